// Package, Session and the C API on packages assembled from clang-19 kernels:
// numbers for 1 and 3 threads, chained steps, and every kind of bad package.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "base/cpu_features.h"
#include "base/digest.h"
#include "client/runtime/float_control.h"
#include "client/runtime/kiln_runtime.h"
#include "client/runtime/package_reader.h"
#include "client/runtime/session.h"
#include "client/runtime/thread_pool.h"
#include "gmock/gmock.h"
#include "google/protobuf/stubs/logging.h"
#include "gtest/gtest.h"
#include "proto/kiln/v1/package_layout.h"
#include "tests/client/runtime/test_kernels.h"
#include "tests/client/runtime/test_package.h"

namespace kiln::runtime {
namespace {

using ::kiln::v1::PackageBuffer;
using ::kiln::v1::PackageManifest;
using ::testing::HasSubstr;

constexpr int kN = 1000;

// Kernels compiled once for the whole binary.
const std::string* Kernels() {
  static const std::string* object = [] {
    auto o = kiln::testing::CompileToObject(kiln::testing::kTestKernelsC);
    return o.ok() ? new std::string(*o) : nullptr;
  }();
  return object;
}

#define KERNELS_OR_SKIP()                                                          \
  if (!kiln::testing::HaveClang()) GTEST_SKIP() << "clang-19 is not installed";    \
  ASSERT_NE(Kernels(), nullptr) << "clang-19 failed on the test kernels"

void AddTensor(google::protobuf::RepeatedPtrField<v1::PackageTensor>* list, const std::string& name,
               v1::DataType dtype, std::vector<int64_t> dims, int buffer) {
  v1::PackageTensor* t = list->Add();
  t->set_name(name);
  t->set_dtype(dtype);
  for (int64_t d : dims) t->add_dims(d);
  t->set_buffer(buffer);
}

void AddBuffer(PackageManifest* m, PackageBuffer::Kind kind, int64_t size, int64_t offset = 0) {
  PackageBuffer* b = m->add_buffers();
  b->set_kind(kind);
  b->set_size_bytes(size);
  b->set_offset(offset);
}

void AddStep(PackageManifest* m, const std::string& symbol, std::vector<int> args, int64_t tasks) {
  v1::PackageStep* s = m->add_steps();
  s->set_symbol(symbol);
  for (int a : args) s->add_args(a);
  s->set_num_tasks(tasks);
}

// Two outputs from one input x[kN]:
//   y = poly(x)                    (step 0: k_poly x -> y)
//   z = x * w + 2                  (step 1: k_scale x, w -> s; step 2: k_bias s -> z)
// w is a CONSTANT in the weights (at offset 64, after 64 bytes of padding) and s
// a SCRATCH buffer at offset 128 in the arena.
struct TestModel {
  PackageManifest manifest;
  std::string weights;
  std::vector<float> w;
};

TestModel MakeModel() {
  TestModel t;
  PackageManifest& m = t.manifest;
  m.set_model_name("test");
  m.set_target_triple("x86_64-unknown-linux-gnu");
  const int64_t bytes = kN * sizeof(float);
  AddBuffer(&m, PackageBuffer::INPUT, bytes);            // 0: x
  AddBuffer(&m, PackageBuffer::OUTPUT, bytes);           // 1: y
  AddBuffer(&m, PackageBuffer::CONSTANT, bytes, 64);     // 2: w
  AddBuffer(&m, PackageBuffer::SCRATCH, bytes, 128);     // 3: s
  AddBuffer(&m, PackageBuffer::OUTPUT, bytes);           // 4: z
  m.set_arena_bytes(128 + bytes);
  AddTensor(m.mutable_inputs(), "x", v1::FLOAT32, {kN}, 0);
  AddTensor(m.mutable_outputs(), "y", v1::FLOAT32, {kN}, 1);
  AddTensor(m.mutable_outputs(), "z", v1::FLOAT32, {10, kN / 10}, 4);
  AddStep(&m, "k_poly", {0, 1}, kN);
  AddStep(&m, "k_scale", {0, 2, 3}, kN);
  AddStep(&m, "k_bias", {3, 4}, kN);
  t.w.resize(kN);
  for (int i = 0; i < kN; ++i) t.w[i] = 0.25f * (i % 13) - 1;
  t.weights.assign(64, '\0');
  t.weights.append(reinterpret_cast<const char*>(t.w.data()), bytes);
  return t;
}

std::string MakePackage(const std::function<void(PackageManifest*)>& tamper = nullptr) {
  TestModel t = MakeModel();
  return kiln::testing::BuildPackage(t.manifest, *Kernels(), t.weights, tamper);
}

// A session of MakePackage()'s package on `threads` threads, through the C
// API; the session keeps the package alive, so the caller releases only it.
void CreateSession(int threads, kiln_session_t** sess) {
  const std::string bytes = MakePackage();
  kiln_package_t* pkg = nullptr;
  ASSERT_EQ(kiln_package_load_bytes(bytes.data(), bytes.size(), &pkg), KILN_OK) << kiln_last_error_message();
  ASSERT_EQ(kiln_session_create(pkg, threads, sess), KILN_OK) << kiln_last_error_message();
  kiln_package_release(pkg);
}

std::vector<float> Input() {
  std::vector<float> x(kN);
  for (int i = 0; i < kN; ++i) x[i] = 0.01f * i - 4;
  return x;
}

void CheckOutputs(const Session& s, const std::vector<float>& x, const std::vector<float>& w) {
  ASSERT_EQ(s.num_outputs(), 2);
  ASSERT_EQ(s.OutputBytes(0), kN * sizeof(float));
  const float* y = static_cast<const float*>(s.OutputData(0));
  const float* z = static_cast<const float*>(s.OutputData(1));
  for (int i = 0; i < kN; ++i) {
    ASSERT_NEAR(y[i], 0.5f * x[i] * x[i] + 1.25f * x[i] - 3.75f, 1e-5f) << i;  // kernels use FMA
    ASSERT_NEAR(z[i], x[i] * w[i] + 2.0f, 1e-5f) << i;
  }
}

TEST(RuntimeTest, RunsChainedStepsWithOneAndThreeThreads) {
  KERNELS_OR_SKIP();
  auto pkg = Package::FromBytes(MakePackage(), "test.kpkg");
  ASSERT_TRUE(pkg.ok()) << pkg.status();
  std::shared_ptr<const Package> shared = std::move(*pkg);
  const std::vector<float> x = Input();
  const std::vector<float> w = MakeModel().w;
  for (int threads : {1, 3}) {
    ThreadPool pool(threads);
    auto s = Session::Create(shared, &pool);
    ASSERT_TRUE(s.ok()) << s.status();
    ASSERT_TRUE((*s)->SetInput("x", x.data(), x.size() * sizeof(float)).ok());
    ASSERT_TRUE((*s)->Run().ok());
    CheckOutputs(**s, x, w);
    // Runs again with new inputs into the same buffers.
    std::vector<float> x2(kN, 1.5f);
    ASSERT_TRUE((*s)->SetInput("x", x2.data(), x2.size() * sizeof(float)).ok());
    ASSERT_TRUE((*s)->Run().ok());
    CheckOutputs(**s, x2, w);
  }
  // The kernels' object is loaded once per package and its .bss counter saw every task.
  auto obj = shared->Object();
  ASSERT_TRUE(obj.ok());
  auto tasks = (*obj)->Lookup("g_tasks_run");
  ASSERT_TRUE(tasks.ok());
  EXPECT_EQ(*static_cast<long*>(*tasks), 4 * kN);
}

TEST(RuntimeTest, SessionWithoutPoolAndConcurrentSessions) {
  KERNELS_OR_SKIP();
  auto pkg = Package::FromBytes(MakePackage());
  ASSERT_TRUE(pkg.ok()) << pkg.status();
  std::shared_ptr<const Package> shared = std::move(*pkg);
  ThreadPool pool(2);
  const std::vector<float> x = Input();
  const std::vector<float> w = MakeModel().w;
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      auto s = Session::Create(shared, t == 0 ? nullptr : &pool);
      ASSERT_TRUE(s.ok()) << s.status();
      for (int r = 0; r < 5; ++r) {
        ASSERT_TRUE((*s)->SetInput("x", x.data(), x.size() * sizeof(float)).ok());
        ASSERT_TRUE((*s)->Run().ok());
        CheckOutputs(**s, x, w);
      }
    });
  }
  for (auto& t : threads) t.join();
}

