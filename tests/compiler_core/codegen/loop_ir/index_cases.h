// Index workloads (Gather and its kin, DepthToSpace, Trilu, Split, CumSum,
// ArgMax) for the CPU and GPU lowering tests (lower_index_test.cc,
// gpu/lower_index_test.cc): graphs with index inputs of known ranges, their
// inputs, and the case lists both check, each with its own harness.
#pragma once

#include <algorithm>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler_core/frontend/ops/index_ops.h"
#include "compiler_core/ir/graph.h"
#include "tests/compiler_core/codegen/loop_ir/lowering_testing.h"

namespace kiln::loop_ir_testing {

// Graph building with f32 inputs, i64 inputs (each with the range of its
// values) and i64 constants.
class IndexGraph : public codegen_testing::GraphBuilder {
 public:
  Value* F32(const Ints& dims) { return Input(dims); }
  // An i64 input holding values in [lo, hi).
  Value* I64(const Ints& dims, int64_t lo, int64_t hi) {
    Value* v = Input(dims, DType::kInt64);
    ranges_[v->name()] = {lo, hi};
    return v;
  }
  // An i32 input holding values in [lo, hi).
  Value* I32(const Ints& dims, int64_t lo, int64_t hi) {
    Value* v = Input(dims, DType::kInt32);
    ranges_[v->name()] = {lo, hi};
    return v;
  }
  Value* Const(const Ints& dims, const std::vector<int64_t>& vals) { return Int64Constant(dims, vals); }
  const std::map<std::string, std::pair<int64_t, int64_t>>& ranges() const { return ranges_; }

