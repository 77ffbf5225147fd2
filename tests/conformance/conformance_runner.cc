// The ONNX node-test conformance runner (see conformance_runner.h).
#include "tests/conformance/conformance_runner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/file.h"
#include "base/status_macros.h"
#include "client/runtime/package_reader.h"
#include "client/runtime/absl_interop.h"
#include "client/runtime/cuda_driver.h"
#include "client/runtime/session.h"
#include "compiler_core/codegen/target.h"
#include "compiler_core/driver/compile_driver.h"
#include "compiler_core/frontend/graph_proto.h"
#include "compiler_core/frontend/interpreter.h"
#include "compiler_core/frontend/onnx_importer.h"
#include "compiler_core/frontend/op_registry.h"
#include "compiler_core/ir/float16.h"
#include "onnx/onnx.pb.h"
#include "tests/client/runtime/fake_cuda/fake_cuda_driver.h"
#include "tests/client/runtime/fake_cuda/package_kernels.h"

namespace kiln::conformance {
namespace fs = std::filesystem;
namespace {

absl::StatusOr<Tensor> ReadTensor(const fs::path& path, onnx::TensorProto* proto_out = nullptr) {
  ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
  onnx::TensorProto proto;
  if (!proto.ParseFromString(bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(path.filename().string(), " is not a TensorProto"));
  }
  auto t = TensorFromOnnx(proto);
  if (!t.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path.filename().string(), ": ", t.status().message()));
  }
  if (proto_out != nullptr) *proto_out = std::move(proto);
  return t;
}

// The ONNX backend suite stores bf16 test data as UINT16 tensors of the
// same bit patterns (numpy has no bfloat16). Reads such data as the bf16 the
// graph declares; anything else is returned as read.
Tensor AsDeclared(Tensor t, int declared_onnx_type) {
  if (declared_onnx_type != DTypeToOnnx(DType::kBFloat16) || t.dtype() != DType::kUInt16) return t;
  Tensor bf(DType::kBFloat16, t.dims());
  std::memcpy(bf.raw(), t.raw(), t.size_bytes());
  return bf;
}

// Element k as double (every dtype Kiln reads from ONNX except f16 and bf16).
double At(const Tensor& t, int64_t k) {
  switch (t.dtype()) {
    case DType::kFloat32: return t.data<float>()[k];
    case DType::kFloat64: return t.data<double>()[k];
    case DType::kInt64: return static_cast<double>(t.data<int64_t>()[k]);
    case DType::kInt32: return t.data<int32_t>()[k];
    case DType::kInt16: return t.data<int16_t>()[k];
    case DType::kInt8: return t.data<int8_t>()[k];
    case DType::kUInt8: return t.data<uint8_t>()[k];
    case DType::kBool: return t.data<uint8_t>()[k] != 0;
    default: return 0;
  }
}

// Compares `got` with `want`; the message names the first mismatch.
absl::Status Compare(const std::string& name, const Tensor& got, const Tensor& want) {
  if (got.dtype() != want.dtype() || got.dims() != want.dims()) {
    return absl::InternalError(absl::StrCat("output '", name, "': got ", got.DebugString(0), ", expected ",
                                            want.DebugString(0)));
  }
  if (IsNarrowFloat(want.dtype())) {
    if (got.bytes() != want.bytes()) {
      return absl::InternalError(absl::StrCat("output '", name, "': ", DTypeName(want.dtype()), " bytes differ"));
    }
    return absl::OkStatus();
  }
  const bool is_float = want.dtype() == DType::kFloat32 || want.dtype() == DType::kFloat64;
  for (int64_t k = 0; k < want.num_elements(); ++k) {
    double g = At(got, k), w = At(want, k);
    bool ok;
    if (is_float) {
      ok = (std::isnan(g) && std::isnan(w)) || g == w || std::fabs(g - w) <= kAtol + kRtol * std::fabs(w);
    } else {
      ok = g == w;
    }
    if (!ok) {
      return absl::InternalError(absl::StrCat("output '", name, "' element ", k, ": got ", g, ", expected ", w,
                                              " (", want.DebugString(0), ")"));
    }
  }
  return absl::OkStatus();
}

struct DataSet {
  std::string name;
  std::map<std::string, Tensor> inputs;
  std::map<std::string, onnx::TensorProto> input_protos;
  std::vector<std::pair<std::string, Tensor>> outputs;  // in graph output order
};

