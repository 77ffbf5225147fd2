// .npy and ONNX TensorProto (.pb) reading and .npy writing.
#include "client/tensor_io.h"

#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/file.h"
#include "base/status_macros.h"
#include "onnx/onnx.pb.h"

namespace kiln {
namespace {

constexpr char kNpyMagic[] = "\x93NUMPY";
constexpr size_t kNpyMagicSize = 6;
// Larger element counts or byte sizes are corrupt files, not tensors.
constexpr int64_t kMaxBytes = int64_t{1} << 42;

struct NpyDtype {
  const char* descr;
  DType dtype;
};
constexpr NpyDtype kNpyDtypes[] = {
    {"<f4", DType::kFloat32}, {"<f8", DType::kFloat64}, {"<f2", DType::kFloat16}, {"<i8", DType::kInt64},
    {"<i4", DType::kInt32},   {"<i2", DType::kInt16},   {"|i1", DType::kInt8},    {"|u1", DType::kUInt8},
    {"<u2", DType::kUInt16},  {"<u4", DType::kUInt32},  {"<u8", DType::kUInt64},
    {"|b1", DType::kBool},
    // NumPy has no bfloat16: ml_dtypes saves it as 2-byte void, and
    // np.load(path).view(ml_dtypes.bfloat16) reads it back.
    {"<V2", DType::kBFloat16},
};

// Element count and byte size of dims, or an error for negative dims or overflow.
absl::Status CheckedSize(const std::vector<int64_t>& dims, DType dtype, const std::string& name, int64_t* bytes) {
  int64_t n = DTypeSize(dtype);
  for (int64_t d : dims) {
    if (d < 0 || __builtin_mul_overflow(n, d, &n) || n > kMaxBytes) {
      return absl::InvalidArgumentError(absl::StrCat(name, ": invalid shape [", absl::StrJoin(dims, ","), "]"));
    }
  }
  *bytes = n;
  return absl::OkStatus();
}

// The Python dict literal of a .npy header, e.g.
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
class NpyHeaderParser {
 public:
  NpyHeaderParser(std::string_view text, const std::string& name) : s_(text), name_(name) {}

  absl::Status Parse() {
    SkipSpace();
    if (!Eat('{')) return Error("header is not a dict");
    while (true) {
      SkipSpace();
      if (Eat('}')) break;
      std::string key;
      if (!ParseString(&key)) return Error("expected a string key");
      SkipSpace();
      if (!Eat(':')) return Error("expected ':'");
      SkipSpace();
      if (key == "descr") {
        if (!ParseString(&descr_)) return Error("'descr' is not a simple dtype string (structured dtypes are unsupported)");
        has_descr_ = true;
      } else if (key == "fortran_order") {
        if (Word("True")) fortran_ = true;
        else if (Word("False")) fortran_ = false;
        else return Error("'fortran_order' is not True or False");
        has_fortran_ = true;
      } else if (key == "shape") {
        RETURN_IF_ERROR(ParseShape());
        has_shape_ = true;
      } else {
        return Error(absl::StrCat("unexpected key '", key, "'"));
      }
      SkipSpace();
      if (Eat(',')) continue;
      SkipSpace();
      if (Eat('}')) break;
      return Error("expected ',' or '}'");
    }
    if (!has_descr_ || !has_fortran_ || !has_shape_) {
      return Error("header lacks 'descr', 'fortran_order' or 'shape'");
    }
    return absl::OkStatus();
  }

  const std::string& descr() const { return descr_; }
  bool fortran() const { return fortran_; }
  const std::vector<int64_t>& shape() const { return shape_; }

 private:
  absl::Status Error(const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrCat(name_, ": bad .npy header: ", what));
  }
  void SkipSpace() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }
  bool Eat(char c) {
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool Word(std::string_view w) {
    if (s_.substr(pos_, w.size()) == w) {
      pos_ += w.size();
      return true;
    }
    return false;
  }
  bool ParseString(std::string* out) {
    if (pos_ >= s_.size() || (s_[pos_] != '\'' && s_[pos_] != '"')) return false;
    char q = s_[pos_++];
    size_t end = s_.find(q, pos_);
    if (end == std::string_view::npos) return false;
    *out = std::string(s_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return true;
  }
  absl::Status ParseShape() {
    if (!Eat('(')) return Error("'shape' is not a tuple");
    while (true) {
      SkipSpace();
      if (Eat(')')) return absl::OkStatus();
      if (pos_ >= s_.size() || s_[pos_] < '0' || s_[pos_] > '9') return Error("'shape' holds a non-integer");
      int64_t v = 0;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
        if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, s_[pos_] - '0', &v)) {
          return Error("'shape' dimension overflows");
        }
        ++pos_;
      }
      Eat('L');  // Python 2 long literals
      shape_.push_back(v);
      SkipSpace();
      if (Eat(',')) continue;
      SkipSpace();
      if (Eat(')')) return absl::OkStatus();
      return Error("malformed 'shape' tuple");
    }
  }

  std::string_view s_;
  const std::string& name_;
  size_t pos_ = 0;
  std::string descr_;
  bool fortran_ = false;
  std::vector<int64_t> shape_;
  bool has_descr_ = false, has_fortran_ = false, has_shape_ = false;
};