TEST(RuntimeTest, LoadsFromFileAndDigestIsSha256OfTheFile) {
  KERNELS_OR_SKIP();
  const std::string bytes = MakePackage();
  const std::string path = kiln::testing::MakeTempDir() + "/m.kpkg";
  kiln::testing::WriteFile(path, bytes);
  auto pkg = Package::Load(path);
  ASSERT_TRUE(pkg.ok()) << pkg.status();
  EXPECT_EQ((*pkg)->digest(), "sha256:" + kiln::Sha256Hex(bytes));
  EXPECT_EQ((*pkg)->manifest().model_name, "test");
  EXPECT_EQ((*pkg)->code(), *Kernels());
  EXPECT_EQ(reinterpret_cast<uintptr_t>((*pkg)->weights()) % 64, 0u);
  EXPECT_EQ((*pkg)->weights_size(), MakeModel().weights.size());

  auto missing = Package::Load(path + ".nope");
  EXPECT_EQ(missing.status().code(), runtime::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr(".nope"));
  auto dir = Package::Load(kiln::testing::MakeTempDir());
  EXPECT_EQ(dir.status().code(), runtime::StatusCode::kInvalidArgument);
  EXPECT_THAT(dir.status().message(), HasSubstr("not a regular file"));
}

TEST(RuntimeTest, TruncatedPackagesAreErrors) {
  KERNELS_OR_SKIP();
  const std::string bytes = MakePackage();
  for (size_t n : {size_t{0}, size_t{8}, size_t{64}, size_t{95}, size_t{200}, bytes.size() / 2, bytes.size() - 1}) {
    auto pkg = Package::FromBytes(std::string_view(bytes).substr(0, n), "t.kpkg");
    ASSERT_FALSE(pkg.ok()) << n;
    EXPECT_THAT(pkg.status().message(), HasSubstr("t.kpkg")) << n;
  }
}

