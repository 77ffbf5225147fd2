// Package writer: codegen (x86-64 object, or PTX and cubin for a CUDA GPU),
// buffer plan, manifest, weights, trailer.
#include "compiler_core/package/package_writer.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "absl/strings/str_cat.h"
#include "base/cpu_features.h"
#include "base/digest.h"
#include "base/status_macros.h"
#include "compiler_core/codegen/object_emitter.h"
#include "compiler_core/codegen/ptx_assembler.h"
#include "compiler_core/codegen/ptx_emitter.h"
#include "compiler_core/driver/version.h"
#include "kiln/v1/package.pb.h"
#include "kiln/v1/package_layout.h"

namespace kiln {
namespace {

using kiln::v1::PackageBuffer;

int64_t ValueBytes(const Value* v) {
  return NumElements(v->type().StaticDims()) * DTypeSize(v->type().dtype);
}

int64_t AlignTo(int64_t x, int64_t alignment) { return (x + alignment - 1) / alignment * alignment; }

// First-fit allocator over an arena; offsets and sizes are multiples of
// `alignment` (64 on the CPU, 256 in a CUDA package's device plan).
class ArenaPlanner {
 public:
  explicit ArenaPlanner(int64_t alignment) : alignment_(alignment) {}
  int64_t Allocate(int64_t bytes) {
    bytes = AlignTo(std::max<int64_t>(bytes, 1), alignment_);
    int64_t offset = 0;
    for (const auto& [start, size] : live_) {
      if (start - offset >= bytes) break;
      offset = std::max(offset, start + size);
    }
    live_[offset] = bytes;
    peak_ = std::max(peak_, offset + bytes);
    return offset;
  }
  void Free(int64_t offset) { live_.erase(offset); }
  int64_t peak() const { return peak_; }

