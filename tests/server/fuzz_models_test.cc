// Fuzzing the front door with damaged models: truncated and bit-flipped copies
// of ONNX node-test models must give a status from ImportOnnxModel (never a
// crash), and a real server must answer each of a few hundred of them with an
// error or a result and still compile a good model afterwards.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "client/example_models.h"
#include "client/kiln_client.h"
#include "compiler_core/frontend/interpreter.h"
#include "compiler_core/frontend/onnx_importer.h"
#include "tests/server/test_farm.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
constexpr char kNodeTests[] = "/usr/share/libonnx-testdata/data/node";

// model.onnx of every `stride`-th node test (sorted by name).
std::vector<std::string> SampleModels(int stride) {
  std::vector<fs::path> dirs;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(kNodeTests, ec)) {
    if (fs::exists(e.path() / "model.onnx")) dirs.push_back(e.path());
  }
  std::sort(dirs.begin(), dirs.end());
  std::vector<std::string> models;
  for (size_t i = 0; i < dirs.size(); i += stride) {
    std::ifstream f(dirs[i] / "model.onnx", std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    models.push_back(ss.str());
  }
  return models;
}

// Damaged copies of `bytes`: truncations at several lengths and copies with
// 1..4 flipped bits, reproducible from `rng`.
std::vector<std::string> Mutants(const std::string& bytes, std::mt19937& rng, int flips) {
  std::vector<std::string> out;
  if (bytes.empty()) return out;
  for (int k = 0; k < 8; ++k) out.push_back(bytes.substr(0, bytes.size() * k / 8));
  std::uniform_int_distribution<size_t> pos(0, bytes.size() - 1);
  std::uniform_int_distribution<int> bit(0, 7), count(1, 4);
  for (int i = 0; i < flips; ++i) {
    std::string m = bytes;
    for (int n = count(rng); n > 0; --n) m[pos(rng)] ^= static_cast<char>(1 << bit(rng));
    out.push_back(std::move(m));
  }
  return out;
}

TEST(FuzzModelsTest, ImporterReturnsAStatusForDamagedModels) {
  std::vector<std::string> models = SampleModels(10);
  if (models.empty()) GTEST_SKIP() << "no ONNX node tests under " << kNodeTests;
  std::mt19937 rng(1234);
  int imported = 0, rejected = 0;
  for (const std::string& model : models) {
    for (const std::string& bad : Mutants(model, rng, 24)) {
      auto g = ImportOnnxModel(bad, {});
      if (!g.ok()) {
        ++rejected;
        EXPECT_NE(g.status().code(), absl::StatusCode::kOk);
        EXPECT_FALSE(g.status().message().empty());
        continue;
      }
      ++imported;
      // A model that still imports must also be safe to evaluate on zeros.
      std::map<std::string, Tensor> inputs;
      bool bindable = true;
      for (Value* v : (*g)->inputs()) {
        if (!v->type().IsStatic() || NumElements(v->type().StaticDims()) > (1 << 20)) bindable = false;
        if (bindable) inputs.emplace(v->name(), Tensor(v->type().dtype, v->type().StaticDims()));
      }
      if (bindable) (void)Evaluate(**g, inputs);
    }
  }
  EXPECT_GT(rejected, 0);
  RecordProperty("imported", imported);
  RecordProperty("rejected", rejected);
}

TEST(FuzzModelsTest, ServerAnswersDamagedModelsAndKeepsServing) {
  std::vector<std::string> models = SampleModels(40);
  if (models.empty()) GTEST_SKIP() << "no ONNX node tests under " << kNodeTests;
  auto mlp = client::MakeExampleModel("mlp");
  ASSERT_TRUE(mlp.ok()) << mlp.status();
  models.push_back(mlp->onnx_bytes);

  testing::TestFarm farm;
  client::KilnClient client(farm.address());
  std::mt19937 rng(99);
  int answered = 0, errors = 0;
  for (const std::string& model : models) {
    for (const std::string& bad : Mutants(model, rng, 4)) {
      kiln::v1::CompileRequest r;
      r.set_onnx_model(bad);
      r.set_target("cpu");
      r.set_trials_per_group(0);
      auto result = client.Compile(r, [](const kiln::v1::Progress&) {});
      ++answered;
      if (!result.ok()) {
        ++errors;
        // Transport failures would mean the server went away.
        EXPECT_NE(result.status().code(), absl::StatusCode::kUnavailable) << result.status();
        EXPECT_NE(result.status().code(), absl::StatusCode::kInternal) << result.status();
      }
    }
  }
  EXPECT_GE(answered, 200);
  EXPECT_GT(errors, 0);

  kiln::v1::CompileRequest good;
  good.set_onnx_model(mlp->onnx_bytes);
  good.set_target("cpu");
  good.set_trials_per_group(0);
  good.set_model_name("mlp");
  auto* b = good.add_shapes();
  b->set_input("x");
  b->add_dims(8);
  b->add_dims(64);
  auto ok = client.Compile(good, [](const kiln::v1::Progress&) {});
  EXPECT_TRUE(ok.ok()) << ok.status();
}

}  // namespace
}  // namespace kiln