TEST(RuntimeTest, FlippedByteIsChecksumMismatch) {
  KERNELS_OR_SKIP();
  const std::string bytes = MakePackage();
  auto m = MakeModel();
  for (size_t at : {size_t{70}, static_cast<size_t>(bytes.size() - 40), bytes.size() - 1, bytes.size() / 2}) {
    std::string b = bytes;
    b[at] ^= 0x10;
    auto pkg = Package::FromBytes(b, "flip.kpkg");
    ASSERT_FALSE(pkg.ok()) << at;
    EXPECT_EQ(pkg.status().code(), runtime::StatusCode::kDataLoss) << at;
    EXPECT_EQ(pkg.status().message(), "package 'flip.kpkg': checksum mismatch");
  }
}

TEST(RuntimeTest, BadMagicAndVersion) {
  KERNELS_OR_SKIP();
  std::string b = MakePackage();
  b[0] = 'X';
  kiln::testing::Reseal(&b);
  auto pkg = Package::FromBytes(b);
  EXPECT_EQ(pkg.status().code(), runtime::StatusCode::kInvalidArgument);
  EXPECT_THAT(pkg.status().message(), HasSubstr("bad magic"));

  b = MakePackage();
  b[8] = 7;  // format_version
  kiln::testing::Reseal(&b);
  pkg = Package::FromBytes(b);
  EXPECT_EQ(pkg.status().code(), runtime::StatusCode::kInvalidArgument);
  EXPECT_THAT(pkg.status().message(), HasSubstr("format version 7"));
}

TEST(RuntimeTest, HeaderManifestOutOfRange) {
  KERNELS_OR_SKIP();
  for (uint64_t field_at : {offsetof(package::Header, manifest_offset), offsetof(package::Header, manifest_size)}) {
    for (uint64_t value : {uint64_t{0}, uint64_t{1} << 40, ~uint64_t{0}}) {
      std::string b = MakePackage();
      if (field_at == offsetof(package::Header, manifest_size) && value == 0) continue;  // empty manifest parses
      std::memcpy(b.data() + field_at, &value, 8);
      kiln::testing::Reseal(&b);
      auto pkg = Package::FromBytes(b);
      ASSERT_FALSE(pkg.ok()) << field_at << " " << value;
      EXPECT_EQ(pkg.status().code(), runtime::StatusCode::kInvalidArgument);
      EXPECT_THAT(pkg.status().message(), HasSubstr("manifest"));
    }
  }
  std::string b = MakePackage();
  b.replace(64, 4, "\xff\xff\xff\xff");  // garbage manifest bytes
  kiln::testing::Reseal(&b);
  EXPECT_THAT(Package::FromBytes(b).status().message(), HasSubstr("manifest"));
}

struct TamperCase {
  const char* name;
  std::function<void(PackageManifest*)> tamper;
  const char* message;
};

TEST(RuntimeTest, ManifestFieldsOutOfRangeAreInvalidArgument) {
  KERNELS_OR_SKIP();
  const std::vector<TamperCase> cases = {
      {"code past end", [](PackageManifest* m) { m->set_code_size(m->code_size() + (1 << 20)); }, "code section"},
      {"negative code offset", [](PackageManifest* m) { m->set_code_offset(-64); }, "code section"},
      {"weights past end", [](PackageManifest* m) { m->set_weights_offset(int64_t{1} << 62); }, "weights section"},
      {"huge weights", [](PackageManifest* m) { m->set_weights_size(INT64_MAX); }, "weights section"},
      {"constant past weights", [](PackageManifest* m) { m->mutable_buffers(2)->set_offset(128); }, "buffer 2"},
      {"constant overflow",
       [](PackageManifest* m) { m->mutable_buffers(2)->set_offset(INT64_MAX - 8); }, "out of range of the weights"},
      {"scratch past arena", [](PackageManifest* m) { m->set_arena_bytes(100); }, "out of range of the arena"},
      {"negative size", [](PackageManifest* m) { m->mutable_buffers(1)->set_size_bytes(-4); }, "buffer 1"},
      {"unknown kind", [](PackageManifest* m) { m->mutable_buffers(1)->set_kind(PackageBuffer::KIND_UNSPECIFIED); },
       "unknown kind"},
      {"step arg out of range", [](PackageManifest* m) { m->mutable_steps(1)->set_args(2, 5); },
       "argument 2 buffer index 5 out of range"},
      {"negative step arg", [](PackageManifest* m) { m->mutable_steps(0)->set_args(0, -1); }, "buffer index -1"},
      {"step writes the buffer it reads", [](PackageManifest* m) { m->mutable_steps(0)->set_args(1, 0); },
       "arguments 0 (buffer 0) and 1 (buffer 0) overlap"},
      {"scratch overlaps a step's other scratch",
       [](PackageManifest* m) {
         m->mutable_buffers(1)->set_kind(PackageBuffer::SCRATCH);
         m->mutable_buffers(1)->set_offset(100);
         m->mutable_outputs()->DeleteSubrange(0, 1);
         m->mutable_steps(1)->set_args(0, 1);
       },
       "overlap in the memory plan"},
      {"input buffer out of range", [](PackageManifest* m) { m->mutable_inputs(0)->set_buffer(9); },
       "input 'x': buffer index 9 out of range"},
      {"output buffer out of range", [](PackageManifest* m) { m->mutable_outputs(1)->set_buffer(-2); },
       "output 'z': buffer index -2"},
      {"size mismatch", [](PackageManifest* m) { m->mutable_outputs(0)->set_dims(0, 999); }, "output 'y'"},
      {"input on output buffer", [](PackageManifest* m) { m->mutable_inputs(0)->set_buffer(1); },
       "is a output buffer"},
      {"negative tasks", [](PackageManifest* m) { m->mutable_steps(0)->set_num_tasks(-1); }, "negative task count"},
      {"duplicate output", [](PackageManifest* m) { m->mutable_outputs(1)->set_name("y"); }, "appears twice"},
      {"bad dtype", [](PackageManifest* m) { m->mutable_outputs(0)->set_dtype(static_cast<v1::DataType>(77)); },
       "unsupported dtype"},
  };
  for (const TamperCase& c : cases) {
    auto pkg = Package::FromBytes(MakePackage(c.tamper), "bad.kpkg");
    ASSERT_FALSE(pkg.ok()) << c.name;
    EXPECT_EQ(pkg.status().code(), runtime::StatusCode::kInvalidArgument) << c.name;
    EXPECT_THAT(pkg.status().message(), HasSubstr(c.message)) << c.name;
    EXPECT_THAT(pkg.status().message(), HasSubstr("package 'bad.kpkg'")) << c.name;
  }
}

