/* The Kiln runtime's C API: load a package, bind inputs, run, read outputs,
 * on the CPU or on a CUDA GPU. Plain C99; everything a deployment needs
 * without C++, the compiler or the CUDA toolkit. */
#ifndef KILN_RUNTIME_H_
#define KILN_RUNTIME_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define KILN_API __attribute__((visibility("default")))
#else
#define KILN_API
#endif

/* Status codes; numerically equal to absl/gRPC canonical codes. */
typedef enum kiln_status_t {
  KILN_OK = 0,
  KILN_CANCELLED = 1,
  KILN_UNKNOWN = 2,
  KILN_INVALID_ARGUMENT = 3,
  KILN_NOT_FOUND = 5,
  KILN_FAILED_PRECONDITION = 9,
  KILN_OUT_OF_RANGE = 11,
  KILN_UNIMPLEMENTED = 12,
  KILN_INTERNAL = 13,
  KILN_RESOURCE_EXHAUSTED = 8,
  KILN_DATA_LOSS = 15
} kiln_status_t;

/* Element types; numerically equal to kiln.v1.DataType. */
typedef enum kiln_dtype_t {
  KILN_DTYPE_UNSPECIFIED = 0,
  KILN_DTYPE_FLOAT32 = 1,
  KILN_DTYPE_FLOAT16 = 2,
  KILN_DTYPE_FLOAT64 = 3,
  KILN_DTYPE_INT8 = 4,
  KILN_DTYPE_INT16 = 5,
  KILN_DTYPE_INT32 = 6,
  KILN_DTYPE_INT64 = 7,
  KILN_DTYPE_UINT8 = 8,
  KILN_DTYPE_BOOL = 9
} kiln_dtype_t;

/* The ABI this header describes. A library answers kiln_runtime_abi_version();
 * it serves every header with the same major ABI version and a lower or equal
 * minor one (docs/runtime-abi.md). */
#define KILN_RUNTIME_ABI_MAJOR 1
#define KILN_RUNTIME_ABI_MINOR 3

/* Capacity a caller's dims array must have for kiln_session_*_info/output. */
#define KILN_MAX_RANK 16

typedef struct kiln_package_t kiln_package_t;
typedef struct kiln_session_t kiln_session_t;

/* The device a package runs on (ABI 1.2); numerically equal to
 * kiln.v1.PackageDevice. */
typedef enum kiln_device_t {
  KILN_DEVICE_CPU = 0,
  KILN_DEVICE_CUDA = 1
} kiln_device_t;

/* CUDA device memory: the driver API's CUdeviceptr (a pointer from
 * cudaMalloc, cast to an integer) (ABI 1.2). */
typedef uint64_t kiln_device_ptr_t;

/* The message of the last failing call on this thread ("" if none). Valid until
 * the next call on this thread. */
KILN_API const char* kiln_last_error_message(void);

/* The library's version, "MAJOR.MINOR.PATCH" (the Kiln release it comes from). */
KILN_API const char* kiln_runtime_version(void);
/* The library's ABI as major * 1000 + minor (KILN_RUNTIME_ABI_MAJOR/MINOR). */
KILN_API int kiln_runtime_abi_version(void);

/* Loads and verifies a .kpkg (checksum, bounds). A CUDA package also needs
 * the CUDA driver (libcuda.so.1, loaded at run time): without one, or
 * without a GPU, it is KILN_FAILED_PRECONDITION ("this package is for a CUDA
 * GPU (sm_90) and no CUDA driver could be loaded: ..."). */
KILN_API kiln_status_t kiln_package_load(const char* path, kiln_package_t** out_package);
/* Loads and verifies a package from memory; the bytes are copied. */
KILN_API kiln_status_t kiln_package_load_bytes(const void* data, size_t bytes, kiln_package_t** out_package);
/* The CPU the package was compiled for: its ISA level and microarchitecture,
 * e.g. "x86-64-v4 znver4", or "x86-64-v3" for a package compiled for a level;
 * a CUDA package's GPU, e.g. "cuda:sm_90"; owned by the package. Loading
 * refuses a package whose CPU features this host lacks
 * (KILN_FAILED_PRECONDITION). */
KILN_API const char* kiln_package_target(const kiln_package_t* package);
/* "sha256:<hex>" of the package file; owned by the package. */
KILN_API const char* kiln_package_digest(const kiln_package_t* package);
/* Sessions keep their package alive: releasing it while sessions exist is fine.
 * NULL is ignored. */
KILN_API void kiln_package_release(kiln_package_t* package);

/* num_threads: 1 runs on the calling thread, 0 uses every hardware thread. */
KILN_API kiln_status_t kiln_session_create(kiln_package_t* package, int num_threads,
                                           kiln_session_t** out_session);
KILN_API int kiln_session_num_inputs(const kiln_session_t* session);
KILN_API int kiln_session_num_outputs(const kiln_session_t* session);
/* NULL if index is out of range. Owned by the session. */
KILN_API const char* kiln_session_input_name(const kiln_session_t* session, int index);
KILN_API const char* kiln_session_output_name(const kiln_session_t* session, int index);
/* dtype, dims (KILN_MAX_RANK entries) and rank of an input; any out-pointer may be NULL. */
KILN_API kiln_status_t kiln_session_input_info(const kiln_session_t* session, int index, kiln_dtype_t* dtype,
                                               int64_t* dims, int* rank);
/* Copies `bytes` bytes, which must equal the input's size. */
KILN_API kiln_status_t kiln_session_set_input(kiln_session_t* session, const char* name, const void* data,
                                              size_t bytes);