 private:
  int64_t alignment_;
  std::map<int64_t, int64_t> live_;  // offset -> size, ordered
  int64_t peak_ = 0;
};

std::string SerializeDeterministic(const google::protobuf::MessageLite& msg) {
  std::string out;
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    msg.SerializeToCodedStream(&coded);
  }
  return out;
}

void FillTensor(const Value* v, int buffer, kiln::v1::PackageTensor* t) {
  t->set_name(v->name());
  t->set_dtype(static_cast<kiln::v1::DataType>(v->type().dtype));
  for (int64_t d : v->type().StaticDims()) t->add_dims(d);
  t->set_buffer(buffer);
}

// The file: header, manifest, `sections` (each page aligned), trailer.
// `place(offsets)` records the sections' offsets in the manifest; they
// depend on the manifest's own size, so the layout iterates until stable.
absl::StatusOr<std::string> LayOut(kiln::v1::PackageManifest& m, const std::vector<std::string_view>& sections,
                                   const std::function<void(const std::vector<int64_t>&)>& place) {
  std::string manifest_bytes;
  std::vector<int64_t> offsets(sections.size(), 0);
  for (int iter = 0; iter < 4; ++iter) {
    place(offsets);
    manifest_bytes = SerializeDeterministic(m);
    std::vector<int64_t> next(sections.size());
    int64_t end = package::kHeaderSize + static_cast<int64_t>(manifest_bytes.size());
    for (size_t i = 0; i < sections.size(); ++i) {
      next[i] = package::AlignUp(end, package::kPageAlignment);
      end = next[i] + static_cast<int64_t>(sections[i].size());
    }
    if (next == offsets) break;
    offsets = next;
  }

  package::Header header{};
  std::memcpy(header.magic, package::kMagic, sizeof(header.magic));
  header.format_version = package::kFormatVersion;
  header.manifest_offset = package::kHeaderSize;
  header.manifest_size = manifest_bytes.size();

  std::string file;
  file.append(reinterpret_cast<const char*>(&header), sizeof(header));
  file.append(manifest_bytes);
  for (size_t i = 0; i < sections.size(); ++i) {
    file.resize(package::AlignUp(static_cast<int64_t>(file.size()), package::kPageAlignment), '\0');
    if (static_cast<int64_t>(file.size()) != offsets[i]) {
      return absl::InternalError(absl::StrCat("package writer: section ", i, " landed at ", file.size(),
                                              ", the manifest says ", offsets[i]));
    }
    file.append(sections[i]);
  }
  file.resize(package::AlignUp(static_cast<int64_t>(file.size())), '\0');
  const Sha256Bytes trailer = Sha256(file);
  file.append(reinterpret_cast<const char*>(trailer.data()), trailer.size());
  return file;
}

package::ArgumentBytes ArgumentBytesOf(const kiln::v1::PackageManifest& m, int buffer, bool gpu) {
  const PackageBuffer& b = m.buffers(buffer);
  return package::ArgumentBytesOf(buffer, b.kind() == PackageBuffer::CONSTANT, b.kind() == PackageBuffer::SCRATCH,
                                  b.offset(), b.size_bytes(), gpu);
}

// No two arguments of one step share a byte (package::ArgumentBytes: the
// kernels take them as noalias pointers). The planner never lets them (a
// step's outputs are allocated before its inputs' space is freed); this says
// so for every step of the finished plan.
absl::Status CheckStepArgumentsDisjoint(const kiln::v1::PackageManifest& m, bool gpu) {
  for (const kiln::v1::PackageStep& step : m.steps()) {
    for (int a = 0; a < step.args_size(); ++a) {
      const package::ArgumentBytes ra = ArgumentBytesOf(m, step.args(a), gpu);
      for (int b = a + 1; b < step.args_size(); ++b) {
        const package::ArgumentBytes rb = ArgumentBytesOf(m, step.args(b), gpu);
        if (ra.space == rb.space && ra.begin < rb.end && rb.begin < ra.end) {
          return absl::InternalError(absl::StrCat(
              "package writer: step '", step.symbol(), "': arguments ", a, " ('", m.buffers(step.args(a)).name(),
              "', [", ra.begin, ", ", ra.end, ")) and ", b, " ('", m.buffers(step.args(b)).name(), "', [",
              rb.begin, ", ", rb.end, ")) overlap in the memory plan; its kernel assumes they do not"));
        }
      }
    }
  }
  return absl::OkStatus();
}

// The launch limits every CUDA GPU Kiln targets has: a grid's x dimension,
// a block's threads, a block's static shared memory.
constexpr int64_t kMaxGridBlocks = std::numeric_limits<int32_t>::max();
constexpr int64_t kMaxBlockThreads = 1024;
constexpr int64_t kMaxStaticSharedBytes = 48 * 1024;

// Why a CUDA package has no cubin. Fixed words, not the places looked in:
// those depend on the environment, and a package's bytes may not.
constexpr char kNoPtxas[] = "no ptxas was found when the package was built: the CUDA driver JIT-compiles the PTX";
constexpr char kPtxOnly[] = "built as PTX only: the CUDA driver JIT-compiles the PTX";

}  // namespace