// Reads every test_data_set_*: input_i.pb binds the i-th graph input that is
// not an initializer, output_i.pb is the i-th graph output.
absl::StatusOr<std::vector<DataSet>> ReadDataSets(const fs::path& dir, const onnx::ModelProto& model) {
  std::set<std::string> inits;
  for (const auto& t : model.graph().initializer()) inits.insert(t.name());
  std::vector<std::string> input_names, output_names;
  std::vector<int> input_types, output_types;
  for (const auto& vi : model.graph().input()) {
    if (inits.count(vi.name())) continue;
    input_names.push_back(vi.name());
    input_types.push_back(vi.type().tensor_type().elem_type());
  }
  for (const auto& vi : model.graph().output()) {
    output_names.push_back(vi.name());
    output_types.push_back(vi.type().tensor_type().elem_type());
  }
  std::vector<fs::path> set_dirs;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) set_dirs.push_back(e.path());
  }
  std::sort(set_dirs.begin(), set_dirs.end());
  std::vector<DataSet> sets;
  for (const fs::path& sd : set_dirs) {
    DataSet ds;
    ds.name = sd.filename().string();
    for (size_t i = 0; i < input_names.size(); ++i) {
      fs::path p = sd / absl::StrCat("input_", i, ".pb");
      if (!fs::exists(p)) continue;  // an optional input left out
      onnx::TensorProto proto;
      ASSIGN_OR_RETURN(Tensor t, ReadTensor(p, &proto));
      ds.inputs.emplace(input_names[i], AsDeclared(std::move(t), input_types[i]));
      proto.set_name(input_names[i]);
      ds.input_protos.emplace(input_names[i], std::move(proto));
    }
    for (size_t i = 0; i < output_names.size(); ++i) {
      ASSIGN_OR_RETURN(Tensor t, ReadTensor(sd / absl::StrCat("output_", i, ".pb")));
      ds.outputs.emplace_back(output_names[i], AsDeclared(std::move(t), output_types[i]));
    }
    sets.push_back(std::move(ds));
  }
  if (sets.empty()) return absl::NotFoundError("no test_data_set_* folder");
  return sets;
}

// Why the code generator cannot take `graph`, or "" when it can.
std::string NotCompilable(const Graph& graph) {
  for (Value* v : graph.values()) {
    if (!v->type().IsStatic()) return absl::StrCat("value '", v->name(), "' is ", v->type().ToString());
  }
  return "";
}

// Runs `package` over every data set and compares its outputs.
absl::Status RunPackage(std::shared_ptr<const runtime::Package> package, const std::vector<DataSet>& sets) {
  ASSIGN_OR_RETURN(std::unique_ptr<runtime::Session> session,
                   runtime::ToAbsl(runtime::Session::Create(std::move(package), nullptr)));
  for (const DataSet& ds : sets) {
    for (const auto& [name, t] : ds.inputs) RETURN_IF_ERROR(runtime::ToAbsl(session->SetInput(name, t.raw(), t.size_bytes())));
    RETURN_IF_ERROR(runtime::ToAbsl(session->Run()));
    for (const auto& [name, want] : ds.outputs) {
      int index = -1;
      for (int i = 0; i < session->num_outputs(); ++i) {
        if (session->output_info(i).name == name) index = i;
      }
      if (index < 0) return absl::InternalError(absl::StrCat("package has no output '", name, "'"));
      if (session->OutputBytes(index) != static_cast<size_t>(want.size_bytes())) {
        return absl::InternalError(absl::StrCat("output '", name, "' has ", session->OutputBytes(index),
                                                " bytes, expected ", want.size_bytes()));
      }
      Tensor got = Tensor::FromBytes(want.dtype(), want.dims(),
                                     std::string_view(static_cast<const char*>(session->OutputData(index)),
                                                      session->OutputBytes(index)));
      absl::Status s = Compare(name, got, want);
      if (!s.ok()) return absl::InternalError(absl::StrCat(ds.name, ": ", s.message()));
    }
  }
  return absl::OkStatus();
}

// Compiles like the compile pipeline does (optimise, fuse what the code
// generator takes, default schedules), runs the package and compares. A group
// the code generator cannot take is UNIMPLEMENTED: the case is skipped.
absl::Status RunCompiledOnCpu(const Graph& original, const std::vector<DataSet>& sets) {
  PackageOptions po;
  po.model_name = original.name();
  po.target = CpuTarget::Host();
  ASSIGN_OR_RETURN(PackageBytes bytes, CompileWithDefaultSchedules(original.Clone(), po));
  ASSIGN_OR_RETURN(std::unique_ptr<runtime::Package> pkg, runtime::ToAbsl(runtime::Package::FromBytes(bytes.bytes)));
  return RunPackage(std::move(pkg), sets);
}