/* Binds an input without a copy: the next runs read it from `data`, which must
 * stay valid and unchanged until the input is bound again or set; `bytes` must
 * equal the input's size and `data` be aligned to its element size. Kernels
 * never write inputs. */
KILN_API kiln_status_t kiln_session_bind_input(kiln_session_t* session, const char* name, const void* data,
                                               size_t bytes);
/* Makes the next runs write output `index` straight into `data` (same rules as
 * kiln_session_bind_input); kiln_session_output then returns `data`. NULL
 * data returns the output to the session's own memory. An output may not
 * overlap an input or another output: either binding that would make them
 * overlap is refused (KILN_INVALID_ARGUMENT). */
KILN_API kiln_status_t kiln_session_bind_output(kiln_session_t* session, int index, void* data, size_t bytes);
/* Fails with KILN_FAILED_PRECONDITION if an input is unbound. */
KILN_API kiln_status_t kiln_session_run(kiln_session_t* session);
/* flush != 0 (the default): a CPU session's runs treat denormal floats as
 * zero, as operands and as results (x86's DAZ and FTZ), which keeps layers
 * whose values decay below 2^-126 from running many times slower; flush == 0
 * keeps IEEE gradual underflow. Runs set the mode on the threads they use and
 * leave the calling thread's own as it was. No effect on a CUDA session
 * (ABI 1.3). */
KILN_API kiln_status_t kiln_session_flush_denormals(kiln_session_t* session, int flush);
/* Output `index` after a run: data (owned by the session, valid until the next
 * run or release), size in bytes, dtype, dims (KILN_MAX_RANK entries) and rank.
 * Any out-pointer may be NULL. */
KILN_API kiln_status_t kiln_session_output(const kiln_session_t* session, int index, const void** data,
                                           size_t* bytes, kiln_dtype_t* dtype, int64_t* dims, int* rank);
/* NULL is ignored. */
KILN_API void kiln_session_release(kiln_session_t* session);

/* ---- CUDA packages (ABI 1.2) ------------------------------------------
 * A CUDA package's session runs on a GPU: every function above works as it
 * does on the CPU, with host memory (inputs are copied to the device and
 * outputs back at each run; kiln_session_run returns when the run is done).
 * kiln_session_create uses CUDA device 0 and a stream of the session's own.
 * The functions below also let inputs and outputs stay in device memory.
 * They return KILN_FAILED_PRECONDITION for a CPU package's session. */

/* The device the package runs on; for a CUDA package, *sm (if sm is not
 * NULL) gets its SM as major * 10 + minor (90 for sm_90), else 0. */
KILN_API kiln_device_t kiln_package_device(const kiln_package_t* package, int* sm);
/* A session of a CUDA package on CUDA device `device` (an ordinal), whose
 * runs go on `stream`: a CUstream (or cudaStream_t) of the device's primary
 * context (the one the CUDA runtime API uses), which the caller owns and
 * keeps alive while the session lives; NULL: the session makes its own.
 * The package's kernels load on the device (the cubin when its SM is the
 * package's, else the PTX, which the driver compiles), and its weights are
 * copied there, once per package and device. KILN_FAILED_PRECONDITION for a
 * CPU package, or a GPU older than the package's SM; KILN_INVALID_ARGUMENT
 * for a device that does not exist. */
KILN_API kiln_status_t kiln_session_create_cuda(kiln_package_t* package, int device, void* stream,
                                                kiln_session_t** out_session);
/* Binds an input to device memory the caller owns: kernels read it in
 * place at every run (no copy), until the input is bound or set again; it
 * must stay valid and unchanged while runs read it. `bytes` must equal the
 * input's size; `data` must be aligned to 256 bytes (as cudaMalloc gives) and
 * lie inside one allocation (KILN_INVALID_ARGUMENT). */
KILN_API kiln_status_t kiln_session_bind_input_device(kiln_session_t* session, const char* name,
                                                      kiln_device_ptr_t data, size_t bytes);
/* Makes runs write output `index` straight into device memory the caller
 * owns (same rules), copying nothing to the host: kiln_session_output then
 * gives NULL data, kiln_session_output_device `data`. 0 returns the output to
 * the session's memory, copied to the host. Two arguments of one kernel may
 * not overlap: a run refuses bindings that make them (KILN_INVALID_ARGUMENT). */
KILN_API kiln_status_t kiln_session_bind_output_device(kiln_session_t* session, int index,
                                                       kiln_device_ptr_t data, size_t bytes);
/* keep != 0: runs leave output `index` in the session's device memory
 * (kiln_session_output_device), copying nothing to the host; keep == 0:
 * runs copy it to the host (the default). Undoes a binding of the output. */
KILN_API kiln_status_t kiln_session_keep_output_on_device(kiln_session_t* session, int index, int keep);
/* Where output `index` is in device memory after a run: the session's
 * memory, or the caller's it is bound to. Valid until the next run or the
 * session's release. */
KILN_API kiln_status_t kiln_session_output_device(const kiln_session_t* session, int index,
                                                  kiln_device_ptr_t* data);
/* Enqueues a run on the session's stream and returns without waiting for
 * it. Its outputs (host or device) are ready, and memory bound to the
 * session may change, once the stream has run it (cuStreamSynchronize or
 * cudaStreamSynchronize on kiln_session_cuda_stream). A CPU session runs
 * synchronously, as kiln_session_run. */
KILN_API kiln_status_t kiln_session_run_async(kiln_session_t* session);
/* The CUstream a CUDA session's runs go on; NULL for a CPU session. */
KILN_API void* kiln_session_cuda_stream(const kiln_session_t* session);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif  /* KILN_RUNTIME_H_ */
