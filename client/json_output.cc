// A protobuf-reflection JSON printer: every field present, int64 as numbers.
#include "client/json_output.h"

#include <google/protobuf/descriptor.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace kiln::client {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// The shortest of %.{min}g..%.{max}g that reads back as `value`.
std::string ShortestDouble(double value, int min_digits, int max_digits, bool as_float) {
  char buf[40];
  for (int digits = min_digits; digits <= max_digits; ++digits) {
    std::snprintf(buf, sizeof(buf), "%.*g", digits, value);
    const double back = std::strtod(buf, nullptr);
    if (as_float ? static_cast<float>(back) == static_cast<float>(value) : back == value) break;
  }
  return buf;
}

std::string NonFinite(double value) {
  if (std::isnan(value)) return "\"NaN\"";
  return value > 0 ? "\"Infinity\"" : "\"-Infinity\"";
}

void AppendMessage(const Message& message, std::string* out);

// One value of `field`: element `index` of a repeated field, else the singular value.
void AppendValue(const Message& message, const FieldDescriptor* field, int index, std::string* out) {
  const Reflection* r = message.GetReflection();
  const bool rep = field->is_repeated();
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      absl::StrAppend(out, rep ? r->GetRepeatedInt32(message, field, index) : r->GetInt32(message, field));
      break;
    case FieldDescriptor::CPPTYPE_INT64:
      absl::StrAppend(out, rep ? r->GetRepeatedInt64(message, field, index) : r->GetInt64(message, field));
      break;
    case FieldDescriptor::CPPTYPE_UINT32:
      absl::StrAppend(out, rep ? r->GetRepeatedUInt32(message, field, index) : r->GetUInt32(message, field));
      break;
    case FieldDescriptor::CPPTYPE_UINT64:
      absl::StrAppend(out, rep ? r->GetRepeatedUInt64(message, field, index) : r->GetUInt64(message, field));
      break;
    case FieldDescriptor::CPPTYPE_DOUBLE:
      out->append(JsonNumber(rep ? r->GetRepeatedDouble(message, field, index) : r->GetDouble(message, field)));
      break;
    case FieldDescriptor::CPPTYPE_FLOAT: {
      const float v = rep ? r->GetRepeatedFloat(message, field, index) : r->GetFloat(message, field);
      out->append(std::isfinite(v) ? ShortestDouble(v, 6, 9, /*as_float=*/true) : NonFinite(v));
      break;
    }
    case FieldDescriptor::CPPTYPE_BOOL:
      out->append((rep ? r->GetRepeatedBool(message, field, index) : r->GetBool(message, field)) ? "true" : "false");
      break;
    case FieldDescriptor::CPPTYPE_ENUM: {
      const int number = rep ? r->GetRepeatedEnumValue(message, field, index) : r->GetEnumValue(message, field);
      const auto* value = field->enum_type()->FindValueByNumber(number);
      out->append(value ? JsonString(value->name()) : absl::StrCat(number));
      break;
    }
    case FieldDescriptor::CPPTYPE_STRING: {
      std::string scratch;
      const std::string& s = rep ? r->GetRepeatedStringReference(message, field, index, &scratch)
                                 : r->GetStringReference(message, field, &scratch);
      out->append(JsonString(field->type() == FieldDescriptor::TYPE_BYTES ? absl::Base64Escape(s) : s));
      break;
    }
    case FieldDescriptor::CPPTYPE_MESSAGE:
      AppendMessage(rep ? r->GetRepeatedMessage(message, field, index) : r->GetMessage(message, field), out);
      break;
  }
}

// A map entry's key as a JSON object key: always a string.
std::string MapKey(const Message& entry) {
  const FieldDescriptor* key = entry.GetDescriptor()->map_key();
  std::string text;
  AppendValue(entry, key, -1, &text);
  return key->cpp_type() == FieldDescriptor::CPPTYPE_STRING ? text : JsonString(text);
}

void AppendMessage(const Message& message, std::string* out) {
  const Reflection* r = message.GetReflection();
  const auto* descriptor = message.GetDescriptor();
  out->push_back('{');
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const FieldDescriptor* field = descriptor->field(i);
    if (i > 0) out->push_back(',');
    out->append(JsonString(field->name()));
    out->push_back(':');
    if (field->is_map()) {
      out->push_back('{');
      for (int k = 0; k < r->FieldSize(message, field); ++k) {
        const Message& entry = r->GetRepeatedMessage(message, field, k);
        if (k > 0) out->push_back(',');
        out->append(MapKey(entry));
        out->push_back(':');
        AppendValue(entry, entry.GetDescriptor()->map_value(), -1, out);
      }
      out->push_back('}');
    } else if (field->is_repeated()) {
      out->push_back('[');
      for (int k = 0; k < r->FieldSize(message, field); ++k) {
        if (k > 0) out->push_back(',');
        AppendValue(message, field, k, out);
      }
      out->push_back(']');
    } else if (field->has_presence() && !r->HasField(message, field)) {
      out->append("null");  // an unset message, oneof member or `optional` field
    } else {
      AppendValue(message, field, -1, out);
    }
  }
  out->push_back('}');
}

}  // namespace

std::string ProtoToJson(const Message& message) {
  std::string out;
  AppendMessage(message, &out);
  return out;
}

std::string JsonString(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (c == '\n') {
      out.append("\\n");
    } else if (c == '\t') {
      out.append("\\t");
    } else if (c == '\r') {
      out.append("\\r");
    } else if (u < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", u);
      out.append(buf);
    } else {
      out.push_back(c);  // UTF-8 passes through
    }
  }
  out.push_back('"');
  return out;
}

std::string JsonNumber(double value) {
  return std::isfinite(value) ? ShortestDouble(value, 15, 17, /*as_float=*/false) : NonFinite(value);
}

void JsonObject::Key(std::string_view key) {
  if (text_.size() > 1) text_.push_back(',');
  text_.append(JsonString(key));
  text_.push_back(':');
}

JsonObject& JsonObject::Add(std::string_view key, std::string_view value) {
  Key(key);
  text_.append(JsonString(value));
  return *this;
}

JsonObject& JsonObject::Add(std::string_view key, int64_t value) {
  Key(key);
  absl::StrAppend(&text_, value);
  return *this;
}

JsonObject& JsonObject::Add(std::string_view key, double value) {
  Key(key);
  text_.append(JsonNumber(value));
  return *this;
}

JsonObject& JsonObject::Add(std::string_view key, bool value) {
  Key(key);
  text_.append(value ? "true" : "false");
  return *this;
}

JsonObject& JsonObject::AddRaw(std::string_view key, std::string_view json) {
  Key(key);
  text_.append(json);
  return *this;
}

}  // namespace kiln::client
