// A work queue keyed by job id, shaped like client-go's rate-limited workqueue: a key is queued
// at most once; a key being processed is not handed to a second worker (if it is added again
// meanwhile, it is processed again afterwards); AddAfter delays; AddRateLimited backs off
// exponentially per key until Forget.
//
// Keys wait in three lanes, served in this order (FIFO within a lane), as controller-runtime's
// priority queue ranks its items: kCleanup (a terminal job's archive and release: the machines
// come back and the user waits for the logs), kEvent (something changed: a fleet notification,
// the API), kResync (a periodic look or a retry whose delay came due). A key added again to a
// better lane moves up; never down. Get(kCleanup) serves the cleanup lane only (dedicated
// workers, so archiving is never queued behind live observes).
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

enum class Lane { kCleanup = 0, kEvent = 1, kResync = 2 };

class WorkQueue {
 public:
  using Clock = std::chrono::steady_clock;
  WorkQueue(std::chrono::milliseconds base_delay, std::chrono::milliseconds max_delay);

  void Add(const std::string& key, Lane lane = Lane::kEvent);  // now (no-op if already queued)
  // Queued in `lane` once `delay` has passed; one pending delay per key, the earliest (its lane
  // the best of the two when they tie).
  void AddAfter(const std::string& key, std::chrono::milliseconds delay, Lane lane = Lane::kResync);
  // After base * 2^failures (capped at max); returns that delay.
  std::chrono::milliseconds AddRateLimited(const std::string& key, Lane lane = Lane::kResync);
  void Forget(const std::string& key);  // reset the key's failure count
  int Failures(const std::string& key);

  // Blocks until a key is ready (in `worst` or a better lane) or ShutDown; nullopt after
  // ShutDown. Call Done(key) after.
  std::optional<std::string> Get(Lane worst = Lane::kResync);
  void Done(const std::string& key);
  void ShutDown();
  size_t Len();  // keys ready now

 private:
  struct Delayed {
    Clock::time_point at;
    Lane lane;
  };
  void AddLocked(const std::string& key, Lane lane);
  void PromoteLocked(Clock::time_point now);
  std::optional<std::string> PopLocked(Lane worst);

  std::mutex mu_;
  std::condition_variable cv_;
  // Per lane; may hold stale entries of keys that moved to a better lane (skipped when popped).
  std::deque<std::string> lanes_[3];
  std::map<std::string, Lane> queued_;  // waiting keys and their lane
  std::set<std::string> processing_;    // handed out, not Done
  std::map<std::string, Lane> dirty_;   // added while processing (best lane asked)
  std::multimap<Clock::time_point, std::string> delayed_;
  std::map<std::string, Delayed> delayed_by_key_;  // the one pending delay of each key
  std::map<std::string, int> failures_;
  std::chrono::milliseconds base_, max_;
  bool shutdown_ = false;
};

}  // namespace starforge::controller
