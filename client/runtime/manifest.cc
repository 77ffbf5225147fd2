// A protobuf wire-format reader for exactly the manifest messages: varints,
// length-delimited fields, fixed 64/32-bit fields; unknown fields skipped.
#include "client/runtime/manifest.h"

#include <cstring>

namespace kiln::runtime {
namespace {

enum WireType : int { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kStartGroup = 3, kEndGroup = 4, kFixed32 = 5 };

// A cursor over one message's bytes. Every read checks the bounds; the first
// error sticks and later reads return zeros.
class WireReader {
 public:
  WireReader(const uint8_t* data, size_t size, std::string context)
      : p_(data), end_(data + size), context_(std::move(context)) {}

  bool done() const { return p_ >= end_ || !status_.ok(); }
  const std::string& context() const { return context_; }
  const Status& status() const { return status_; }

  // The next field's number and wire type; false at the end or on error.
  bool NextField(int* number, int* wire_type) {
    if (done()) return false;
    uint64_t key = Varint();
    if (!status_.ok()) return false;
    *number = static_cast<int>(key >> 3);
    *wire_type = static_cast<int>(key & 7);
    if (*number <= 0) return Fail(Cat("field number ", key >> 3, " is invalid"));
    return true;
  }

  uint64_t Varint() {
    uint64_t value = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      if (p_ >= end_) return Fail("truncated varint"), 0;
      const uint8_t byte = *p_++;
      value |= uint64_t{byte & 0x7fu} << shift;
      if ((byte & 0x80) == 0) return value;
    }
    return Fail("varint longer than 10 bytes"), 0;
  }

  double Double() {
    if (end_ - p_ < 8) return Fail("truncated 64-bit field"), 0.0;
    uint64_t bits = 0;
    for (int i = 0; i < 8; ++i) bits |= uint64_t{p_[i]} << (8 * i);
    p_ += 8;
    double value;
    std::memcpy(&value, &bits, sizeof(value));
    return value;
  }

  // A length-delimited field's bytes (its length prefix already consumed by this call).
  bool Bytes(const uint8_t** data, size_t* size) {
    const uint64_t length = Varint();
    if (!status_.ok()) return false;
    if (length > static_cast<uint64_t>(end_ - p_)) return Fail(Cat("length ", length, " runs past the message"));
    *data = p_;
    *size = static_cast<size_t>(length);
    p_ += length;
    return true;
  }

  std::string String() {
    const uint8_t* data = nullptr;
    size_t size = 0;
    if (!Bytes(&data, &size)) return std::string();
    return std::string(reinterpret_cast<const char*>(data), size);
  }

  void Skip(int wire_type) {
    const uint8_t* data;
    size_t size;
    switch (wire_type) {
      case kVarint:
        Varint();
        return;
      case kFixed64:
        Advance(8);
        return;
      case kLengthDelimited:
        Bytes(&data, &size);
        return;
      case kFixed32:
        Advance(4);
        return;
      default:
        Fail(Cat("wire type ", wire_type, " (groups) is not used by package manifests"));
    }
  }

  // For a known field: true if its wire type is `want`, else the error naming it.
  bool Expect(int number, int wire_type, int want) {
    if (wire_type == want) return true;
    return Fail(Cat("field ", number, " has wire type ", wire_type, ", expected ", want));
  }

  // Repeated integer fields come packed (proto3's default) or one per tag.
  template <typename T>
  void RepeatedInt(int number, int wire_type, std::vector<T>* out) {
    if (wire_type == kVarint) {
      out->push_back(static_cast<T>(Varint()));
      return;
    }
    if (!Expect(number, wire_type, kLengthDelimited)) return;
    const uint8_t* data = nullptr;
    size_t size = 0;
    if (!Bytes(&data, &size)) return;
    WireReader packed(data, size, context_);
    while (!packed.done()) out->push_back(static_cast<T>(packed.Varint()));
    if (!packed.status().ok()) status_ = packed.status();
  }

  // A nested message's bytes, decoded by `decode(reader)`.
  template <typename Fn>
  void Message(int number, int wire_type, const std::string& context, Fn decode) {
    if (!Expect(number, wire_type, kLengthDelimited)) return;
    const uint8_t* data = nullptr;
    size_t size = 0;
    if (!Bytes(&data, &size)) return;
    WireReader nested(data, size, context);
    decode(nested);
    if (!nested.status().ok()) status_ = nested.status();
  }

 private:
  void Advance(size_t n) {
    if (static_cast<size_t>(end_ - p_) < n) {
      Fail("truncated fixed-size field");
      return;
    }
    p_ += n;
  }
  bool Fail(const std::string& what) {
    if (status_.ok()) status_ = InvalidArgumentError(Cat("manifest ", context_, ": ", what));
    p_ = end_;
    return false;
  }

