// GPU lowering of the elementwise and data_movement kinds.
#include "compiler_core/codegen/loop_ir/gpu/lower_elementwise.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "compiler_core/codegen/loop_ir/graph_expr.h"
#include "compiler_core/codegen/loop_ir/lower_common.h"
#include "compiler_core/codegen/loop_ir/lower_elementwise.h"

namespace kiln::loop_ir::gpu {
namespace {

// Lanes of a 16-byte access of the widest element (narrow types count as
// 4 bytes: they are computed in f32), at most 4.
int64_t MaxVw(const Graph& g) { return std::clamp<int64_t>(16 / WidestElementBytes(g), 1, 4); }

int64_t InnerExtent(const std::vector<int64_t>& dims) { return dims.empty() ? 1 : dims.back(); }

std::vector<ScheduleConfig> Enumerate(const Graph& g, const GpuTarget&) {
  return FlatSpace(MaxVw(g), InnerExtent(DimsOf(g.outputs()[0])), {1, 2, 4});
}

// The widest vw that divides the rows of the first output (no masked
// lanes), 256 threads, one item per thread.
ScheduleConfig Default(const Graph& g, const GpuTarget& t) {
  const int64_t inner = InnerExtent(DimsOf(g.outputs()[0]));
  int64_t vw = 1;
  while (vw * 2 <= MaxVw(g) && inner % (vw * 2) == 0) vw *= 2;
  ScheduleConfig c;
  c.Set("vw", vw);
  c.Set("bt", 256);
  c.Set("un", 1);
  std::vector<ScheduleConfig> space = Enumerate(g, t);
  return std::find(space.begin(), space.end(), c) != space.end() ? c : space.front();
}

absl::Status Validate(const Graph& g, const ScheduleConfig& c, const GpuTarget&) {
  RETURN_IF_ERROR(ValidateGpuKnobs(g, c, {"vw", "bt", "un"}));
  const int64_t vw = c.Get("vw", 1), un = c.Get("un", 1);
  if (vw < 1 || vw > MaxVw(g) || (vw & (vw - 1)) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("schedule ", c.ToString(), ": knob vw=", vw,
                                                   " is not a power of two up to ", MaxVw(g), " for workload ",
                                                   g.name()));
  }
  if (un < 1 || un > 8) {
    return absl::InvalidArgumentError(absl::StrCat("schedule ", c.ToString(), ": knob un=", un, " is not in [1, 8]"));
  }
  return absl::OkStatus();
}

// One item: `vw` consecutive elements of a row of the segment's box. The
// item's row is split into the outer indices; lanes past the row's end are
// masked only when vw does not divide it.
absl::StatusOr<Stmt> SegmentItem(GraphExpr& ge, const Buffer& out, const OutputSegment& seg, int64_t vw,
                                 const Expr& item, const std::string& tag) {
  const std::vector<int64_t>& d = seg.dims;
  const int rank = static_cast<int>(d.size());
  const int64_t inner = InnerExtent(d);
  const int64_t per_row = CeilDiv(inner, vw);
  const std::string row_var = absl::StrCat("row", tag), lane_var = absl::StrCat("v", tag);
  Expr row = Var(row_var);
  Expr col = Add(Mul(Mod(item, IntImm(per_row)), IntImm(vw)), Var(lane_var));
  std::vector<Expr> idx(rank);
  Expr rest = row;
  for (int k = rank - 2; k >= 0; --k) {
    idx[k] = k == 0 ? rest : Mod(rest, IntImm(d[k]));
    rest = Div(rest, IntImm(d[k]));
  }
  if (rank > 0) idx[rank - 1] = col;
  std::vector<Expr> at;
  ASSIGN_OR_RETURN(Expr v, SegmentValue(ge, seg, idx, &at));
  Stmt store = Store(out, at, Cast(out->dtype, v));
  if (inner % vw != 0) store = IfThen(Lt(col, IntImm(inner)), store);
  Stmt lanes = For(lane_var, IntImm(vw), store, vw > 1 ? ForKind::kVectorized : ForKind::kSerial);
  return LetStmt(row_var, Div(item, IntImm(per_row)), lanes);
}

absl::StatusOr<LoopFunc> Lower(const Graph& g, const ScheduleConfig& c, const GpuTarget&) {
  RETURN_IF_ERROR(CheckWorkloadTypes(g));
  for (const auto& n : g.nodes()) RETURN_IF_ERROR(GraphExpr::CheckNode(*n));
  GraphExpr ge(g);
  const int64_t vw = c.Get("vw", 1), bt = c.Get("bt", 256), un = c.Get("un", 1);
  std::vector<std::pair<int64_t, std::function<Stmt(Expr)>>> bodies;
  absl::Status err = absl::OkStatus();
  for (size_t j = 0; j < g.outputs().size(); ++j) {
    const Buffer& out = ge.output_buffer(static_cast<int>(j));
    for (const OutputSegment& seg : OutputSegments(g.outputs()[j])) {
      const int64_t elements = NumElements(seg.dims);
      if (elements == 0) continue;
      const int64_t inner = InnerExtent(seg.dims);
      const int64_t items = elements / inner * CeilDiv(inner, vw);
      const std::string tag = absl::StrCat("_", j, seg.name);
      bodies.emplace_back(items, [&ge, &out, seg, vw, tag, &err](Expr item) -> Stmt {
        absl::StatusOr<Stmt> s = SegmentItem(ge, out, seg, vw, item, tag);
        if (!s.ok()) {
          if (err.ok()) err = s.status();
          return Block({});
        }
        return *s;
      });
    }
  }
  if (bodies.empty()) {
    // Every output is empty (a Slice past the end): nothing to write, but a
    // grid cannot be empty: one block of one thread that does nothing.
    return LoopFunc{"data_movement", ge.args(),
                    For("blk", IntImm(1), For("tid", IntImm(1), Block({}), ForKind::kGpuThread), ForKind::kGpuBlock)};
  }
  Stmt body = FlatKernel(bodies, bt, un);
  RETURN_IF_ERROR(err);
  return LoopFunc{"data_movement", ge.args(), body};
}

GpuWorkloadLowering Make(const std::string& kind) {
  return GpuWorkloadLowering{kind, Enumerate, Default, Validate, Lower};
}

}  // namespace

GpuWorkloadLowering GpuElementwiseLowering() { return Make("elementwise"); }
GpuWorkloadLowering GpuDataMovementLowering() { return Make("data_movement"); }

}  // namespace kiln::loop_ir::gpu