TEST(RuntimeTest, CorruptCodeIsAnErrorOnSessionCreate) {
  KERNELS_OR_SKIP();
  TestModel t = MakeModel();
  std::string garbage(Kernels()->size(), 'Z');
  auto pkg = Package::FromBytes(kiln::testing::BuildPackage(t.manifest, garbage, t.weights), "junk.kpkg");
  ASSERT_TRUE(pkg.ok()) << pkg.status();
  std::shared_ptr<const Package> shared = std::move(*pkg);
  auto s = Session::Create(shared, nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), runtime::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr("junk.kpkg"));
  EXPECT_THAT(s.status().message(), HasSubstr("ELF"));
  // The failure is cached, not retried into a crash.
  EXPECT_FALSE(Session::Create(shared, nullptr).ok());

  // A valid object truncated to half.
  std::string half = Kernels()->substr(0, Kernels()->size() / 2);
  pkg = Package::FromBytes(kiln::testing::BuildPackage(t.manifest, half, t.weights));
  ASSERT_TRUE(pkg.ok());
  EXPECT_FALSE(Session::Create(std::move(*pkg), nullptr).ok());
}

TEST(RuntimeTest, MissingKernelSymbolNamesIt) {
  KERNELS_OR_SKIP();
  auto pkg = Package::FromBytes(
      MakePackage([](PackageManifest* m) { m->mutable_steps(1)->set_symbol("k_nope"); }), "p.kpkg");
  ASSERT_TRUE(pkg.ok()) << pkg.status();
  auto s = Session::Create(std::move(*pkg), nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("step 1: kernel 'k_nope'"));
}

TEST(RuntimeTest, InputBindingErrors) {
  KERNELS_OR_SKIP();
  auto pkg = Package::FromBytes(MakePackage());
  ASSERT_TRUE(pkg.ok()) << pkg.status();
  auto s = Session::Create(std::move(*pkg), nullptr);
  ASSERT_TRUE(s.ok()) << s.status();
  std::vector<float> x = Input();

  runtime::Status run = (*s)->Run();
  EXPECT_EQ(run.code(), runtime::StatusCode::kFailedPrecondition);
  EXPECT_THAT(run.message(), HasSubstr("input 'x' is not bound"));

  runtime::Status st = (*s)->SetInput("x", x.data(), 12);
  EXPECT_EQ(st.code(), runtime::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("input 'x': expected 4000 bytes (FLOAT32[1000]), got 12"));

  st = (*s)->SetInput("q", x.data(), 4000);
  EXPECT_EQ(st.code(), runtime::StatusCode::kNotFound);
  EXPECT_THAT(st.message(), HasSubstr("'q'"));
  EXPECT_FALSE((*s)->Run().ok());

  EXPECT_EQ((*s)->num_inputs(), 1);
  EXPECT_EQ((*s)->input_info(0).name, "x");
  EXPECT_EQ((*s)->output_info(1).name, "z");
}

// Random flips in the manifest, resealed so that the checksum passes: Load and
// Session::Create answer with an error or succeed, never crash.
TEST(RuntimeTest, RandomManifestCorruptionNeverCrashes) {
  KERNELS_OR_SKIP();
  const std::string bytes = MakePackage();
  package::Header h;
  std::memcpy(&h, bytes.data(), sizeof(h));
  std::mt19937 rng(42);
  google::protobuf::LogSilencer quiet;  // invalid UTF-8 in string fields is logged
  int errors = 0;
  for (int iter = 0; iter < 2000; ++iter) {
    std::string b = bytes;
    const int flips = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < flips; ++k) b[h.manifest_offset + rng() % h.manifest_size] ^= static_cast<char>(1 + rng() % 255);
    kiln::testing::Reseal(&b);
    auto pkg = Package::FromBytes(b);
    if (!pkg.ok()) {
      ++errors;
      continue;
    }
    auto s = Session::Create(std::move(*pkg), nullptr);
    if (!s.ok()) ++errors;
  }
  EXPECT_GT(errors, 0);
}

