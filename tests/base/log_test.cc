// The logger on stderr: levels below the minimum are dropped, and a log line
// written while a status line (the CLI's progress bar) is shown erases it,
// takes its place and draws it again below, so the two never share a line.
#include "base/log.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace kiln {
namespace {

// What `write` puts on stderr (fd 2), captured in a file of this process's
// own: ctest runs each test as a process, several at once, in one TempDir.
template <typename Write>
std::string CaptureStderr(Write write) {
  const std::string path =
      (std::filesystem::path(::testing::TempDir()) / ("log_test_stderr." + std::to_string(getpid()) + ".txt"))
          .string();
  std::fflush(stderr);
  const int saved = dup(2);
  FILE* file = std::fopen(path.c_str(), "w");
  dup2(fileno(file), 2);
  write();
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  std::fclose(file);
  std::stringstream text;
  text << std::ifstream(path).rdbuf();
  std::filesystem::remove(path);
  return text.str();
}

// The line without its "ts=... " prefix.
std::string WithoutTimestamps(std::string text) {
  for (size_t at = text.find("ts="); at != std::string::npos; at = text.find("ts=", at)) {
    text.erase(at, text.find(' ', at) + 1 - at);
  }
  return text;
}

class LogTest : public ::testing::Test {
 protected:
  void SetUp() override { saved_ = MinLogLevel(); }
  void TearDown() override { SetMinLogLevel(saved_); }
  LogLevel saved_;
};

TEST_F(LogTest, LinesBelowTheMinimumLevelAreDropped) {
  SetMinLogLevel(LogLevel::kWarning);
  const std::string text = CaptureStderr([] {
    LogInfo("not shown");
    LogWarn("shown", {{"key", "a value"}});
    LogError("also shown");
  });
  EXPECT_EQ(WithoutTimestamps(text), "level=warn msg=shown key=\"a value\"\nlevel=error msg=\"also shown\"\n");
}

TEST_F(LogTest, ALogLineNeverSharesALineWithTheStatusLine) {
  SetMinLogLevel(LogLevel::kInfo);
  const std::string text = CaptureStderr([] {
    ShowStatusLine("[#.] 1/2 groups");
    LogInfo("leased task", {{"task", "t1"}});
    ShowStatusLine("[##] 2/2 groups");
    EndStatusLine(/*keep=*/true);
    LogInfo("after");
    EndStatusLine(/*keep=*/true);  // none shown: nothing
  });
  EXPECT_EQ(WithoutTimestamps(text),
            "\r\033[K[#.] 1/2 groups"
            "\r\033[Klevel=info msg=\"leased task\" task=t1\n[#.] 1/2 groups"
            "\r\033[K[##] 2/2 groups\n"
            "level=info msg=after\n");
}

TEST_F(LogTest, AnErasedStatusLineLeavesNothingBehind) {
  const std::string text = CaptureStderr([] {
    ShowStatusLine("working");
    EndStatusLine(/*keep=*/false);
  });
  EXPECT_EQ(text, "\r\033[Kworking\r\033[K");
}

TEST(ParseLogLevelTest, NamesAndAnError) {
  EXPECT_EQ(*ParseLogLevel("warning"), LogLevel::kWarning);
  EXPECT_EQ(*ParseLogLevel("warn"), LogLevel::kWarning);
  EXPECT_EQ(*ParseLogLevel("debug"), LogLevel::kDebug);
  EXPECT_FALSE(ParseLogLevel("loud").ok());
}

}  // namespace
}  // namespace kiln
