// "matmul" workloads: the analysis of MatMul/Gemm + elementwise epilogue, the
// schedule space, and the lowering to a tiled, packed, register-blocked loop
// nest (see lower_matmul.h).
#include "compiler_core/codegen/loop_ir/lower_matmul.h"
#include "compiler_core/codegen/loop_ir/verifier.h"
#include "compiler_core/codegen/loop_ir/substitute.h"

#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "compiler_core/codegen/loop_ir/graph_expr.h"
#include "compiler_core/codegen/loop_ir/lower_common.h"
#include "compiler_core/codegen/loop_ir/llvm_lowering.h"
#include "compiler_core/frontend/op_registry.h"
#include "compiler_core/frontend/ops/matmul_panels.h"

namespace kiln::loop_ir {
namespace {

constexpr int kMaxRank = 6;
constexpr int64_t kMaxElements = int64_t{1} << 40;

bool IsPackedMatMul(const Node& n) { return n.op_type() == "PackedMatMul" && n.domain() == kKilnDomain; }

std::string DimsToString(const std::vector<int64_t>& d) {
  return absl::StrCat("[", absl::StrJoin(d, ","), "]");
}

absl::StatusOr<std::vector<int64_t>> Broadcast(const Node& node, const std::vector<int64_t>& a,
                                               const std::vector<int64_t>& b) {
  size_t r = std::max(a.size(), b.size());
  std::vector<int64_t> out(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da != db && da != 1 && db != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("node ", node.name(), " (", node.op_type(), "): shapes ", DimsToString(a),
                       " and ", DimsToString(b), " do not broadcast"));
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

// Strides of `in` (row-major, dense) seen through broadcasting to `out`.
std::vector<int64_t> BroadcastStrides(const std::vector<int64_t>& in, const std::vector<int64_t>& out) {
  size_t r = out.size();
  std::vector<int64_t> strides(r, 0);
  int64_t s = 1;
  for (size_t i = in.size(); i-- > 0;) {
    size_t d = i + (r - in.size());
    strides[d] = in[i] == 1 ? 0 : s;
    s *= in[i];
  }
  return strides;
}

// True when `in` broadcasts to `out` without changing it.
bool BroadcastsTo(const std::vector<int64_t>& in, const std::vector<int64_t>& out) {
  if (in.size() > out.size()) return false;
  for (size_t i = 0; i < in.size(); ++i) {
    int64_t o = out[i + out.size() - in.size()];
    if (in[i] != 1 && in[i] != o) return false;
  }
  return true;
}

absl::Status AnalyzeAnchor(const Node& node, const std::vector<std::vector<int64_t>>& in_dims,
                           MatMulSpec* spec, std::vector<int64_t>* out_dims) {
  auto error = [&](const std::string& why) {
    return absl::InvalidArgumentError(
        absl::StrCat("node ", node.name(), " (", node.op_type(), "): ", why));
  };
  const std::vector<int64_t>& a = in_dims[0];
  std::vector<int64_t> b = in_dims[1];
  const bool packed = IsPackedMatMul(node);
  if (packed) {  // Bp [P, K, L] holds B [K, n]: a Gemm with a 2-D A, else a MatMul
    const int64_t n = node.GetInt("n", 0);
    if (!ops::HoldsColumns(b, n)) {
      return error(absl::StrCat("packed B ", DimsToString(b), " does not hold n=", n, " columns in [P, K, L] panels"));
    }
    spec->b_panel = b[2];
    b = {b[1], n};
  }
  if (node.op_type() == "Gemm" ||
      (packed && ops::PackedProductIsGemm(a.size(), in_dims.size() > 2, node.GetInt("transA", 0) != 0))) {
    if (a.size() != 2 || b.size() != 2) {
      return error(absl::StrCat("Gemm needs 2-D A and B, got ", DimsToString(a), " and ", DimsToString(b)));
    }
    bool ta = node.GetInt("transA", 0) != 0, tb = node.GetInt("transB", 0) != 0;
    spec->m = ta ? a[1] : a[0];
    spec->k = ta ? a[0] : a[1];
    int64_t kb = tb ? b[1] : b[0];
    spec->n = tb ? b[0] : b[1];
    if (kb != spec->k) {
      return error(absl::StrCat("inner dimensions differ: A ", DimsToString(a), " B ", DimsToString(b),
                                " transA=", ta, " transB=", tb));
    }
    spec->a_stride_m = ta ? 1 : spec->k;
    spec->a_stride_k = ta ? spec->m : 1;
    spec->b_stride_k = tb ? 1 : spec->n;
    spec->b_stride_n = tb ? spec->k : 1;
    spec->alpha = node.GetFloat("alpha", 1.0f);
    spec->beta = node.GetFloat("beta", 1.0f);
    spec->has_c = in_dims.size() > 2;
    if (spec->has_c) {
      const std::vector<int64_t>& c = in_dims[2];
      if (c.size() > 2) return error(absl::StrCat("C of rank ", c.size(), " does not broadcast to [M,N]"));
      int64_t c0 = c.size() == 2 ? c[0] : 1;
      int64_t c1 = c.empty() ? 1 : c.back();
      if ((c0 != 1 && c0 != spec->m) || (c1 != 1 && c1 != spec->n)) {
        return error(absl::StrCat("C ", DimsToString(c), " does not broadcast to [", spec->m, ",",
                                  spec->n, "]"));
      }
      spec->c_stride_m = c0 == 1 ? 0 : c1;
      spec->c_stride_n = c1 == 1 ? 0 : 1;
    }
    *out_dims = {spec->m, spec->n};
    return absl::OkStatus();
  }
  // MatMul, numpy semantics.
  if (a.empty() || b.empty()) return error("MatMul operands must have rank >= 1");
  bool a1 = a.size() == 1, b1 = b.size() == 1;
  spec->m = a1 ? 1 : a[a.size() - 2];
  spec->k = a.back();
  int64_t kb = b1 ? b[0] : b[b.size() - 2];
  spec->n = b1 ? 1 : b.back();
  if (kb != spec->k) {
    return error(absl::StrCat("inner dimensions differ: ", DimsToString(a), " x ", DimsToString(b)));
  }
  spec->a_stride_m = a1 ? 0 : spec->k;
  spec->a_stride_k = 1;
  spec->b_stride_k = b1 ? 1 : spec->n;
  spec->b_stride_n = 1;
  std::vector<int64_t> ab(a.begin(), a1 ? a.end() - 1 : a.end() - 2);
  std::vector<int64_t> bb(b.begin(), b1 ? b.end() - 1 : b.end() - 2);
  ASSIGN_OR_RETURN(spec->batch_dims, Broadcast(node, ab, bb));
  // Batch strides in elements: each batch of A is an M x K matrix.
  spec->a_batch_strides = BroadcastStrides(ab, spec->batch_dims);
  spec->b_batch_strides = BroadcastStrides(bb, spec->batch_dims);
  for (auto& s : spec->a_batch_strides) s *= spec->m * spec->k;
  for (auto& s : spec->b_batch_strides) s *= spec->k * spec->n;
  *out_dims = spec->batch_dims;
  if (!a1) out_dims->push_back(spec->m);
  if (!b1) out_dims->push_back(spec->n);
  spec->has_m_dim = !a1;
  spec->has_n_dim = !b1;
  // One B for every batch of a contiguous A: the batches are rows of one
  // taller matrix (a batch of single rows is otherwise a run of matrix-vector
  // products).
  bool b_shared = !spec->batch_dims.empty() && !a1 && ab == spec->batch_dims;
  for (int64_t st : spec->b_batch_strides) b_shared = b_shared && st == 0;
  if (b_shared) {
    spec->folded_batch_dims = spec->batch_dims;
    spec->m_rows = spec->m;
    spec->m *= NumElements(spec->batch_dims);
    spec->batch_dims.clear();
    spec->a_batch_strides.clear();
    spec->b_batch_strides.clear();
  }
  return absl::OkStatus();
}


// "MatMul+Add+Relu": the workload's operators, for messages.
std::string OpSummary(const Graph& g) {
  std::vector<std::string> ops;
  for (const auto& n : g.nodes()) ops.push_back(n->op_type());
  return absl::StrJoin(ops, "+");
}

}  // namespace

int64_t MatMulSpec::num_batches() const { return NumElements(batch_dims); }

absl::StatusOr<MatMulSpec> AnalyzeMatMul(const Graph& workload) {
  if (workload.nodes().empty() || workload.outputs().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("workload graph ", workload.name(), " has no nodes or no outputs"));
  }
  // Operators first: a workload that is no matmul is UNIMPLEMENTED whatever
  // else is wrong with it.
  const Node* anchor = nullptr;
  for (const auto& n : workload.nodes()) {
    const std::string& op = n->op_type();
    const bool product = IsPackedMatMul(*n) || (n->domain().empty() && (op == "MatMul" || op == "Gemm"));
    if (!product && !n->domain().empty()) {
      return absl::UnimplementedError(absl::StrCat("node ", n->name(), ": operator ", n->domain(), ".", op,
                                                   " has no CPU codegen"));
    }
    if (product) {
      if (anchor != nullptr) {
        return absl::UnimplementedError(absl::StrCat("node ", n->name(), " (", op,
                                                     "): a workload fuses at most one MatMul/Gemm (",
                                                     anchor->name(), " is the first)"));
      }
      anchor = n.get();
      continue;
    }
    // BatchNormalization broadcasts per channel, not as numpy does; the
    // batchnorm-folding pass folds it into the anchor's weights instead.
    if (!IsInlinableElementwise(op) || op == "BatchNormalization") {
      return absl::UnimplementedError(
          absl::StrCat("node ", n->name(), " (", op, "): not an elementwise epilogue operator"));
    }
    RETURN_IF_ERROR(GraphExpr::CheckNode(*n));
  }
  if (anchor == nullptr) {
    return absl::UnimplementedError(absl::StrCat("workload ", workload.name(), " has no MatMul or Gemm anchor"));
  }
  MatMulSpec spec;
  spec.anchor = anchor;