TEST(RuntimeTest, PackageWithoutStepsOrInputs) {
  PackageManifest m;
  AddBuffer(&m, PackageBuffer::CONSTANT, 8, 0);
  AddTensor(m.mutable_outputs(), "c", v1::INT32, {2}, 0);
  const int32_t vals[2] = {7, -7};
  auto pkg = Package::FromBytes(kiln::testing::BuildPackage(m, "", std::string_view(reinterpret_cast<const char*>(vals), 8)));
  ASSERT_TRUE(pkg.ok()) << pkg.status();
  auto s = Session::Create(std::move(*pkg), nullptr);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_TRUE((*s)->Run().ok());
  EXPECT_EQ(static_cast<const int32_t*>((*s)->OutputData(0))[1], -7);
}

// A package of one step, y = x * 0.5 (k_halve), over kN floats.
std::string MakeHalvingPackage() {
  PackageManifest m;
  m.set_model_name("halve");
  m.set_target_triple("x86_64-unknown-linux-gnu");
  AddBuffer(&m, PackageBuffer::INPUT, kN * sizeof(float));
  AddBuffer(&m, PackageBuffer::OUTPUT, kN * sizeof(float));
  AddTensor(m.mutable_inputs(), "x", v1::FLOAT32, {kN}, 0);
  AddTensor(m.mutable_outputs(), "y", v1::FLOAT32, {kN}, 1);
  AddStep(&m, "k_halve", {0, 1}, kN);
  return kiln::testing::BuildPackage(m, *Kernels(), "");
}

// Runs flush denormals by default, on every thread of the pool, and keep them
// when told; the calling thread's own mode is left as it was either way.
TEST(RuntimeTest, RunsFlushDenormalsUnlessToldToKeepThem) {
  KERNELS_OR_SKIP();
  auto pkg = Package::FromBytes(MakeHalvingPackage());
  ASSERT_TRUE(pkg.ok()) << pkg.status();
  std::shared_ptr<const Package> shared = std::move(*pkg);
  // Even i: 2^-126 (normal), halved to a denormal; odd i: a denormal input.
  std::vector<float> x(kN);
  for (int i = 0; i < kN; ++i) x[i] = i % 2 == 0 ? 0x1p-126f : 0x1p-130f;
  // MXCSR's low six bits are sticky exception flags, which the checks below
  // set themselves when they compare denormals: only the control bits count.
  const auto control_bits = [] { return FloatControl() & ~uint32_t{0x3f}; };
  const uint32_t caller = control_bits();
  for (int threads : {1, 3}) {
    ThreadPool pool(threads);
    auto s = Session::Create(shared, &pool);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_TRUE((*s)->flush_denormals());
    ASSERT_TRUE((*s)->SetInput("x", x.data(), x.size() * sizeof(float)).ok());
    for (bool flush : {true, false}) {
      (*s)->set_flush_denormals(flush);
      ASSERT_TRUE((*s)->Run().ok());
      EXPECT_EQ(control_bits(), caller);
      const float* y = static_cast<const float*>((*s)->OutputData(0));
      for (int i = 0; i < kN; ++i) {
        const float want = flush ? 0.0f : (i % 2 == 0 ? 0x1p-127f : 0x1p-131f);
        ASSERT_EQ(y[i], want) << "threads=" << threads << " flush=" << flush << " i=" << i;
      }
    }
  }
}

// --- C API ---------------------------------------------------------------------

TEST(RuntimeCApiTest, RoundTrip) {
  KERNELS_OR_SKIP();
  const std::string bytes = MakePackage();
  const std::string path = kiln::testing::MakeTempDir() + "/c.kpkg";
  kiln::testing::WriteFile(path, bytes);

  kiln_package_t* pkg = nullptr;
  ASSERT_EQ(kiln_package_load(path.c_str(), &pkg), KILN_OK) << kiln_last_error_message();
  EXPECT_EQ(std::string(kiln_package_digest(pkg)), "sha256:" + kiln::Sha256Hex(bytes));
  kiln_session_t* sess = nullptr;
  ASSERT_EQ(kiln_session_create(pkg, 2, &sess), KILN_OK) << kiln_last_error_message();
  kiln_package_release(pkg);  // the session keeps it alive

  ASSERT_EQ(kiln_session_num_inputs(sess), 1);
  ASSERT_EQ(kiln_session_num_outputs(sess), 2);
  EXPECT_STREQ(kiln_session_input_name(sess, 0), "x");
  EXPECT_STREQ(kiln_session_output_name(sess, 1), "z");
  EXPECT_EQ(kiln_session_input_name(sess, 1), nullptr);
  kiln_dtype_t dtype;
  int64_t dims[KILN_MAX_RANK];
  int rank = -1;
  ASSERT_EQ(kiln_session_input_info(sess, 0, &dtype, dims, &rank), KILN_OK);
  EXPECT_EQ(dtype, KILN_DTYPE_FLOAT32);
  EXPECT_EQ(rank, 1);
  EXPECT_EQ(dims[0], kN);

  EXPECT_EQ(kiln_session_run(sess), KILN_FAILED_PRECONDITION);
  EXPECT_THAT(kiln_last_error_message(), HasSubstr("input 'x'"));
  std::vector<float> x = Input();
  EXPECT_EQ(kiln_session_set_input(sess, "x", x.data(), 3), KILN_INVALID_ARGUMENT);
  EXPECT_THAT(kiln_last_error_message(), HasSubstr("input 'x'"));
  EXPECT_EQ(kiln_session_set_input(sess, "nope", x.data(), 3), KILN_NOT_FOUND);
  ASSERT_EQ(kiln_session_set_input(sess, "x", x.data(), x.size() * sizeof(float)), KILN_OK);
  ASSERT_EQ(kiln_session_run(sess), KILN_OK) << kiln_last_error_message();

  const void* data = nullptr;
  size_t nbytes = 0;
  ASSERT_EQ(kiln_session_output(sess, 1, &data, &nbytes, &dtype, dims, &rank), KILN_OK);
  EXPECT_EQ(nbytes, kN * sizeof(float));
  EXPECT_EQ(dtype, KILN_DTYPE_FLOAT32);
  ASSERT_EQ(rank, 2);
  EXPECT_EQ(dims[0], 10);
  EXPECT_EQ(dims[1], kN / 10);
  const std::vector<float> w = MakeModel().w;
  for (int i = 0; i < kN; ++i) ASSERT_NEAR(static_cast<const float*>(data)[i], x[i] * w[i] + 2.0f, 1e-5f);
  EXPECT_EQ(kiln_session_output(sess, 2, &data, &nbytes, nullptr, nullptr, nullptr), KILN_OUT_OF_RANGE);
  kiln_session_release(sess);
  kiln_session_release(nullptr);
  kiln_package_release(nullptr);
}

