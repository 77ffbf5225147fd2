// CUDA packages in the runtime, on the fake driver (fake_cuda_driver.h): a
// package from the package writer runs its real kernels' CPU emulations
// through Package, CudaModule and Session exactly as on a GPU, and its
// outputs match the interpreter; inputs and outputs in device memory, the
// cubin or the PTX by the device's SM, corrupt CUDA manifests, overlapping
// bindings, driver errors. Without a CUDA driver, loading is refused with a
// clear message (the C API, as a deployment sees it). A CPU package of the
// same model still runs as before.
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "client/runtime/cuda_driver.h"
#include "client/runtime/kiln_runtime.h"
#include "client/runtime/package_reader.h"
#include "client/runtime/session.h"
#include "compiler_core/frontend/interpreter.h"
#include "compiler_core/package/manifest_reader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/client/runtime/fake_cuda/fake_cuda_driver.h"
#include "tests/client/runtime/fake_cuda/package_kernels.h"
#include "tests/client/runtime/test_package.h"
#include "tests/compiler_core/package/gpu_test_model.h"

namespace kiln::runtime {
namespace {

using gpu_package_testing::GpuTestModel;
using gpu_package_testing::MakeGpuTestModel;
using gpu_package_testing::WriteGpuTestPackage;
using ::testing::HasSubstr;
using testing::FakeCudaDriver;

const GpuTarget kSm90{90};

// The test model, its CUDA package (with a cubin when the build found a
// ptxas) and its kernels' CPU emulations, made once for the binary.
struct GpuFixture {
  GpuTestModel model;
  std::string package;        // as the writer wrote it
  bool has_cubin = false;
  std::map<std::string, Tensor> want;  // the interpreter's outputs
  std::vector<testing::EmulatedKernel> kernels;
};

const GpuFixture& Fixture() {
  static const GpuFixture* f = [] {
    auto* f = new GpuFixture();
    f->model = MakeGpuTestModel(kSm90);
    const std::string ptxas = KILN_PTXAS;
    auto bytes = WriteGpuTestPackage(f->model, kSm90, ptxas, !ptxas.empty());
    EXPECT_TRUE(bytes.ok()) << bytes.status();
    if (bytes.ok()) f->package = bytes->bytes;
    f->has_cubin = !ptxas.empty();
    auto want = Evaluate(*f->model.graph, f->model.feeds);
    EXPECT_TRUE(want.ok()) << want.status();
    if (want.ok()) f->want = std::move(*want);
    auto kernels = testing::EmulatePackageKernels(f->package, f->model.workloads);
    EXPECT_TRUE(kernels.ok()) << kernels.status();
    if (kernels.ok()) f->kernels = std::move(*kernels);
    return f;
  }();
  return *f;
}

std::unique_ptr<FakeCudaDriver> MakeFake(int sm = 90, bool refuse_cubin = false) {
  auto fake = std::make_unique<FakeCudaDriver>(FakeCudaDriver::Options{sm, 1, refuse_cubin});
  testing::RegisterKernels(*fake, Fixture().kernels);
  return fake;
}

std::shared_ptr<const Package> Load(const std::string& bytes, const FakeCudaDriver& fake) {
  auto pkg = Package::FromBytes(bytes, "gpu_test.kpkg", fake.driver());
  EXPECT_TRUE(pkg.ok()) << pkg.status();
  return pkg.ok() ? std::shared_ptr<const Package>(std::move(*pkg)) : nullptr;
}

int OutputIndex(const Session& s, const std::string& name) {
  for (int i = 0; i < s.num_outputs(); ++i) {
    if (s.output_info(i).name == name) return i;
  }
  ADD_FAILURE() << "no output " << name;
  return 0;
}

void ExpectMatches(const void* got, const std::string& name) {
  ASSERT_NE(got, nullptr) << name;
  const Tensor& want = Fixture().want.at(name);
  const float* g = static_cast<const float*>(got);
  for (int64_t i = 0; i < want.num_elements(); ++i) {
    ASSERT_NEAR(g[i], want.data<float>()[i], 1e-6) << name << "[" << i << "]";
  }
}

void SetInputs(Session& s, const std::map<std::string, Tensor>& feeds) {
  for (const auto& [name, t] : feeds) {
    Status st = s.SetInput(name, t.raw(), static_cast<size_t>(t.size_bytes()));
    ASSERT_TRUE(st.ok()) << st;
  }
}

// What the runtime leaves behind once its sessions and packages are gone:
// nothing, and no misuse of the driver on the way.
void ExpectCleanDriver(const FakeCudaDriver& fake) {
  EXPECT_EQ(fake.live_allocations(), 0);
  EXPECT_EQ(fake.retained_contexts(), 0);
  EXPECT_EQ(fake.context_depth(), 0);
  EXPECT_THAT(fake.misuse(), ::testing::IsEmpty());
}

// The CUDA package as the writer wrote it but PTX only and with `tamper`
// applied to its manifest (test_package.h lays it out: the PTX in the code
// slot, then moved where a CUDA package keeps it).
std::string Rebuilt(const std::function<void(v1::PackageManifest*)>& tamper) {
  const std::string& bytes = Fixture().package;
  auto info = ReadPackageInfo(bytes);
  EXPECT_TRUE(info.ok()) << info.status();
  const v1::PackageManifest& m = info->manifest;
  const std::string ptx = bytes.substr(static_cast<size_t>(m.cuda().ptx_offset()), m.cuda().ptx_size());
  const std::string weights = bytes.substr(static_cast<size_t>(m.weights_offset()), m.weights_size());
  return kiln::testing::BuildPackage(m, ptx, weights, [&](v1::PackageManifest* t) {
    v1::PackageCuda* c = t->mutable_cuda();
    c->set_ptx_offset(t->code_offset());
    c->set_ptx_size(t->code_size());
    c->set_cubin_offset(0);
    c->set_cubin_size(0);
    t->set_code_offset(0);
    t->set_code_size(0);
    if (tamper) tamper(t);
  });
}

// The fixture package on `fake` loads its PTX (not its cubin), runs and
// matches the interpreter; the driver is clean after.
void ExpectRunsFromPtx(FakeCudaDriver& fake) {
  const GpuFixture& f = Fixture();
  {
    std::shared_ptr<const Package> pkg = Load(f.package, fake);
    ASSERT_NE(pkg, nullptr);
    auto session = Session::Create(pkg, nullptr);
    ASSERT_TRUE(session.ok()) << session.status();
    EXPECT_EQ(fake.counts().modules_from_ptx, 1);
    EXPECT_EQ(fake.counts().modules_from_cubin, 0);
    SetInputs(**session, f.model.feeds);
    ASSERT_TRUE((*session)->Run().ok());
    ExpectMatches((*session)->OutputData(OutputIndex(**session, "o")), "o");
  }
  ExpectCleanDriver(fake);
}

TEST(CudaSessionTest, RunsAPackageOnTheDriverAndMatchesTheInterpreter) {
  const GpuFixture& f = Fixture();
  auto fake = MakeFake();
  {
    std::shared_ptr<const Package> pkg = Load(f.package, *fake);
    ASSERT_NE(pkg, nullptr);
    EXPECT_TRUE(pkg->is_cuda());
    auto session = Session::Create(pkg, nullptr);
    ASSERT_TRUE(session.ok()) << session.status();
    Session& s = **session;
    EXPECT_TRUE(s.on_cuda());
    EXPECT_EQ(s.device(), "CUDA device 0 (Kiln fake GPU, sm_90)");
    // The cubin on its own SM; the PTX when the package has none.
    EXPECT_EQ(fake->counts().modules_from_cubin, f.has_cubin ? 1 : 0);
    EXPECT_EQ(fake->counts().modules_from_ptx, f.has_cubin ? 0 : 1);
    EXPECT_EQ(s.Run().code(), StatusCode::kFailedPrecondition);  // inputs not set

    SetInputs(s, f.model.feeds);
    fake->ResetCounts();
    Status run = s.Run();
    ASSERT_TRUE(run.ok()) << run;
    EXPECT_EQ(fake->counts().launches, 4);
    ExpectMatches(s.OutputData(OutputIndex(s, "o")), "o");
    ExpectMatches(s.OutputData(OutputIndex(s, "s")), "s");
    // Inputs in, outputs out, nothing else crosses.
    const int64_t io = 4 * 33 * 17 * 4 * 2;
    EXPECT_EQ(fake->counts().bytes_to_device, io);
    EXPECT_EQ(fake->counts().bytes_to_host, io);

    // Again, with other inputs, on the same arena: every byte is rewritten.
    std::map<std::string, Tensor> negated;
    for (const auto& [name, t] : f.model.feeds) {
      std::vector<float> v(t.data<float>(), t.data<float>() + t.num_elements());
      for (float& x : v) x = -x;
      negated.emplace(name, Tensor::FromVector<float>(DType::kFloat32, t.dims(), v));
    }
    SetInputs(s, negated);
    ASSERT_TRUE(s.Run().ok());
    auto want = Evaluate(*f.model.graph, negated);
    ASSERT_TRUE(want.ok()) << want.status();
    const float* o = static_cast<const float*>(s.OutputData(OutputIndex(s, "o")));
    for (int64_t i = 0; i < want->at("o").num_elements(); ++i) ASSERT_NEAR(o[i], want->at("o").data<float>()[i], 1e-6);

    // Two sessions share the package's module and weights.
    auto second = Session::Create(pkg, nullptr);
    ASSERT_TRUE(second.ok()) << second.status();
    EXPECT_EQ(fake->counts().modules_from_cubin + fake->counts().modules_from_ptx, 0);
  }
  ExpectCleanDriver(*fake);
}

// A driver older than the toolkit that assembled the cubin refuses it: the
// package's PTX runs instead, compiled by that driver.
TEST(CudaSessionTest, ACubinTheDriverRefusesFallsBackToThePtx) {
  const GpuFixture& f = Fixture();
  if (!f.has_cubin) GTEST_SKIP() << "the fixture package has no cubin (no ptxas at configure time)";
  ExpectRunsFromPtx(*MakeFake(90, /*refuse_cubin=*/true));
}

// A newer GPU than the package's runs its PTX (the driver JIT-compiles it);
// an older one is refused, naming both.
TEST(CudaSessionTest, PtxOnANewerGpuAndAnOlderGpuRefused) {
  const GpuFixture& f = Fixture();
  ExpectRunsFromPtx(*MakeFake(100));
  auto fake = MakeFake(80);
  {
    std::shared_ptr<const Package> pkg = Load(f.package, *fake);
    ASSERT_NE(pkg, nullptr);
    auto session = Session::Create(pkg, nullptr);
    ASSERT_FALSE(session.ok());
    EXPECT_EQ(session.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_EQ(session.status().message(),
              "package 'gpu_test.kpkg' is for sm_90: CUDA device 0 (Kiln fake GPU, sm_80) is older and cannot run "
              "it; compile for cuda:sm_80");
    CudaSessionOptions other;
    other.device = 3;
    auto missing = Session::Create(pkg, nullptr, other);
    EXPECT_EQ(missing.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(missing.status().message(), HasSubstr("there is no CUDA device 3 (this host has 1 device)"));
  }
  ExpectCleanDriver(*fake);
}

// Inputs read from, and outputs written to, device memory the caller owns,
// with no copy; an output kept in the session's device memory; runs that
// return before the stream has run them; a caller's stream.
TEST(CudaSessionTest, InputsAndOutputsInDeviceMemory) {
  const GpuFixture& f = Fixture();
  auto fake = MakeFake();
  void* stream = fake->CreateStream();
  const size_t bytes = 4 * 33 * 17 * sizeof(float);
  const uint64_t x = fake->Allocate(bytes), z = fake->Allocate(bytes), o = fake->Allocate(bytes);
  std::memcpy(reinterpret_cast<void*>(x), f.model.feeds.at("x").raw(), bytes);
  std::memcpy(reinterpret_cast<void*>(z), f.model.feeds.at("z").raw(), bytes);
  {
    std::shared_ptr<const Package> pkg = Load(f.package, *fake);
    ASSERT_NE(pkg, nullptr);
    CudaSessionOptions options;
    options.stream = stream;
    auto session = Session::Create(pkg, nullptr, options);
    ASSERT_TRUE(session.ok()) << session.status();
    Session& s = **session;
    EXPECT_EQ(s.cuda_stream(), stream);
    const int oi = OutputIndex(s, "o"), si = OutputIndex(s, "s");
    ASSERT_TRUE(s.BindInputDevice("x", x, bytes).ok());
    ASSERT_TRUE(s.BindInputDevice("z", z, bytes).ok());
    ASSERT_TRUE(s.BindOutputDevice(oi, o, bytes).ok());
    ASSERT_TRUE(s.KeepOutputOnDevice(si, true).ok());
    fake->ResetCounts();
    Status run = s.RunAsync();
    ASSERT_TRUE(run.ok()) << run;
    EXPECT_EQ(fake->counts().bytes_to_device, 0);
    EXPECT_EQ(fake->counts().bytes_to_host, 0);
    EXPECT_THAT(fake->counts().launch_streams, ::testing::Each(stream));
    EXPECT_EQ(s.OutputData(oi), nullptr);
    EXPECT_EQ(s.OutputData(si), nullptr);
    auto o_ptr = s.OutputDevicePtr(oi);
    ASSERT_TRUE(o_ptr.ok());
    EXPECT_EQ(*o_ptr, o);
    ExpectMatches(reinterpret_cast<const void*>(o), "o");
    auto s_ptr = s.OutputDevicePtr(si);
    ASSERT_TRUE(s_ptr.ok());
    EXPECT_EQ(*s_ptr % 256, 0u);
    ExpectMatches(reinterpret_cast<const void*>(*s_ptr), "s");

    // Back to host memory: the outputs are copied again.
    ASSERT_TRUE(s.BindOutputDevice(oi, 0, 0).ok());
    ASSERT_TRUE(s.KeepOutputOnDevice(si, false).ok());
    std::vector<float> host_s(4 * 33 * 17);
    ASSERT_TRUE(s.BindOutput(si, host_s.data(), bytes).ok());
    ASSERT_TRUE(s.Run().ok());
    ExpectMatches(s.OutputData(oi), "o");
    EXPECT_EQ(s.OutputData(si), host_s.data());
    ExpectMatches(host_s.data(), "s");
  }
  fake->Free(x);
  fake->Free(z);
  fake->Free(o);
  fake->DestroyStream(stream);
  ExpectCleanDriver(*fake);
}

TEST(CudaSessionTest, DeviceBindingErrors) {
  const GpuFixture& f = Fixture();
  auto fake = MakeFake();
  const size_t bytes = 4 * 33 * 17 * sizeof(float);
  const uint64_t mem = fake->Allocate(bytes + 512), small = fake->Allocate(bytes / 2);
  {
    std::shared_ptr<const Package> pkg = Load(f.package, *fake);
    ASSERT_NE(pkg, nullptr);
    auto session = Session::Create(pkg, nullptr);
    ASSERT_TRUE(session.ok()) << session.status();
    Session& s = **session;
    Status st = s.BindInputDevice("x", mem + 16, bytes);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(st.message(), HasSubstr("is not aligned to 256 bytes"));
    st = s.BindInputDevice("x", 0x10000, bytes);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(st.message(), HasSubstr("input 'x': 0x10000 is not device memory the CUDA driver knows"));
    st = s.BindInputDevice("x", small, bytes);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(st.message(), HasSubstr("run past the end of the " + std::to_string(bytes / 2) + "-byte allocation"));
    EXPECT_EQ(s.BindInputDevice("x", mem, bytes - 4).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(s.BindInputDevice("nope", mem, bytes).code(), StatusCode::kNotFound);
    EXPECT_EQ(s.BindOutputDevice(7, mem, bytes).code(), StatusCode::kOutOfRange);
    EXPECT_EQ(s.BindOutputDevice(0, mem, 12).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(s.OutputDevicePtr(-1).status().code(), StatusCode::kOutOfRange);
  }
  fake->Free(mem);
  fake->Free(small);
  ExpectCleanDriver(*fake);
}

// Memory of another GPU than the session's is refused, naming both (the
// fake's allocations are device 0's).
TEST(CudaSessionTest, MemoryOfAnotherGpuIsRefused) {
  const GpuFixture& f = Fixture();
  auto fake = std::make_unique<FakeCudaDriver>(FakeCudaDriver::Options{90, 2});
  testing::RegisterKernels(*fake, f.kernels);
  const size_t bytes = 4 * 33 * 17 * sizeof(float);
  const uint64_t mem = fake->Allocate(bytes);
  {
    std::shared_ptr<const Package> pkg = Load(f.package, *fake);
    ASSERT_NE(pkg, nullptr);
    CudaSessionOptions on_one;
    on_one.device = 1;
    auto session = Session::Create(pkg, nullptr, on_one);
    ASSERT_TRUE(session.ok()) << session.status();
    Status st = (*session)->BindInputDevice("x", mem, bytes);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(st.message(), HasSubstr("is memory of CUDA device 0; this session runs on CUDA device 1"));
  }
  fake->Free(mem);
  ExpectCleanDriver(*fake);
}

// The kernels assume their arguments do not overlap (noalias): a run whose
// bindings make two arguments of one step share memory is refused, naming
// the step and both arguments, before anything is launched.
TEST(CudaSessionTest, OverlappingDeviceBindingsAreRefused) {
  const GpuFixture& f = Fixture();
  auto fake = MakeFake();
  const size_t bytes = 4 * 33 * 17 * sizeof(float);
  const uint64_t shared = fake->Allocate(bytes), other = fake->Allocate(bytes);
  {
    std::shared_ptr<const Package> pkg = Load(f.package, *fake);
    ASSERT_NE(pkg, nullptr);
    auto session = Session::Create(pkg, nullptr);
    ASSERT_TRUE(session.ok()) << session.status();
    Session& s = **session;
    SetInputs(s, f.model.feeds);
    // Step 3 (Mul) reads z and writes o: the same memory for both.
    ASSERT_TRUE(s.BindInputDevice("z", shared, bytes).ok());
    ASSERT_TRUE(s.BindOutputDevice(OutputIndex(s, "o"), shared, bytes).ok());
    fake->ResetCounts();
    Status run = s.Run();
    EXPECT_EQ(run.code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(run.message(), HasSubstr("step 3 ('kiln_group_3'): arguments 1 ('z'"));
    EXPECT_THAT(run.message(), HasSubstr("and 2 ('o'"));
    EXPECT_THAT(run.message(), HasSubstr("overlap in device memory"));
    EXPECT_EQ(fake->counts().launches, 0);
    ASSERT_TRUE(s.BindOutputDevice(OutputIndex(s, "o"), other, bytes).ok());
    std::memcpy(reinterpret_cast<void*>(shared), f.model.feeds.at("z").raw(), bytes);
    ASSERT_TRUE(s.Run().ok());
    ExpectMatches(reinterpret_cast<const void*>(other), "o");
  }
  fake->Free(shared);
  fake->Free(other);
  ExpectCleanDriver(*fake);
}

TEST(CudaSessionTest, ProfiledRunsTimeEveryStepWithEvents) {
  const GpuFixture& f = Fixture();
  auto fake = MakeFake();
  {
    std::shared_ptr<const Package> pkg = Load(f.package, *fake);
    ASSERT_NE(pkg, nullptr);
    auto session = Session::Create(pkg, nullptr);
    ASSERT_TRUE(session.ok()) << session.status();
    SetInputs(**session, f.model.feeds);
    std::vector<double> seconds;
    ASSERT_TRUE((*session)->Run(&seconds).ok());
    ASSERT_TRUE((*session)->Run(&seconds).ok());
    ASSERT_EQ(seconds.size(), 4u);
    for (double s : seconds) EXPECT_DOUBLE_EQ(s, 2 * 0.5e-3);  // the fake's 0.5 ms per step, twice
    EXPECT_EQ((*session)->num_steps(), 4);
    EXPECT_EQ((*session)->step_group(2), 2);
  }
  ExpectCleanDriver(*fake);
}

// A driver error is a status naming the call, never a crash, and what was
// made before it is released.
TEST(CudaSessionTest, DriverErrorsAreStatuses) {
  const GpuFixture& f = Fixture();
  auto fake = MakeFake();
  {
    std::shared_ptr<const Package> pkg = Load(f.package, *fake);
    ASSERT_NE(pkg, nullptr);
    ASSERT_TRUE(pkg->Cuda(0).ok());  // module and weights loaded first
    fake->FailNextAllocation();
    auto session = Session::Create(pkg, nullptr);
    ASSERT_FALSE(session.ok());
    EXPECT_EQ(session.status().code(), StatusCode::kResourceExhausted);
    EXPECT_THAT(session.status().message(), HasSubstr("byte device arena: CUDA_ERROR_OUT_OF_MEMORY"));
  }
  ExpectCleanDriver(*fake);
}

// Every way a CUDA manifest can be wrong is INVALID_ARGUMENT naming it,
// before the driver is asked anything; an unknown device kind is refused.
TEST(CudaSessionTest, CorruptCudaManifestsAreRefused) {
  auto fake = MakeFake();
  // The rebuilt package itself loads and runs.
  {
    std::shared_ptr<const Package> pkg = Load(Rebuilt(nullptr), *fake);
    ASSERT_NE(pkg, nullptr);
    auto session = Session::Create(pkg, nullptr);
    ASSERT_TRUE(session.ok()) << session.status();
    SetInputs(**session, Fixture().model.feeds);
    ASSERT_TRUE((*session)->Run().ok());
    ExpectMatches((*session)->OutputData(OutputIndex(**session, "o")), "o");
  }
  auto buffer_named = [](v1::PackageManifest* m, const std::string& name) {
    for (v1::PackageBuffer& b : *m->mutable_buffers()) {
      if (b.name() == name) return &b;
    }
    return static_cast<v1::PackageBuffer*>(nullptr);
  };
  struct Case {
    std::string expect;
    std::function<void(v1::PackageManifest*)> tamper;
  };
  const std::vector<Case> cases = {
      {"without its CUDA section", [](v1::PackageManifest* m) { m->clear_cuda(); }},
      {"CUDA SM 0 is invalid", [](v1::PackageManifest* m) { m->mutable_cuda()->set_sm(0); }},
      {"PTX section (offset", [](v1::PackageManifest* m) { m->mutable_cuda()->set_ptx_size(1 << 30); }},
      {"cubin section (offset", [](v1::PackageManifest* m) { m->mutable_cuda()->set_cubin_offset(-64); }},
      {"device buffer alignment 3", [](v1::PackageManifest* m) { m->mutable_cuda()->set_buffer_alignment(3); }},
      {"device arena size -1", [](v1::PackageManifest* m) { m->mutable_cuda()->set_arena_bytes(-1); }},
      {"'t': device offset 64 is not a multiple of 256",
       [&](v1::PackageManifest* m) { buffer_named(m, "t")->set_offset(64); }},
      {"out of range of the device arena",
       [&](v1::PackageManifest* m) { buffer_named(m, "o")->set_offset(m->cuda().arena_bytes()); }},
      {"('kiln_group_2'): arguments 0 (buffer",
       [&](v1::PackageManifest* m) { buffer_named(m, "t")->set_offset(buffer_named(m, "s")->offset()); }},
      {"launch of 5 blocks of 0 threads",
       [](v1::PackageManifest* m) {
         m->mutable_steps(1)->mutable_launch()->set_blocks(5);
         m->mutable_steps(1)->mutable_launch()->set_threads(0);
       }},
      {"launch of -1 blocks", [](v1::PackageManifest* m) { m->mutable_steps(0)->mutable_launch()->set_blocks(-1); }},
  };
  for (const Case& c : cases) {
    auto pkg = Package::FromBytes(Rebuilt(c.tamper), "bad.kpkg", fake->driver());
    ASSERT_FALSE(pkg.ok()) << c.expect;
    EXPECT_EQ(pkg.status().code(), StatusCode::kInvalidArgument) << pkg.status();
    EXPECT_THAT(pkg.status().message(), HasSubstr(c.expect));
  }
  auto unknown = Package::FromBytes(Rebuilt([](v1::PackageManifest* m) { m->set_device(static_cast<v1::PackageDevice>(7)); }),
                                    "rocm.kpkg", fake->driver());
  EXPECT_EQ(unknown.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(unknown.status().message(), HasSubstr("device kind 7, which this runtime does not know"));
  // A kernel the module lacks is named when the package loads on a device.
  auto renamed = Package::FromBytes(Rebuilt([](v1::PackageManifest* m) { m->mutable_steps(2)->set_symbol("gone"); }),
                                    "renamed.kpkg", fake->driver());
  ASSERT_TRUE(renamed.ok()) << renamed.status();
  auto module = (*renamed)->Cuda(0);
  EXPECT_EQ(module.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(module.status().message(), HasSubstr("step 2: kernel 'gone' is not in the package's PTX"));
  renamed->reset();
  ExpectCleanDriver(*fake);
}

// What a deployment without a GPU sees: loading refused, saying why.
TEST(CudaRuntimeCApiTest, WithoutACudaDriverLoadingIsRefused) {
  const GpuFixture& f = Fixture();
  kiln_package_t* pkg = reinterpret_cast<kiln_package_t*>(0x1);
  const kiln_status_t status = kiln_package_load_bytes(f.package.data(), f.package.size(), &pkg);
  auto driver = CudaDriver::Get();
  if (driver.ok()) {
    ASSERT_EQ(status, KILN_OK) << kiln_last_error_message();
    int sm = 0;
    EXPECT_EQ(kiln_package_device(pkg, &sm), KILN_DEVICE_CUDA);
    EXPECT_EQ(sm, 90);
    EXPECT_STREQ(kiln_package_target(pkg), "cuda:sm_90");
    kiln_package_release(pkg);
    GTEST_SKIP() << "this host has a CUDA driver: the refusal cannot be seen here";
  }
  EXPECT_EQ(status, KILN_FAILED_PRECONDITION);
  EXPECT_EQ(pkg, nullptr);
  EXPECT_EQ(std::string(kiln_last_error_message()),
            "package '<memory>': this package is for a CUDA GPU (sm_90) and " + driver.status().message());
  if (driver.status().message().rfind("no CUDA driver could be loaded: ", 0) == 0) {
    EXPECT_THAT(kiln_last_error_message(), HasSubstr("libcuda.so.1"));
  }
  std::printf("[   INFO   ] %s\n[   INFO   ] not run: there is no GPU here\n", kiln_last_error_message());
}

// A CPU package of the same model loads and runs as before; the CUDA calls
// refuse it, and the ones every package has work unchanged.
TEST(CudaRuntimeCApiTest, ACpuPackageRunsAndRefusesDeviceMemory) {
  const GpuFixture& f = Fixture();
  PackageOptions po;
  po.model_name = "gpu_test";
  po.target = CpuTarget::Host();
  std::vector<ScheduleConfig> configs;
  for (const Workload& w : f.model.workloads) configs.push_back(DefaultSchedule(*w.graph, po.target));
  auto bytes = WritePackage(*f.model.graph, f.model.partition, f.model.workloads, configs, po);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  auto info = ReadPackageInfo(bytes->bytes);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->manifest.device(), v1::DEVICE_CPU);
  EXPECT_FALSE(info->manifest.has_cuda());
  for (const v1::PackageStep& step : info->manifest.steps()) EXPECT_FALSE(step.has_launch());

  kiln_package_t* pkg = nullptr;
  ASSERT_EQ(kiln_package_load_bytes(bytes->bytes.data(), bytes->bytes.size(), &pkg), KILN_OK)
      << kiln_last_error_message();
  int sm = -1;
  EXPECT_EQ(kiln_package_device(pkg, &sm), KILN_DEVICE_CPU);
  EXPECT_EQ(sm, 0);
  kiln_session_t* cuda = reinterpret_cast<kiln_session_t*>(0x1);
  EXPECT_EQ(kiln_session_create_cuda(pkg, 0, nullptr, &cuda), KILN_FAILED_PRECONDITION);
  EXPECT_EQ(cuda, nullptr);
  EXPECT_THAT(kiln_last_error_message(), HasSubstr("is for the CPU"));

  kiln_session_t* s = nullptr;
  ASSERT_EQ(kiln_session_create(pkg, 2, &s), KILN_OK) << kiln_last_error_message();
  EXPECT_EQ(kiln_session_cuda_stream(s), nullptr);
  EXPECT_EQ(kiln_session_bind_input_device(s, "x", 0x100000, 4 * 33 * 17 * 4), KILN_FAILED_PRECONDITION);
  EXPECT_THAT(kiln_last_error_message(), HasSubstr("device memory is for CUDA packages"));
  EXPECT_EQ(kiln_session_bind_output_device(s, 0, 0x100000, 4 * 17 * 33 * 4), KILN_FAILED_PRECONDITION);
  EXPECT_EQ(kiln_session_keep_output_on_device(s, 0, 1), KILN_FAILED_PRECONDITION);
  kiln_device_ptr_t where = 0;
  EXPECT_EQ(kiln_session_output_device(s, 0, &where), KILN_FAILED_PRECONDITION);
  for (const auto& [name, t] : f.model.feeds) {
    ASSERT_EQ(kiln_session_set_input(s, name.c_str(), t.raw(), static_cast<size_t>(t.size_bytes())), KILN_OK);
  }
  ASSERT_EQ(kiln_session_run_async(s), KILN_OK) << kiln_last_error_message();  // runs, on the CPU
  for (int i = 0; i < kiln_session_num_outputs(s); ++i) {
    const void* data = nullptr;
    ASSERT_EQ(kiln_session_output(s, i, &data, nullptr, nullptr, nullptr, nullptr), KILN_OK);
    ExpectMatches(data, kiln_session_output_name(s, i));
  }
  kiln_session_release(s);
  kiln_package_release(pkg);
}

}  // namespace
}  // namespace kiln::runtime