  // Workload inputs: static f32 buffers of sane size.
  std::map<const Value*, std::vector<int64_t>> dims_of;
  std::map<const Value*, int> input_index;
  for (size_t i = 0; i < workload.inputs().size(); ++i) {
    const Value* v = workload.inputs()[i];
    auto error = [&](const std::string& why) {
      return absl::InvalidArgumentError(absl::StrCat("workload input ", v->name(), ": ", why));
    };
    if (!v->type().known || !v->type().IsStatic() || v->type().dtype != DType::kFloat32) {
      return error(absl::StrCat("has type ", v->type().ToString(), ", want static f32"));
    }
    std::vector<int64_t> dims = v->type().StaticDims();
    if (dims.size() > kMaxRank) return error(absl::StrCat("has rank ", dims.size(), " > ", kMaxRank));
    for (int64_t d : dims) {
      if (d < 0 || d > kMaxElements) return error(absl::StrCat("has a bad dim ", d));
    }
    if (NumElements(dims) > kMaxElements) return error("is too large");
    dims_of[v] = std::move(dims);
    input_index[v] = static_cast<int>(i);
  }

  // Nodes in order: every read value is a workload input or computed earlier;
  // output dims follow from broadcasting (epilogue) or the anchor's shapes.
  for (const auto& np : workload.nodes()) {
    const Node& node = *np;
    const std::string& op = node.op_type();
    auto error = [&](const std::string& why) {
      return absl::InvalidArgumentError(absl::StrCat("node ", node.name(), " (", op, "): ", why));
    };
    const bool is_anchor = &node == anchor;
    std::vector<Value*> inputs = node.inputs();
    while (!inputs.empty() && inputs.back() == nullptr) inputs.pop_back();
    if (is_anchor) {
      size_t max_inputs = op == "MatMul" ? 2 : 3;
      if (inputs.size() < 2 || inputs.size() > max_inputs) {
        return error(absl::StrCat("has ", inputs.size(), " inputs, want 2", max_inputs == 3 ? "..3" : ""));
      }
    }
    if (node.num_outputs() != 1 || node.output(0) == nullptr) return error("must have exactly one output");
    std::vector<std::vector<int64_t>> in_dims;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Value* v = inputs[i];
      if (v == nullptr) {
        if (op == "Clip" && i > 0) {
          in_dims.emplace_back();
          continue;
        }
        return error(absl::StrCat("input ", i, " is omitted"));
      }
      auto it = dims_of.find(v);
      if (v->is_constant() || it == dims_of.end()) {
        return error(absl::StrCat("input ", v->name(),
                                  " is neither a workload graph input nor computed by an earlier node"));
      }
      if (is_anchor && input_index.count(v) == 0) {
        return error(absl::StrCat("input ", v->name(), " is not a workload graph input"));
      }
      in_dims.push_back(it->second);
    }
    std::vector<int64_t> out_dims;
    if (is_anchor) {
      spec.a_arg = input_index[inputs[0]];
      spec.b_arg = input_index[inputs[1]];
      if (inputs.size() > 2) spec.c_arg = input_index[inputs[2]];
      RETURN_IF_ERROR(AnalyzeAnchor(node, in_dims, &spec, &out_dims));
      spec.out_dims = out_dims;
    } else if (op == "Clip") {
      out_dims = in_dims[0];
    } else {
      out_dims = in_dims[0];
      for (size_t i = 1; i < in_dims.size(); ++i) {
        ASSIGN_OR_RETURN(out_dims, Broadcast(node, out_dims, in_dims[i]));
      }
    }
    if (NumElements(out_dims) > kMaxElements) return error("output is too large");
    const Value* out = node.output(0);
    if (out->type().known) {
      if (out->type().dtype != DType::kFloat32 || !out->type().IsStatic() ||
          out->type().StaticDims() != out_dims) {
        return error(absl::StrCat("output ", out->name(), " has type ", out->type().ToString(),
                                  ", want f32", DimsToString(out_dims)));
      }
    }
    if (dims_of.count(out) > 0) return error(absl::StrCat("output ", out->name(), " is defined twice"));
    dims_of[out] = std::move(out_dims);
  }

  // Every output is of the anchor's shape, every epilogue value broadcasts to it.
  const std::vector<int64_t>& full = spec.out_dims;
  for (size_t j = 0; j < workload.outputs().size(); ++j) {
    const Value* v = workload.outputs()[j];
    if (v == nullptr || v->producer() == nullptr || input_index.count(v) > 0 || dims_of.count(v) == 0) {
      return absl::UnimplementedError(absl::StrCat("workload graph ", workload.name(), ": output ", j,
                                                   " is not computed by a node of the workload"));
    }
    if (dims_of[v] != full) {
      return absl::UnimplementedError(absl::StrCat(
          "workload graph ", workload.name(), ": output ", v->name(), " ", DimsToString(dims_of[v]),
          " differs from the kernel's iteration shape ", DimsToString(full)));
    }
  }
  for (const auto& np : workload.nodes()) {
    if (np.get() == anchor) continue;
    const Value* v = np->output(0);
    if (!BroadcastsTo(dims_of[v], full)) {
      return absl::UnimplementedError(absl::StrCat("node ", np->name(), " (", np->op_type(), "): result ",
                                                   DimsToString(dims_of[v]),
                                                   " is larger than the kernel's iteration shape ",
                                                   DimsToString(full)));
    }
  }
  return spec;
}

