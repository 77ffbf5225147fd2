// `kiln eval`: run a model through the reference interpreter (no compile).
#include <cstdio>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "client/commands.h"
#include "client/tensor_io.h"
#include "compiler_core/driver/compile_driver.h"
#include "compiler_core/frontend/interpreter.h"

namespace kiln::client {

int RunEval(const EvalOptions& o) {
  auto bytes = ReadFile(o.model);
  if (!bytes.ok()) return ReportError("eval", bytes.status());
  ModelSource source;
  source.onnx_model = std::move(*bytes);
  for (const std::string& flag : o.shapes) {
    std::string name;
    std::vector<int64_t> dims;
    if (absl::Status s = ParseShapeFlag(flag, &name, &dims); !s.ok()) return ReportError("eval", s);
    source.input_shapes[name] = dims;
  }
  std::map<std::string, Tensor> inputs;
  for (const std::string& flag : o.inputs) {
    std::string name, path;
    if (absl::Status s = ParseInputFlag(flag, &name, &path); !s.ok()) return ReportError("eval", s);
    auto t = ReadTensorFile(path);
    if (!t.ok()) return ReportError("eval", t.status());
    // An input file also binds that input's shape, unless --shape did.
    if (!source.input_shapes.count(name)) source.input_shapes[name] = t->dims();
    inputs.emplace(name, std::move(*t));
  }
  auto graph = ImportModel(source);
  if (!graph.ok()) return ReportError("eval", graph.status());
  if (o.dump_graph) std::fprintf(stderr, "%s", (*graph)->ToText().c_str());
  auto outputs = Evaluate(**graph, inputs);
  if (!outputs.ok()) return ReportError("eval", outputs.status());
  if (!o.output_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(o.output_dir, ec);
  }
  for (const auto& [name, t] : *outputs) {
    if (o.output_dir.empty()) {
      std::printf("%s = %s\n", name.c_str(), t.DebugString(16).c_str());
      continue;
    }
    std::string path = absl::StrCat(o.output_dir, "/", FileNameFor(name), ".npy");
    if (absl::Status s = WriteNpy(path, t); !s.ok()) return ReportError("eval", s);
  }
  return 0;
}

}  // namespace kiln::client