// Zero-copy: a bound input is read where the caller keeps it (a change between
// runs shows without another bind), a bound output is written into the
// caller's memory, and neither is ever written by a kernel.
TEST(RuntimeCApiTest, BoundInputsAndOutputsAreNotCopied) {
  KERNELS_OR_SKIP();
  kiln_session_t* sess = nullptr;
  ASSERT_NO_FATAL_FAILURE(CreateSession(3, &sess));
  const std::vector<float> w = MakeModel().w;
  std::vector<float> x = Input();
  const std::vector<float> x_before = x;
  std::vector<float> z(kN, -7.0f);
  ASSERT_EQ(kiln_session_bind_input(sess, "x", x.data(), x.size() * sizeof(float)), KILN_OK);
  ASSERT_EQ(kiln_session_bind_output(sess, 1, z.data(), z.size() * sizeof(float)), KILN_OK);
  ASSERT_EQ(kiln_session_run(sess), KILN_OK) << kiln_last_error_message();
  EXPECT_EQ(x, x_before);  // inputs are read only
  for (int i = 0; i < kN; ++i) ASSERT_NEAR(z[i], x[i] * w[i] + 2.0f, 1e-5f) << i;
  const void* data = nullptr;
  ASSERT_EQ(kiln_session_output(sess, 1, &data, nullptr, nullptr, nullptr, nullptr), KILN_OK);
  EXPECT_EQ(data, z.data());

  // The caller changes x in place; the next run sees it.
  for (float& v : x) v = 0.5f;
  ASSERT_EQ(kiln_session_run(sess), KILN_OK);
  for (int i = 0; i < kN; ++i) ASSERT_NEAR(z[i], 0.5f * w[i] + 2.0f, 1e-5f) << i;

  // Unbinding the output returns it to the session's memory; set_input copies again.
  ASSERT_EQ(kiln_session_bind_output(sess, 1, nullptr, 0), KILN_OK);
  std::vector<float> x2(kN, 2.0f);
  ASSERT_EQ(kiln_session_set_input(sess, "x", x2.data(), x2.size() * sizeof(float)), KILN_OK);
  x2.assign(kN, 100.0f);  // no effect: it was copied
  ASSERT_EQ(kiln_session_run(sess), KILN_OK);
  ASSERT_EQ(kiln_session_output(sess, 1, &data, nullptr, nullptr, nullptr, nullptr), KILN_OK);
  EXPECT_NE(data, z.data());
  for (int i = 0; i < kN; ++i) ASSERT_NEAR(static_cast<const float*>(data)[i], 2.0f * w[i] + 2.0f, 1e-5f) << i;
  EXPECT_NEAR(z[0], 0.5f * w[0] + 2.0f, 1e-5f);  // untouched since the unbind

  // Misaligned, wrongly sized, unknown.
  std::vector<char> raw(kN * sizeof(float) + 8);
  EXPECT_EQ(kiln_session_bind_input(sess, "x", raw.data() + 1, kN * sizeof(float)), KILN_INVALID_ARGUMENT);
  EXPECT_THAT(kiln_last_error_message(), HasSubstr("aligned"));
  EXPECT_EQ(kiln_session_bind_input(sess, "x", x.data(), 12), KILN_INVALID_ARGUMENT);
  EXPECT_EQ(kiln_session_bind_input(sess, "nope", x.data(), 12), KILN_NOT_FOUND);
  EXPECT_EQ(kiln_session_bind_output(sess, 1, raw.data() + 2, kN * sizeof(float)), KILN_INVALID_ARGUMENT);
  EXPECT_EQ(kiln_session_bind_output(sess, 1, z.data(), 4), KILN_INVALID_ARGUMENT);
  EXPECT_EQ(kiln_session_bind_output(sess, 5, z.data(), 4), KILN_OUT_OF_RANGE);
  kiln_session_release(sess);
}

