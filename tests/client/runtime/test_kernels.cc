// Kernel sources compiled at test time by the client tests.
#include "tests/client/runtime/test_kernels.h"

namespace kiln::testing {

const char kTestKernelsC[] = R"KILN(
#include <math.h>
#include <stdint.h>
#include <string.h>

float g_bias = 2.0f;          /* .data */
int g_zero[64];               /* .bss: must be zeroed by the loader */
long g_tasks_run = 0;         /* .bss, written by kernels: data pages are RW */
float* g_bias_ptr = &g_bias;  /* R_X86_64_64 in .data.rel */

/* y = 0.5 x^2 + 1.25 x - 3.75: float constants from a .rodata constant pool. */
void k_poly(void* const* args, int64_t begin, int64_t end) {
  const float* x = (const float*)args[0];
  float* y = (float*)args[1];
  for (int64_t i = begin; i < end; ++i) y[i] = 0.5f * x[i] * x[i] + 1.25f * x[i] - 3.75f;
  __atomic_fetch_add(&g_tasks_run, end - begin, __ATOMIC_RELAXED);
}

/* A switch lowered to a jump table in .rodata. */
static __attribute__((noinline)) int pick(int v, int i) {
  switch (v & 7) {
    case 0: return i * 3;
    case 1: return i + 17;
    case 2: return i ^ 0x55;
    case 3: return i << 2;
    case 4: return i - 9;
    case 5: return i * i;
    case 6: return ~i;
    default: return 1000;
  }
}
void k_switch(void* const* args, int64_t begin, int64_t end) {
  const int32_t* x = (const int32_t*)args[0];
  int32_t* y = (int32_t*)args[1];
  for (int64_t i = begin; i < end; ++i) y[i] = pick(x[i], (int)i);
}

/* s = x * w, with w a constant buffer; copies x into the scratch with memcpy. */
void k_scale(void* const* args, int64_t begin, int64_t end) {
  const float* x = (const float*)args[0];
  const float* w = (const float*)args[1];
  float* s = (float*)args[2];
  memcpy(s + begin, x + begin, (size_t)(end - begin) * sizeof(float));
  for (int64_t i = begin; i < end; ++i) s[i] *= w[i];
}

/* y = s + g_bias + g_zero[i % 64], after clearing y with memset. */
void k_bias(void* const* args, int64_t begin, int64_t end) {
  const float* s = (const float*)args[0];
  float* y = (float*)args[1];
  memset(y + begin, 0, (size_t)(end - begin) * sizeof(float));
  for (int64_t i = begin; i < end; ++i) y[i] += s[i] + *g_bias_ptr + (float)g_zero[i & 63];
}

/* y = exp(x): expf is resolved through dlsym. */
void k_exp(void* const* args, int64_t begin, int64_t end) {
  const float* x = (const float*)args[0];
  float* y = (float*)args[1];
  for (int64_t i = begin; i < end; ++i) y[i] = expf(x[i]);
}

/* y = x * 0.5: a denormal x, or an x below 2^-125, makes a denormal y unless
   the thread flushes them. */
void k_halve(void* const* args, int64_t begin, int64_t end) {
  const float* x = (const float*)args[0];
  float* y = (float*)args[1];
  for (int64_t i = begin; i < end; ++i) y[i] = x[i] * 0.5f;
}
)KILN";

const char kTestKernelsAsm[] = R"KILN(
  .text
  .globl get_target
get_target:                      # returns &target via a PC64 offset stored in .rodata
  leaq table(%rip), %rax
  movq (%rax), %rcx
  addq %rcx, %rax
  ret
  .globl get_target_got
get_target_got:                  # returns &target through a GOT slot
  movq target@GOTPCREL(%rip), %rax
  ret
  .section .rodata
  .p2align 3
table:
  .quad target - table
  .data
  .globl target
  .p2align 2
target:
  .long 42
)KILN";

}  // namespace kiln::testing
