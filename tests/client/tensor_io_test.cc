// Tensor files: .npy round trips for every dtype, NumPy-written headers (v1/v2/v3),
// malformed files, and ONNX TensorProto .pb files with raw and typed data.
#include "client/tensor_io.h"

#include <cstring>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "onnx/onnx.pb.h"
#include "tests/client/runtime/test_package.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

// A .npy file as NumPy writes it: magic, version, little-endian header length,
// the dict padded with spaces to `align` bytes and ending in '\n', then data.
std::string NpyBytes(int major, const std::string& dict, std::string_view data, int align = 64) {
  const size_t prefix = major == 1 ? 10 : 12;
  std::string header = dict;
  while ((prefix + header.size() + 1) % align != 0) header.push_back(' ');
  header.push_back('\n');
  std::string out = "\x93NUMPY";
  out.push_back(static_cast<char>(major));
  out.push_back(0);
  for (size_t i = 0; i < prefix - 8; ++i) out.push_back(static_cast<char>((header.size() >> (8 * i)) & 0xff));
  return out + header + std::string(data);
}

template <typename T>
std::string_view Bytes(const std::vector<T>& v) {
  return std::string_view(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

TEST(TensorIoTest, NpyRoundTripEveryDtypeAndShape) {
  const std::vector<DType> dtypes = {DType::kFloat32, DType::kFloat64, DType::kInt64, DType::kInt32, DType::kInt16,
                                     DType::kInt8,    DType::kUInt8,   DType::kBool,  DType::kFloat16};
  const std::vector<std::vector<int64_t>> shapes = {{}, {0}, {5}, {2, 3}, {2, 0, 4}, {1, 2, 3, 4}};
  for (DType dt : dtypes) {
    for (const auto& shape : shapes) {
      Tensor t(dt, shape);
      uint8_t* p = static_cast<uint8_t*>(t.raw());
      for (int64_t i = 0; i < t.size_bytes(); ++i) p[i] = dt == DType::kBool ? (i % 3 == 0) : static_cast<uint8_t>(i * 37 + 11);
      auto enc = EncodeNpy(t);
      ASSERT_TRUE(enc.ok()) << enc.status();
      // Data starts 64-byte aligned and the header ends in '\n', as NumPy writes it.
      EXPECT_EQ((enc->size() - t.size_bytes()) % 64, 0u);
      EXPECT_EQ((*enc)[enc->size() - t.size_bytes() - 1], '\n');
      auto dec = DecodeNpy(*enc, "x.npy");
      ASSERT_TRUE(dec.ok()) << dec.status() << " " << t.DebugString();
      EXPECT_EQ(dec->dtype(), dt);
      EXPECT_EQ(dec->dims(), shape);
      EXPECT_EQ(dec->bytes(), t.bytes()) << t.DebugString();
    }
  }
}

TEST(TensorIoTest, WriteAndReadFile) {
  const std::string path = kiln::testing::MakeTempDir() + "/t.npy";
  Tensor t = Tensor::FromVector<float>(DType::kFloat32, {2, 2}, std::vector<float>{1, -2, 3.5f, 4});
  ASSERT_TRUE(WriteNpy(path, t).ok());
  auto back = ReadTensorFile(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->DebugString(), "f32[2,2]{1,-2,3.5,4}");
}

TEST(TensorIoTest, ReadsNumpyWrittenHeaders) {
  const std::vector<float> f = {0, 1, 2, 3, 4, 5};
  // What np.save(np.arange(6, dtype=np.float32).reshape(2, 3)) writes (format 1.0).
  auto a = DecodeNpy(NpyBytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", Bytes(f)), "a");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->dims(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a->data<float>()[5], 5.0f);
  // Old NumPy: 16-byte alignment; format 2.0 and 3.0; 1-d and scalar shapes.
  const std::vector<int64_t> l = {7, -8, 9};
  auto b = DecodeNpy(NpyBytes(2, "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }", Bytes(l), 16), "b");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->data<int64_t>()[1], -8);
  const std::vector<double> d = {2.5};
  auto c = DecodeNpy(NpyBytes(3, "{\"descr\": \"<f8\", \"fortran_order\": False, \"shape\": ()}", Bytes(d)), "c");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->rank(), 0);
  EXPECT_EQ(c->data<double>()[0], 2.5);
  const std::vector<uint8_t> bools = {1, 0, 1, 1};
  auto e = DecodeNpy(NpyBytes(1, "{'descr': '|b1', 'fortran_order': False, 'shape': (2, 2), }", Bytes(bools)), "e");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->dtype(), DType::kBool);
  // Python 2 long literals and keys in another order.
  const std::vector<int16_t> s = {1, 2};
  auto g = DecodeNpy(NpyBytes(1, "{'shape': (2L,), 'fortran_order': False, 'descr': '<i2'}", Bytes(s)), "g");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->dtype(), DType::kInt16);
  auto z = DecodeNpy(NpyBytes(1, "{'descr': '|u1', 'fortran_order': False, 'shape': (0, 5), }", ""), "z");
  ASSERT_TRUE(z.ok()) << z.status();
  EXPECT_EQ(z->num_elements(), 0);
}

