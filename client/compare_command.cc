// `kiln compare`: agreement of two output folders (.npy files of the same
// names), e.g. a compiled package's outputs against the reference interpreter's.
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "base/exit_codes.h"
#include "client/commands.h"
#include "client/json_output.h"
#include "client/tensor_io.h"

namespace kiln::client {

int RunCompare(const CompareOptions& o) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(o.expected_dir, ec)) {
    return ReportError("compare", absl::NotFoundError(absl::StrCat("no folder '", o.expected_dir, "'")));
  }
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(o.expected_dir)) {
    if (e.path().extension() == ".npy") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    return ReportError("compare", absl::NotFoundError(absl::StrCat("no .npy files in '", o.expected_dir, "'")));
  }
  bool all_ok = true;
  double worst = 0;
  std::string outputs_json;  // --json: one object per output
  auto add_output = [&](const JsonObject& output) {
    absl::StrAppend(&outputs_json, outputs_json.empty() ? "" : ",", output.str());
  };
  for (const fs::path& f : files) {
    fs::path other = fs::path(o.actual_dir) / f.filename();
    auto want = ReadTensorFile(f.string());
    if (!want.ok()) return ReportError("compare", want.status());
    auto got = ReadTensorFile(other.string());
    if (!got.ok()) return ReportError("compare", got.status());
    std::string name = f.stem().string();
    if (want->dtype() != DType::kFloat32 || got->dtype() != DType::kFloat32 || want->dims() != got->dims()) {
      const std::string why = absl::StrCat(want->DebugString(0), " vs ", got->DebugString(0));
      if (!o.json) std::printf("%s: MISMATCH %s\n", name.c_str(), why.c_str());
      add_output(JsonObject()
                     .Add("name", name)
                     .Add("values", want->num_elements())
                     .AddRaw("max_abs_error", "null")
                     .Add("match", false)
                     .Add("mismatch", why));
      all_ok = false;
      continue;
    }
    double max_abs = 0;
    bool ok = true;
    for (int64_t i = 0; i < want->num_elements(); ++i) {
      double a = want->data<float>()[i], b = got->data<float>()[i];
      double err = std::fabs(a - b);
      if (std::isnan(a) != std::isnan(b)) err = INFINITY;
      if (std::isnan(a) && std::isnan(b)) err = 0;
      max_abs = std::max(max_abs, err);
      if (err > o.atol + o.rtol * std::fabs(a)) ok = false;
    }
    worst = std::max(worst, max_abs);
    if (!o.json) {
      std::printf("%s: %lld values, max abs error %.3g: %s\n", name.c_str(),
                  static_cast<long long>(want->num_elements()), max_abs, ok ? "match" : "MISMATCH");
    }
    add_output(JsonObject()
                   .Add("name", name)
                   .Add("values", want->num_elements())
                   .Add("max_abs_error", max_abs)
                   .Add("match", ok)
                   .AddRaw("mismatch", ok ? "null" : JsonString("values differ beyond the tolerances")));
    all_ok = all_ok && ok;
  }
  if (o.json) {
    std::printf("%s\n", JsonObject()
                            .Add("match", all_ok)
                            .Add("atol", o.atol)
                            .Add("rtol", o.rtol)
                            .Add("worst_max_abs_error", worst)
                            .AddRaw("outputs", absl::StrCat("[", outputs_json, "]"))
                            .str()
                            .c_str());
    return all_ok ? kExitOk : kExitOutputsDiffer;
  }
  std::printf("%s (atol %g, rtol %g, worst max abs error %.3g)\n",
              all_ok ? "outputs match the reference" : "OUTPUTS DIFFER FROM THE REFERENCE", o.atol, o.rtol,
              worst);
  return all_ok ? kExitOk : kExitOutputsDiffer;
}

}  // namespace kiln::client
