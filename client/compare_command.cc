// `kiln compare`: agreement of two output folders (.npy files of the same
// names), e.g. a compiled package's outputs against the reference interpreter's.
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "client/commands.h"
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
  for (const fs::path& f : files) {
    fs::path other = fs::path(o.actual_dir) / f.filename();
    auto want = ReadTensorFile(f.string());
    if (!want.ok()) return ReportError("compare", want.status());
    auto got = ReadTensorFile(other.string());
    if (!got.ok()) return ReportError("compare", got.status());
    std::string name = f.stem().string();
    if (want->dtype() != DType::kFloat32 || got->dtype() != DType::kFloat32 || want->dims() != got->dims()) {
      std::printf("%s: MISMATCH %s vs %s\n", name.c_str(), want->DebugString(0).c_str(),
                  got->DebugString(0).c_str());
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
    std::printf("%s: %lld values, max abs error %.3g: %s\n", name.c_str(),
                static_cast<long long>(want->num_elements()), max_abs, ok ? "match" : "MISMATCH");
    all_ok = all_ok && ok;
  }
  std::printf("%s (atol %g, rtol %g, worst max abs error %.3g)\n",
              all_ok ? "outputs match the reference" : "OUTPUTS DIFFER FROM THE REFERENCE", o.atol, o.rtol,
              worst);
  return all_ok ? 0 : 1;
}

}  // namespace kiln::client