// Kernels take their buffers as noalias pointers, so no binding may make an
// output share bytes with an input or another output; inputs may share.
TEST(RuntimeCApiTest, BindingsThatOverlapAnOutputAreRefused) {
  KERNELS_OR_SKIP();
  kiln_session_t* sess = nullptr;
  ASSERT_NO_FATAL_FAILURE(CreateSession(1, &sess));
  const size_t n = kN * sizeof(float);
  std::vector<float> x = Input();
  std::vector<float> big(3 * kN, 0.0f);
  ASSERT_EQ(kiln_session_bind_input(sess, "x", x.data(), n), KILN_OK);
  // An output onto the bound input, or overlapping it by one element.
  EXPECT_EQ(kiln_session_bind_output(sess, 1, x.data(), n), KILN_INVALID_ARGUMENT);
  EXPECT_THAT(kiln_last_error_message(), HasSubstr("overlaps input"));
  ASSERT_EQ(kiln_session_bind_input(sess, "x", big.data(), n), KILN_OK);
  EXPECT_EQ(kiln_session_bind_output(sess, 1, big.data() + kN - 1, n), KILN_INVALID_ARGUMENT);
  // Adjacent is fine; then the input may not move onto the bound output.
  ASSERT_EQ(kiln_session_bind_output(sess, 1, big.data() + kN, n), KILN_OK) << kiln_last_error_message();
  EXPECT_EQ(kiln_session_bind_input(sess, "x", big.data() + kN + 1, n), KILN_INVALID_ARGUMENT);
  EXPECT_THAT(kiln_last_error_message(), HasSubstr("overlaps output"));
  // Nor onto the session's own memory of the other output.
  for (int i = 0; i < kN; ++i) big[static_cast<size_t>(i)] = x[static_cast<size_t>(i)];
  ASSERT_EQ(kiln_session_run(sess), KILN_OK) << kiln_last_error_message();
  const void* own = nullptr;
  ASSERT_EQ(kiln_session_output(sess, 0, &own, nullptr, nullptr, nullptr, nullptr), KILN_OK);
  EXPECT_EQ(kiln_session_bind_input(sess, "x", own, n), KILN_INVALID_ARGUMENT);
  EXPECT_EQ(kiln_session_bind_output(sess, 1, const_cast<void*>(own), n), KILN_INVALID_ARGUMENT);
  EXPECT_THAT(kiln_last_error_message(), HasSubstr("overlaps output"));
  // The refused bindings changed nothing: the same run gives the same result.
  const std::vector<float> w = MakeModel().w;
  ASSERT_EQ(kiln_session_run(sess), KILN_OK) << kiln_last_error_message();
  for (int i = 0; i < kN; ++i) ASSERT_NEAR(big[static_cast<size_t>(kN + i)], x[i] * w[i] + 2.0f, 1e-5f) << i;
  kiln_session_release(sess);
}

TEST(RuntimeCApiTest, VersionAndTarget) {
  KERNELS_OR_SKIP();
  EXPECT_EQ(kiln_runtime_abi_version(), KILN_RUNTIME_ABI_MAJOR * 1000 + KILN_RUNTIME_ABI_MINOR);
  EXPECT_THAT(kiln_runtime_version(), ::testing::MatchesRegex("[0-9]+\\.[0-9]+\\.[0-9]+"));
  const std::string bytes = MakePackage([](PackageManifest* m) {
    m->set_target_cpu("znver4");
    m->set_isa_level("x86-64-v4");
  });
  kiln_package_t* pkg = nullptr;
  ASSERT_EQ(kiln_package_load_bytes(bytes.data(), bytes.size(), &pkg), KILN_OK) << kiln_last_error_message();
  EXPECT_STREQ(kiln_package_target(pkg), "x86-64-v4 znver4");
  kiln_package_release(pkg);
  EXPECT_EQ(kiln_package_load_bytes(bytes.data(), 10, &pkg), KILN_INVALID_ARGUMENT);
  EXPECT_EQ(kiln_package_load_bytes(nullptr, 10, &pkg), KILN_INVALID_ARGUMENT);
}

TEST(RuntimeCApiTest, FlushDenormals) {
  KERNELS_OR_SKIP();
  const std::string bytes = MakeHalvingPackage();
  kiln_package_t* pkg = nullptr;
  ASSERT_EQ(kiln_package_load_bytes(bytes.data(), bytes.size(), &pkg), KILN_OK) << kiln_last_error_message();
  kiln_session_t* sess = nullptr;
  ASSERT_EQ(kiln_session_create(pkg, 2, &sess), KILN_OK) << kiln_last_error_message();
  kiln_package_release(pkg);
  const std::vector<float> x(kN, 0x1p-126f);
  ASSERT_EQ(kiln_session_set_input(sess, "x", x.data(), x.size() * sizeof(float)), KILN_OK);
  for (int flush : {1, 0}) {
    ASSERT_EQ(kiln_session_flush_denormals(sess, flush), KILN_OK);
    ASSERT_EQ(kiln_session_run(sess), KILN_OK) << kiln_last_error_message();
    const void* data = nullptr;
    ASSERT_EQ(kiln_session_output(sess, 0, &data, nullptr, nullptr, nullptr, nullptr), KILN_OK);
    EXPECT_EQ(static_cast<const float*>(data)[kN - 1], flush ? 0.0f : 0x1p-127f);
  }
  kiln_session_release(sess);
  EXPECT_EQ(kiln_session_flush_denormals(nullptr, 1), KILN_INVALID_ARGUMENT);
  EXPECT_THAT(kiln_last_error_message(), HasSubstr("kiln_session_flush_denormals"));
}