namespace {

// Keeps the first candidate and each next one while the previous one did not
// yet cover `extent` (a larger one would only repeat it).
std::vector<int64_t> Useful(const std::vector<int64_t>& candidates, int64_t unit, int64_t extent) {
  std::vector<int64_t> out;
  for (int64_t c : candidates) {
    if (!out.empty() && out.back() * unit >= extent) break;
    out.push_back(c);
  }
  return out;
}


// Whether an mr x nr register block fits the register file: accumulators,
// B vectors and one broadcast A.
bool BlockFitsRegisters(int64_t mr, int64_t nr, const CpuTarget& target) {
  return mr * nr + nr + 1 <= target.NumVectorRegisters();
}

// The register-block grid (mr x nr x ku), without blocking knobs.
std::vector<ScheduleConfig> MatMulRegisterBlocks(const MatMulSpec& s, const CpuTarget& target) {
  int64_t lanes = target.FloatLanes();
  std::vector<ScheduleConfig> out;
  for (int64_t mr : Useful({1, 2, 4, 6, 8, 12}, 1, s.m)) {
    for (int64_t nr : Useful({1, 2, 3, 4}, lanes, s.n)) {
      if (!BlockFitsRegisters(mr, nr, target)) continue;
      for (int64_t ku : Useful({1, 4}, 1, s.k)) {
        ScheduleConfig c;
        c.Set("mr", mr);
        c.Set("nr", nr);
        c.Set("ku", ku);
        out.push_back(c);
      }
    }
  }
  return out;
}

// At most this many rows are one or two row tasks: the space then also
// splits the columns (nc) so that threads have tasks.
constexpr int64_t kFewRows = 64;

// Rows from which a 32-register target's default packs B again (DefaultMatMul).
constexpr int64_t kPackManyRows = 256;

// One row of A and B's columns contiguous: the row-streaming GEMV variant
// applies.
bool GemvApplies(const MatMulSpec& s) { return s.m == 1 && s.b_panel == 0 && s.b_stride_n == 1; }

// Columns a GEMV task may accumulate on its stack (32 KiB).
constexpr int64_t kMaxGemvColumns = 8192;

// One row of A and B's K contiguous (Gemm transB=1, weights [N, K] as a
// Linear layer stores them): the dot-form GEMV (gv=2) applies: every output
// column is a dot product of A's row with one contiguous row of B.
bool GemvDotApplies(const MatMulSpec& s) { return s.m == 1 && s.b_panel == 0 && s.b_stride_k == 1 && s.n > 1; }

// Half of a GEMV's columns, in whole 16-column runs: two tasks.
int64_t HalfColumns(int64_t n) { return CeilDiv(CeilDiv(n, 2), 16) * 16; }

// GEMV points of variant gv (mr = nr = 1): each ku with all columns (nc 0)
// or nc per task, nc below N (each nc once).
std::vector<ScheduleConfig> GemvGrid(int64_t gv, const std::vector<int64_t>& ncs, const std::vector<int64_t>& kus,
                                     int64_t n) {
  std::vector<ScheduleConfig> out;
  for (size_t i = 0; i < ncs.size(); ++i) {
    const int64_t nc = ncs[i];
    if (nc >= n || std::find(ncs.begin(), ncs.begin() + i, nc) != ncs.begin() + i) continue;
    for (int64_t ku : kus) {
      ScheduleConfig c;
      c.Set("gv", gv);
      c.Set("mr", 1);
      c.Set("nr", 1);
      c.Set("ku", ku);
      if (nc > 0) c.Set("nc", nc);
      out.push_back(c);
    }
  }
  return out;
}

// Dot-form GEMV points: ku columns per block (ku rows of B streamed
// together), all columns or nc per task.
std::vector<ScheduleConfig> GemvDotPoints(const MatMulSpec& s) {
  if (!GemvDotApplies(s) || s.k * s.n * 4 <= 32 * 1024) return {};
  return GemvGrid(2, {0, 256, 512, HalfColumns(s.n)}, {2, 4, 8}, s.n);
}

// GEMV points: ku rows of B per pass, all columns (up to kMaxGemvColumns) or
// nc per task. Only for a B beyond an L1 (smaller, the register tiles hold
// it anyway).
std::vector<ScheduleConfig> GemvPoints(const MatMulSpec& s) {
  if (!GemvApplies(s) || s.k * s.n * 4 <= 32 * 1024) return {};
  std::vector<int64_t> ncs = {256, 512, 1024};
  if (s.n <= kMaxGemvColumns) ncs.insert(ncs.begin(), 0);
  if (s.n <= 1024) ncs.push_back(HalfColumns(s.n));
  return GemvGrid(1, ncs, Useful({1, 2, 4, 8}, 1, s.k), s.n);
}

// B larger than an L2 (PackFromBytes) and more rows than kFewRows: worth
// packing. Fewer
// rows read B in place once, in one row block, and packing it first costs
// about as much again while B stays near an L2's size (25 x 240 by 240 x
// 1280, 1.2 MB: 0.074 ms in place, 0.083 packed; LeViT's 49 x 256 by 256 x
// 1280: 0.149 and 0.144). From kPackFewRowsBytes on, 8 rows or more gain
// from packing: B's rows are kilobytes apart, and a register tile's K walk
// in place touches a new page and cache line at every row where packed
// panels are contiguous (Zen 5, 1 thread, in place -> packed: a
// bidirectional LSTM's input projection 33 x 512 by 512 x 2048 0.69 -> 0.43
// ms, 33 x 256 by 256 x 2048 0.34 -> 0.21, 8 x 256 by 256 x 2048 0.119 ->
// 0.097; but 4 x 512 by 512 x 1024 0.036 -> 0.039); any rows from
// kPackAnyRowsBytes on (8 x 1024 by 1024 x 4096: 4.2 -> 1.9 ms on Zen 4).
constexpr int64_t kPackFewRowsBytes = int64_t{2} << 20;
constexpr int64_t kPackAnyRowsBytes = int64_t{4} << 20;

// The B size from which packing pays: the whole L2 on the 1 MiB L2s of Zen 4
// and 5, where it was measured; on smaller L2s three quarters of it, since A's
// rows and C's tiles stream through it too (Zen 3, 512 KiB, 1 thread, in
// place -> packed: ViT's 197 x 192 by 192 x 768 with GELU, 590 KB, 1.08 ->
// 0.82 ms; 197 x 192 by 192 x 576, 442 KB, 0.56 -> 0.52).
int64_t PackFromBytes(const CpuTarget& target) {
  const int64_t l2 = target.L2Bytes();
  return l2 >= (int64_t{1} << 20) ? l2 : l2 / 4 * 3;
}

bool WantsPacking(const MatMulSpec& s, const CpuTarget& target) {
  const int64_t b_bytes = s.k * s.n * 4;
  return b_bytes > PackFromBytes(target) &&
         (s.m > kFewRows || (s.m >= 8 && b_bytes >= kPackFewRowsBytes) || b_bytes > kPackAnyRowsBytes);
}

// EvenShareRank of the tasks of point `c`: each task's rows times columns,
// in task order (batch, row block, column block); 3 past 4096 tasks.
int TaskShareRank(const MatMulSpec& s, const ScheduleConfig& c, const CpuTarget& target) {
  const MatMulTiling t = TileMatMul(s, c, target);
  if (t.num_tasks > 4096) return 3;
  std::vector<int64_t> work;
  work.reserve(t.num_tasks);
  for (int64_t b = 0; b < s.num_batches(); ++b) {
    for (int64_t rb = 0; rb < t.row_blocks; ++rb) {
      for (int64_t cb = 0; cb < t.col_blocks; ++cb) {
        work.push_back(std::min(t.rows_per_task, s.m - rb * t.rows_per_task) *
                       std::min(t.cols_per_task, s.n - cb * t.cols_per_task));
      }
    }
  }
  return EvenShareRank(work);
}

// Of `options` (in order of preference), the first of the highest
// TaskShareRank.
ScheduleConfig MostEven(const MatMulSpec& s, const std::vector<ScheduleConfig>& options, const CpuTarget& target) {
  return BestBy(options, [&](const ScheduleConfig& c) { return TaskShareRank(s, c, target); });
}

// `reg` with K blocking kc and rows per task mc (0: default), in column
// blocks of the widest width whose packed B fits kMaxPackedBytes, or of down
// to half of it where that splits the tasks more evenly between threads (a
// GRU's 1536 columns: 7 blocks of 240 run 4 against 3 on two threads, 8 of
// 192 run 4 against 4).
ScheduleConfig PackedVariant(const MatMulSpec& s, const ScheduleConfig& reg, int64_t kc, int64_t mc,
                             const CpuTarget& target) {
  ScheduleConfig c = reg;
  const int64_t nb = reg.Get("nr", 2) * target.FloatLanes();
  const int64_t widest = kMaxPackedBytes / 4 / kc / nb;  // panels
  c.Set("kc", kc);
  if (mc > 0) c.Set("mc", mc);
  if (widest * nb >= CeilDiv(s.n, nb) * nb) return c;
  std::vector<ScheduleConfig> options;
  for (int64_t panels = widest; panels >= std::max<int64_t>(1, CeilDiv(widest, 2)); --panels) {
    ScheduleConfig o = c;
    o.Set("nc", panels * nb);
    options.push_back(o);
  }
  return MostEven(s, options, target);
}

// Rows per task of a register block of mr rows when no mc is set.
int64_t DefaultTaskRows(int64_t mr) { return mr * std::max<int64_t>(1, 32 / mr); }

// Up to this many rows a matmul's space also has one row block of all its
// rows, its columns split in `parts` (SplitColumns).
constexpr int64_t kOneRowBlockRows = 128;

// Register block `reg` over all of the rows in one row block, its columns in
// `parts` column blocks of whole panels; no nc where there are fewer panels
// than parts.
ScheduleConfig SplitColumns(const MatMulSpec& s, const ScheduleConfig& reg, int64_t parts,
                            const CpuTarget& target) {
  ScheduleConfig c = reg;
  const int64_t mr = reg.Get("mr", 6);
  const int64_t nb = reg.Get("nr", 2) * target.FloatLanes();
  const int64_t panels = CeilDiv(s.n, nb);
  c.Set("mc", CeilDiv(s.m, mr) * mr);
  if (panels >= parts) c.Set("nc", CeilDiv(panels, parts) * nb);
  return c;
}

std::vector<ScheduleConfig> EnumerateMatMul(const MatMulSpec& s, const CpuTarget& target) {
  std::vector<ScheduleConfig> base = MatMulRegisterBlocks(s, target);
  std::vector<ScheduleConfig> out = base;
  if (s.m <= kFewRows) {
    // Few rows (GEMV, a pointwise conv's pixels): column blocks give threads
    // tasks; B streams once, no packing.
    for (int64_t nc : {128, 256, 512}) {
      if (nc >= s.n) continue;
      for (ScheduleConfig c : base) {
        c.Set("nc", nc);
        out.push_back(c);
      }
    }
  }
  if (s.m > kFewRows) {
    // Row tasks of one or two register blocks of 4 rows or more: tasks that
    // threads share evenly.
    for (ScheduleConfig c : base) {
      const int64_t mr = c.Get("mr", 6);
      if (mr < 4) continue;
      for (int64_t blocks : {1, 2}) {
        if (mr * blocks >= DefaultTaskRows(mr)) continue;
        c.Set("mc", mr * blocks);
        out.push_back(c);
      }
    }
  }
  if (s.m > kFewRows && s.m <= kOneRowBlockRows) {
    // All rows in one row block, the columns in halves or quarters: tasks
    // that threads share evenly whatever the rows, each reading its part of
    // B once (SplitColumns).
    for (const ScheduleConfig& c : base) {
      if (c.Get("mr", 6) < 4) continue;
      for (int64_t parts : {2, 4}) {
        ScheduleConfig split = SplitColumns(s, c, parts, target);
        if (split.Get("nc", 0) > 0) out.push_back(split);
      }
    }
  }
  for (const ScheduleConfig& c : GemvPoints(s)) out.push_back(c);
  for (const ScheduleConfig& c : GemvDotPoints(s)) out.push_back(c);
  if (WantsPacking(s, target)) {
    for (const ScheduleConfig& reg : base) {
      int64_t mr = reg.Get("mr", 6), nr = reg.Get("nr", 2);
      if (mr < 4 || mr * nr < 12) continue;  // too little reuse per packed panel
      for (int64_t kc : Useful({128, 256, 512}, 1, s.k)) {
        std::vector<int64_t> mcs = {0};
        for (int64_t mc : Useful({128, 256}, 1, s.m)) {
          if (mc > 32) mcs.push_back(mc);
        }
        for (int64_t mc : mcs) out.push_back(PackedVariant(s, reg, kc, mc, target));
      }
    }
  }
  return out;
}

// The point of `space` closest to `want` (knob by knob, largest value not above
// the wanted one, else the smallest).
ScheduleConfig Closest(const std::vector<ScheduleConfig>& space, const ScheduleConfig& want) {
  if (space.empty()) return {};
  ScheduleConfig best = space.front();
  auto score = [&](const ScheduleConfig& c) {
    // Lexicographic over knobs in `want` order of importance: fewer overshoots, then closeness.
    int64_t over = 0, dist = 0;
    for (const auto& [k, v] : want.knobs) {
      int64_t x = c.Get(k, v);
      if (x > v) over += 1;
      dist += (x > v ? x - v : v - x) * 1000 / std::max<int64_t>(v, 1);
    }
    return std::make_pair(over, dist);
  };
  for (const ScheduleConfig& c : space) {
    if (score(c) < score(best)) best = c;
  }
  return best;
}

ScheduleConfig DefaultMatMul(const MatMulSpec& s, const CpuTarget& target) {
  // About 12 accumulators: enough independent FMAs to cover their latency on
  // both pipes. One vector of columns (a Winograd GEMM over 16 tiles, a thin
  // N) takes them all in rows.
  // A GEMV (one row) has only nr accumulator chains: 4 keep the FMA latency
  // covered (1x1000x1280 with B in cache: nr=2 28, nr=4 33 GFLOP/s).
  const bool one_vector = s.n <= target.FloatLanes();
  // A GEMV with B beyond the caches streams it: whole rows read best at one
  // thread (1280x1000 in mobilenet_v3: 0.29 ms, 256-column tasks 0.36), two
  // half rows nearly as well and in parallel at two (0.20 ms): 512-column
  // tasks, or two halves up to 1024 columns. Eight rows a pass, so that the
  // accumulators are loaded and stored once per eight rows of B, not four
  // (Zen 3, keras MobileNetV2's 1280 x 1000 in the model: 0.56 -> 0.42 ms
  // at 1 thread, 0.29 -> 0.20 at 2).
  if (GemvApplies(s) && s.k * s.n * 4 > kGemvStreamBytes) {
    ScheduleConfig gemv;
    gemv.Set("gv", 1);
    gemv.Set("mr", 1);
    gemv.Set("nr", 1);
    gemv.Set("ku", Useful({1, 2, 4, 8}, 1, s.k).back());
    if (s.n > 512) gemv.Set("nc", s.n > 1024 ? 512 : HalfColumns(s.n));
    return gemv;
  }
  // The same over B's rows when its K is contiguous: each task streams whole
  // rows, contiguous memory (1000x1280 of a classifier head: 0.20 ms at one
  // thread where the transposed copy streamed by row took 0.29). A task's
  // rows are contiguous however few: 512-column tasks, or two halves up to
  // 1024 columns (VGG's 25088 -> 256 head, 26 MB, in one task left the
  // second thread idle). Eight rows of B a pass, each A vector loaded once
  // for eight multiply-adds (Zen 3, 1 thread, in the models: MNASNet's
  // 1280 -> 1000 head 0.42 -> 0.31 ms, six other heads 1.03-1.10x faster,
  // VGG-11's two 4096-column heads 1.63 -> 1.72 ms).
  if (GemvDotApplies(s) && s.k * s.n * 4 > kGemvStreamBytes) {
    ScheduleConfig dot;
    dot.Set("gv", 2);
    dot.Set("mr", 1);
    dot.Set("nr", 1);
    dot.Set("ku", 8);
    if (s.n > 1024) {
      dot.Set("nc", 512);
    } else if (HalfColumns(s.n) < s.n) {
      dot.Set("nc", HalfColumns(s.n));
    }
    return dot;
  }
  // With 32 vector registers, 8 rows by 3 vectors (24 accumulators, 11
  // loads per 24 FMAs) and no unroll of K: over 15 shapes (transformer
  // projections and MLPs of 128-384 rows, Winograd's batched products, an
  // attention product, 1024^3), tuned through their whole spaces on Zen 5
  // at 1 thread, it came within 1.07x of each shape's best, where 6 x 2 by
  // 4 came 1.02-1.85x (16 rows in 6-row blocks: 1.85x).
  // Three vectors only where they cover as many columns in whole panels as
  // two do: a narrower tail tile is lane-masked and keeps its accumulators
  // in memory (a Winograd product of N = 34 columns all in one 3-vector
  // tail: 1.32 ms; 2 vectors and a 2-column tail: 0.93).
  const bool wide = target.NumVectorRegisters() >= 32;
  const int64_t lanes = target.FloatLanes();
  const bool three = s.n / (3 * lanes) * 3 >= s.n / (2 * lanes) * 2;
  ScheduleConfig want;
  want.Set("mr", one_vector ? 12 : wide ? 8 : 6);
  want.Set("nr", one_vector ? 1 : s.m == 1 ? 4 : wide && three ? 3 : 2);
  want.Set("ku", wide && !one_vector && s.m > 1 ? 1 : 4);
  ScheduleConfig reg = Closest(MatMulRegisterBlocks(s, target), want);
  ScheduleConfig blocked = reg;
  // That block reads a B of up to kPackAnyRowsBytes in place faster than
  // packed below kPackManyRows rows (128 x 768 by 768 x 768: 0.53 ms in
  // place, 0.60 packed); from there packing pays for itself again (1024^3:
  // 1.04x and 1.01x of the best), and so it does for a larger B read by a
  // GRU's 100 rows (100 x 1312 by 1312 x 1536: 2.74 ms in place, 2.22
  // packed in one row block).
  const bool in_place = wide && s.m > kFewRows && s.m < kPackManyRows && s.k * s.n * 4 <= kPackAnyRowsBytes;
  if (WantsPacking(s, target) && !in_place) {
    // Every row block packs B's panels again: up to 256 rows take one row
    // block when the column blocks alone make 4 tasks or more (a GRU's input
    // projection, 100 x 1312 by 1312 x 1536: 30-row tasks packed B four
    // times, 5.5 ms; one row block 4.1); up to kFewRows rows one row block always (32 x 768
    // by 768 x 3072: 30 + 2 rows 2.54 ms, 32 rows 1.95);
    // else 128-row blocks past 128 rows.
    const int64_t kc = std::min<int64_t>(256, Useful({128, 256}, 1, s.k).back());
    const std::vector<int64_t> mcs = Useful({128, 256}, 1, s.m);
    blocked = PackedVariant(s, reg, kc, s.m > 128 ? 128 : 0, target);
    ScheduleConfig one_block = PackedVariant(s, reg, kc, mcs.back(), target);
    if (s.m <= mcs.back() && TileMatMul(s, blocked, target).row_blocks > 1 &&
        (s.m <= kFewRows || TileMatMul(s, one_block, target).col_blocks >= 4)) {
      blocked = one_block;
    }
  } else if (s.m <= kFewRows && s.n > 256) {
    blocked.Set("nc", 256);
  } else if (s.m > kFewRows) {
    // Row tasks that threads share evenly: ViT's 197 rows in 32-row tasks
    // are 7, 4 against 3 on two threads (128 rows against 69); in 8-row
    // tasks 25 (104 against 93). At one thread the task size makes no
    // difference (197 x 192 by 192 x 576: 0.178 ms, 0.176); at two, 0.109
    // -> 0.091 ms (and 197 x 768 by 768 x 192 0.145 -> 0.120).
    // Where no task size of that register block shares evenly, a taller
    // block (as many accumulators or more, so no slower a thread) whose tasks
    // do: ViT's 65 rows in 8-row blocks are 8 blocks and a 1-row tail, 40
    // rows against 25 on two threads however they are cut (in the 32-row
    // tasks before, 64 against 1: no gain from the second thread); in
    // 12-row tasks 36 against 29. Zen 5, 65 x 128 by 128 x 256 under Gelu:
    // 0.019 ms at one thread in either block, at two 0.020 -> 0.011. A
    // shorter block would share as evenly but costs a thread more: a GRU's
    // 100 x 1312 by 1312 x 1536 in 6 x 3 blocks was 1.19x faster at two
    // threads and 1.16x slower at one.
    auto row_tasks = [&](const ScheduleConfig& reg_block, std::vector<ScheduleConfig>& options) {
      options.push_back(reg_block);
      const int64_t mr = reg_block.Get("mr", 6);
      for (int64_t blocks : {2, 1}) {
        if (mr * blocks >= DefaultTaskRows(mr)) continue;
        ScheduleConfig c = reg_block;
        c.Set("mc", mr * blocks);
        options.push_back(c);
      }
    };
    std::vector<ScheduleConfig> options;
    row_tasks(blocked, options);
    blocked = MostEven(s, options, target);
    if (TaskShareRank(s, blocked, target) < 2) {
      const int64_t mr = reg.Get("mr", 6);
      const int64_t nr = reg.Get("nr", 2);
      options = {blocked};
      for (int64_t taller : {8, 12}) {
        if (taller <= mr || taller > s.m || !BlockFitsRegisters(taller, nr, target)) continue;
        ScheduleConfig alt = reg;
        alt.Set("mr", taller);
        row_tasks(alt, options);
      }
      blocked = MostEven(s, options, target);
    }
    // Where no taller block fits (three vectors of columns), all rows in one
    // row block and the columns in halves: ViT-S's 65 x 384 by 384 x 1536
    // under Gelu in 8 x 3 blocks (Zen 5, a group 0.30 -> 0.19 ms at two
    // threads, 0.39 -> 0.37 at one: each half of B is read once, not once
    // per 32-row task).
    if (TaskShareRank(s, blocked, target) < 2 && s.m <= kOneRowBlockRows) {
      options = {blocked, SplitColumns(s, reg, 2, target)};
      blocked = MostEven(s, options, target);
    }
  }
  std::vector<ScheduleConfig> space = EnumerateMatMul(s, target);
  return std::find(space.begin(), space.end(), blocked) != space.end() ? blocked : reg;
}


absl::Status ValidateMatMul(const Graph& workload, const MatMulSpec& spec, const ScheduleConfig& config,
                            const CpuTarget& target) {
  struct Range { const char* key; int64_t lo, hi; };
  const std::vector<Range> ranges = {{"mr", 1, 12},
                                     {"nr", 1, 4},
                                     {"ku", 1, 8},
                                     {"mc", 0, int64_t{1} << 30},
                                     {"nc", 0, int64_t{1} << 30},
                                     {"kc", 0, int64_t{1} << 20},
                                     {"gv", 0, 2}};
  for (const auto& [k, v] : config.knobs) {
    auto it = std::find_if(ranges.begin(), ranges.end(), [&](const Range& r) { return k == r.key; });
    if (it == ranges.end()) {
      return absl::InvalidArgumentError(absl::StrCat("schedule ", config.ToString(), ": knob ", k,
                                                     " does not apply to node ", spec.anchor->name(), " (",
                                                     OpSummary(workload), ")"));
    }
    bool ok = v >= it->lo && v <= it->hi;
    if (!ok) {
      return absl::InvalidArgumentError(absl::StrCat("schedule ", config.ToString(), ": knob ", k, "=",
                                                     v, " out of range for target ", target.Key()));
    }
  }
  MatMulTiling t = TileMatMul(spec, config, target);
  if (t.gemv_dot && (!GemvDotApplies(spec) || t.kc != 0 || t.mr != 1 || t.nr != 1)) {
    return absl::InvalidArgumentError(absl::StrCat("schedule ", config.ToString(),
                                                   ": gv=2 needs one row of A, B's K contiguous, mr=nr=1 and ",
                                                   "no kc (node ", spec.anchor->name(), ")"));
  }
  if (t.gemv && (!GemvApplies(spec) || t.kc != 0 || t.mr != 1 || t.nr != 1 || t.cols_per_task > kMaxGemvColumns)) {
    return absl::InvalidArgumentError(
        absl::StrCat("schedule ", config.ToString(), ": gv=1 needs one row of A, B's columns contiguous, mr=nr=1, ",
                     "no kc and at most ", kMaxGemvColumns, " columns per task (node ", spec.anchor->name(), ")"));
  }
  if (t.pack_floats * 4 > kMaxPackedBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "schedule ", config.ToString(), ": packed B block of kc=", t.kc, " x ", t.cols_per_task,
        " columns needs ", t.pack_floats * 4, " bytes, more than ", kMaxPackedBytes, " (node ",
        spec.anchor->name(), ")"));
  }
  return absl::OkStatus();
}

}  // namespace