// The same for `gpu`: the stages of CompileWithDefaultSchedules, kept apart
// because the fake driver needs the workloads to emulate the package's
// kernels. The package runs through the runtime's CUDA path on a fake device
// of `gpu`'s SM; any misuse of the driver the fake saw (a launch unlike the
// kernel's, arguments outside device memory) fails the case, as does memory
// the runtime leaves allocated. `*launches`: the kernels launched (0 when
// the optimiser folded every output to a constant). `real_gpu`: the package
// runs on this machine's GPU through the process's CUDA driver instead.
absl::Status RunCompiledOnGpu(const Graph& original, const std::vector<DataSet>& sets, const GpuTarget& gpu,
                              const std::string& ptxas, bool real_gpu, int* launches) {
  const Target target(gpu);
  ASSIGN_OR_RETURN(PreparedModel model, PrepareModel(original.Clone(), PrepareOptionsFor(target)));
  RETURN_IF_ERROR(CheckCompilable(model, target));
  PackageOptions po;
  po.model_name = original.name();
  po.target = CpuTarget::Host();
  po.gpu = GpuPackageOptions{gpu, ptxas, !ptxas.empty()};
  ASSIGN_OR_RETURN(PackageBytes bytes, BuildPackage(model, DefaultSchedules(model, target), po));
  if (real_gpu) {
    ASSIGN_OR_RETURN(std::unique_ptr<runtime::Package> pkg,
                     runtime::ToAbsl(runtime::Package::FromBytes(bytes.bytes, po.model_name)));
    *launches += static_cast<int>(model.workloads.size());
    return RunPackage(std::move(pkg), sets);
  }
  ASSIGN_OR_RETURN(std::vector<testing::EmulatedKernel> kernels,
                   testing::EmulatePackageKernels(bytes.bytes, model.workloads));
  testing::FakeCudaDriver fake(testing::FakeCudaDriver::Options{gpu.sm, 1});
  testing::RegisterKernels(fake, kernels);
  absl::Status run = [&]() -> absl::Status {
    ASSIGN_OR_RETURN(std::unique_ptr<runtime::Package> pkg,
                     runtime::ToAbsl(runtime::Package::FromBytes(bytes.bytes, po.model_name, fake.driver())));
    return RunPackage(std::move(pkg), sets);
  }();
  *launches += fake.counts().launches;
  if (!fake.misuse().empty()) {
    return absl::InternalError(absl::StrCat(run.ok() ? "" : absl::StrCat(run.message(), "; "),
                                            "CUDA driver misuse: ", absl::StrJoin(fake.misuse(), "; ")));
  }
  if (run.ok() && fake.live_allocations() + fake.retained_contexts() + fake.context_depth() != 0) {
    return absl::InternalError(absl::StrCat("the runtime left ", fake.live_allocations(), " allocations, ",
                                            fake.retained_contexts(), " retained contexts and ",
                                            fake.context_depth(), " pushed contexts behind"));
  }
  return run;
}

// `*launches` counts the GPU kernels launched (left alone on the CPU).
absl::Status RunCompiled(const Graph& original, const std::vector<DataSet>& sets, const Options& options,
                         int* launches) {
  return options.gpu ? RunCompiledOnGpu(original, sets, *options.gpu, options.ptxas, options.real_gpu, launches)
                     : RunCompiledOnCpu(original, sets);
}

// Node tests feed shape operands (Reshape's shape, Slice's starts, Range's
// limits, ...) as graph inputs; Kiln compiles static shapes, so these must be
// constants. This makes the data set's small operands initializers (the graph
// inputs that shadow them stay constants) and removes them from `inputs`:
// integer inputs up to kMaxShapeOperand elements, 1-D inputs up to
// kMaxVectorOperand and any input up to kMaxScalarOperand elements.
constexpr int64_t kMaxShapeOperand = 64;
constexpr int64_t kMaxScalarOperand = 1;
constexpr int64_t kMaxVectorOperand = 8;  // Resize's scales and roi

absl::StatusOr<std::unique_ptr<Graph>> ImportWithConstantOperands(const onnx::ModelProto& model, const DataSet& ds,
                                                                  std::map<std::string, Tensor>* inputs) {
  onnx::ModelProto variant = model;
  for (const auto& [name, t] : ds.inputs) {
    bool integer = t.dtype() == DType::kInt64 || t.dtype() == DType::kInt32;
    if ((integer && t.num_elements() <= kMaxShapeOperand) || t.num_elements() <= kMaxScalarOperand ||
        (t.rank() == 1 && t.num_elements() <= kMaxVectorOperand)) {
      *variant.mutable_graph()->add_initializer() = ds.input_protos.at(name);
      inputs->erase(name);
    }
  }
  return ImportOnnxModel(variant.SerializeAsString(), {});
}