TEST(TensorIoTest, UnsupportedOrMalformedNpyNamesTheFile) {
  const std::vector<float> f = {0, 1, 2, 3, 4, 5};
  struct Case {
    std::string bytes;
    const char* message;
  };
  const std::vector<Case> cases = {
      {NpyBytes(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", Bytes(f)), "Fortran"},
      {NpyBytes(1, "{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }", Bytes(f)), "big-endian"},
      {NpyBytes(1, "{'descr': '<c8', 'fortran_order': False, 'shape': (3,), }", Bytes(f)), "unsupported dtype '<c8'"},
      {NpyBytes(1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (6,), }", Bytes(f)), "structured"},
      {NpyBytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 4), }", Bytes(f)), "expected 32"},
      {NpyBytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", Bytes(f)), "expected 16"},
      {NpyBytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }", Bytes(f)), "non-integer"},
      {NpyBytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999, 99999999999), }", ""),
       "invalid shape"},
      {NpyBytes(1, "{'descr': '<f4', 'shape': (6,), }", Bytes(f)), "lacks"},
      {NpyBytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (6,)", Bytes(f)), "bad .npy header"},
      {NpyBytes(7, "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }", Bytes(f)), "version 7"},
      {std::string("\x93NUMPY\x01\x00\xff\x7f{}", 12), "truncated"},
      {"PK\x03\x04 not numpy at all", "bad magic"},
      {"", "bad magic"},
  };
  for (const Case& c : cases) {
    auto t = DecodeNpy(c.bytes, "tensor file 'in.npy'");
    ASSERT_FALSE(t.ok()) << c.message;
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(t.status().message(), HasSubstr("in.npy")) << c.message;
    EXPECT_THAT(t.status().message(), HasSubstr(c.message));
  }
  // Every prefix of a valid file is an error, never a crash.
  std::string good = NpyBytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", Bytes(f));
  for (size_t n = 0; n < good.size(); ++n) EXPECT_FALSE(DecodeNpy(good.substr(0, n), "p").ok()) << n;
}

TEST(TensorIoTest, ReadTensorFileErrors) {
  const std::string dir = kiln::testing::MakeTempDir();
  auto missing = ReadTensorFile(dir + "/none.npy");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("none.npy"));
  kiln::testing::WriteFile(dir + "/x.txt", "1 2 3");
  auto ext = ReadTensorFile(dir + "/x.txt");
  EXPECT_EQ(ext.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ext.status().message(), HasSubstr("x.txt"));
  kiln::testing::WriteFile(dir + "/bad.npy", "garbage");
  EXPECT_THAT(ReadTensorFile(dir + "/bad.npy").status().message(), HasSubstr("bad.npy"));
  EXPECT_FALSE(WriteNpy(dir + "/no/such/dir/x.npy", Tensor(DType::kFloat32, {1})).ok());
  EXPECT_FALSE(EncodeNpy(Tensor(DType::kUnknown, {1})).ok());
}

TEST(TensorIoTest, ReadsTensorProtoRawAndTypedData) {
  const std::string dir = kiln::testing::MakeTempDir();
  onnx::TensorProto raw;
  raw.set_name("x");
  raw.add_dims(2);
  raw.add_dims(2);
  raw.set_data_type(onnx::TensorProto::FLOAT);
  const std::vector<float> f = {1.5f, -2, 3, 4.25f};
  raw.set_raw_data(std::string(Bytes(f)));
  kiln::testing::WriteFile(dir + "/raw.pb", raw.SerializeAsString());
  auto a = ReadTensorFile(dir + "/raw.pb");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->DebugString(), "f32[2,2]{1.5,-2,3,4.25}");

  onnx::TensorProto typed;
  typed.add_dims(4);
  typed.set_data_type(onnx::TensorProto::FLOAT);
  for (float v : f) typed.add_float_data(v);
  kiln::testing::WriteFile(dir + "/typed.pb", typed.SerializeAsString());
  auto b = ReadTensorFile(dir + "/typed.pb");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->DebugString(), "f32[4]{1.5,-2,3,4.25}");

  onnx::TensorProto i64;
  i64.add_dims(3);
  i64.set_data_type(onnx::TensorProto::INT64);
  for (int64_t v : {int64_t{1} << 40, int64_t{-3}, int64_t{0}}) i64.add_int64_data(v);
  auto c = DecodeTensorProto(i64.SerializeAsString(), "i64.pb");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->data<int64_t>()[0], int64_t{1} << 40);

  onnx::TensorProto i8;
  i8.add_dims(3);
  i8.set_data_type(onnx::TensorProto::INT8);
  for (int v : {-128, 0, 127}) i8.add_int32_data(v);
  auto d = DecodeTensorProto(i8.SerializeAsString(), "i8.pb");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->data<int8_t>()[0], -128);
  EXPECT_EQ(d->data<int8_t>()[2], 127);

  onnx::TensorProto dbl;
  dbl.set_data_type(onnx::TensorProto::DOUBLE);  // scalar
  dbl.add_double_data(0.125);
  auto e = DecodeTensorProto(dbl.SerializeAsString(), "d.pb");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->rank(), 0);
  EXPECT_EQ(e->data<double>()[0], 0.125);

  onnx::TensorProto bl;
  bl.add_dims(2);
  bl.set_data_type(onnx::TensorProto::BOOL);
  bl.add_int32_data(5);
  bl.add_int32_data(0);
  auto g = DecodeTensorProto(bl.SerializeAsString(), "b.pb");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->DebugString(), "bool[2]{true,false}");
}

