// Example ONNX models that ship with Kiln as code: `kiln example NAME` writes
// one with a matching input, so the end-to-end demo needs nothing downloaded.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler_core/ir/tensor.h"

namespace kiln::client {

struct ExampleModel {
  std::string onnx_bytes;                 // serialized onnx.ModelProto
  std::map<std::string, Tensor> inputs;   // a deterministic input for every graph input
  std::map<std::string, std::vector<int64_t>> shapes;  // the --shape bindings the inputs use
};

// "mlp": x[batch,64] -> MatMul -> Add -> Relu -> Gemm(transB) -> Sigmoid -> Sub -> Mul -> Div,
// batch symbolic in the model and bound to 8 by the example's shapes.
absl::StatusOr<ExampleModel> MakeExampleModel(const std::string& name);
std::vector<std::string> ExampleModelNames();

}  // namespace kiln::client