absl::StatusOr<PackageBytes> WritePackage(const Graph& graph, const Partition& partition,
                                          const std::vector<Workload>& workloads,
                                          const std::vector<ScheduleConfig>& configs,
                                          const PackageOptions& options) {
  if (workloads.size() != partition.groups.size() || configs.size() != partition.groups.size()) {
    return absl::InternalError("package writer: one workload and one schedule per group expected");
  }
  if (!options.provenance.empty() && options.provenance.size() != partition.groups.size()) {
    return absl::InternalError("package writer: one provenance per group expected, or none");
  }
  // A CUDA package plans device memory: inputs and outputs in the arena too,
  // every buffer (constants in the weights as well) aligned for the device.
  const bool gpu = options.gpu.has_value();
  const int64_t alignment = gpu ? package::kGpuBufferAlignment : package::kAlignment;
  kiln::v1::PackageManifest m;
  m.set_format_version(package::kFormatVersion);
  m.set_compiler_version(kCompilerVersion);
  m.set_target_triple(options.target.triple);
  // A CUDA package runs no host code: the host's CPU would only make its
  // bytes depend on the machine that built it.
  if (!gpu) {
    m.set_target_cpu(options.target.cpu);
    m.set_target_features(options.target.features);
    m.set_isa_level(IsaLevelOf(options.target.features));
  }
  m.set_model_name(options.model_name);
  m.set_tuned_threads(options.tuned_threads);
  if (gpu) {
    m.set_device(kiln::v1::DEVICE_CUDA);
    m.mutable_cuda()->set_sm(options.gpu->target.sm);
    m.mutable_cuda()->set_buffer_alignment(alignment);
  }

  ArenaPlanner arena(alignment);
  // Buffers: graph inputs, graph outputs, then constants and intermediates as groups use them.
  std::unordered_map<const Value*, int> buffer_of;
  auto add_buffer = [&](const Value* v, PackageBuffer::Kind kind) {
    PackageBuffer* b = m.add_buffers();
    b->set_kind(kind);
    b->set_size_bytes(ValueBytes(v));
    b->set_name(v->name());
    // Device inputs and outputs live for the whole run: never freed.
    if (gpu && kind != PackageBuffer::CONSTANT) b->set_offset(arena.Allocate(b->size_bytes()));
    int index = m.buffers_size() - 1;
    buffer_of[v] = index;
    return index;
  };
  for (const Value* v : graph.inputs()) {
    if (!v->type().IsStatic()) {
      return absl::InvalidArgumentError(absl::StrCat("input '", v->name(), "' has no static shape (",
                                                     v->type().ToString(), "); bind it with --shape"));
    }
    FillTensor(v, add_buffer(v, PackageBuffer::INPUT), m.add_inputs());
  }
  std::string weights;
  auto add_constant = [&](const Value* v) {
    int b = add_buffer(v, PackageBuffer::CONSTANT);
    const int64_t align = !gpu && ValueBytes(v) >= package::kPageAlignedBytes ? package::kPageAlignment : alignment;
    weights.resize(AlignTo(static_cast<int64_t>(weights.size()), align), '\0');
    m.mutable_buffers(b)->set_offset(static_cast<int64_t>(weights.size()));
    weights.append(v->constant().bytes());
    return b;
  };
  // A graph output that no group computes (a constant, a graph input, or a
  // value listed twice) refers to the buffer that already holds it.
  for (const Value* v : graph.outputs()) {
    if (!v->type().IsStatic()) {
      return absl::InvalidArgumentError(absl::StrCat("output '", v->name(), "' has no static shape (",
                                                     v->type().ToString(), ")"));
    }
    int b = 0;
    if (buffer_of.count(v)) {
      b = buffer_of[v];
    } else if (v->is_constant()) {
      b = add_constant(v);
    } else if (v->producer() == nullptr) {
      return absl::InternalError(absl::StrCat("graph output '", v->name(), "' has no producer"));
    } else {
      b = add_buffer(v, PackageBuffer::OUTPUT);
    }
    FillTensor(v, b, m.add_outputs());
  }

  // Last group that reads each value, to free scratch space after it.
  std::unordered_map<const Value*, size_t> last_use;
  for (size_t gi = 0; gi < partition.groups.size(); ++gi) {
    for (const Value* v : partition.groups[gi].inputs) last_use[v] = gi;
  }
  // Views (Partition::views): a value stored in place inside another's
  // buffer. Each tree of views has one arena block, its root's, taken when a
  // group first writes or reads a value of the tree and given back after
  // the last group that does.
  if (gpu && !partition.views.empty()) {
    return absl::InternalError("package writer: a CUDA package plans no views of one value in another");
  }
  std::unordered_set<const Value*> in_tree;
  for (const ValueView& v : partition.views) in_tree.insert({v.value, v.into});
  std::unordered_map<const Value*, size_t> root_last_use;
  std::unordered_map<const Value*, int64_t> root_block;
  for (size_t gi = 0; gi < partition.groups.size(); ++gi) {
    for (const std::vector<Value*>* vs : {&partition.groups[gi].inputs, &partition.groups[gi].outputs}) {
      for (const Value* v : *vs) {
        int64_t offset = 0;
        if (in_tree.count(v)) root_last_use[partition.ViewRoot(v, &offset)] = gi;
      }
    }
  }
  // The buffer of a value of a tree of views, at its place in the root's block.
  auto add_view_buffer = [&](const Value* v) {
    int64_t offset = 0;
    const Value* root = partition.ViewRoot(v, &offset);
    auto block = root_block.find(root);
    if (block == root_block.end()) block = root_block.emplace(root, arena.Allocate(ValueBytes(root))).first;
    const int b = add_buffer(v, PackageBuffer::SCRATCH);
    m.mutable_buffers(b)->set_offset(block->second + offset);
    return b;
  };

  std::vector<KernelRequest> requests;
  for (size_t gi = 0; gi < partition.groups.size(); ++gi) {
    const FusionGroup& g = partition.groups[gi];
    kiln::v1::PackageStep* step = m.add_steps();
    step->set_symbol(absl::StrCat("kiln_group_", gi));
    step->set_group(static_cast<int>(gi));
    for (const Value* v : g.inputs) {
      if (!buffer_of.count(v) && !in_tree.count(v)) {
        if (!v->is_constant()) {
          return absl::InternalError(absl::StrCat("value '", v->name(), "' is read before it is written"));
        }
        add_constant(v);
      }
      if (!buffer_of.count(v)) add_view_buffer(v);
      step->add_args(buffer_of[v]);
    }
    for (const Value* v : g.outputs) {
      if (!buffer_of.count(v)) {
        if (in_tree.count(v)) {
          add_view_buffer(v);
        } else {
          int b = add_buffer(v, PackageBuffer::SCRATCH);
          if (!gpu) m.mutable_buffers(b)->set_offset(arena.Allocate(ValueBytes(v)));
        }
      }
      step->add_args(buffer_of[v]);
    }
    for (const Value* v : g.inputs) {
      auto it = last_use.find(v);
      const PackageBuffer& b = m.buffers(buffer_of[v]);
      if (it != last_use.end() && it->second == gi && b.kind() == PackageBuffer::SCRATCH &&
          !in_tree.count(v)) {
        arena.Free(b.offset());
      }
    }
    for (const auto& [root, last] : root_last_use) {
      if (last == gi) arena.Free(root_block.at(root));
    }
    kiln::v1::PackageGroup* pg = m.add_groups();
    pg->set_workload_key(workloads[gi].key);
    pg->set_kind(g.kind);
    pg->set_schedule_config(configs[gi].ToString());
    for (const Node* n : g.nodes) pg->add_nodes(n->name());
    pg->set_flops(workloads[gi].flops);
    pg->set_bytes(workloads[gi].bytes);
    if (!options.provenance.empty()) *pg->mutable_provenance() = options.provenance[gi];
    requests.push_back(KernelRequest{workloads[gi].graph.get(), configs[gi], step->symbol()});
  }

  PackageBytes out;
  if (!gpu) {
    m.set_arena_bytes(arena.peak());
    RETURN_IF_ERROR(CheckStepArgumentsDisjoint(m, false));
    ASSIGN_OR_RETURN(ObjectCode object, CompileToObject(requests, options.target));
    for (size_t i = 0; i < object.kernels.size() && i < static_cast<size_t>(m.steps_size()); ++i) {
      m.mutable_steps(static_cast<int>(i))->set_num_tasks(object.kernels[i].num_tasks);
    }
    ASSIGN_OR_RETURN(out.bytes, LayOut(m, {object.elf, weights}, [&](const std::vector<int64_t>& at) {
                       m.set_code_offset(at[0]);
                       m.set_code_size(static_cast<int64_t>(object.elf.size()));
                       m.set_weights_offset(at[1]);
                       m.set_weights_size(static_cast<int64_t>(weights.size()));
                     }));
    out.digest = ContentDigest(out.bytes);
    out.llvm_ir = std::move(object.llvm_ir);
    return out;
  }

  const GpuTarget& target = options.gpu->target;
  kiln::v1::PackageCuda* cuda = m.mutable_cuda();
  cuda->set_arena_bytes(arena.peak());
  ASSIGN_OR_RETURN(PtxCode code, CompileToPtx(requests, target));
  if (code.kernels.size() != static_cast<size_t>(m.steps_size())) {
    return absl::InternalError(absl::StrCat("package writer: ", m.steps_size(), " steps but ", code.kernels.size(),
                                            " GPU kernels"));
  }
  for (int i = 0; i < m.steps_size(); ++i) {
    kiln::v1::PackageStep* step = m.mutable_steps(i);
    const GpuKernelInfo& k = code.kernels[static_cast<size_t>(i)];
    const loop_ir::GpuLaunch& l = k.launch;
    if (k.num_args != step->args_size()) {
      return absl::InternalError(absl::StrCat("package writer: kernel ", k.symbol, " takes ", k.num_args,
                                              " pointers, its step passes ", step->args_size()));
    }
    if (l.blocks < 0 || l.blocks > kMaxGridBlocks || l.threads < 1 || l.threads > kMaxBlockThreads ||
        l.shared_bytes < 0 || l.shared_bytes > kMaxStaticSharedBytes) {
      return absl::InternalError(absl::StrCat("package writer: kernel ", k.symbol, " launches ", l.blocks,
                                              " blocks of ", l.threads, " threads with ", l.shared_bytes,
                                              " bytes of shared memory, beyond what a CUDA launch allows (",
                                              kMaxGridBlocks, " blocks, ", kMaxBlockThreads, " threads, ",
                                              kMaxStaticSharedBytes, " bytes)"));
    }
    step->mutable_launch()->set_blocks(l.blocks);
    step->mutable_launch()->set_threads(static_cast<int32_t>(l.threads));
    step->mutable_launch()->set_shared_bytes(static_cast<int32_t>(l.shared_bytes));
  }
  RETURN_IF_ERROR(CheckStepArgumentsDisjoint(m, true));

  // The cubin for target's SM. A ptxas named in the options must work;
  // without one named and none found, the package carries the PTX alone.
  std::string cubin;
  if (!options.gpu->cubin) {
    cuda->set_cubin_missing(kPtxOnly);
  } else if (absl::StatusOr<PtxAssembler> ptxas = PtxAssembler::Find(options.gpu->ptxas); ptxas.ok()) {
    ASSIGN_OR_RETURN(cubin, ptxas->Assemble(code.ptx, target));
    ASSIGN_OR_RETURN(std::string version, ptxas->Version());
    cuda->set_ptxas_version(version);
  } else if (!options.gpu->ptxas.empty()) {
    return ptxas.status();
  } else {
    cuda->set_cubin_missing(kNoPtxas);
  }
  ASSIGN_OR_RETURN(out.bytes, LayOut(m, {code.ptx, cubin, weights}, [&](const std::vector<int64_t>& at) {
                     cuda->set_ptx_offset(at[0]);
                     cuda->set_ptx_size(static_cast<int64_t>(code.ptx.size()));
                     cuda->set_cubin_offset(cubin.empty() ? 0 : at[1]);
                     cuda->set_cubin_size(static_cast<int64_t>(cubin.size()));
                     m.set_weights_offset(at[2]);
                     m.set_weights_size(static_cast<int64_t>(weights.size()));
                   }));
  out.digest = ContentDigest(out.bytes);
  out.llvm_ir = std::move(code.llvm_ir);
  return out;
}

}  // namespace kiln
