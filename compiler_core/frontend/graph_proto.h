// Lossless conversion between the in-memory Graph and the wire graph kiln.v1.Graph,
// and between tensors and kiln.v1.Tensor / onnx.TensorProto.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "compiler_core/ir/graph.h"
#include "compiler_core/ir/tensor.h"
#include "kiln/v1/graph.pb.h"
#include "onnx/onnx.pb.h"

namespace kiln {

// Writes inputs and outputs with their types, nodes in order, constants as
// initializers, the types of all other values as value_info, and the opset.
void GraphToProto(const Graph& graph, kiln::v1::Graph* proto);

// Rebuilds a Graph, re-runs shape inference (declared types must agree with the
// inferred ones) and the verifier. A malformed proto is INVALID_ARGUMENT.
// GraphFromProto(GraphToProto(g)) has the same ToText() as g.
absl::StatusOr<std::unique_ptr<Graph>> GraphFromProto(const kiln::v1::Graph& proto);

void TensorToProto(const Tensor& t, kiln::v1::Tensor* proto);
// Checks the dtype, dims and that `data` holds exactly the elements.
absl::StatusOr<Tensor> TensorFromProto(const kiln::v1::Tensor& proto);

// ONNX TensorProto (raw_data or the typed *_data fields) -> Tensor. External
// data, segments and unsupported element types are INVALID_ARGUMENT.
absl::StatusOr<Tensor> TensorFromOnnx(const onnx::TensorProto& proto);

}  // namespace kiln
