// Test helper: a fresh directory under ::testing::TempDir() per test, removed
// afterwards, to hold real SQLite tuning-database files.
#pragma once

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>

#include "gtest/gtest.h"

namespace kiln::tuningdb::testing_util {

class TempDbDir {
 public:
  TempDbDir() {
    static std::atomic<int> counter{0};
    const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = info != nullptr ? std::string(info->name()) : "db";
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("kiln_tuning_db_" + std::to_string(getpid()) + "_" + std::to_string(counter++) + "_" + name);
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  ~TempDbDir() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string Path(const std::string& file = "tuning.db") const { return (dir_ / file).string(); }

 private:
  std::filesystem::path dir_;
};

}  // namespace kiln::tuningdb::testing_util
