// The runtime's own manifest decoder against protobuf's: every field the
// runtime reads, both encodings of repeated integers, unknown fields skipped,
// and malformed bytes answered with an error naming the place.
#include "client/runtime/manifest.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kiln/v1/package.pb.h"

namespace kiln::runtime {
namespace {

using ::testing::HasSubstr;

v1::PackageManifest FullManifest() {
  v1::PackageManifest m;
  m.set_format_version(1);
  m.set_compiler_version("kiln-9.9.9");
  m.set_target_triple("x86_64-unknown-linux-gnu");
  m.set_target_cpu("znver4");
  m.set_target_features("+avx2,+avx512f,-amx-tile");
  m.set_model_name("m");
  v1::PackageTensor* x = m.add_inputs();
  x->set_name("x");
  x->set_dtype(v1::FLOAT16);
  x->add_dims(1);
  x->add_dims(300);  // a two-byte varint
  x->set_buffer(0);
  v1::PackageTensor* y = m.add_outputs();
  y->set_name("y");
  y->set_dtype(v1::INT64);
  y->set_buffer(2);
  for (int k = 1; k <= 4; ++k) {
    v1::PackageBuffer* b = m.add_buffers();
    b->set_kind(static_cast<v1::PackageBuffer::Kind>(k));
    b->set_size_bytes(int64_t{1} << (30 + k));
    b->set_offset(64 * k);
    b->set_name("b" + std::to_string(k));
  }
  v1::PackageStep* s = m.add_steps();
  s->set_symbol("k0");
  s->add_args(0);
  s->add_args(3);
  s->set_num_tasks(1000000);
  s->set_group(-1);  // a negative int32: a ten-byte varint
  s->mutable_launch()->set_blocks(int64_t{1} << 31);
  s->mutable_launch()->set_threads(1024);
  s->mutable_launch()->set_shared_bytes(49152);
  v1::PackageGroup* g = m.add_groups();
  g->set_workload_key("w");
  g->set_kind("conv");
  g->set_schedule_config("mr=4");
  g->add_nodes("n1");
  g->add_nodes("n2");
  g->set_flops(1.5e9);
  g->set_bytes(0.25);
  m.set_arena_bytes(12345);
  m.set_code_offset(128);
  m.set_code_size(64);
  m.set_weights_offset(192);
  m.set_weights_size(7);
  m.set_tuned_threads(2);
  m.set_isa_level("x86-64-v4");
  m.set_device(v1::DEVICE_CUDA);
  v1::PackageCuda* c = m.mutable_cuda();
  c->set_sm(90);
  c->set_ptx_offset(256);
  c->set_ptx_size(1000);
  c->set_cubin_offset(1280);
  c->set_cubin_size(3000);
  c->set_cubin_missing("none");
  c->set_ptxas_version("release 13.0");
  c->set_arena_bytes(int64_t{5} << 32);
  c->set_buffer_alignment(256);
  return m;
}

Result<Manifest> Decode(const std::string& bytes) {
  return DecodeManifest(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

TEST(ManifestDecoderTest, ReadsEveryFieldProtobufWrites) {
  const v1::PackageManifest want = FullManifest();
  Result<Manifest> got = Decode(want.SerializeAsString());
  ASSERT_TRUE(got.ok()) << got.status();
  const Manifest& m = *got;
  EXPECT_EQ(m.format_version, 1);
  EXPECT_EQ(m.compiler_version, "kiln-9.9.9");
  EXPECT_EQ(m.target_triple, "x86_64-unknown-linux-gnu");
  EXPECT_EQ(m.target_cpu, "znver4");
  EXPECT_EQ(m.target_features, "+avx2,+avx512f,-amx-tile");
  EXPECT_EQ(m.isa_level, "x86-64-v4");
  EXPECT_EQ(m.model_name, "m");
  ASSERT_EQ(m.inputs.size(), 1u);
  EXPECT_EQ(m.inputs[0].name, "x");
  EXPECT_EQ(m.inputs[0].dtype, DataType::kFloat16);
  EXPECT_EQ(m.inputs[0].dims, (std::vector<int64_t>{1, 300}));
  ASSERT_EQ(m.outputs.size(), 1u);
  EXPECT_EQ(m.outputs[0].dtype, DataType::kInt64);
  EXPECT_TRUE(m.outputs[0].dims.empty());
  EXPECT_EQ(m.outputs[0].buffer, 2);
  ASSERT_EQ(m.buffers.size(), 4u);
  for (int k = 1; k <= 4; ++k) {
    EXPECT_EQ(m.buffers[k - 1].kind, k);
    EXPECT_EQ(m.buffers[k - 1].size_bytes, int64_t{1} << (30 + k));
    EXPECT_EQ(m.buffers[k - 1].offset, 64 * k);
    EXPECT_EQ(m.buffers[k - 1].name, "b" + std::to_string(k));
  }
  ASSERT_EQ(m.steps.size(), 1u);
  EXPECT_EQ(m.steps[0].symbol, "k0");
  EXPECT_EQ(m.steps[0].args, (std::vector<int32_t>{0, 3}));
  EXPECT_EQ(m.steps[0].num_tasks, 1000000);
  EXPECT_EQ(m.steps[0].group, -1);
  EXPECT_EQ(m.steps[0].launch.blocks, int64_t{1} << 31);
  EXPECT_EQ(m.steps[0].launch.threads, 1024);
  EXPECT_EQ(m.steps[0].launch.shared_bytes, 49152);
  ASSERT_EQ(m.groups.size(), 1u);
  EXPECT_EQ(m.groups[0].workload_key, "w");
  EXPECT_EQ(m.groups[0].kind, "conv");
  EXPECT_EQ(m.groups[0].schedule_config, "mr=4");
  EXPECT_EQ(m.groups[0].nodes, (std::vector<std::string>{"n1", "n2"}));
  EXPECT_EQ(m.groups[0].flops, 1.5e9);
  EXPECT_EQ(m.groups[0].bytes, 0.25);
  EXPECT_EQ(m.arena_bytes, 12345);
  EXPECT_EQ(m.code_offset, 128);
  EXPECT_EQ(m.code_size, 64);
  EXPECT_EQ(m.weights_offset, 192);
  EXPECT_EQ(m.weights_size, 7);
  EXPECT_EQ(m.tuned_threads, 2);
  EXPECT_EQ(m.device, Device::kCuda);
  ASSERT_TRUE(m.has_cuda);
  EXPECT_EQ(m.cuda.sm, 90);
  EXPECT_EQ(m.cuda.ptx_offset, 256);
  EXPECT_EQ(m.cuda.ptx_size, 1000);
  EXPECT_EQ(m.cuda.cubin_offset, 1280);
  EXPECT_EQ(m.cuda.cubin_size, 3000);
  EXPECT_EQ(m.cuda.cubin_missing, "none");
  EXPECT_EQ(m.cuda.ptxas_version, "release 13.0");
  EXPECT_EQ(m.cuda.arena_bytes, int64_t{5} << 32);
  EXPECT_EQ(m.cuda.buffer_alignment, 256);
}

// A CPU package (every package before CUDA ones) has neither: the defaults.
TEST(ManifestDecoderTest, ACpuManifestHasNoDeviceFields) {
  v1::PackageManifest want = FullManifest();
  want.clear_device();
  want.clear_cuda();
  want.mutable_steps(0)->clear_launch();
  Result<Manifest> got = Decode(want.SerializeAsString());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->device, Device::kCpu);
  EXPECT_FALSE(got->has_cuda);
  EXPECT_EQ(got->steps[0].launch.threads, 0);
}

// Repeated integers one per tag (proto2 style, allowed by the wire format) and
// fields this runtime does not know (a newer writer's) of every wire type.
TEST(ManifestDecoderTest, AcceptsUnpackedIntegersAndSkipsUnknownFields) {
  std::string bytes;
  bytes += "\x3a\x07\x0a\x01x\x18\x02\x18\x03";  // inputs { name: "x" dims: 2 dims: 3 }
  bytes += std::string("\xa0\x06\x05", 3);                // field 100, varint 5
  bytes += std::string("\xa9\x06") + std::string(8, '\1');  // field 101, fixed64
  bytes += std::string("\xb2\x06\x02zz", 5);              // field 102, bytes
  bytes += std::string("\xbd\x06") + std::string(4, '\2');  // field 103, fixed32
  bytes += "\x60\x2a";                                    // arena_bytes: 42
  Result<Manifest> got = Decode(bytes);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->inputs.size(), 1u);
  EXPECT_EQ(got->inputs[0].dims, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(got->arena_bytes, 42);
}

TEST(ManifestDecoderTest, MalformedBytesAreErrorsNamingThePlace) {
  const std::string full = FullManifest().SerializeAsString();
  // Every proper prefix either decodes (it ends between fields) or is an
  // INVALID_ARGUMENT; none reads past its end (ASan would say).
  int errors = 0;
  for (size_t n = 0; n < full.size(); ++n) {
    Result<Manifest> got = Decode(full.substr(0, n));
    if (!got.ok()) {
      EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument) << n;
      ++errors;
    }
  }
  EXPECT_GT(errors, 0);

  Result<Manifest> wrong_type = Decode(std::string("\x22\x01", 2) + "x" + std::string("\x62\x05zzzzz", 7));
  ASSERT_FALSE(wrong_type.ok());
  EXPECT_THAT(wrong_type.status().message(), HasSubstr("field 12 has wire type 2"));

  Result<Manifest> nested = Decode(std::string("\x4a\x02\x10\xff", 4));  // buffers { size_bytes: <truncated> }
  ASSERT_FALSE(nested.ok());
  EXPECT_THAT(nested.status().message(), HasSubstr("buffer 0"));
  EXPECT_THAT(nested.status().message(), HasSubstr("truncated varint"));

  // steps { launch { blocks: <truncated> } }
  Result<Manifest> launch = Decode(std::string("\x52\x04\x2a\x02\x08\xff", 6));
  ASSERT_FALSE(launch.ok());
  EXPECT_THAT(launch.status().message(), HasSubstr("step 0 launch: truncated varint"));

  Result<Manifest> group = Decode(std::string("\x9b\x06", 2));  // field 99, start-group
  ASSERT_FALSE(group.ok());
  EXPECT_THAT(group.status().message(), HasSubstr("groups"));

  Result<Manifest> too_long = Decode(std::string("\x3a\x7f\x0a", 3));  // a length past the end
  ASSERT_FALSE(too_long.ok());
  EXPECT_THAT(too_long.status().message(), HasSubstr("runs past"));
}

}  // namespace
}  // namespace kiln::runtime
