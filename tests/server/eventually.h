// Polling a condition in the server tests: a generous bound for "promptly" on a
// loaded machine, never a timing assertion.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace kiln::testing_util {

inline constexpr auto kPatience = std::chrono::seconds(30);

// Waits until `done()` holds; ADD_FAILURE after kPatience.
template <typename F>
void Eventually(F done) {
  const auto until = std::chrono::steady_clock::now() + kPatience;
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) {
      ADD_FAILURE() << "condition not reached within " << kPatience.count() << " s";
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace kiln::testing_util