MatMulTiling TileMatMul(const MatMulSpec& s, const ScheduleConfig& config, const CpuTarget& target) {
  MatMulTiling t;
  t.mr = config.Get("mr", 6);
  t.nr = config.Get("nr", 2);
  t.ku = config.Get("ku", 4);
  t.nb = t.nr * target.FloatLanes();
  int64_t mc = config.Get("mc", 0);
  t.rows_per_task = mc > 0 ? CeilDiv(mc, t.mr) * t.mr : DefaultTaskRows(t.mr);
  int64_t n_padded = std::max<int64_t>(CeilDiv(s.n, t.nb) * t.nb, t.nb);
  int64_t nc = config.Get("nc", 0);
  t.cols_per_task = nc > 0 ? std::min(CeilDiv(nc, t.nb) * t.nb, n_padded) : n_padded;
  t.kc = config.Get("kc", 0);
  t.gemv = config.Get("gv", 0) == 1;
  t.gemv_dot = config.Get("gv", 0) == 2;
  t.row_blocks = CeilDiv(s.m, t.rows_per_task);
  t.col_blocks = std::max<int64_t>(1, CeilDiv(s.n, t.cols_per_task));
  t.num_tasks = s.num_batches() * t.row_blocks * t.col_blocks;
  t.pack_floats = s.b_panel > 0 ? 0 : t.kc * t.cols_per_task;
  t.cols_outer = t.kc == 0 && !t.gemv && !t.gemv_dot && t.cols_per_task > t.nb &&
                 std::min(t.rows_per_task, s.m) > t.mr && s.k * std::min(t.cols_per_task, s.n) * 4 > kColsOuterBytes;
  const int64_t klen = t.kc > 0 ? std::min(t.kc, s.k) : s.k;
  t.pack_a = !t.gemv && !t.gemv_dot && !t.cols_outer && std::min(t.cols_per_task, s.n) <= 2 * t.nb &&
             t.mr * klen <= kAPackMaxFloats;
  return t;
}

