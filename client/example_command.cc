// `kiln example`: write an example model and a matching input.
#include <cstdio>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/commands.h"
#include "client/example_models.h"
#include "client/tensor_io.h"

namespace kiln::client {

int RunExample(const ExampleOptions& o) {
  auto model = MakeExampleModel(o.name);
  if (!model.ok()) return ReportError("example", model.status());
  std::error_code ec;
  std::filesystem::create_directories(o.output_dir, ec);
  std::string path = absl::StrCat(o.output_dir, "/", o.name, ".onnx");
  if (absl::Status s = WriteFileAtomic(path, model->onnx_bytes); !s.ok()) return ReportError("example", s);
  std::printf("model %s\n", path.c_str());
  for (const auto& [name, t] : model->inputs) {
    std::string ipath = absl::StrCat(o.output_dir, "/", FileNameFor(name), ".npy");
    if (absl::Status s = WriteNpy(ipath, t); !s.ok()) return ReportError("example", s);
    std::printf("input %s=%s\n", name.c_str(), ipath.c_str());
  }
  for (const auto& [name, dims] : model->shapes) {
    std::printf("shape %s=%s\n", name.c_str(), absl::StrJoin(dims, ",").c_str());
  }
  return 0;
}

}  // namespace kiln::client
