// TopK (topk_ops.cc): ties keep the lower index first.
#include <gtest/gtest.h>

#include "tests/compiler_core/frontend/ops/op_testing.h"

namespace kiln {
namespace {

using ::kiln::testing::F32;
using ::kiln::testing::OnnxModelBuilder;

TEST(TopKOpsTest, TiesKeepTheLowerIndexFirst) {
  OnnxModelBuilder m;
  m.Input("x", {"3", "4"});
  onnx::TensorProto k;
  k.set_name("k");
  k.set_data_type(onnx::TensorProto::INT64);
  k.add_dims(1);
  k.add_int64_data(2);
  *m.graph()->add_initializer() = k;
  m.Node("TopK", "tk", {"x", "k"}, {"v", "i"});
  m.Output("v").Output("i");
  auto g = ImportOnnxModel(m.Bytes(), {});
  ASSERT_TRUE(g.ok()) << g.status();
  auto out = Evaluate(**g, {{"x", F32({3, 4}, {1, 5, 5, 2, 0, 0, 0, 0, 9, 8, 7, 6})}});
  ASSERT_TRUE(out.ok()) << out.status();
  const Tensor& i = out->at("i");
  // Ties keep the lower index first.
  EXPECT_EQ(std::vector<int64_t>(i.data<int64_t>(), i.data<int64_t>() + 6), (std::vector<int64_t>{1, 2, 0, 1, 0, 1}));
}

}  // namespace
}  // namespace kiln