std::vector<Expr> MatMulBatchIndex(const MatMulSpec& s, const Expr& batch) {
  std::vector<Expr> idx(s.batch_dims.size());
  int64_t inner = 1;
  for (size_t d = s.batch_dims.size(); d-- > 0;) {
    Expr i = d == 0 ? Div(batch, IntImm(inner)) : Mod(Div(batch, IntImm(inner)), IntImm(s.batch_dims[d]));
    idx[d] = Simplify(i);
    inner *= s.batch_dims[d];
  }
  return idx;
}

absl::StatusOr<Stmt> MatMulOutputStores(const Graph& g, const MatMulSpec& s, GraphExpr& ge,
                                        const std::vector<Expr>& batch_idx, Expr v, const Expr& mi, const Expr& nj,
                                        const Expr& out_idx) {
  if (s.alpha != 1.0f) v = Mul(v, FloatImm(s.alpha));
  if (s.has_c && s.beta != 0.0f) {
    Expr c = Load(ge.args()[s.c_arg], Add(Mul(mi, IntImm(s.c_stride_m)), Mul(nj, IntImm(s.c_stride_n))));
    if (s.beta != 1.0f) c = Mul(c, FloatImm(s.beta));
    v = Add(v, c);
  }
  std::vector<Expr> index = batch_idx;
  if (!s.folded_batch_dims.empty()) {  // row mi of the folded M: its batch, then its row
    std::vector<Expr> folded;
    Expr rest = Div(mi, IntImm(s.m_rows));
    for (size_t d = s.folded_batch_dims.size(); d-- > 0;) {
      folded.insert(folded.begin(), d == 0 ? rest : Mod(rest, IntImm(s.folded_batch_dims[d])));
      rest = Div(rest, IntImm(s.folded_batch_dims[d]));
    }
    index.insert(index.end(), folded.begin(), folded.end());
    index.push_back(Mod(mi, IntImm(s.m_rows)));
  } else if (s.has_m_dim) {
    index.push_back(mi);
  }
  if (s.has_n_dim) index.push_back(nj);
  // Every read of the anchor's value in the epilogue is the product itself.
  ge.BindValue(s.anchor->output(0), v);
  std::vector<Stmt> stores;
  for (size_t o = 0; o < g.outputs().size(); ++o) {
    ASSIGN_OR_RETURN(Expr e, ge.At(g.outputs()[o], index));
    const Buffer& out = ge.output_buffer(static_cast<int>(o));
    stores.push_back(Store(out, out_idx, Cast(out->dtype, e)));
  }
  return Block(std::move(stores));
}

