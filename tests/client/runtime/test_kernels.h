// Kernel sources for the client tests, in the Kiln kernel ABI
//   void k(void* const* args, int64_t task_begin, int64_t task_end).
#pragma once

namespace kiln::testing {

// k_poly(x, y), k_switch(x, y) (int32), k_scale(x, w, s), k_bias(s, y), k_exp(x, y), k_halve(x, y);
// globals g_bias (.data), g_zero (.bss), g_tasks_run (tasks k_poly ran), g_bias_ptr.
extern const char kTestKernelsC[];
// get_target() (PC64) and get_target_got() (GOTPCREL) return &target (an int 42).
extern const char kTestKernelsAsm[];

}  // namespace kiln::testing
