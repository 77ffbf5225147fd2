// XGBoost through its C API (Debian's libxgboost-dev): dense matrices in,
// squared-error regression on the normalised throughput.
#include "server/cost_model.h"

#include <cmath>
#include <limits>
#include <memory>

#include "absl/strings/str_cat.h"
#include "xgboost/c_api.h"

namespace kiln::server {
namespace {

absl::Status XgbError(const char* what) {
  return absl::InternalError(absl::StrCat("XGBoost ", what, ": ", XGBGetLastError()));
}

// A DMatrix freed with its scope.
struct Matrix {
  DMatrixHandle handle = nullptr;
  ~Matrix() {
    if (handle != nullptr) XGDMatrixFree(handle);
  }
};

absl::Status MakeMatrix(const FeatureMatrix& x, Matrix* out) {
  if (XGDMatrixCreateFromMat(x.data.data(), static_cast<bst_ulong>(x.rows()), static_cast<bst_ulong>(x.cols),
                             std::numeric_limits<float>::quiet_NaN(), &out->handle) != 0) {
    return XgbError("cannot make a matrix");
  }
  return absl::OkStatus();
}

}  // namespace

void FeatureMatrix::AddRow(const std::vector<float>& row) {
  if (cols == 0) cols = static_cast<int>(row.size());
  data.insert(data.end(), row.begin(), row.end());
}

CostModel::~CostModel() {
  if (booster_ != nullptr) XGBoosterFree(booster_);
}

absl::Status CostModel::Train(const FeatureMatrix& x, const std::vector<float>& y,
                              const std::vector<unsigned>& groups) {
  if (x.rows() == 0 || x.cols <= 0) return absl::InvalidArgumentError("cost model: no training rows");
  if (static_cast<int64_t>(y.size()) != x.rows() || static_cast<int64_t>(x.data.size()) != x.rows() * x.cols) {
    return absl::InvalidArgumentError(
        absl::StrCat("cost model: ", x.rows(), " rows of ", x.cols, " features but ", y.size(), " labels"));
  }
  Matrix m;
  if (absl::Status s = MakeMatrix(x, &m); !s.ok()) return s;
  if (XGDMatrixSetFloatInfo(m.handle, "label", y.data(), static_cast<bst_ulong>(y.size())) != 0) {
    return XgbError("cannot set labels");
  }
  if (!groups.empty()) {
    int64_t total = 0;
    for (unsigned g : groups) total += g;
    if (total != x.rows()) {
      return absl::InvalidArgumentError(
          absl::StrCat("cost model: groups cover ", total, " rows of ", x.rows()));
    }
    if (XGDMatrixSetUIntInfo(m.handle, "group", groups.data(), static_cast<bst_ulong>(groups.size())) != 0) {
      return XgbError("cannot set groups");
    }
  }
  BoosterHandle booster = nullptr;
  if (XGBoosterCreate(&m.handle, 1, &booster) != 0) return XgbError("cannot create a booster");
  std::unique_ptr<void, int (*)(BoosterHandle)> owned(booster, XGBoosterFree);
  const std::vector<std::pair<std::string, std::string>> params = {
      {"booster", "gbtree"},
      {"objective", options_.objective},
      {"max_depth", absl::StrCat(options_.max_depth)},
      {"eta", absl::StrCat(options_.eta)},
      {"min_child_weight", "1"},
      {"subsample", "1"},
      {"nthread", absl::StrCat(options_.threads)},
      {"verbosity", "0"},
      {"seed", "0"},
  };
  for (const auto& [k, v] : params) {
    if (XGBoosterSetParam(booster, k.c_str(), v.c_str()) != 0) return XgbError("rejects a parameter");
  }
  for (int i = 0; i < options_.rounds; ++i) {
    if (XGBoosterUpdateOneIter(booster, i, m.handle) != 0) return XgbError("training failed");
  }
  if (booster_ != nullptr) XGBoosterFree(booster_);
  booster_ = owned.release();
  cols_ = x.cols;
  trained_rows_ = x.rows();
  return absl::OkStatus();
}

absl::StatusOr<std::vector<float>> CostModel::Predict(const FeatureMatrix& x) const {
  if (booster_ == nullptr) return absl::FailedPreconditionError("cost model: not trained");
  if (x.rows() == 0) return std::vector<float>{};
  if (x.cols != cols_) {
    return absl::InvalidArgumentError(
        absl::StrCat("cost model: trained on ", cols_, " features, asked about ", x.cols));
  }
  Matrix m;
  if (absl::Status s = MakeMatrix(x, &m); !s.ok()) return s;
  bst_ulong len = 0;
  const float* out = nullptr;
  if (XGBoosterPredict(booster_, m.handle, /*option_mask=*/0, /*ntree_limit=*/0, /*training=*/0, &len, &out) != 0) {
    return XgbError("prediction failed");
  }
  if (static_cast<int64_t>(len) != x.rows()) return absl::InternalError("XGBoost returned the wrong number of scores");
  return std::vector<float>(out, out + len);
}

}  // namespace kiln::server
