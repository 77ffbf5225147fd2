// The matmul family (matmul_ops.cc): Einsum's implicit output and ellipsis.
#include <gtest/gtest.h>

#include "tests/compiler_core/frontend/ops/op_testing.h"

namespace kiln {
namespace {

using ::kiln::testing::AttrString;
using ::kiln::testing::F32;
using ::kiln::testing::OnnxModelBuilder;

TEST(MatMulOpsTest, EinsumImplicitOutputAndEllipsis) {
  OnnxModelBuilder m;
  m.Input("a", {"2", "2", "3"});
  m.Input("b", {"3", "4"});
  AttrString(m.Node("Einsum", "e", {"a", "b"}, {"y"}), "equation", "...ij,jk");
  m.Output("y");
  auto g = ImportOnnxModel(m.Bytes(), {});
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ((*g)->FindValue("y")->type().ToString(), "f32[2,2,4]");
  std::vector<float> av(12, 1.0f), bv(12, 2.0f);
  auto out = Evaluate(**g, {{"a", F32({2, 2, 3}, av)}, {"b", F32({3, 4}, bv)}});
  ASSERT_TRUE(out.ok()) << out.status();
  for (int i = 0; i < 16; ++i) EXPECT_FLOAT_EQ(out->at("y").data<float>()[i], 6.0f);
}

}  // namespace
}  // namespace kiln
