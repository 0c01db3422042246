// Waiting in tests for something another thread or process does.
#pragma once

#include <chrono>
#include <thread>

namespace starforge::support {

// Calls `f` every `interval` until it returns true or `timeout` passes; its last answer.
template <typename F>
bool Eventually(F f, std::chrono::milliseconds timeout = std::chrono::seconds(10),
                std::chrono::milliseconds interval = std::chrono::milliseconds(20)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (f()) return true;
    std::this_thread::sleep_for(interval);
  }
  return f();
}

}  // namespace starforge::support