// A package for a CPU with a feature this host lacks (checksum intact) is
// refused at load, naming the feature, instead of dying of SIGILL.
TEST(RuntimeTest, APackageForAnotherCpuIsRefusedNamingWhatIsMissing) {
  KERNELS_OR_SKIP();
  std::string lacking;
  for (const char* f : {"avx512fp16", "amx-tile", "avx512vp2intersect", "xop", "fma4"}) {
    if (HostHasFeature(f) == false) {
      lacking = f;
      break;
    }
  }
  if (lacking.empty()) GTEST_SKIP() << "this host has every feature the test could claim";
  const std::string bytes = MakePackage([&](PackageManifest* m) {
    m->set_target_cpu("future");
    m->set_target_features("+avx2,+" + lacking + ",-amx-int8");
    m->set_isa_level("x86-64-v4");
  });
  auto pkg = Package::FromBytes(bytes, "future.kpkg");
  ASSERT_FALSE(pkg.ok());
  EXPECT_EQ(pkg.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(pkg.status().message(), HasSubstr("package 'future.kpkg': compiled for future (x86-64-v4)"));
  EXPECT_THAT(pkg.status().message(), HasSubstr("lacks: " + lacking + ";"));
  EXPECT_THAT(pkg.status().message(), HasSubstr("this host runs " + HostIsaLevel()));
  // A package for this host's own features loads.
  const std::string ok = MakePackage([](PackageManifest* m) { m->set_target_features("+sse2,-" "avx512fp16"); });
  EXPECT_TRUE(Package::FromBytes(ok).ok());
}

TEST(RuntimeCApiTest, LoadErrors) {
  kiln_package_t* pkg = reinterpret_cast<kiln_package_t*>(0x1);
  EXPECT_EQ(kiln_package_load("/nonexistent/dir/m.kpkg", &pkg), KILN_NOT_FOUND);
  EXPECT_EQ(pkg, nullptr);
  EXPECT_THAT(kiln_last_error_message(), HasSubstr("/nonexistent/dir/m.kpkg"));
  const std::string path = kiln::testing::MakeTempDir() + "/bad.kpkg";
  kiln::testing::WriteFile(path, std::string(200, 'k'));
  EXPECT_EQ(kiln_package_load(path.c_str(), &pkg), KILN_INVALID_ARGUMENT);
  EXPECT_THAT(kiln_last_error_message(), HasSubstr("bad magic"));
  EXPECT_EQ(kiln_package_load(nullptr, &pkg), KILN_INVALID_ARGUMENT);
}

// The header is plain C: a C program includes it, links libkiln_runtime.so and
// runs a package through it.
TEST(RuntimeCApiTest, CProgramRunsAPackage) {
  KERNELS_OR_SKIP();
  const std::string dir = kiln::testing::MakeTempDir();
  kiln::testing::WriteFile(dir + "/m.kpkg", MakePackage());
  kiln::testing::WriteFile(dir + "/main.c", R"(
#include "client/runtime/kiln_runtime.h"
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char** argv) {
  kiln_package_t* pkg;
  kiln_session_t* sess;
  if (kiln_package_load(argv[1], &pkg) != KILN_OK) { fprintf(stderr, "%s\n", kiln_last_error_message()); return 1; }
  if (kiln_session_create(pkg, 3, &sess) != KILN_OK) { fprintf(stderr, "%s\n", kiln_last_error_message()); return 2; }
  float* x = malloc(1000 * sizeof(float));
  for (int i = 0; i < 1000; ++i) x[i] = 1.0f;
  if (kiln_session_set_input(sess, kiln_session_input_name(sess, 0), x, 1000 * sizeof(float)) != KILN_OK) return 3;
  if (kiln_session_run(sess) != KILN_OK) return 4;
  const void* data; size_t bytes; kiln_dtype_t dtype; int64_t dims[KILN_MAX_RANK]; int rank;
  if (kiln_session_output(sess, 0, &data, &bytes, &dtype, dims, &rank) != KILN_OK) return 5;
  printf("%s %g %d %d\n", kiln_session_output_name(sess, 0), ((const float*)data)[7], (int)dtype, rank);
  kiln_session_release(sess);
  kiln_package_release(pkg);
  free(x);
  return 0;
}
)");
  const std::string libdir = std::string(KILN_BINARY_DIR) + "/client/runtime";
  const std::string build = "clang-19 -std=c99 -Wall -Werror -pedantic -o " + dir + "/main " + dir + "/main.c -I" +
                            KILN_SOURCE_DIR + " -L" + libdir + " -lkiln_runtime -Wl,-rpath," + libdir + " 2> " +
                            dir + "/build.log";
  ASSERT_EQ(std::system(build.c_str()), 0) << "see " << dir << "/build.log";
  const std::string run = dir + "/main " + dir + "/m.kpkg > " + dir + "/out.txt";
  ASSERT_EQ(std::system(run.c_str()), 0);
  std::ifstream in(dir + "/out.txt");
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "y -2 1 1");  // 0.5 + 1.25 - 3.75
}

}  // namespace
}  // namespace kiln::runtime