namespace {

Expr I(int64_t v) { return IntImm(v); }
Expr V(const std::string& name) { return Var(name); }

// How a register tile starts and ends over one K block.
enum class Init { kZero, kPartial, kFirstBlock };  // kFirstBlock: zero when kb == 0, else partial

struct KPart {
  Expr k0;
  int64_t klen = 0;
  Init init = Init::kZero;
  Expr first;          // kFirstBlock: the "no partial sums yet" condition
  bool final = true;   // epilogue and every output; else raw sums into output 0
};

class MatMulBuilder {
 public:
  MatMulBuilder(const Graph& g, const MatMulSpec& spec, const ScheduleConfig& config, const CpuTarget& target)
      : g_(g), s_(spec), t_(TileMatMul(spec, config, target)), ge_(g), lanes_(target.FloatLanes()) {}

  absl::StatusOr<LoopFunc> Build() {
    const Node* anchor = s_.anchor;
    a_ = ge_.args()[s_.a_arg];
    b_ = ge_.args()[s_.b_arg];
    for (size_t j = 0; j < g_.outputs().size(); ++j) outs_.push_back(ge_.output_buffer(static_cast<int>(j)));
    if (t_.num_tasks <= 0) return absl::UnimplementedError(absl::StrCat("node ", anchor->name(), ": empty matmul"));
    nf_ = s_.n / t_.nb * t_.nb;
    if (t_.pack_floats > 0) packed_ = MakeBuffer("packed_b", {t_.pack_floats}, BufferRole::kTemp);

    Expr a_off = I(0), b_off = I(0);
    batch_idx_ = MatMulBatchIndex(s_, V("batch"));
    for (size_t d = 0; d < s_.batch_dims.size(); ++d) {
      if (s_.a_batch_strides[d] != 0) a_off = Add(a_off, Mul(batch_idx_[d], I(s_.a_batch_strides[d])));
      if (s_.b_batch_strides[d] != 0) b_off = Add(b_off, Mul(batch_idx_[d], I(s_.b_batch_strides[d])));
    }
    std::vector<Stmt> parts;
    if (t_.gemv) {
      ASSIGN_OR_RETURN(Stmt p, GemvPart());
      parts.push_back(p);
    } else if (t_.gemv_dot) {
      ASSIGN_OR_RETURN(Stmt p, GemvDotPart());
      parts.push_back(p);
    } else if (t_.kc == 0) {
      ASSIGN_OR_RETURN(Stmt p, Part(KPart{I(0), s_.k, Init::kZero, nullptr, true}));
      parts.push_back(p);
    } else {
      int64_t nk = std::max<int64_t>(1, (s_.k + t_.kc - 1) / t_.kc);
      int64_t last_k0 = (nk - 1) * t_.kc;
      if (nk > 1) {
        ASSIGN_OR_RETURN(Stmt p, Part(KPart{Mul(V("kb"), I(t_.kc)), t_.kc, Init::kFirstBlock, Eq(V("kb"), I(0)), false}));
        parts.push_back(For("kb", I(nk - 1), p));
      }
      ASSIGN_OR_RETURN(Stmt p, Part(KPart{I(last_k0), s_.k - last_k0, nk > 1 ? Init::kPartial : Init::kZero, nullptr, true}));
      parts.push_back(p);
    }
    Stmt body = Block(std::move(parts));
    if (packed_ != nullptr) body = Allocate(packed_, body);
    // Task decomposition: batch, row block, column block.
    int64_t per_batch = t_.row_blocks * t_.col_blocks;
    body = LetStmt("m0", Mul(V("rb"), I(t_.rows_per_task)), LetStmt("n0", Mul(V("cb"), I(t_.cols_per_task)), body));
    body = LetStmt("a_off", Simplify(a_off), LetStmt("b_off", Simplify(b_off), body));
    body = LetStmt("batch", Div(V("task"), I(per_batch)),
                   LetStmt("rb", Div(Mod(V("task"), I(per_batch)), I(t_.col_blocks)),
                           LetStmt("cb", Mod(V("task"), I(t_.col_blocks)), body)));
    LoopFunc f;
    f.name = "matmul";
    f.args = ge_.args();
    f.body = For("task", I(t_.num_tasks), body, ForKind::kParallel);
    RETURN_IF_ERROR(Verify(f));
    return f;
  }

 private:
  // The statements of one K block for the task.
  absl::StatusOr<Stmt> Part(const KPart& kp) {
    std::vector<Stmt> out;
    const int64_t nb = t_.nb, tail = s_.n % nb;
    const int64_t last_cb = t_.col_blocks - 1;
    const int64_t tail_panel = (nf_ - last_cb * t_.cols_per_task) / nb;  // in the last column block
    // Full column panels of the task: a static count when every task has the
    // same, else a guard.
    int64_t panels = t_.cols_per_task / nb;
    bool guard_cols = false;
    if (t_.col_blocks == 1) {
      panels = nf_ / nb;
    } else if (s_.n % t_.cols_per_task != 0) {
      guard_cols = true;
    }
    auto col_n = [&](const Expr& jp) { return Add(V("n0"), Mul(jp, I(nb))); };
    auto col_guard = [&](const Expr& jp, Stmt st) {
      return guard_cols ? IfThen(Le(col_n(jp), I(s_.n - nb)), st) : st;
    };
    auto tail_guard = [&](Stmt st) { return t_.col_blocks == 1 ? st : IfThen(Eq(V("cb"), I(last_cb)), st); };
    if (packed_ != nullptr && kp.klen > 0) {  // K = 0: nothing to pack
      auto pack = [&](const Expr& panel, const Expr& n, int64_t width) {
        Expr src = Add(Add(V("b_off"), Mul(Add(kp.k0, V("kk")), I(s_.b_stride_k))),
                       Mul(Add(n, V("pj")), I(s_.b_stride_n)));
        Expr dst = Add(Add(Mul(panel, I(t_.kc * nb)), Mul(V("kk"), I(nb))), V("pj"));
        return For("kk", I(kp.klen), EachCol(width, "pj", Store(packed_, dst, Load(b_, src))));
      };
      if (panels > 0) out.push_back(For("jp", I(panels), col_guard(V("jp"), pack(V("jp"), col_n(V("jp")), nb))));
      if (tail != 0) out.push_back(tail_guard(pack(I(tail_panel), I(nf_), tail)));
    }
    // One row of tiles: full panels, then the column tail.
    auto tile_row = [&](const Expr& m, int64_t rows, const std::string& tag) -> absl::StatusOr<Stmt> {
      std::vector<Stmt> row;
      packed_a_ = nullptr;
      if (t_.pack_a && kp.klen > 0) packed_a_ = MakeBuffer("packed_a_" + tag, {rows * kp.klen}, BufferRole::kTemp);
      if (packed_a_ != nullptr) row.push_back(PackA(kp, m, rows));
      if (panels > 0) {
        ASSIGN_OR_RETURN(Stmt full, Tile(kp, m, col_n(V("jp")), rows, nb, Mul(V("jp"), I(t_.kc * nb)), tag + "f"));
        row.push_back(For("jp", I(panels), col_guard(V("jp"), full)));
      }
      if (tail != 0) {
        ASSIGN_OR_RETURN(Stmt t, Tile(kp, m, I(nf_), rows, tail, I(tail_panel * t_.kc * nb), tag + "t"));
        row.push_back(tail_guard(t));
      }
      Stmt tiles = Block(std::move(row));
      if (packed_a_ != nullptr) tiles = Allocate(packed_a_, tiles);
      packed_a_ = nullptr;
      return tiles;
    };
    const int64_t mr = t_.mr;
    int64_t row_blocks = t_.rows_per_task / mr;
    bool guard_rows = false;
    if (t_.row_blocks == 1) {
      row_blocks = s_.m / mr;
    } else if (s_.m % t_.rows_per_task != 0) {
      guard_rows = true;
    }
    // `tile` over the task's rows: register tiles of mr rows, then one tile of
    // the M % mr rows left, which reads each B panel once for all of them
    // (LeViT's 16 x 768 by 768 x 384 in 6-row tiles: 4 more passes over B
    // when the last 4 rows went one by one).
    using RowTile = std::function<absl::StatusOr<Stmt>(const Expr& m, int64_t rows, const std::string& tag)>;
    auto each_row = [&](const RowTile& tile) -> absl::StatusOr<Stmt> {
      std::vector<Stmt> rows_out;
      if (row_blocks > 0) {
        Expr m = Add(V("m0"), Mul(V("ib"), I(mr)));
        ASSIGN_OR_RETURN(Stmt r, tile(m, mr, "r"));
        if (guard_rows) r = IfThen(Le(m, I(s_.m - mr)), r);
        rows_out.push_back(For("ib", I(row_blocks), r));
      }
      if (s_.m % mr != 0) {
        ASSIGN_OR_RETURN(Stmt rows, tile(I(s_.m / mr * mr), s_.m % mr, "t"));
        rows_out.push_back(t_.row_blocks == 1 ? rows : IfThen(Eq(V("rb"), I(t_.row_blocks - 1)), rows));
      }
      return Block(std::move(rows_out));
    };
    if (!t_.cols_outer) {
      ASSIGN_OR_RETURN(Stmt rows, each_row(tile_row));
      out.push_back(rows);
      return Block(std::move(out));
    }
    // Column panels outermost (MatMulTiling::cols_outer; B is not packed here).
    if (panels > 0) {
      ASSIGN_OR_RETURN(Stmt col, each_row([&](const Expr& m, int64_t rows, const std::string& tag) {
                         return Tile(kp, m, col_n(V("jp")), rows, nb, Mul(V("jp"), I(t_.kc * nb)), tag + "f");
                       }));
      out.push_back(For("jp", I(panels), col_guard(V("jp"), col)));
    }
    if (tail != 0) {
      ASSIGN_OR_RETURN(Stmt col, each_row([&](const Expr& m, int64_t rows, const std::string& tag) {
                         return Tile(kp, m, I(nf_), rows, tail, I(tail_panel * t_.kc * nb), tag + "t");
                       }));
      out.push_back(tail_guard(col));
    }
    return Block(std::move(out));
  }

