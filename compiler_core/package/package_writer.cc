// Package writer: codegen, buffer plan, manifest, weights, trailer.
#include "compiler_core/package/package_writer.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <unordered_map>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "absl/strings/str_cat.h"
#include "base/cpu_features.h"
#include "base/digest.h"
#include "base/status_macros.h"
#include "compiler_core/codegen/object_emitter.h"
#include "compiler_core/driver/version.h"
#include "kiln/v1/package.pb.h"
#include "kiln/v1/package_layout.h"

namespace kiln {
namespace {

using kiln::v1::PackageBuffer;

int64_t ValueBytes(const Value* v) {
  return NumElements(v->type().StaticDims()) * DTypeSize(v->type().dtype);
}

// First-fit allocator over the scratch arena; offsets are 64-byte aligned.
class ArenaPlanner {
 public:
  int64_t Allocate(int64_t bytes) {
    bytes = package::AlignUp(std::max<int64_t>(bytes, 1));
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
  std::map<int64_t, int64_t> live_;  // offset -> size, ordered
  int64_t peak_ = 0;
};

void AppendAligned(std::string* out, std::string_view bytes) {
  out->resize(package::AlignUp(static_cast<int64_t>(out->size())), '\0');
  out->append(bytes);
}

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
  kiln::v1::PackageManifest m;
  m.set_format_version(package::kFormatVersion);
  m.set_compiler_version(kCompilerVersion);
  m.set_target_triple(options.target.triple);
  m.set_target_cpu(options.target.cpu);
  m.set_target_features(options.target.features);
  m.set_isa_level(IsaLevelOf(options.target.features));
  m.set_model_name(options.model_name);
  m.set_tuned_threads(options.tuned_threads);

  // Buffers: graph inputs, graph outputs, then constants and intermediates as groups use them.
  std::unordered_map<const Value*, int> buffer_of;
  auto add_buffer = [&](const Value* v, PackageBuffer::Kind kind) {
    PackageBuffer* b = m.add_buffers();
    b->set_kind(kind);
    b->set_size_bytes(ValueBytes(v));
    b->set_name(v->name());
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
    weights.resize(package::AlignUp(static_cast<int64_t>(weights.size())), '\0');
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

  ArenaPlanner arena;
  std::vector<KernelRequest> requests;
  for (size_t gi = 0; gi < partition.groups.size(); ++gi) {
    const FusionGroup& g = partition.groups[gi];
    kiln::v1::PackageStep* step = m.add_steps();
    step->set_symbol(absl::StrCat("kiln_group_", gi));
    step->set_group(static_cast<int>(gi));
    for (const Value* v : g.inputs) {
      if (!buffer_of.count(v)) {
        if (!v->is_constant()) {
          return absl::InternalError(absl::StrCat("value '", v->name(), "' is read before it is written"));
        }
        add_constant(v);
      }
      step->add_args(buffer_of[v]);
    }
    for (const Value* v : g.outputs) {
      if (!buffer_of.count(v)) {
        int b = add_buffer(v, PackageBuffer::SCRATCH);
        m.mutable_buffers(b)->set_offset(arena.Allocate(ValueBytes(v)));
      }
      step->add_args(buffer_of[v]);
    }
    for (const Value* v : g.inputs) {
      auto it = last_use.find(v);
      const PackageBuffer& b = m.buffers(buffer_of[v]);
      if (it != last_use.end() && it->second == gi && b.kind() == PackageBuffer::SCRATCH) {
        arena.Free(b.offset());
      }
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
  m.set_arena_bytes(arena.peak());

  ASSIGN_OR_RETURN(ObjectCode object, CompileToObject(requests, options.target));
  for (size_t i = 0; i < object.kernels.size() && i < static_cast<size_t>(m.steps_size()); ++i) {
    m.mutable_steps(static_cast<int>(i))->set_num_tasks(object.kernels[i].num_tasks);
  }

  // Layout: header, manifest, code, weights, trailer. The manifest records the
  // section offsets, which depend on its own size: iterate until stable.
  std::string manifest_bytes;
  int64_t code_offset = 0, weights_offset = 0;
  for (int iter = 0; iter < 4; ++iter) {
    m.set_code_offset(code_offset);
    m.set_code_size(static_cast<int64_t>(object.elf.size()));
    m.set_weights_offset(weights_offset);
    m.set_weights_size(static_cast<int64_t>(weights.size()));
    manifest_bytes = SerializeDeterministic(m);
    int64_t new_code = package::AlignUp(package::kHeaderSize + static_cast<int64_t>(manifest_bytes.size()));
    int64_t new_weights = package::AlignUp(new_code + static_cast<int64_t>(object.elf.size()));
    if (new_code == code_offset && new_weights == weights_offset) break;
    code_offset = new_code;
    weights_offset = new_weights;
  }

  package::Header header{};
  std::memcpy(header.magic, package::kMagic, sizeof(header.magic));
  header.format_version = package::kFormatVersion;
  header.manifest_offset = package::kHeaderSize;
  header.manifest_size = manifest_bytes.size();

  PackageBytes out;
  std::string& file = out.bytes;
  file.append(reinterpret_cast<const char*>(&header), sizeof(header));
  file.append(manifest_bytes);
  AppendAligned(&file, object.elf);
  if (static_cast<int64_t>(file.size()) - static_cast<int64_t>(object.elf.size()) != code_offset) {
    return absl::InternalError("package writer: code section landed at the wrong offset");
  }
  AppendAligned(&file, weights);
  file.resize(package::AlignUp(static_cast<int64_t>(file.size())), '\0');
  const Sha256Bytes trailer = Sha256(file);
  file.append(reinterpret_cast<const char*>(trailer.data()), trailer.size());
  out.digest = ContentDigest(file);
  out.llvm_ir = std::move(object.llvm_ir);
  return out;
}

}  // namespace kiln
