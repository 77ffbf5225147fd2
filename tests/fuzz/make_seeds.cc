// Seeds for the fuzz targets that take Kiln's own formats, made from ONNX
// models: the kiln.v1.Graph of each model that imports (graph_proto) and the
// package it compiles to with default schedules (package_load), the same
// bytes `kiln compile --trials 0` writes. tests/fuzz/run_fuzzers.sh runs it
// over the ONNX conformance models.
//
//   kiln_fuzz_make_seeds [--graphs DIR] [--packages DIR] [--target CPU] MODEL.onnx...
//
// A seed is named after the model ("mlp.onnx" -> "mlp"), or its folder for
// the test suites' "test_relu/model.onnx". Models that do not import or
// compile are skipped.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "compiler_core/codegen/target.h"
#include "compiler_core/driver/compile_driver.h"
#include "compiler_core/frontend/graph_proto.h"

namespace {

bool WriteFile(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return out.good();
}

}  // namespace

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  std::string graphs, packages, target_name = "x86-64";
  std::vector<fs::path> models;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if ((arg == "--graphs" || arg == "--packages" || arg == "--target") && i + 1 < argc) {
      (arg == "--graphs" ? graphs : arg == "--packages" ? packages : target_name) = argv[++i];
    } else if (!arg.empty() && arg[0] == '-') {
      std::fprintf(stderr, "usage: %s [--graphs DIR] [--packages DIR] [--target CPU] MODEL.onnx...\n", argv[0]);
      return 2;
    } else {
      models.emplace_back(arg);
    }
  }
  absl::StatusOr<kiln::CpuTarget> target = kiln::CpuTarget::Named(target_name);
  if (!target.ok()) {
    std::fprintf(stderr, "make_seeds: %s\n", target.status().ToString().c_str());
    return 2;
  }
  int num_graphs = 0, num_packages = 0;
  for (const fs::path& model : models) {
    std::ifstream in(model, std::ios::binary);
    kiln::ModelSource source;
    source.onnx_model.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    absl::StatusOr<std::unique_ptr<kiln::Graph>> graph = kiln::ImportModel(source);
    if (!graph.ok()) continue;
    const std::string name =
        model.stem() == "model" ? model.parent_path().filename().string() : model.stem().string();
    if (!graphs.empty()) {
      kiln::v1::Graph proto;
      kiln::GraphToProto(**graph, &proto);
      if (!WriteFile(fs::path(graphs) / name, proto.SerializeAsString())) return 1;
      ++num_graphs;
    }
    if (packages.empty()) continue;
    kiln::PackageOptions options;
    options.model_name = name;
    options.target = *target;
    absl::StatusOr<kiln::PackageBytes> package = kiln::CompileWithDefaultSchedules(std::move(*graph), options);
    if (!package.ok()) continue;
    if (!WriteFile(fs::path(packages) / name, package->bytes)) return 1;
    ++num_packages;
  }
  std::printf("make_seeds: %zu models: %d graphs, %d packages\n", models.size(), num_graphs, num_packages);
  return 0;
}
