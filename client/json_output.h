// The CLI's JSON output (`--json`): protobuf messages and small objects of the
// CLI's own, printed the way scripts want them. Every field is present (a
// default value as that value, an unset message or oneof member as null); 64-bit
// integers are JSON numbers, not the strings of protobuf's canonical JSON
// mapping (exact in Python and jq; JavaScript's JSON.parse rounds beyond 2^53);
// field names are the .proto names; enums are their names; bytes are base64;
// NaN and infinities are the strings "NaN", "Infinity", "-Infinity".
#pragma once

#include <google/protobuf/message.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace kiln::client {

// One line of JSON, no newline.
std::string ProtoToJson(const google::protobuf::Message& message);

// A JSON string literal, quotes included.
std::string JsonString(std::string_view text);
// A JSON number (the shortest text that reads back as `value`), or a string for
// NaN and the infinities, as ProtoToJson writes them.
std::string JsonNumber(double value);

// A flat JSON object built field by field, in order: the CLI's own results
// (`kiln compare --json`, `kiln db gc --json`, ...).
class JsonObject {
 public:
  JsonObject& Add(std::string_view key, std::string_view value);
  JsonObject& Add(std::string_view key, const char* value) { return Add(key, std::string_view(value)); }
  JsonObject& Add(std::string_view key, int64_t value);
  JsonObject& Add(std::string_view key, int value) { return Add(key, static_cast<int64_t>(value)); }
  JsonObject& Add(std::string_view key, double value);
  JsonObject& Add(std::string_view key, bool value);
  // `json` is already JSON (an object, an array, null).
  JsonObject& AddRaw(std::string_view key, std::string_view json);
  std::string str() const { return text_ + "}"; }

 private:
  void Key(std::string_view key);
  std::string text_ = "{";
};

}  // namespace kiln::client