TEST(TensorIoTest, BadTensorProtos) {
  onnx::TensorProto t;
  t.add_dims(3);
  t.set_data_type(onnx::TensorProto::FLOAT);
  t.add_float_data(1);
  EXPECT_THAT(DecodeTensorProto(t.SerializeAsString(), "short.pb").status().message(),
              HasSubstr("float_data holds 1 values, expected 3"));
  t.set_raw_data("12345");
  EXPECT_THAT(DecodeTensorProto(t.SerializeAsString(), "raw.pb").status().message(),
              HasSubstr("raw_data holds 5 bytes, expected 12"));
  t.clear_raw_data();
  t.set_data_type(onnx::TensorProto::STRING);
  EXPECT_THAT(DecodeTensorProto(t.SerializeAsString(), "s.pb").status().message(), HasSubstr("s.pb"));
  t.set_data_type(onnx::TensorProto::FLOAT);
  t.set_data_location(onnx::TensorProto::EXTERNAL);
  EXPECT_THAT(DecodeTensorProto(t.SerializeAsString(), "e.pb").status().message(), HasSubstr("external"));
  onnx::TensorProto neg;
  neg.add_dims(-1);
  neg.set_data_type(onnx::TensorProto::FLOAT);
  EXPECT_THAT(DecodeTensorProto(neg.SerializeAsString(), "n.pb").status().message(), HasSubstr("invalid shape"));
  EXPECT_THAT(DecodeTensorProto("\xff\xff\xff", "junk.pb").status().message(), HasSubstr("junk.pb"));
}

}  // namespace
}  // namespace kiln
