// The CLI's --json printer: every field present (defaults included, unset
// messages as null), int64 as JSON numbers, and text that protobuf's own JSON
// parser reads back into the same message.
#include "client/json_output.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "kiln/v1/compile.pb.h"

namespace kiln::client {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;

Struct Parse(const std::string& json) {
  Struct object;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(json, &object).ok()) << json;
  return object;
}

TEST(ProtoToJsonTest, AnEmptyMessageHasEveryFieldWithItsDefault) {
  kiln::v1::CompileResult empty;
  const std::string json = ProtoToJson(empty);
  const Struct object = Parse(json);
  // One key per field of the message, none dropped for being zero.
  EXPECT_EQ(object.fields_size(), kiln::v1::CompileResult::descriptor()->field_count()) << json;
  EXPECT_EQ(object.fields().at("package_size").kind_case(), Value::kNumberValue) << json;
  EXPECT_EQ(object.fields().at("package_size").number_value(), 0);
  EXPECT_EQ(object.fields().at("package_digest").string_value(), "");
  EXPECT_EQ(object.fields().at("tuning_in_background").kind_case(), Value::kBoolValue);
  EXPECT_EQ(object.fields().at("groups").list_value().values_size(), 0);
  EXPECT_EQ(object.fields().at("model_check").kind_case(), Value::kNullValue) << json;
}

TEST(ProtoToJsonTest, Int64IsANumberAndExactBeyondDoublePrecision) {
  kiln::v1::CompileResult result;
  result.set_package_size(std::numeric_limits<int64_t>::max());
  const std::string json = ProtoToJson(result);
  EXPECT_NE(json.find("\"package_size\":9223372036854775807,"), std::string::npos) << json;
  kiln::v1::ShapeBinding shape;
  shape.set_input("x");
  shape.add_dims(-1);
  shape.add_dims(0);
  shape.add_dims(int64_t{1} << 40);
  EXPECT_EQ(ProtoToJson(shape), "{\"input\":\"x\",\"dims\":[-1,0,1099511627776]}");
}

TEST(ProtoToJsonTest, ProtobufReadsItBackIntoTheSameMessage) {
  kiln::v1::CompileResult result;
  result.set_package_digest("sha256:ab\"c\\\n");
  result.set_package_size(123456789012345);
  result.set_compile_seconds(0.1);
  result.set_trials_measured(7);
  auto* group = result.add_groups();
  group->set_index(3);
  group->add_ops("MatMul");
  group->set_median_ms(1.0 / 3.0);
  group->set_from_database(true);
  result.mutable_model_check()->set_message("kept");
  kiln::v1::CompileResult back;
  const std::string json = ProtoToJson(result);
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json, &back).ok()) << json;
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(result, back)) << json << "\n" << back.DebugString();
}

TEST(ProtoToJsonTest, OneofMembersThatAreNotSetAreNull) {
  kiln::v1::CompileRequest request;
  request.set_onnx_model("\x01\x02");
  const Struct object = Parse(ProtoToJson(request));
  EXPECT_EQ(object.fields().at("onnx_model").string_value(), "AQI=");  // bytes: base64
  EXPECT_EQ(object.fields().at("graph").kind_case(), Value::kNullValue);
}

TEST(JsonNumberTest, ShortestTextThatReadsBackAndNonFiniteAsStrings) {
  EXPECT_EQ(JsonNumber(0.1), "0.1");
  EXPECT_EQ(JsonNumber(0), "0");
  EXPECT_EQ(JsonNumber(1e300), "1e+300");
  EXPECT_EQ(std::stod(JsonNumber(1.0 / 3.0)), 1.0 / 3.0);
  EXPECT_EQ(JsonNumber(std::nan("")), "\"NaN\"");
  EXPECT_EQ(JsonNumber(-INFINITY), "\"-Infinity\"");
}

TEST(JsonObjectTest, FieldsInOrderWithEscapedStrings) {
  const std::string json = JsonObject()
                               .Add("name", "a\"b\n")
                               .Add("count", int64_t{-3})
                               .Add("ratio", 0.5)
                               .Add("ok", false)
                               .AddRaw("list", "[1,2]")
                               .AddRaw("none", "null")
                               .str();
  EXPECT_EQ(json, "{\"name\":\"a\\\"b\\n\",\"count\":-3,\"ratio\":0.5,\"ok\":false,\"list\":[1,2],\"none\":null}");
  EXPECT_EQ(JsonObject().str(), "{}");
  EXPECT_EQ(JsonString(std::string("\x01", 1)), "\"\\u0001\"");
}

}  // namespace
}  // namespace kiln::client
