// The expression rules of the elementwise and data-movement families agree
// with the operators' traits (OpDef): a rule exists only for an operator of
// its family, and every elementwise operator has one.
#include "compiler_core/codegen/loop_ir/lower_data_movement.h"
#include "compiler_core/codegen/loop_ir/lower_elementwise.h"
#include "compiler_core/frontend/op_registry.h"
#include "gtest/gtest.h"

namespace kiln::loop_ir {
namespace {

TEST(ElementwiseRulesTest, RulesFollowTheOperatorTraits) {
  int elementwise = 0, movement = 0;
  for (const OpDef* def : AllOpDefs()) {
    const bool has_elementwise_rule = FindElementwiseRule(def->op_type) != nullptr;
    const bool has_movement_rule = FindDataMovementRule(def->op_type) != nullptr;
    EXPECT_FALSE(has_elementwise_rule && has_movement_rule) << def->op_type;
    if (has_elementwise_rule) {
      ++elementwise;
      EXPECT_EQ(def->traits.op_class, OpClass::kElementwise) << def->op_type;
    }
    if (has_movement_rule) {
      ++movement;
      EXPECT_EQ(def->traits.op_class, OpClass::kDataMovement) << def->op_type;
    }
    if (def->traits.op_class == OpClass::kElementwise) {
      EXPECT_TRUE(has_elementwise_rule) << def->op_type << ": give it an expression rule in lower_elementwise.cc";
    }
    if (def->traits.layout_only) EXPECT_TRUE(has_movement_rule) << def->op_type;
  }
  EXPECT_GE(elementwise, 50);
  EXPECT_GE(movement, 11);
}

}  // namespace
}  // namespace kiln::loop_ir
