// The operator table against its documentation: docs/operators.md lists every
// entry, with its class, and nothing else.
#include "compiler_core/frontend/op_registry.h"

#include <map>
#include <regex>
#include <sstream>
#include <string>

#include "base/file.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

// The rows "| `Op` | class | ..." of the table in docs/operators.md.
std::map<std::string, std::string> DocumentedOperators(const std::string& text) {
  std::map<std::string, std::string> out;
  static const std::regex row(R"(^\| `([A-Za-z0-9.]+)` \| ([a-z_]+) \|)");
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_search(line, m, row)) out[m[1]] = m[2];
  }
  return out;
}

TEST(OpRegistryTest, DocsListEveryOperatorWithItsClass) {
  auto text = ReadFile(std::string(KILN_SOURCE_DIR) + "/docs/operators.md");
  ASSERT_TRUE(text.ok()) << text.status();
  std::map<std::string, std::string> documented = DocumentedOperators(*text);
  std::map<std::string, std::string> table;
  for (const OpDef* def : AllOpDefs()) {
    table[QualifiedOpName(def->domain, def->op_type)] = OpClassName(def->traits.op_class);
  }
  std::string rows;  // what the table should hold, to paste
  for (const auto& [op, cls] : table) rows += "| `" + op + "` | " + cls + " |\n";
  EXPECT_EQ(documented, table) << "docs/operators.md should list exactly these operators:\n" << rows;
}

TEST(OpRegistryTest, EveryEntryIsFoundByNameInBothSpellingsOfTheDefaultDomain) {
  for (const OpDef* def : AllOpDefs()) {
    if (!def->domain.empty()) continue;
    EXPECT_EQ(FindOpDef("", def->op_type), def) << def->op_type;
    EXPECT_EQ(FindOpDef("ai.onnx", def->op_type), def) << def->op_type;
    EXPECT_EQ(FindOpDef(kKilnDomain, def->op_type), nullptr) << def->op_type;
  }
  EXPECT_EQ(FindOpDef("", "NoSuchOperator"), nullptr);
  EXPECT_EQ(FindOpDef("com.example", "Relu"), nullptr);
}

TEST(OpRegistryTest, InternalOperatorsLiveOnlyInTheKilnDomain) {
  const OpDef* rec = FindOpDef(kKilnDomain, "Recurrence");
  ASSERT_NE(rec, nullptr);
  EXPECT_EQ(rec->domain, kKilnDomain);
  EXPECT_EQ(FindOpDef("", "Recurrence"), nullptr);
  EXPECT_EQ(FindOpDef("ai.onnx", "Recurrence"), nullptr);
}

}  // namespace
}  // namespace kiln