bool EndsWith(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && std::string_view(s).substr(s.size() - suffix.size()) == suffix;
}

template <typename T, typename Repeated>
void CopyConverted(const Repeated& values, Tensor* t) {
  T* out = t->data<T>();
  for (int i = 0; i < values.size(); ++i) out[i] = static_cast<T>(values.Get(i));
}

}  // namespace

absl::StatusOr<Tensor> DecodeNpy(std::string_view bytes, const std::string& name) {
  auto invalid = [&](const std::string& what) { return absl::InvalidArgumentError(absl::StrCat(name, ": ", what)); };
  if (bytes.size() < 10 || bytes.substr(0, kNpyMagicSize) != std::string_view(kNpyMagic, kNpyMagicSize)) {
    return invalid("not a .npy file (bad magic)");
  }
  const uint8_t major = static_cast<uint8_t>(bytes[6]);
  size_t header_len = 0, header_start = 0;
  if (major == 1) {
    header_len = static_cast<uint8_t>(bytes[8]) | (static_cast<size_t>(static_cast<uint8_t>(bytes[9])) << 8);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return invalid("truncated .npy header");
    for (int i = 3; i >= 0; --i) header_len = (header_len << 8) | static_cast<uint8_t>(bytes[8 + i]);
    header_start = 12;
  } else {
    return invalid(absl::StrCat("unsupported .npy format version ", major, ".", static_cast<int>(bytes[7])));
  }
  if (header_len > bytes.size() - header_start) return invalid("truncated .npy header");
  NpyHeaderParser parser(bytes.substr(header_start, header_len), name);
  RETURN_IF_ERROR(parser.Parse());
  if (parser.fortran()) return invalid("Fortran-order arrays are unsupported (save with C order)");
  const std::string& descr = parser.descr();
  DType dtype = DType::kUnknown;
  for (const NpyDtype& d : kNpyDtypes) {
    std::string_view ds(d.descr);
    // '=' is native (little-endian here); single bytes may be spelled '<' too.
    if (descr == ds || (descr.size() == 3 && descr.substr(1) == ds.substr(1) &&
                        (descr[0] == '=' || (ds[0] == '|' && descr[0] == '<')))) {
      dtype = d.dtype;
    }
  }
  if (dtype == DType::kUnknown) {
    if (!descr.empty() && descr[0] == '>' && descr.size() > 2 && descr.substr(2) != "1") {
      return invalid(absl::StrCat("big-endian dtype '", descr, "' is unsupported"));
    }
    return invalid(absl::StrCat("unsupported dtype '", descr, "'"));
  }
  int64_t expected = 0;
  RETURN_IF_ERROR(CheckedSize(parser.shape(), dtype, name, &expected));
  std::string_view data = bytes.substr(header_start + header_len);
  if (static_cast<int64_t>(data.size()) != expected) {
    return invalid(absl::StrCat("holds ", data.size(), " data bytes, expected ", expected, " for ", descr, " (",
                                absl::StrJoin(parser.shape(), ","), ")"));
  }
  return Tensor::FromBytes(dtype, parser.shape(), data);
}

absl::StatusOr<std::string> EncodeNpy(const Tensor& tensor) {
  const char* descr = nullptr;
  for (const NpyDtype& d : kNpyDtypes) {
    if (d.dtype == tensor.dtype()) descr = d.descr;
  }
  if (descr == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("cannot write dtype ", DTypeName(tensor.dtype()), " to .npy"));
  }
  std::string shape;
  if (tensor.rank() == 1) {
    shape = absl::StrCat("(", tensor.dims()[0], ",)");
  } else {
    shape = absl::StrCat("(", absl::StrJoin(tensor.dims(), ", "), ")");
  }
  std::string header = absl::StrCat("{'descr': '", descr, "', 'fortran_order': False, 'shape': ", shape, ", }");
  // Pad with spaces and end in '\n' so that the data starts 64-byte aligned.
  size_t prefix = 10;
  size_t total = (prefix + header.size() + 1 + 63) / 64 * 64;
  bool v2 = total - prefix > 65535;
  if (v2) {
    prefix = 12;
    total = (prefix + header.size() + 1 + 63) / 64 * 64;
  }
  header.append(total - prefix - header.size() - 1, ' ');
  header.push_back('\n');
  std::string out(kNpyMagic, kNpyMagicSize);
  out.push_back(static_cast<char>(v2 ? 2 : 1));
  out.push_back(0);
  const uint32_t len = static_cast<uint32_t>(header.size());
  for (int i = 0; i < (v2 ? 4 : 2); ++i) out.push_back(static_cast<char>((len >> (8 * i)) & 0xff));
  out += header;
  if (tensor.size_bytes() > 0 && tensor.empty_storage()) {
    return absl::InvalidArgumentError("tensor has no storage");
  }
  if (tensor.size_bytes() > 0) out.append(tensor.bytes());
  return out;
}

