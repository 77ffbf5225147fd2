// Operator classes and memory-traffic estimates for the fusion partitioner.
#include "compiler_core/fusion/cost_model.h"

#include "compiler_core/frontend/op_registry.h"

namespace kiln {

OpClass ClassifyForFusion(const Node& node) {
  const OpDef* def = FindOpDef(node.domain(), node.op_type());
  if (def == nullptr) return OpClass::kOpaque;
  const OpClass c = def->traits.op_class;
  if (c == OpClass::kAnchor) return c;
  if (c == OpClass::kShape || node.num_outputs() != 1) return OpClass::kOpaque;
  return c;
}

bool IsLayoutFree(const Node& node) {
  const OpDef* def = FindOpDef(node.domain(), node.op_type());
  return def != nullptr && def->traits.layout_only;
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
  const OpDef* def = FindOpDef(node.domain(), node.op_type());
  if (i == 0 && def != nullptr && def->traits.reads_output_sized_input0 && node.num_outputs() > 0) {
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