  // A's rows [m, m + rows) over kp's K range into packed_a_ (row i at i *
  // klen), row after row, each in whole vectors and then its tail.
  Stmt PackA(const KPart& kp, const Expr& m, int64_t rows) {
    auto copy = [&](const Expr& k) {
      Expr src = Add(Add(V("a_off"), Mul(Add(m, V("ai")), I(s_.a_stride_m))), Mul(Add(kp.k0, k), I(s_.a_stride_k)));
      return Store(packed_a_, Add(Mul(V("ai"), I(kp.klen)), k), Load(a_, src));
    };
    std::vector<Stmt> row;
    const int64_t full = kp.klen / lanes_, rest = kp.klen % lanes_;
    if (full > 0) {
      Stmt vector = For("akl", I(lanes_), copy(Add(Mul(V("akv"), I(lanes_)), V("akl"))), ForKind::kVectorized);
      row.push_back(For("akv", I(full), vector));
    }
    if (rest > 0) row.push_back(For("akl", I(rest), copy(Add(I(full * lanes_), V("akl"))), ForKind::kVectorized));
    return For("ai", I(rows), Block(std::move(row)));
  }

  // `body` over columns `col` in [0, width): an unrolled loop over full vectors
  // of the target's lanes, then one narrower vector for the rest. (A single
  // vectorized loop nr * lanes wide would make LLVM vectors of 48 floats,
  // which the x86 back end legalizes poorly.)
  Stmt EachCol(int64_t width, const std::string& col, const Stmt& body) {
    std::vector<Stmt> out;
    int64_t full = width / lanes_, rest = width % lanes_;
    if (full > 0) {
      Stmt v = For(col + "l", I(lanes_), Substitute(body, col, Add(Mul(V(col + "v"), I(lanes_)), V(col + "l"))),
                   ForKind::kVectorized);
      out.push_back(For(col + "v", I(full), v, ForKind::kUnrolled));
    }
    if (rest > 0) {
      out.push_back(For(col + "l", I(rest), Substitute(body, col, Add(I(full * lanes_), V(col + "l"))),
                        ForKind::kVectorized));
    }
    return out.size() == 1 ? out[0] : Block(std::move(out));
  }

  // The rows x width register tile at (m, n) over kp's K range; `panel`: flat
  // offset of its packed B panel (when B is packed).
  absl::StatusOr<Stmt> Tile(const KPart& kp, const Expr& m, const Expr& n, int64_t rows, int64_t width,
                            const Expr& panel, const std::string& tag) {
    Buffer acc = MakeBuffer("acc_" + tag, {rows, width}, BufferRole::kTemp);
    Expr acc_idx = Add(Mul(V("i"), I(width)), V("j"));
    Expr mi = Add(m, V("i"));
    Expr nj = Add(n, V("j"));
    Expr out_idx = Add(Add(Mul(V("batch"), I(s_.m * s_.n)), Mul(mi, I(s_.n))), nj);
    auto each = [&](Stmt st) { return For("i", I(rows), EachCol(width, "j", st), ForKind::kUnrolled); };
    std::vector<Stmt> body;
    // Init.
    Expr init = FloatImm(0);
    if (kp.init == Init::kPartial) init = Load(outs_[0], out_idx);
    if (kp.init == Init::kFirstBlock) init = Select(kp.first, FloatImm(0), Load(outs_[0], out_idx));
    body.push_back(each(Store(acc, acc_idx, init)));
    // K loop: acc += A[m+i, k0+k] * B[k0+k, n+j].
    auto kstep = [&](const Expr& k) {
      Expr a = packed_a_ != nullptr
                   ? Load(packed_a_, Add(Mul(V("i"), I(kp.klen)), k))
                   : Load(a_, Add(Add(V("a_off"), Mul(mi, I(s_.a_stride_m))), Mul(Add(kp.k0, k), I(s_.a_stride_k))));
      Expr b = packed_ != nullptr ? Load(packed_, Add(Add(panel, Mul(k, I(t_.nb))), V("j"))) : BAt(kp.k0, k, nj);
      return each(Store(acc, acc_idx, Call("fma", {a, b, Load(acc, acc_idx)})));
    };
    int64_t ku = std::max<int64_t>(1, t_.ku);
    int64_t kfull = kp.klen / ku;
    if (kfull > 0) {
      body.push_back(For("ko", I(kfull), For("u", I(ku), kstep(Add(Mul(V("ko"), I(ku)), V("u"))), ForKind::kUnrolled)));
    }
    if (kp.klen % ku != 0) {
      body.push_back(For("kt", I(kp.klen % ku), kstep(Add(I(kfull * ku), V("kt"))), ForKind::kUnrolled));
    }
    // Store: partial sums, or the epilogue of every output.
    Expr v = Load(acc, acc_idx);
    if (!kp.final) {
      body.push_back(each(Store(outs_[0], out_idx, v)));
      return Allocate(acc, Block(std::move(body)));
    }
    ASSIGN_OR_RETURN(Stmt stores, FinalStores(v, mi, nj, out_idx));
    body.push_back(each(stores));
    return Allocate(acc, Block(std::move(body)));
  }

  // B[k0 + k, n] as the model stores it, k0 a K block's first row: at B's
  // strides, or in its panels of b_panel columns (kiln.PackedMatMul). There
  // a vector of a panel row is one contiguous load once the index
  // simplification splits n by the panel width, which it does from the loop
  // extents where n's other terms are multiples of it: the task's first
  // column is spelt out for that (n0 is cb * cols_per_task, a multiple of
  // nb). k0's offset is a term of its own, invariant in the block's loop
  // (scaled as one sum, k0 + k, LLVM built each unrolled step's address anew
  // and spilled accumulators).
  Expr BAt(const Expr& k0, const Expr& k, const Expr& n) {
    const int64_t p = s_.b_panel;
    if (p == 0) return Load(b_, Add(Add(V("b_off"), Mul(Add(k0, k), I(s_.b_stride_k))), Mul(n, I(s_.b_stride_n))));
    const Expr col = Substitute(n, "n0", Mul(V("cb"), I(t_.cols_per_task)));
    const Expr panel = Add(Mul(Div(col, I(p)), I(s_.k * p)), Mul(k0, I(p)));
    return Load(b_, Add(Add(panel, Mul(k, I(p))), Mod(col, I(p))));
  }

  // Every output at (mi, nj) (flat index out_idx) from the product v.
  absl::StatusOr<Stmt> FinalStores(Expr v, const Expr& mi, const Expr& nj, const Expr& out_idx) {
    return MatMulOutputStores(g_, s_, ge_, batch_idx_, std::move(v), mi, nj, out_idx);
  }