absl::Status WriteNpy(const std::string& path, const Tensor& tensor) {
  ASSIGN_OR_RETURN(std::string bytes, EncodeNpy(tensor));
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return absl::PermissionDeniedError(absl::StrCat("cannot open '", path, "' for writing"));
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) return absl::DataLossError(absl::StrCat("cannot write '", path, "'"));
  return absl::OkStatus();
}

absl::StatusOr<Tensor> DecodeTensorProto(std::string_view bytes, const std::string& name) {
  auto invalid = [&](const std::string& what) { return absl::InvalidArgumentError(absl::StrCat(name, ": ", what)); };
  onnx::TensorProto proto;
  if (bytes.size() > static_cast<size_t>(INT32_MAX) ||
      !proto.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return invalid("not a serialized onnx.TensorProto");
  }
  if (proto.data_location() == onnx::TensorProto::EXTERNAL || proto.external_data_size() > 0) {
    return invalid("external tensor data is unsupported");
  }
  if (proto.has_segment()) return invalid("segmented tensors are unsupported");
  auto dtype = DTypeFromOnnx(proto.data_type());
  if (!dtype.ok()) return invalid(std::string(dtype.status().message()));
  std::vector<int64_t> dims(proto.dims().begin(), proto.dims().end());
  int64_t expected = 0;
  RETURN_IF_ERROR(CheckedSize(dims, *dtype, name, &expected));
  const int64_t n = NumElements(dims);
  if (proto.has_raw_data()) {
    if (static_cast<int64_t>(proto.raw_data().size()) != expected) {
      return invalid(absl::StrCat("raw_data holds ", proto.raw_data().size(), " bytes, expected ", expected));
    }
    return Tensor::FromBytes(*dtype, dims, proto.raw_data());
  }
  int64_t count = 0;
  const char* field = "";
  switch (*dtype) {
    case DType::kFloat32: count = proto.float_data_size(); field = "float_data"; break;
    case DType::kFloat64: count = proto.double_data_size(); field = "double_data"; break;
    case DType::kInt64: count = proto.int64_data_size(); field = "int64_data"; break;
    case DType::kUInt32:
    case DType::kUInt64: count = proto.uint64_data_size(); field = "uint64_data"; break;
    default: count = proto.int32_data_size(); field = "int32_data"; break;
  }
  if (count != n) return invalid(absl::StrCat(field, " holds ", count, " values, expected ", n));
  Tensor t(*dtype, dims);
  switch (*dtype) {
    case DType::kFloat32: CopyConverted<float>(proto.float_data(), &t); break;
    case DType::kFloat64: CopyConverted<double>(proto.double_data(), &t); break;
    case DType::kInt64: CopyConverted<int64_t>(proto.int64_data(), &t); break;
    case DType::kInt32: CopyConverted<int32_t>(proto.int32_data(), &t); break;
    case DType::kInt16: CopyConverted<int16_t>(proto.int32_data(), &t); break;
    case DType::kFloat16: CopyConverted<uint16_t>(proto.int32_data(), &t); break;   // IEEE half bits
    case DType::kBFloat16: CopyConverted<uint16_t>(proto.int32_data(), &t); break;  // upper f32 bits
    case DType::kInt8: CopyConverted<int8_t>(proto.int32_data(), &t); break;
    case DType::kUInt8: CopyConverted<uint8_t>(proto.int32_data(), &t); break;
    case DType::kUInt16: CopyConverted<uint16_t>(proto.int32_data(), &t); break;
    case DType::kUInt32: CopyConverted<uint32_t>(proto.uint64_data(), &t); break;
    case DType::kUInt64: CopyConverted<uint64_t>(proto.uint64_data(), &t); break;
    case DType::kBool: {
      uint8_t* out = t.data<uint8_t>();
      for (int i = 0; i < proto.int32_data_size(); ++i) out[i] = proto.int32_data(i) != 0;
      break;
    }
    case DType::kUnknown: return invalid("unknown dtype");
  }
  return t;
}

absl::StatusOr<std::string> TensorProtoName(const std::string& path) {
  ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
  onnx::TensorProto proto;
  if (bytes.size() > static_cast<size_t>(INT32_MAX) ||
      !proto.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::InvalidArgumentError(absl::StrCat("tensor file '", path, "': not an ONNX TensorProto"));
  }
  return proto.name();
}

absl::StatusOr<Tensor> ReadTensorFile(const std::string& path) {
  if (EndsWith(path, ".npy")) {
    ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
    return DecodeNpy(bytes, absl::StrCat("tensor file '", path, "'"));
  }
  if (EndsWith(path, ".pb")) {
    ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
    return DecodeTensorProto(bytes, absl::StrCat("tensor file '", path, "'"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("tensor file '", path, "': unsupported extension (expected .npy or .pb)"));
}

}  // namespace kiln
