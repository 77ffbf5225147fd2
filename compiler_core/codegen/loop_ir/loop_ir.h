// Loop-level IR of the CPU and GPU back ends, in the spirit of Halide's IR and
// TVM's TIR: buffers, loop nests, loads/stores, index and value expressions.
// Nodes are immutable and shared (shared_ptr<const>); passes build new trees.
// Every level has a textual dump (Print) and a verifier (Verify).
//
// A GPU kernel is the same IR with loops bound to the grid: its body is one
// gpu_block loop (the blocks), inside which gpu_thread loops are the block's
// threads. Code between thread loops runs in every thread alike (uniform);
// consecutive thread loops are separated by a barrier. Shared buffers are the
// block's; local buffers give every thread its own copy across thread loops.
// Written this way a GPU kernel is also a serial program (gpu_emulation.h):
// the same schedule runs on the CPU, so every GPU lowering is checked against
// the reference interpreter without a GPU.
//
//   kernel softmax(in0: f32[4,10] input, out0: f32[4,10] output) {
//     parallel for (r, 0, 4) {
//       allocate mx: f32[1] {
//         mx[0] = -inf
//         for (k, 0, 10) {
//           mx[0] = max(mx[0], in0[r, k])
//         }
//         ...
//       }
//     }
//   }
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace kiln::loop_ir {

// Scalar types of expressions: f32 values, i64 indices, booleans, and the
// other Kiln tensor element types (compiler_core/ir/dtype.h). In memory a bool is
// one byte (0 or 1; any non-zero byte loads as true) and an f16 is IEEE half;
// f16 values are storage only in practice (graph lowerings compute in f32 and
// Cast at the boundaries, the lowering converts without F16C or libcalls).
enum class ScalarType { kF32, kI64, kBool, kF64, kF16, kI8, kI16, kI32, kU8, kU16, kU32, kU64, kBF16 };
const char* ScalarTypeName(ScalarType t);
bool IsFloat(ScalarType t);     // f16, f32, f64
bool IsInteger(ScalarType t);   // i8..i64, u8..u64 (not bool)
bool IsSigned(ScalarType t);    // signed integers and floats
int ScalarTypeBytes(ScalarType t);

// Where a buffer lives. Inputs and outputs are kernel arguments (dense
// row-major arrays); temps are stack allocations introduced by Allocate (in a
// GPU kernel: inside a thread loop, per thread). GPU kernels add two roles,
// both allocated inside the gpu_block loop and outside any thread loop:
//   kShared  one copy per block that all its threads read and write
//            (shared memory); a barrier separates consecutive thread loops
//   kLocal   one copy per thread that lives across the block's thread loops
//            (registers or local memory), read and written only inside them
enum class BufferRole { kInput, kOutput, kTemp, kShared, kLocal };
const char* BufferRoleName(BufferRole r);

struct BufferNode {
  std::string name;
  ScalarType dtype = ScalarType::kF32;
  std::vector<int64_t> shape;  // row-major, static
  BufferRole role = BufferRole::kInput;
  int arg = -1;  // kernel argument index for inputs/outputs; -1 for temps
  int64_t num_elements() const;
};
using Buffer = std::shared_ptr<const BufferNode>;

Buffer MakeBuffer(std::string name, std::vector<int64_t> shape, BufferRole role, int arg = -1,
                  ScalarType dtype = ScalarType::kF32);

// ---- expressions ------------------------------------------------------------

enum class ExprKind {
  kIntImm, kFloatImm, kVar,
  kAdd, kSub, kMul, kDiv, kMod, kMin, kMax,   // Div/Mod: floor semantics on i64
                                               // indices; on element integers
                                               // C's (truncating; x/0 and x%0
                                               // do not trap, INT_MIN/-1 wraps);
                                               // Mod on floats is C's fmod
  kLt, kLe, kGt, kGe, kEq, kNe, kAnd, kOr, kNot,
  kSelect,                                     // args: cond, a, b
  kLoad,                                       // buffer, args: flat index (one i64)
  kCast,                                       // to `type`, args: value; float
                                               // -> int truncates, saturates,
                                               // NaN -> 0; int -> int wraps;
                                               // -> bool is != 0
  kCall,                                       // name: math function, args
};

struct ExprNode {
  ExprKind kind = ExprKind::kIntImm;
  ScalarType type = ScalarType::kI64;
  int64_t int_value = 0;
  double float_value = 0;
  std::string name;  // kVar: variable; kCall: function
  Buffer buffer;     // kLoad
  std::vector<std::shared_ptr<const ExprNode>> args;
};
using Expr = std::shared_ptr<const ExprNode>;

// Math functions for kCall (all f32 -> f32 unless noted): exp, log, sqrt, tanh,
// erf, sigmoid, abs, neg, floor; exp_nonpositive (exp for x <= 0, results
// below 2^-126 flushed to 0: vector_math::ExpNonPositive); fmax/fmin (numpy
// maximum/minimum: NaN wins);
// fma(a, b, c) = a*b+c (llvm.fmuladd: fused where the target has FMA);
// sin, cos, ceil, round (half to even), trunc, expm1, log1p, pow(x, y) and
// fmod(x, y) (C's, sign of x) from compiler_core/codegen/loop_ir/math_functions.h.
// Calls take operands of one float type (f32 or f64; f64 transcendental
// functions are evaluated in f32) and return that type. The exception:
// ipow(base, e): integer base, i64 exponent -> the base's type, exact wrapping
// square-and-multiply (e < 0: trunc(base ** e), i.e. 1, -1 or 0).
bool IsKnownCall(const std::string& name, int num_args);

Expr IntImm(int64_t v);
Expr FloatImm(double v);
// A constant of any scalar type: integers take `v` truncated (Const) or the
// two's-complement bits `bits` (IntConst, exact for u64); bool is v != 0.
Expr Const(ScalarType t, double v);
Expr IntConst(ScalarType t, int64_t bits);
Expr Var(const std::string& name, ScalarType type = ScalarType::kI64);
Expr Add(Expr a, Expr b);
Expr Sub(Expr a, Expr b);
Expr Mul(Expr a, Expr b);
Expr Div(Expr a, Expr b);
Expr Mod(Expr a, Expr b);
Expr Min(Expr a, Expr b);
Expr Max(Expr a, Expr b);
Expr Lt(Expr a, Expr b);
Expr Le(Expr a, Expr b);
Expr Gt(Expr a, Expr b);
Expr Ge(Expr a, Expr b);
Expr Eq(Expr a, Expr b);
Expr Ne(Expr a, Expr b);
Expr And(Expr a, Expr b);
Expr Or(Expr a, Expr b);
Expr Not(Expr a);
Expr Select(Expr cond, Expr a, Expr b);
Expr Cast(ScalarType to, Expr v);
Expr Call(const std::string& name, std::vector<Expr> args, ScalarType type = ScalarType::kF32);
// Load at a flat element index, or at a multi-dimensional index (row-major
// linearised against the buffer's shape; the printer shows the flat form).
Expr Load(Buffer buffer, Expr flat_index);
Expr Load(Buffer buffer, const std::vector<Expr>& index);
// Row-major flat index of `index` in `shape`.
Expr FlatIndex(const std::vector<int64_t>& shape, const std::vector<Expr>& index);

// Arithmetic (+ - * / % min max) and comparison kinds.
bool IsArith(ExprKind k);
bool IsCompare(ExprKind k);
// A binary node of `kind` (arithmetic, comparison, &&, ||), folding integer
// constants and identities.
Expr Binary(ExprKind kind, Expr a, Expr b);

// Constant folding of integer arithmetic (x + 0, x * 1, 2 * 3, ...).
Expr Simplify(const Expr& e);
// Integer value of a constant expression, if it is one.
bool AsConst(const Expr& e, int64_t* value);

// ---- statements ---------------------------------------------------------------

// kParallel: the CPU kernel's tasks (outermost only). kGpuBlock: the GPU
// kernel's blocks (outermost only, blockIdx.x). kGpuThread: a block's threads
// (threadIdx.x), inside the block loop, never nested in another thread loop;
// the block has as many threads as its widest thread loop, and a narrower one
// runs on the first `extent` of them.
enum class ForKind { kSerial, kVectorized, kUnrolled, kParallel, kGpuBlock, kGpuThread };
const char* ForKindName(ForKind k);

// kWarpReduce (GPU kernels, uniform code between thread loops): every element
// of a local buffer becomes, in every thread, the `var` ("sum", "max",
// "min") of that element over the `width` consecutive threads of its group
// (width a power of two, 2 to 32; groups start at multiples of width). Every
// thread of the block takes part, so the block's threads must be a multiple
// of 32 and every thread must have written the buffer first.
// kFence: a scheduling fence (CPU kernels), no instruction of its own: no
// load or store moves across it, and no load after it reuses a value loaded
// before it. A register block whose taps are fenced from each other holds
// one tap's loads at a time: LLVM would otherwise load the next taps' ahead
// and keep loads shared between taps live across them (a stride-2 window's
// third column is the next pixel's first), spilling the accumulators of
// blocks that fit the registers (LowerChannelVector in lower_conv.cc).
enum class StmtKind { kFor, kStore, kLet, kAllocate, kBlock, kIf, kWarpReduce, kFence };

struct StmtNode {
  StmtKind kind = StmtKind::kBlock;
  // kFor: var in [0, extent). kLet: var = value over body. kWarpReduce: var
  // is the operation, extent the width.
  std::string var;
  Expr extent;      // kFor (i64; static for vectorized/unrolled/parallel)
  ForKind for_kind = ForKind::kSerial;
  Expr value;       // kStore: stored value; kLet: bound value; kIf: condition
  Expr index;       // kStore: flat index
  Buffer buffer;    // kStore target; kAllocate: the temp; kWarpReduce: the local buffer
  std::vector<std::shared_ptr<const StmtNode>> body;  // kBlock: statements;
  // kFor/kLet/kAllocate: body[0]; kIf: body[0] then, body[1] else (optional)
};
using Stmt = std::shared_ptr<const StmtNode>;

Stmt For(const std::string& var, Expr extent, Stmt body, ForKind kind = ForKind::kSerial);
Stmt Store(Buffer buffer, Expr flat_index, Expr value);
Stmt Store(Buffer buffer, const std::vector<Expr>& index, Expr value);
Stmt LetStmt(const std::string& var, Expr value, Stmt body);
Stmt Allocate(Buffer temp, Stmt body);
Stmt Block(std::vector<Stmt> stmts);
Stmt IfThen(Expr cond, Stmt then_case, Stmt else_case = nullptr);
Stmt WarpReduce(Buffer local, const std::string& op, int64_t width);
Stmt Fence();

// A kernel: its argument buffers (inputs then outputs, `arg` = position) and
// body. A parallel loop, if any, is the outermost statement; its iterations are
// the kernel's tasks (num_tasks = its extent, else 1).
struct LoopFunc {
  std::string name;
  std::vector<Buffer> args;
  Stmt body;
};

// Number of tasks of the kernel: the outermost parallel loop's extent, else 1.
int64_t NumTasks(const LoopFunc& f);

// A GPU kernel: its body is a gpu_block loop.
bool IsGpuKernel(const LoopFunc& f);

// How a GPU kernel launches: blocks (the gpu_block loop's extent), threads per
// block (the widest thread loop; 1 without one) and static shared memory (the
// sum of its shared buffers, each 16-byte aligned).
// What every CUDA GPU Kiln targets (sm_80 and newer) accepts: threads per
// block, static shared memory per block, blocks of a one-dimensional grid.
inline constexpr int64_t kMaxGpuThreads = 1024;
inline constexpr int64_t kMaxGpuSharedBytes = 48 * 1024;
inline constexpr int64_t kMaxGpuBlocks = (int64_t{1} << 31) - 1;

struct GpuLaunch {
  int64_t blocks = 1;
  int64_t threads = 1;
  int64_t shared_bytes = 0;
};
GpuLaunch GpuLaunchOf(const LoopFunc& f);

}  // namespace kiln::loop_ir
