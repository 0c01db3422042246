// A work queue keyed by job id, shaped like client-go's rate-limited workqueue: a key is queued
// at most once; a key being processed is not handed to a second worker (if it is added again
// meanwhile, it is processed again afterwards); AddAfter delays; AddRateLimited backs off
// exponentially per key until Forget.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>

namespace starforge::controller {

class WorkQueue {
 public:
  using Clock = std::chrono::steady_clock;
  WorkQueue(std::chrono::milliseconds base_delay, std::chrono::milliseconds max_delay);

  void Add(const std::string& key);  // now (no-op if already queued)
  void AddAfter(const std::string& key, std::chrono::milliseconds delay);
  // After base * 2^failures (capped at max); returns that delay.
  std::chrono::milliseconds AddRateLimited(const std::string& key);
  void Forget(const std::string& key);  // reset the key's failure count
  int Failures(const std::string& key);

  // Blocks until a key is ready or ShutDown; nullopt after ShutDown. Call Done(key) after.
  std::optional<std::string> Get();
  void Done(const std::string& key);
  void ShutDown();
  size_t Len();  // keys ready now

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> queue_;
  std::set<std::string> queued_;      // in queue_
  std::set<std::string> processing_;  // handed out, not Done
  std::set<std::string> dirty_;       // added while processing
  std::multimap<Clock::time_point, std::string> delayed_;
  std::map<std::string, int> failures_;
  std::chrono::milliseconds base_, max_;
  bool shutdown_ = false;
};

}  // namespace starforge::controller