  const uint8_t* p_;
  const uint8_t* end_;
  std::string context_;
  Status status_;
};

void DecodeTensor(WireReader& r, ManifestTensor* t) {
  int number, wire;
  while (r.NextField(&number, &wire)) {
    switch (number) {
      case 1:
        if (r.Expect(number, wire, kLengthDelimited)) t->name = r.String();
        break;
      case 2:
        if (r.Expect(number, wire, kVarint)) t->dtype = static_cast<DataType>(r.Varint());
        break;
      case 3:
        r.RepeatedInt(number, wire, &t->dims);
        break;
      case 4:
        if (r.Expect(number, wire, kVarint)) t->buffer = static_cast<int32_t>(r.Varint());
        break;
      default:
        r.Skip(wire);
    }
  }
}

void DecodeBuffer(WireReader& r, ManifestBuffer* b) {
  int number, wire;
  while (r.NextField(&number, &wire)) {
    switch (number) {
      case 1:
        if (r.Expect(number, wire, kVarint)) b->kind = static_cast<ManifestBuffer::Kind>(r.Varint());
        break;
      case 2:
        if (r.Expect(number, wire, kVarint)) b->size_bytes = static_cast<int64_t>(r.Varint());
        break;
      case 3:
        if (r.Expect(number, wire, kVarint)) b->offset = static_cast<int64_t>(r.Varint());
        break;
      case 4:
        if (r.Expect(number, wire, kLengthDelimited)) b->name = r.String();
        break;
      default:
        r.Skip(wire);
    }
  }
}

void DecodeLaunch(WireReader& r, ManifestLaunch* l) {
  int number, wire;
  while (r.NextField(&number, &wire)) {
    switch (number) {
      case 1:
        if (r.Expect(number, wire, kVarint)) l->blocks = static_cast<int64_t>(r.Varint());
        break;
      case 2:
        if (r.Expect(number, wire, kVarint)) l->threads = static_cast<int32_t>(r.Varint());
        break;
      case 3:
        if (r.Expect(number, wire, kVarint)) l->shared_bytes = static_cast<int32_t>(r.Varint());
        break;
      default:
        r.Skip(wire);
    }
  }
}

void DecodeStep(WireReader& r, ManifestStep* s) {
  int number, wire;
  while (r.NextField(&number, &wire)) {
    switch (number) {
      case 1:
        if (r.Expect(number, wire, kLengthDelimited)) s->symbol = r.String();
        break;
      case 2:
        r.RepeatedInt(number, wire, &s->args);
        break;
      case 3:
        if (r.Expect(number, wire, kVarint)) s->num_tasks = static_cast<int64_t>(r.Varint());
        break;
      case 4:
        if (r.Expect(number, wire, kVarint)) s->group = static_cast<int32_t>(r.Varint());
        break;
      case 5:
        r.Message(number, wire, r.context() + " launch", [&](WireReader& n) { DecodeLaunch(n, &s->launch); });
        break;
      default:
        r.Skip(wire);
    }
  }
}

void DecodeCuda(WireReader& r, ManifestCuda* c) {
  int number, wire;
  auto i64 = [&](int64_t* out) {
    if (r.Expect(number, wire, kVarint)) *out = static_cast<int64_t>(r.Varint());
  };
  auto str = [&](std::string* out) {
    if (r.Expect(number, wire, kLengthDelimited)) *out = r.String();
  };
  while (r.NextField(&number, &wire)) {
    switch (number) {
      case 1:
        if (r.Expect(number, wire, kVarint)) c->sm = static_cast<int32_t>(r.Varint());
        break;
      case 2:
        i64(&c->ptx_offset);
        break;
      case 3:
        i64(&c->ptx_size);
        break;
      case 4:
        i64(&c->cubin_offset);
        break;
      case 5:
        i64(&c->cubin_size);
        break;
      case 6:
        str(&c->cubin_missing);
        break;
      case 7:
        str(&c->ptxas_version);
        break;
      case 8:
        i64(&c->arena_bytes);
        break;
      case 9:
        i64(&c->buffer_alignment);
        break;
      default:
        r.Skip(wire);
    }
  }
}

void DecodeGroup(WireReader& r, ManifestGroup* g) {
  int number, wire;
  while (r.NextField(&number, &wire)) {
    switch (number) {
      case 1:
        if (r.Expect(number, wire, kLengthDelimited)) g->workload_key = r.String();
        break;
      case 2:
        if (r.Expect(number, wire, kLengthDelimited)) g->kind = r.String();
        break;
      case 3:
        if (r.Expect(number, wire, kLengthDelimited)) g->schedule_config = r.String();
        break;
      case 4:
        if (r.Expect(number, wire, kLengthDelimited)) g->nodes.push_back(r.String());
        break;
      case 5:
        if (r.Expect(number, wire, kFixed64)) g->flops = r.Double();
        break;
      case 6:
        if (r.Expect(number, wire, kFixed64)) g->bytes = r.Double();
        break;
      default:
        r.Skip(wire);
    }
  }
}

}  // namespace

