// `kiln eval`: run a model through the reference interpreter (no compile).
#include <cstdio>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/exit_codes.h"
#include "client/commands.h"
#include "client/json_output.h"
#include "client/onnx_model_file.h"
#include "client/tensor_io.h"
#include "compiler_core/driver/compile_driver.h"
#include "compiler_core/frontend/interpreter.h"

namespace kiln::client {

int RunEval(const EvalOptions& o) {
  auto bytes = ReadOnnxModelFile(o.model);
  if (!bytes.ok()) return ReportError("eval", bytes.status());
  ModelSource source;
  source.onnx_model = std::move(*bytes);
  if (absl::Status s = CheckDistinctNames("--shape", o.shapes); !s.ok()) return ReportError("eval", s);
  for (const std::string& flag : o.shapes) {
    std::string name;
    std::vector<int64_t> dims;
    if (absl::Status s = ParseShapeFlag(flag, &name, &dims); !s.ok()) return ReportError("eval", s);
    source.input_shapes[name] = dims;
  }
  auto inputs = ReadInputFlags(o.inputs);
  if (!inputs.ok()) return ReportError("eval", inputs.status());
  // The reference interpreter knows every input's value: they are bound at
  // import, so shape operands computed from inputs are evaluated too.
  for (const auto& [name, t] : *inputs) {
    if (auto shape = source.input_shapes.find(name); shape != source.input_shapes.end()) {
      if (shape->second != t.dims()) {
        return ReportError("eval", absl::InvalidArgumentError(absl::StrCat(
                                       "--shape ", name, ": differs from the shape of the value given (--input) ",
                                       t.DebugString(0))));
      }
      source.input_shapes.erase(shape);
    }
    source.input_values[name] = t;
  }
  auto graph = ImportModel(source);
  if (!graph.ok()) return ReportError("eval", graph.status());
  if (o.dump_graph) std::fprintf(stderr, "%s", (*graph)->ToText().c_str());
  auto outputs = Evaluate(**graph, {});
  if (!outputs.ok()) return ReportError("eval", outputs.status());
  if (!o.output_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(o.output_dir, ec);
  }
  std::string outputs_json;  // --json: one object per output
  for (const auto& [name, t] : *outputs) {
    std::string path;
    if (!o.output_dir.empty()) {
      path = absl::StrCat(o.output_dir, "/", FileNameFor(name), ".npy");
      if (absl::Status s = WriteNpy(path, t); !s.ok()) return ReportError("eval", s);
    }
    if (o.json) {
      absl::StrAppend(&outputs_json, outputs_json.empty() ? "" : ",",
                      JsonObject()
                          .Add("name", name)
                          .Add("dtype", DTypeName(t.dtype()))
                          .AddRaw("dims", absl::StrCat("[", absl::StrJoin(t.dims(), ","), "]"))
                          .AddRaw("file", path.empty() ? "null" : JsonString(path))
                          .str());
    } else if (path.empty()) {
      std::printf("%s = %s\n", name.c_str(), t.DebugString(16).c_str());
    }
  }
  if (o.json) std::printf("%s\n", JsonObject().AddRaw("outputs", absl::StrCat("[", outputs_json, "]")).str().c_str());
  return kExitOk;
}

}  // namespace kiln::client
