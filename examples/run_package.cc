// Runs a Kiln package from C++ through kiln_runtime.hpp (RAII and exceptions
// over the C API): the same program as run_package.c, with the pattern inputs.
//
//   run_package_cpp MODEL.kpkg [THREADS]
#include <kiln_runtime.hpp>

#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL.kpkg [THREADS]\n", argv[0]);
    return 2;
  }
  try {
    kiln_rt::Package package = kiln_rt::Package::Load(argv[1]);
    std::printf("package %s for %s\n", package.digest().c_str(), package.target().c_str());
    kiln_rt::Session session(package, argc > 2 ? std::atoi(argv[2]) : 1);

    std::vector<std::vector<float>> inputs;
    for (const kiln_rt::TensorInfo& in : session.inputs()) {
      if (in.dtype != KILN_DTYPE_FLOAT32) throw kiln_rt::Error(KILN_UNIMPLEMENTED, "this example feeds float32 only");
      size_t count = std::accumulate(in.dims.begin(), in.dims.end(), size_t{1},
                                     [](size_t a, int64_t d) { return a * static_cast<size_t>(d); });
      std::vector<float>& x = inputs.emplace_back(count);
      for (size_t k = 0; k < count; ++k) x[k] = static_cast<float>(k % 7) * 0.25f - 0.5f;
      session.BindInput(in.name, x.data(), x.size() * sizeof(float));
    }
    // Outputs straight into our own vectors: no copy after the run.
    std::vector<kiln_rt::TensorInfo> outs = session.outputs();
    std::vector<std::vector<float>> outputs;
    for (size_t i = 0; i < outs.size(); ++i) {
      size_t count = std::accumulate(outs[i].dims.begin(), outs[i].dims.end(), size_t{1},
                                     [](size_t a, int64_t d) { return a * static_cast<size_t>(d); });
      std::vector<float>& y = outputs.emplace_back(count);
      if (outs[i].dtype == KILN_DTYPE_FLOAT32) {
        session.BindOutput(static_cast<int>(i), y.data(), y.size() * sizeof(float));
      }
    }
    session.Run();
    for (size_t i = 0; i < outs.size(); ++i) {
      if (outs[i].dtype != KILN_DTYPE_FLOAT32) continue;
      const std::vector<float>& y = outputs[i];
      std::printf("output %s sum %.6g\n", outs[i].name.c_str(), std::accumulate(y.begin(), y.end(), 0.0));
    }
  } catch (const kiln_rt::Error& e) {
    std::fprintf(stderr, "run_package_cpp: %s\n", e.what());
    return 1;
  }
  return 0;
}