 private:
  std::map<std::string, std::pair<int64_t, int64_t>> ranges_;
};

// The f32 inputs: uniform in [-1, 1], multiples of 1/8 in [-1, 1] (every
// order of summation gives the same floats), or from {-1, 0, 1} (ties).
enum class IndexData { kUniform, kEighths, kTies };

// Inputs for `g` built by `b`: i64 inputs uniform over their ranges, f32
// inputs as `data` says.
inline std::map<std::string, Tensor> IndexFeeds(const Graph& g, const IndexGraph& b, IndexData data) {
  std::map<std::string, Tensor> feeds;
  std::mt19937 rng(11);
  for (const Value* v : g.inputs()) {
    const Ints dims = v->type().StaticDims();
    const int64_t n = Product(dims);
    if (v->type().dtype == DType::kInt64 || v->type().dtype == DType::kInt32) {
      auto [lo, hi] = b.ranges().at(v->name());
      std::uniform_int_distribution<int64_t> dist(lo, hi - 1);
      std::vector<int64_t> x(n);
      for (int64_t& e : x) e = dist(rng);
      if (v->type().dtype == DType::kInt64) {
        feeds.emplace(v->name(), Tensor::FromVector(DType::kInt64, dims, x));
      } else {
        feeds.emplace(v->name(), Tensor::FromVector(DType::kInt32, dims, std::vector<int32_t>(x.begin(), x.end())));
      }
      continue;
    }
    std::vector<float> x(n);
    std::uniform_real_distribution<float> uniform(-1, 1);
    std::uniform_int_distribution<int> eighths(-8, 8), ties(-1, 1);
    for (float& e : x) {
      if (data == IndexData::kUniform) e = uniform(rng);
      if (data == IndexData::kEighths) e = static_cast<float>(eighths(rng)) / 8;
      if (data == IndexData::kTies) e = static_cast<float>(ties(rng));
    }
    feeds.emplace(v->name(), Tensor::FromVector(DType::kFloat32, dims, x));
  }
  return feeds;
}

// A case: its name (for SCOPED_TRACE), and its nodes built into a graph,
// returning the values that are the workload's outputs.
struct IndexCase {
  std::string name;
  std::function<std::vector<Value*>(IndexGraph&)> build;
};

// `op` (Gather or GatherElements) of data along an axis (negative ones too)
// by i64 indices over the whole range [-dim, dim).
struct GatherShape {
  Ints data, ind;
  int64_t axis;
};

inline std::vector<IndexCase> GatherLikeCases(const std::string& op, const std::vector<GatherShape>& shapes) {
  std::vector<IndexCase> out;
  for (const GatherShape& c : shapes) {
    out.push_back({absl::StrCat(op, " data=", absl::StrJoin(c.data, "x"), " axis=", c.axis),
                   [op, c](IndexGraph& b) -> std::vector<Value*> {
                     Value* x = b.F32(c.data);
                     const int64_t a = c.axis < 0 ? c.axis + static_cast<int64_t>(c.data.size()) : c.axis;
                     Value* i = b.I64(c.ind, -c.data[a], c.data[a]);
                     return {b.Op(op, {x, i}, {{"axis", c.axis}})};
                   }});
  }
  return out;
}

// Gather along each axis, scalar to 2-D indices.
inline std::vector<IndexCase> GatherAxisCases() {
  return GatherLikeCases("Gather", {{{3, 7, 5}, {4}, 1},
                                    {{3, 7, 5}, {2, 3}, -1},
                                    {{2, 3, 17}, {}, 2},
                                    {{13}, {3, 2}, 0},
                                    {{11, 9}, {2, 3}, 0},
                                    {{2, 5, 3, 2}, {7}, -2}});
}

// Index expressions move elements of any type: rows of bool (the attention
// masks of exported transformers) and of f16.
inline std::vector<IndexCase> GatherOfBoolAndHalfCases() {
  struct Shape {
    Ints data, ind;
  };
  std::vector<IndexCase> out;
  for (int64_t to : {int64_t{9}, int64_t{10}}) {
    for (const Shape& c : {Shape{{32, 1}, {1, 1, 1, 32}}, Shape{{32, 6}, {1, 5}}}) {
      out.push_back({absl::StrCat("Gather of Cast to=", to, " data=", absl::StrJoin(c.data, "x")),
                     [c, to](IndexGraph& b) -> std::vector<Value*> {
                       Value* data = b.Op("Cast", {b.F32(c.data)}, {{"to", to}});
                       return {b.Op("Gather", {data, b.I64(c.ind, 0, c.data[0])}, {{"axis", int64_t{0}}})};
                     }});
    }
  }
  return out;
}

// GatherElements along each axis, indices as long as the data or not.
inline std::vector<IndexCase> GatherElementsCases() {
  return GatherLikeCases("GatherElements",
                         {{{3, 5}, {3, 5}, 0}, {{3, 5}, {2, 7}, 1}, {{2, 3, 7}, {1, 3, 4}, -1}, {{1}, {3}, 0}});
}

// GatherND with and without batch axes, index tuples addressing one axis up
// to all of them, negative indices (wrapped) included.
inline std::vector<IndexCase> GatherNDCases() {
  struct Shape {
    Ints data, ind;
    int64_t batch_dims;
  };
  std::vector<IndexCase> out;
  for (const Shape& c : {Shape{{5, 7}, {3, 2}, 0}, Shape{{5, 7, 3}, {2, 4, 1}, 0}, Shape{{1, 32}, {1, 1, 1, 32, 2}, 0},
                         Shape{{2, 5, 3}, {2, 4, 1}, 1}, Shape{{2, 3, 4, 5}, {2, 3, 2}, 2}}) {
    out.push_back({absl::StrCat("GatherND data=", absl::StrJoin(c.data, "x"), " batch_dims=", c.batch_dims),
                   [c](IndexGraph& b) -> std::vector<Value*> {
                     Value* x = b.F32(c.data);
                     Value* i = b.I64(c.ind, -1, *std::min_element(c.data.begin() + c.batch_dims, c.data.end()));
                     return {b.Op("GatherND", {x, i}, {{"batch_dims", c.batch_dims}})};
                   }});
  }
  return out;
}

// DepthToSpace in both modes (block size 1 too) and SpaceToDepth.
inline std::vector<IndexCase> DepthToSpaceAndSpaceToDepthCases() {
  std::vector<IndexCase> out;
  for (std::string mode : {"DCR", "CRD"}) {
    for (auto [dims, bs] : {std::pair<Ints, int64_t>{{1, 8, 3, 5}, 2}, {{2, 9, 1, 3}, 3}, {{1, 3, 2, 2}, 1}}) {
      out.push_back({absl::StrCat("DepthToSpace ", mode, " x=", absl::StrJoin(dims, "x"), " blocksize=", bs),
                     [dims, bs, mode](IndexGraph& b) -> std::vector<Value*> {
                       return {b.Op("DepthToSpace", {b.F32(dims)}, {{"blocksize", bs}, {"mode", mode}})};
                     }});
    }
  }
  for (auto [dims, bs] : {std::pair<Ints, int64_t>{{1, 3, 6, 10}, 2}, {{2, 1, 3, 9}, 3}}) {
    out.push_back({absl::StrCat("SpaceToDepth x=", absl::StrJoin(dims, "x"), " blocksize=", bs),
                   [dims, bs](IndexGraph& b) -> std::vector<Value*> {
                     return {b.Op("SpaceToDepth", {b.F32(dims)}, {{"blocksize", bs}})};
                   }});
  }
  return out;
}

// Trilu, lower and upper, with a constant k below, on, above and past the
// diagonal, with k as a run-time input, and without k.
inline std::vector<IndexCase> TriluCases() {
  std::vector<IndexCase> out;
  for (int64_t upper : {0, 1}) {
    std::vector<std::pair<Ints, int64_t>> shapes;
    for (int64_t k : {-2, 0, 1, 9}) {
      for (Ints dims : {Ints{5, 7}, Ints{2, 3, 1}, Ints{1, 13, 4}}) shapes.push_back({dims, k});
    }
    for (int64_t k : {-2, 1}) shapes.push_back({{2, 5, 7}, k});
    for (const auto& [dims, k] : shapes) {
      out.push_back({absl::StrCat("Trilu upper=", upper, " k=", k, " x=", absl::StrJoin(dims, "x")),
                     [dims, k, upper](IndexGraph& b) -> std::vector<Value*> {
                       return {b.Op("Trilu", {b.F32(dims), b.Const({}, {k})}, {{"upper", upper}})};
                     }});
    }
    out.push_back({absl::StrCat("Trilu upper=", upper, " k at run time, and no k"),
                   [upper](IndexGraph& b) -> std::vector<Value*> {
                     Value* x = b.F32({6, 5});
                     Value* k = b.I64({}, -3, 4);
                     return {b.Op("Trilu", {x, k}, {{"upper", upper}}), b.Op("Trilu", {x}, {{"upper", upper}})};
                   }});
  }
  return out;
}

// Split into pieces of given sizes (one empty) or equal ones, along each
// axis, every piece an output.
inline std::vector<IndexCase> SplitCases() {
  struct Shape {
    Ints dims;
    int64_t axis;
    std::vector<int64_t> sizes;
    int64_t pieces;
  };
  std::vector<IndexCase> out;
  for (const Shape& c : {Shape{{3, 7}, 1, {1, 4, 2}, 3}, Shape{{7, 2}, 0, {}, 3}, Shape{{2, 3, 5}, -1, {}, 2},
                         Shape{{2, 3, 10}, -1, {}, 2}, Shape{{6}, 0, {2, 0, 4}, 3}}) {
    out.push_back({absl::StrCat("Split x=", absl::StrJoin(c.dims, "x"), " axis=", c.axis, " pieces=", c.pieces),
                   [c](IndexGraph& b) {
                     Value* x = b.F32(c.dims);
                     Value* sizes =
                         c.sizes.empty() ? nullptr : b.Const({static_cast<int64_t>(c.sizes.size())}, c.sizes);
                     std::vector<Value*> outs;
                     for (int64_t k = 0; k < c.pieces; ++k) {
                       Attrs a = {{"axis", c.axis},
                                  {ops::kSplitOutputIndexAttr, k},
                                  {ops::kSplitNumOutputsAttr, c.pieces}};
                       std::vector<Value*> ins = {x};
                       if (sizes) ins.push_back(sizes);
                       outs.push_back(b.Op("Split", ins, a));
                     }
                     return outs;
                   }});
  }
  return out;
}

// CumSum along every axis, exclusive and reverse, rows of 1 to 13 elements.
inline std::vector<IndexCase> CumSumCases() {
  std::vector<IndexCase> out;
  for (Ints dims : {Ints{3, 7, 5}, Ints{13}, Ints{1, 2, 1}}) {
    for (int64_t axis = -1; axis < static_cast<int64_t>(dims.size()); ++axis) {
      for (int64_t excl : {0, 1}) {
        for (int64_t rev : {0, 1}) {
          out.push_back({absl::StrCat("CumSum x=", absl::StrJoin(dims, "x"), " axis=", axis, " exclusive=", excl,
                                      " reverse=", rev),
                         [dims, axis, excl, rev](IndexGraph& b) -> std::vector<Value*> {
                           return {b.Op("CumSum", {b.F32(dims), b.Const({}, {axis})},
                                        {{"exclusive", excl}, {"reverse", rev}})};
                         }});
        }
      }
    }
  }
  return out;
}

// CumSum with its axis a run-time input: read by a consumer at the scanned
// element (Tanh) and by one that reads other elements (Transpose), and alone.
inline std::vector<IndexCase> CumSumRuntimeAxisCases() {
  return {
      {"CumSum x=4x9 reverse, axis at run time, Tanh and Transpose consumers",
       [](IndexGraph& b) -> std::vector<Value*> {
         Value* c = b.Op("CumSum", {b.F32({4, 9}), b.I64({}, -2, 2)}, {{"reverse", int64_t{1}}});
         return {c, b.Op("Tanh", {c}), b.Op("Transpose", {c}, {{"perm", Ints{1, 0}}})};
       }},
      {"CumSum x=17, axis at run time",
       [](IndexGraph& b) -> std::vector<Value*> { return {b.Op("CumSum", {b.F32({17}), b.I64({1}, -1, 1)})}; }},
  };
}

// Integer data, as exporters write position ids (RoBERTa's, from dynamo):
// CumSum over an i64 mask along either axis, exclusive and reverse, rows of
// 1 to 1000 (a GPU block's tiles); over i32 (a Cast in the workload);
// GatherElements, Trilu and Gather moving i64 data, and an i64 Add after
// them; i32 indices.
inline std::vector<IndexCase> IntegerDataCases() {
  std::vector<IndexCase> out;
  for (Ints dims : {Ints{1, 32}, Ints{3, 7}, Ints{2, 1000}}) {
    for (int64_t axis : {-1, 0}) {
      for (int64_t excl : {0, 1}) {
        const int64_t rev = excl;
        out.push_back({absl::StrCat("CumSum of i64 x=", absl::StrJoin(dims, "x"), " axis=", axis,
                                    " exclusive=reverse=", excl),
                       [dims, axis, excl, rev](IndexGraph& b) -> std::vector<Value*> {
                         return {b.Op("CumSum", {b.I64(dims, -3, 5), b.Const({}, {axis})},
                                      {{"exclusive", excl}, {"reverse", rev}})};
                       }});
      }
    }
  }
  out.push_back({"CumSum of i32 (a Cast of i64) x=4x9 axis=1", [](IndexGraph& b) -> std::vector<Value*> {
                   Value* x = b.Op("Cast", {b.I64({4, 9}, -100, 100)}, {{"to", int64_t{6}}});
                   return {b.Op("CumSum", {x, b.Const({}, {1})})};
                 }});
  out.push_back({"GatherElements of i64 data x=1x66 by 1x32", [](IndexGraph& b) -> std::vector<Value*> {
                   return {b.Op("GatherElements", {b.I64({1, 66}, -9, 9), b.I64({1, 32}, -66, 66)},
                                {{"axis", int64_t{1}}})};
                 }});
  out.push_back({"Trilu (lower, k=1) of i64 data x=2x4x5", [](IndexGraph& b) -> std::vector<Value*> {
                   return {b.Op("Trilu", {b.I64({2, 4, 5}, -50, 50), b.Const({}, {1})}, {{"upper", int64_t{0}}})};
                 }});
  out.push_back({"Gather and GatherND of f32 data by i32 indices", [](IndexGraph& b) -> std::vector<Value*> {
                   Value* x = b.F32({6, 5});
                   return {b.Op("Gather", {x, b.I32({2, 3}, -5, 5)}, {{"axis", int64_t{1}}}),
                           b.Op("GatherND", {x, b.I32({4, 2}, 0, 5)})};
                 }});
  out.push_back({"Gather of i64 data x=10x3, then Add 1", [](IndexGraph& b) -> std::vector<Value*> {
                   Value* g = b.Op("Gather", {b.I64({10, 3}, 0, 1000), b.I64({4}, -10, 10)}, {{"axis", int64_t{0}}});
                   return {b.Op("Add", {g, b.Const({}, {1})})};
                 }});
  return out;
}

// ArgMax and ArgMin along every axis, keepdims on and off, first and last
// index; rows of 1 to 17, and rows of 70 and 1000 (warps and blocks per GPU
// row) along their own axis.
inline std::vector<IndexCase> ArgMaxArgMinCases() {
  std::vector<IndexCase> out;
  for (std::string op : {"ArgMax", "ArgMin"}) {
    for (Ints dims : {Ints{3, 7, 5}, Ints{11}, Ints{2, 1, 17}, Ints{5, 70}, Ints{2, 1000}}) {
      for (int64_t axis = -1; axis < static_cast<int64_t>(dims.size()); ++axis) {
        for (int64_t keep : {0, 1}) {
          for (int64_t last : {0, 1}) {
            if (dims.back() >= 70 && (axis != -1 || keep == 0)) continue;  // long rows: their own axis
            out.push_back({absl::StrCat(op, " x=", absl::StrJoin(dims, "x"), " axis=", axis, " keepdims=", keep,
                                        " select_last_index=", last),
                           [op, dims, axis, keep, last](IndexGraph& b) -> std::vector<Value*> {
                             return {b.Op(op, {b.F32(dims)},
                                          {{"axis", axis}, {"keepdims", keep}, {"select_last_index", last}})};
                           }});
          }
        }
      }
    }
  }
  return out;
}

}  // namespace kiln::loop_ir_testing