int64_t DataTypeSize(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32:
      return 4;
    case DataType::kFloat16:
      return 2;
    case DataType::kBfloat16:
      return 2;
    case DataType::kFloat64:
      return 8;
    case DataType::kInt8:
      return 1;
    case DataType::kInt16:
      return 2;
    case DataType::kInt32:
      return 4;
    case DataType::kInt64:
      return 8;
    case DataType::kUint8:
      return 1;
    case DataType::kBool:
      return 1;
    case DataType::kUint16:
      return 2;
    case DataType::kUint32:
      return 4;
    case DataType::kUint64:
      return 8;
    default:
      return 0;
  }
}

std::string DataTypeName(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32:
      return "FLOAT32";
    case DataType::kFloat16:
      return "FLOAT16";
    case DataType::kBfloat16:
      return "BFLOAT16";
    case DataType::kFloat64:
      return "FLOAT64";
    case DataType::kInt8:
      return "INT8";
    case DataType::kInt16:
      return "INT16";
    case DataType::kInt32:
      return "INT32";
    case DataType::kInt64:
      return "INT64";
    case DataType::kUint8:
      return "UINT8";
    case DataType::kBool:
      return "BOOL";
    case DataType::kUint16:
      return "UINT16";
    case DataType::kUint32:
      return "UINT32";
    case DataType::kUint64:
      return "UINT64";
    default:
      return Cat("DATA_TYPE_", static_cast<int>(dtype));
  }
}

Result<Manifest> DecodeManifest(const uint8_t* data, size_t size) {
  Manifest m;
  WireReader r(data, size, "(kiln.v1.PackageManifest)");
  auto str = [&](int number, int wire, std::string* out) {
    if (r.Expect(number, wire, kLengthDelimited)) *out = r.String();
  };
  auto i64 = [&](int number, int wire, int64_t* out) {
    if (r.Expect(number, wire, kVarint)) *out = static_cast<int64_t>(r.Varint());
  };
  int number, wire;
  while (r.NextField(&number, &wire)) {
    switch (number) {
      case 1:
        if (r.Expect(number, wire, kVarint)) m.format_version = static_cast<int32_t>(r.Varint());
        break;
      case 2:
        str(number, wire, &m.compiler_version);
        break;
      case 3:
        str(number, wire, &m.target_triple);
        break;
      case 4:
        str(number, wire, &m.target_cpu);
        break;
      case 5:
        str(number, wire, &m.target_features);
        break;
      case 6:
        str(number, wire, &m.model_name);
        break;
      case 7:
        m.inputs.emplace_back();
        r.Message(number, wire, Cat("input ", m.inputs.size() - 1),
                  [&](WireReader& n) { DecodeTensor(n, &m.inputs.back()); });
        break;
      case 8:
        m.outputs.emplace_back();
        r.Message(number, wire, Cat("output ", m.outputs.size() - 1),
                  [&](WireReader& n) { DecodeTensor(n, &m.outputs.back()); });
        break;
      case 9:
        m.buffers.emplace_back();
        r.Message(number, wire, Cat("buffer ", m.buffers.size() - 1),
                  [&](WireReader& n) { DecodeBuffer(n, &m.buffers.back()); });
        break;
      case 10:
        m.steps.emplace_back();
        r.Message(number, wire, Cat("step ", m.steps.size() - 1),
                  [&](WireReader& n) { DecodeStep(n, &m.steps.back()); });
        break;
      case 11:
        m.groups.emplace_back();
        r.Message(number, wire, Cat("group ", m.groups.size() - 1),
                  [&](WireReader& n) { DecodeGroup(n, &m.groups.back()); });
        break;
      case 12:
        i64(number, wire, &m.arena_bytes);
        break;
      case 13:
        i64(number, wire, &m.code_offset);
        break;
      case 14:
        i64(number, wire, &m.code_size);
        break;
      case 15:
        i64(number, wire, &m.weights_offset);
        break;
      case 16:
        i64(number, wire, &m.weights_size);
        break;
      case 17:
        if (r.Expect(number, wire, kVarint)) m.tuned_threads = static_cast<int32_t>(r.Varint());
        break;
      case 18:
        str(number, wire, &m.isa_level);
        break;
      case 19:
        if (r.Expect(number, wire, kVarint)) m.device = static_cast<Device>(static_cast<int32_t>(r.Varint()));
        break;
      case 20:
        m.has_cuda = true;
        r.Message(number, wire, "cuda", [&](WireReader& n) { DecodeCuda(n, &m.cuda); });
        break;
      default:
        r.Skip(wire);
    }
  }
  if (!r.status().ok()) return r.status();
  return m;
}

}  // namespace kiln::runtime