std::string Oneline(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s;
}

}  // namespace

const char* OutcomeName(Outcome o) {
  switch (o) {
    case Outcome::kPassed: return "passed";
    case Outcome::kFailed: return "failed";
    case Outcome::kSkipped: return "skipped";
  }
  return "?";
}

CaseResult RunCase(const std::string& case_dir, const Options& options) {
  CaseResult r;
  r.name = fs::path(case_dir).filename().string();
  auto fail = [&r](absl::string_view msg) {
    r.outcome = Outcome::kFailed;
    r.message = Oneline(std::string(msg));
    r.compiled_message = "interpreter failed";
    return r;
  };
  auto bytes = ReadFile(fs::path(case_dir) / "model.onnx");
  if (!bytes.ok()) return fail(bytes.status().message());
  onnx::ModelProto model;
  if (!model.ParseFromString(*bytes)) return fail("model.onnx does not parse");
  std::set<std::string> missing;
  for (const auto& n : model.graph().node()) {
    bool default_domain = n.domain().empty() || n.domain() == "ai.onnx";
    if (!default_domain || FindOpDef("", n.op_type()) == nullptr) {
      missing.insert(default_domain ? n.op_type() : absl::StrCat(n.domain(), ".", n.op_type()));
    }
  }
  if (!missing.empty()) {
    r.message = absl::StrCat("not covered: ", absl::StrJoin(missing, ","));
    r.compiled_message = r.message;
    return r;
  }
  // Import as is; when that fails, per data set with its shape operands as
  // constants (compiled path then skipped).
  auto graph = ImportOnnxModel(*bytes, {});
  auto sets = ReadDataSets(case_dir, model);
  if (!sets.ok()) {
    return fail(graph.ok() ? absl::StrCat("test data: ", sets.status().message())
                           : absl::StrCat("import: ", graph.status().message()));
  }
  const bool per_set = !graph.ok();
  // Per data set when shape operands had to become constants: the graph that
  // was interpreted, and the inputs still fed at run time.
  std::vector<std::pair<std::shared_ptr<Graph>, DataSet>> variants;
  for (const DataSet& ds : *sets) {
    std::map<std::string, Tensor> inputs = ds.inputs;
    if (per_set) {
      auto g = ImportWithConstantOperands(model, ds, &inputs);
      if (!g.ok()) return fail(absl::StrCat("import: ", graph.status().message()));
      graph = std::move(g);
    }
    auto start = std::chrono::steady_clock::now();
    auto outs = Evaluate(**graph, inputs);
    r.interpreter_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!outs.ok()) return fail(absl::StrCat(ds.name, ": evaluate: ", outs.status().message()));
    for (const auto& [name, want] : ds.outputs) {
      auto it = outs->find(name);
      if (it == outs->end()) return fail(absl::StrCat(ds.name, ": output '", name, "' missing"));
      absl::Status s = Compare(name, it->second, want);
      if (!s.ok()) return fail(absl::StrCat(ds.name, ": ", s.message()));
    }
    if (per_set) {
      DataSet bound = ds;
      bound.inputs = inputs;
      variants.emplace_back(std::shared_ptr<Graph>(std::move(*graph)), std::move(bound));
    }
  }
  r.outcome = Outcome::kPassed;
  if (per_set) r.message = "shape operands bound as constants";
  if (!options.compiled) {
    r.compiled_message = "compiled path disabled";
    return r;
  }
  // The compiled path sees the graph the interpreter ran: with shape operands
  // bound per data set, one package per set.
  absl::Status s = absl::OkStatus();
  int launches = 0;
  if (per_set) {
    for (const auto& [g, ds] : variants) {
      if (std::string why = NotCompilable(*g); !why.empty()) {
        r.compiled_message = why;
        return r;
      }
      s = RunCompiled(*g, {ds}, options, &launches);
      if (!s.ok()) break;
    }
  } else {
    if (std::string why = NotCompilable(**graph); !why.empty()) {
      r.compiled_message = why;
      return r;
    }
    s = RunCompiled(**graph, *sets, options, &launches);
  }
  if (absl::StartsWith(s.message(), "unsupported: ")) {
    r.compiled_message = Oneline(std::string(s.message()));  // not compiled: must be a reviewed gap
    return r;
  }
  r.compiled = s.ok() ? Outcome::kPassed : Outcome::kFailed;
  r.compiled_message = s.ok() ? "" : Oneline(std::string(s.message()));
  if (s.ok() && options.gpu && launches == 0) r.compiled_message = "no kernel ran: every output is a constant";
  return r;
}

