/* Runs a Kiln package from C: load it, fill each input from a raw file (or a
 * fixed pattern), run, and print every output's shape, first values and sum.
 *
 *   run_package_c MODEL.kpkg [INPUT0.bin INPUT1.bin ...]
 *
 * An input file holds the input's bytes as the package expects them
 * (little-endian, row-major); `kiln run --help` and docs/runtime-abi.md say more. */
#include <kiln_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t element_size(kiln_dtype_t dtype) {
  switch (dtype) {
    case KILN_DTYPE_FLOAT64: case KILN_DTYPE_INT64: return 8;
    case KILN_DTYPE_FLOAT32: case KILN_DTYPE_INT32: return 4;
    case KILN_DTYPE_FLOAT16: case KILN_DTYPE_INT16: return 2;
    default: return 1;
  }
}

static int fail(const char* what) {
  fprintf(stderr, "run_package_c: %s: %s\n", what, kiln_last_error_message());
  return 1;
}

static int read_file(const char* path, void* data, size_t bytes) {
  FILE* f = fopen(path, "rb");
  if (f == NULL) return 0;
  size_t n = fread(data, 1, bytes, f);
  int extra = fgetc(f) != EOF;
  fclose(f);
  return n == bytes && !extra;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s MODEL.kpkg [INPUT.bin ...]\n", argv[0]);
    return 2;
  }
  printf("kiln runtime %s (ABI %d)\n", kiln_runtime_version(), kiln_runtime_abi_version());
  kiln_package_t* package = NULL;
  if (kiln_package_load(argv[1], &package) != KILN_OK) return fail("load");
  printf("package %s for %s\n", kiln_package_digest(package), kiln_package_target(package));
  kiln_session_t* session = NULL;
  if (kiln_session_create(package, 1, &session) != KILN_OK) return fail("session");
  kiln_package_release(package); /* the session keeps it */

  int num_inputs = kiln_session_num_inputs(session);
  void** inputs = calloc((size_t)num_inputs, sizeof(void*));
  for (int i = 0; i < num_inputs; ++i) {
    kiln_dtype_t dtype;
    int64_t dims[KILN_MAX_RANK];
    int rank;
    if (kiln_session_input_info(session, i, &dtype, dims, &rank) != KILN_OK) return fail("input info");
    size_t count = 1;
    for (int d = 0; d < rank; ++d) count *= (size_t)dims[d];
    size_t bytes = count * element_size(dtype);
    inputs[i] = malloc(bytes > 0 ? bytes : 1);
    if (i + 2 < argc) {
      if (!read_file(argv[i + 2], inputs[i], bytes)) {
        fprintf(stderr, "run_package_c: %s is not %zu bytes of input '%s'\n", argv[i + 2], bytes,
                kiln_session_input_name(session, i));
        return 1;
      }
    } else if (dtype == KILN_DTYPE_FLOAT32) {
      float* x = inputs[i];
      for (size_t k = 0; k < count; ++k) x[k] = (float)(k % 7) * 0.25f - 0.5f;
    } else {
      memset(inputs[i], 0, bytes);
    }
    /* No copy: the session reads the input from this memory at every run. */
    if (kiln_session_bind_input(session, kiln_session_input_name(session, i), inputs[i], bytes) != KILN_OK) {
      return fail("bind input");
    }
  }
  if (kiln_session_run(session) != KILN_OK) return fail("run");

  for (int i = 0; i < kiln_session_num_outputs(session); ++i) {
    const void* data;
    size_t bytes;
    kiln_dtype_t dtype;
    int64_t dims[KILN_MAX_RANK];
    int rank;
    if (kiln_session_output(session, i, &data, &bytes, &dtype, dims, &rank) != KILN_OK) return fail("output");
    printf("output %s [", kiln_session_output_name(session, i));
    for (int d = 0; d < rank; ++d) printf(d ? ",%lld" : "%lld", (long long)dims[d]);
    printf("]");
    if (dtype == KILN_DTYPE_FLOAT32) {
      const float* y = data;
      size_t count = bytes / sizeof(float);
      double sum = 0;
      for (size_t k = 0; k < count; ++k) sum += y[k];
      printf(" first");
      for (size_t k = 0; k < count && k < 4; ++k) printf(" %.6g", y[k]);
      printf(" sum %.6g", sum);
    }
    printf("\n");
  }
  kiln_session_release(session);
  for (int i = 0; i < num_inputs; ++i) free(inputs[i]);
  free(inputs);
  return 0;
}
