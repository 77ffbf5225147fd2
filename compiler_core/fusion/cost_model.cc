// Operator classes and memory-traffic estimates for the fusion partitioner.
#include "compiler_core/fusion/cost_model.h"

#include <set>
#include <string>
#include "compiler_core/frontend/op_registry.h"

namespace kiln {

FusionClass ClassifyForFusion(const Node& node) {
  static const std::set<std::string> kElementwise = {
      "Add",  "Sub",     "Mul",         "Div",      "Pow",       "Mod",       "Relu",    "Sigmoid",
      "Tanh", "Exp",     "Log",         "Sqrt",     "Reciprocal", "Neg",      "Abs",     "Sign",
      "Erf",  "Sin",     "Cos",         "Tan",      "Asin",      "Acos",      "Atan",    "Sinh",
      "Cosh", "Asinh",   "Acosh",       "Atanh",    "Floor",     "Ceil",      "Round",   "Softplus",
      "Softsign", "LeakyRelu", "Elu",   "Selu",     "HardSigmoid", "HardSwish", "Gelu",  "PRelu",
      "Clip", "Cast",    "CastLike",    "Where",    "Equal",     "Less",      "Greater", "LessOrEqual",
      "GreaterOrEqual",  "And",         "Or",       "Xor",       "Not",       "Max",     "Min",
      "Sum",  "Mean",    "BatchNormalization",      "Dropout"};
  static const std::set<std::string> kDataMovement = {
      "Transpose", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Slice",  "Concat",
      "Pad",       "Resize",  "Upsample", "Gather", "GatherElements", "Expand", "Tile", "Split",
      "DepthToSpace", "SpaceToDepth"};
  static const std::set<std::string> kReduction = {
      "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceSumSquare",
      "ReduceLogSum", "ReduceLogSumExp", "ReduceL1", "ReduceL2", "ArgMax", "ArgMin",
      "Softmax", "LogSoftmax", "LayerNormalization", "InstanceNormalization",
      "GlobalAveragePool", "GlobalMaxPool", "AveragePool", "MaxPool"};
  if (!IsDefaultDomain(node.domain())) return FusionClass::kOpaque;
  const std::string& op = node.op_type();
  if (op == "Conv" || op == "ConvTranspose") return FusionClass::kConvAnchor;
  if (op == "MatMul" || op == "Gemm") return FusionClass::kMatMulAnchor;
  // Extra outputs (Dropout's mask, BatchNormalization's training statistics,
  // MaxPool's indices, LayerNormalization's mean) are not loop-fusable.
  if (node.num_outputs() != 1) return FusionClass::kOpaque;
  if (kElementwise.count(op)) return FusionClass::kElementwise;
  if (kDataMovement.count(op)) return FusionClass::kDataMovement;
  if (kReduction.count(op)) return FusionClass::kReduction;
  return FusionClass::kOpaque;
}

const char* FusionClassName(FusionClass c) {
  switch (c) {
    case FusionClass::kElementwise: return "elementwise";
    case FusionClass::kDataMovement: return "data_movement";
    case FusionClass::kReduction: return "reduction";
    case FusionClass::kConvAnchor: return "conv";
    case FusionClass::kMatMulAnchor: return "matmul";
    case FusionClass::kOpaque: return "opaque";
  }
  return "opaque";
}

bool IsLayoutFree(const Node& node) {
  static const std::set<std::string> kFree = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"};
  return IsDefaultDomain(node.domain()) && kFree.count(node.op_type()) > 0;
}

int64_t NumElementsOf(const Value* v) {
  if (!v || !v->type().known || !v->type().IsStatic()) return 0;
  return NumElements(v->type().StaticDims());
}

double BytesOf(const Value* v) {
  if (!v) return 0;
  return static_cast<double>(NumElementsOf(v)) * static_cast<double>(DTypeSize(v->type().dtype));
}

double InputBytesRead(const Node& node, int i) {
  const Value* in = node.input(i);
  if (!in) return 0;
  const std::string& op = node.op_type();
  if (i == 0 && (op == "Gather" || op == "Slice" || op == "GatherElements") && node.num_outputs() > 0) {
    double out = BytesOf(node.output(0));
    double all = BytesOf(in);
    return out < all ? out : all;
  }
  return BytesOf(in);
}

double UnfusedBytes(const Node& node) {
  double b = 0;
  for (int i = 0; i < node.num_inputs(); ++i) b += InputBytesRead(node, i);
  for (const Value* v : node.outputs()) b += BytesOf(v);
  return b;
}

}  // namespace kiln
