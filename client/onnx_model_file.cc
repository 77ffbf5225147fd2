// ONNX model files with external data (see onnx_model_file.h).
#include "client/onnx_model_file.h"

#include <climits>
#include <cstdint>
#include <filesystem>
#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/file.h"
#include "base/status_macros.h"
#include "onnx/onnx.pb.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

bool IsExternal(const onnx::TensorProto& t) {
  return t.data_location() == onnx::TensorProto::EXTERNAL || t.external_data_size() > 0;
}

// Reads `t`'s external bytes into raw_data.
absl::Status Inline(onnx::TensorProto& t, const fs::path& dir) {
  const std::string what = absl::StrCat("tensor '", t.name(), "'");
  std::string location;
  int64_t offset = 0, length = -1;
  for (const onnx::StringStringEntryProto& e : t.external_data()) {
    if (e.key() == "location") {
      location = e.value();
    } else if (e.key() == "offset" || e.key() == "length") {
      int64_t v = 0;
      if (!absl::SimpleAtoi(e.value(), &v) || v < 0) {
        return absl::InvalidArgumentError(absl::StrCat(what, ": external data ", e.key(), " '", e.value(),
                                                       "' is not a byte count"));
      }
      (e.key() == "offset" ? offset : length) = v;
    }
  }
  if (location.empty()) return absl::InvalidArgumentError(absl::StrCat(what, ": external data without a location"));
  const fs::path rel(location);
  if (rel.is_absolute() || rel.lexically_normal().string().rfind("..", 0) == 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": external data location '", location,
                                                   "' is outside the model's folder"));
  }
  const fs::path file = dir / rel;
  std::ifstream in(file, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(what, ": cannot open external data file '", file.string(), "'"));
  in.seekg(0, std::ios::end);
  const int64_t size = static_cast<int64_t>(in.tellg());
  if (length < 0) length = size - offset;
  if (offset > size || length > size - offset) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": bytes [", offset, ", ", offset + length,
                                                   ") are beyond the end of '", file.string(), "' (", size,
                                                   " bytes)"));
  }
  std::string bytes(static_cast<size_t>(length), '\0');
  in.seekg(offset);
  in.read(bytes.data(), length);
  if (!in) return absl::DataLossError(absl::StrCat(what, ": short read from '", file.string(), "'"));
  t.set_raw_data(std::move(bytes));
  t.clear_external_data();
  t.set_data_location(onnx::TensorProto::DEFAULT);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> ReadOnnxModelFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
  onnx::ModelProto model;
  if (bytes.size() > static_cast<size_t>(INT_MAX) ||
      !model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return bytes;  // not ours to judge: the importer names what is wrong
  }
  bool external = false;
  for (const onnx::TensorProto& t : model.graph().initializer()) external = external || IsExternal(t);
  if (!external) return bytes;
  const fs::path dir = fs::path(path).parent_path();
  for (onnx::TensorProto& t : *model.mutable_graph()->mutable_initializer()) {
    if (!IsExternal(t)) continue;
    if (absl::Status s = Inline(t, dir); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("model '", path, "': ", s.message()));
    }
  }
  const size_t total = model.ByteSizeLong();
  if (total > static_cast<size_t>(INT_MAX)) {
    return absl::InvalidArgumentError(absl::StrCat("model '", path, "' is ", total >> 20,
                                                   " MiB with its external data inlined; Kiln takes models up to "
                                                   "2 GiB (protobuf's message limit)"));
  }
  std::string out;
  model.SerializeToString(&out);
  return out;
}

}  // namespace kiln