  // The dot-form GEMV (gv=2) of one task: its columns n0 + j, ku at a
  // time (fewer in the last block): per column, lane accumulators over K
  // (whole vectors, then the K % lanes tail in a narrower one) of A's row
  // times B's row n0 + j, summed across the lanes in halving steps, then
  // stored through the epilogue.
  absl::StatusOr<Stmt> GemvDotPart() {
    const int64_t ku = std::max<int64_t>(1, t_.ku), cols = t_.cols_per_task, last_cb = t_.col_blocks - 1;
    const int64_t L = lanes_, kv = s_.k / L, kt = s_.k % L;
    Buffer acc = MakeBuffer("acc_gd", {ku * L}, BufferRole::kTemp);
    auto a_at = [&](const Expr& k) { return Load(a_, Add(V("a_off"), Mul(k, I(s_.a_stride_k)))); };
    // Columns j0 .. j0 + r of the task.
    auto block = [&](const Expr& j0, int64_t r) -> absl::StatusOr<Stmt> {
      Expr u = V("gu"), v = V("gl");
      Expr ai = Add(Mul(u, I(L)), v);
      auto lanes = [&](Stmt body, int64_t width) {
        return For("gl", I(width), For("gu", I(r), std::move(body), ForKind::kUnrolled), ForKind::kVectorized);
      };
      Expr nj = Add(Add(V("n0"), j0), u);
      auto mac = [&](const Expr& k) {
        Expr b = Load(b_, Add(Add(V("b_off"), Mul(nj, I(s_.b_stride_n))), k));
        return Store(acc, ai, Call("fma", {a_at(k), b, Load(acc, ai)}));
      };
      std::vector<Stmt> body = {lanes(Store(acc, ai, FloatImm(0)), L)};
      if (kv > 0) body.push_back(For("gk", I(kv), lanes(mac(Add(Mul(V("gk"), I(L)), v)), L)));
      if (kt > 0) body.push_back(lanes(mac(Add(I(kv * L), v)), kt));
      for (int64_t half = L / 2; half >= 1; half /= 2) {
        Expr h = V("gh");
        Expr at = Add(Mul(u, I(L)), h);
        Stmt step = Store(acc, at, Add(Load(acc, at), Load(acc, Add(at, I(half)))));
        body.push_back(For("gu", I(r), For("gh", I(half), step, half > 1 ? ForKind::kVectorized : ForKind::kSerial),
                           ForKind::kUnrolled));
      }
      Expr out_idx = Add(Add(Mul(V("batch"), I(s_.m * s_.n)), Mul(V("m0"), I(s_.n))), nj);
      ASSIGN_OR_RETURN(Stmt st, FinalStores(Load(acc, Mul(u, I(L))), V("m0"), nj, out_idx));
      body.push_back(For("gu", I(r), st, ForKind::kUnrolled));
      return Block(std::move(body));
    };
    // `count` columns: blocks of ku, then the rest.
    auto columns = [&](int64_t count) -> absl::StatusOr<Stmt> {
      std::vector<Stmt> out;
      if (count / ku > 0) {
        ASSIGN_OR_RETURN(Stmt b, block(Mul(V("gb"), I(ku)), ku));
        out.push_back(For("gb", I(count / ku), b));
      }
      if (count % ku > 0) {
        ASSIGN_OR_RETURN(Stmt b, block(I(count / ku * ku), count % ku));
        out.push_back(b);
      }
      return Block(std::move(out));
    };
    const int64_t last = s_.n - last_cb * cols;  // columns of the last task
    ASSIGN_OR_RETURN(Stmt all, columns(std::min(cols, s_.n)));
    Stmt body = all;
    if (t_.col_blocks > 1 && last != cols) {
      ASSIGN_OR_RETURN(Stmt tail, columns(last));
      body = IfThen(Lt(V("cb"), I(last_cb)), all, tail);
    }
    return Allocate(acc, body);
  }

  // The row-streaming GEMV (gv=1) of one task: its columns n0 + j, full
  // vectors then (last task) the N % lanes tail, accumulated in a stack
  // buffer over ku rows of B per pass.
  absl::StatusOr<Stmt> GemvPart() {
    const int64_t cols = t_.cols_per_task, last_cb = t_.col_blocks - 1;
    Buffer acc = MakeBuffer("acc_gv", {cols}, BufferRole::kTemp);
    const int64_t last_full = (nf_ - last_cb * cols) / lanes_;  // full vectors of the last task
    const int64_t tail = s_.n % lanes_;
    // `make(j)` over the task's columns: vectors jv (a task before the last
    // has cols / lanes of them), then the tail.
    auto each_col = [&](const std::function<absl::StatusOr<Stmt>(const Expr&)>& make) -> absl::StatusOr<Stmt> {
      std::vector<Stmt> out;
      ASSIGN_OR_RETURN(Stmt full, make(Add(Mul(V("jv"), I(lanes_)), V("jl"))));
      auto vectors = [&](int64_t count) { return For("jv", I(count), For("jl", I(lanes_), full, ForKind::kVectorized)); };
      if (t_.col_blocks > 1) {
        out.push_back(last_full > 0 ? IfThen(Lt(V("cb"), I(last_cb)), vectors(cols / lanes_), vectors(last_full))
                                    : IfThen(Lt(V("cb"), I(last_cb)), vectors(cols / lanes_)));
      } else if (last_full > 0) {
        out.push_back(vectors(last_full));
      }
      if (tail != 0) {
        ASSIGN_OR_RETURN(Stmt t, make(Add(I(last_full * lanes_), V("jl"))));
        Stmt tl = For("jl", I(tail), t, ForKind::kVectorized);
        out.push_back(t_.col_blocks == 1 ? tl : IfThen(Eq(V("cb"), I(last_cb)), tl));
      }
      return Block(std::move(out));
    };
    auto a_at = [&](const Expr& k) { return Load(a_, Add(V("a_off"), Mul(k, I(s_.a_stride_k)))); };
    auto b_at = [&](const Expr& k, const Expr& j) {
      return Load(b_, Add(Add(V("b_off"), Mul(k, I(s_.b_stride_k))), Add(V("n0"), j)));
    };
    // acc[j] += A[k0 + u] * B[k0 + u, n0 + j] for u < rows.
    auto pass = [&](const Expr& k0, int64_t rows) {
      return each_col([&](const Expr& j) -> absl::StatusOr<Stmt> {
        Expr e = Load(acc, j);
        for (int64_t u = 0; u < rows; ++u) e = Call("fma", {a_at(Add(k0, I(u))), b_at(Add(k0, I(u)), j), e});
        return Store(acc, j, e);
      });
    };
    std::vector<Stmt> body;
    ASSIGN_OR_RETURN(Stmt init, each_col([&](const Expr& j) -> absl::StatusOr<Stmt> { return Store(acc, j, FloatImm(0)); }));
    body.push_back(init);
    const int64_t ku = std::max<int64_t>(1, t_.ku), kfull = s_.k / ku;
    if (kfull > 0) {
      ASSIGN_OR_RETURN(Stmt p, pass(Mul(V("ko"), I(ku)), ku));
      body.push_back(For("ko", I(kfull), p));
    }
    if (s_.k % ku != 0) {
      ASSIGN_OR_RETURN(Stmt p, pass(I(kfull * ku), s_.k % ku));
      body.push_back(p);
    }
    ASSIGN_OR_RETURN(Stmt stores, each_col([&](const Expr& j) -> absl::StatusOr<Stmt> {
      Expr nj = Add(V("n0"), j);
      Expr out_idx = Add(Add(Mul(V("batch"), I(s_.m * s_.n)), Mul(V("m0"), I(s_.n))), nj);
      return FinalStores(Load(acc, j), V("m0"), nj, out_idx);
    }));
    body.push_back(stores);
    return Allocate(acc, Block(std::move(body)));
  }

  const Graph& g_;
  const MatMulSpec& s_;
  const MatMulTiling t_;
  GraphExpr ge_;
  Buffer a_, b_, packed_;
  Buffer packed_a_;  // the tile row's strip of A while Part lowers it (MatMulTiling::pack_a), else null
  std::vector<Buffer> outs_;
  std::vector<Expr> batch_idx_;
  int64_t lanes_ = 1;
  int64_t nf_ = 0;
};

}  // namespace

WorkloadLowering MatMulLowering() {
  WorkloadLowering l;
  l.kind = "matmul";
  l.match = [](const Graph& g) { return AnalyzeMatMul(g).status(); };
  l.enumerate = [](const Graph& g, const CpuTarget& target) {
    absl::StatusOr<MatMulSpec> spec = AnalyzeMatMul(g);
    return spec.ok() ? EnumerateMatMul(*spec, target) : std::vector<ScheduleConfig>{};
  };
  l.default_schedule = [](const Graph& g, const CpuTarget& target) {
    absl::StatusOr<MatMulSpec> spec = AnalyzeMatMul(g);
    return spec.ok() ? DefaultMatMul(*spec, target) : ScheduleConfig{};
  };
  l.validate = [](const Graph& g, const ScheduleConfig& c, const CpuTarget& target) -> absl::Status {
    ASSIGN_OR_RETURN(MatMulSpec spec, AnalyzeMatMul(g));
    return ValidateMatMul(g, spec, c, target);
  };
  l.lower = [](const Graph& g, const ScheduleConfig& c, const CpuTarget& target) -> absl::StatusOr<LoopFunc> {
    ASSIGN_OR_RETURN(MatMulSpec spec, AnalyzeMatMul(g));
    RETURN_IF_ERROR(ValidateMatMul(g, spec, c, target));
    MatMulBuilder b(g, spec, c, target);
    return b.Build();
  };
  return l;
}

}  // namespace kiln::loop_ir