absl::StatusOr<Report> RunSuite(const Options& options) {
  std::error_code ec;
  if (!fs::is_directory(options.data_dir, ec)) {
    return absl::NotFoundError(absl::StrCat("test data folder ", options.data_dir, " does not exist"));
  }
  std::vector<std::string> dirs;
  for (const auto& e : fs::directory_iterator(options.data_dir)) {
    std::string name = e.path().filename().string();
    if (!e.is_directory() || !fs::exists(e.path() / "model.onnx")) continue;
    if (!options.filter.empty() && name.find(options.filter) == std::string::npos) continue;
    dirs.push_back(e.path().string());
  }
  std::sort(dirs.begin(), dirs.end());
  // On a real GPU the suite holds device 0's primary context throughout:
  // each case's package retains and releases it, and with no other holder
  // the driver would tear it down and build it again for every case.
  const runtime::CudaDriver* cuda = nullptr;
  runtime::cu::Device device = 0;
  if (options.real_gpu) {
    if (!options.gpu) return absl::InvalidArgumentError("--real-gpu needs --target cuda:sm_XY");
    auto driver = runtime::CudaDriver::Get();
    if (!driver.ok()) {
      return absl::FailedPreconditionError(absl::StrCat("no GPU to run on: ", driver.status().message()));
    }
    runtime::cu::Context context = nullptr;
    if ((*driver)->api().cuDeviceGet(&device, 0) == runtime::cu::kSuccess &&
        (*driver)->api().cuDevicePrimaryCtxRetain(&context, device) == runtime::cu::kSuccess) {
      cuda = *driver;
    }
  }
  Report report;
  report.compiled_ran = options.compiled;
  for (const std::string& d : dirs) {
    CaseResult c = RunCase(d, options);
    report.interpreter_seconds += c.interpreter_seconds;
    auto count = [](Counts& n, Outcome o) {
      (o == Outcome::kPassed ? n.passed : o == Outcome::kFailed ? n.failed : n.skipped)++;
    };
    count(report.interpreted, c.outcome);
    count(report.compiled, c.compiled);
    report.cases.push_back(std::move(c));
  }
  if (cuda != nullptr) cuda->api().cuDevicePrimaryCtxRelease(device);
  return report;
}

absl::StatusOr<std::map<std::string, std::string>> ReadExpectedFailures(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    std::string reason;
    size_t hash = line.find('#');
    if (hash != std::string::npos) {
      reason = line.substr(hash + 1);
      line = line.substr(0, hash);
    }
    auto trim = [](std::string s) {
      size_t b = s.find_first_not_of(" \t\r");
      size_t e = s.find_last_not_of(" \t\r");
      return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
    };
    line = trim(line);
    if (line.empty()) continue;
    if (line.find_first_of(" \t") != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(path, ":", line_no, ": expected one test name per line"));
    }
    if (!out.emplace(line, trim(reason)).second) {
      return absl::InvalidArgumentError(absl::StrCat(path, ":", line_no, ": '", line, "' is listed twice"));
    }
  }
  return out;
}

ExpectationCheck CheckExpectations(const Report& report, const std::map<std::string, std::string>& expected) {
  ExpectationCheck check;
  for (const CaseResult& c : report.cases) {
    bool listed = expected.count(c.name) > 0;
    if (c.outcome == Outcome::kFailed && !listed) check.unexpected_failures.push_back(c.name);
    if (c.outcome == Outcome::kPassed && listed) check.unexpected_passes.push_back(c.name);
    const std::string compiled_name = absl::StrCat(c.name, kCompiledSuffix);
    bool compiled_listed = expected.count(compiled_name) > 0;
    // Every case the interpreter passes must compile and pass, or be listed.
    bool compiled_gap = report.compiled_ran && c.outcome == Outcome::kPassed && c.compiled != Outcome::kPassed;
    if ((c.compiled == Outcome::kFailed || compiled_gap) && !compiled_listed) {
      check.unexpected_failures.push_back(compiled_name);
    }
    if (c.compiled == Outcome::kPassed && compiled_listed) check.unexpected_passes.push_back(compiled_name);
  }
  return check;
}

}  // namespace kiln::conformance
