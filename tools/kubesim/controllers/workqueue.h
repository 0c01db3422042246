// A rate-free work queue in the shape of client-go's workqueue: first in, first out; keys are
// deduplicated while waiting (a re-add keeps the key's place), a key being processed is not
// handed to a second worker (a re-add while processing is kept and queued after Done), and
// AddAfter schedules a delayed add (a requeue). FIFO matters under load: with more ready keys
// than workers, any other order can starve a key for minutes (KubeRay's 30 s submitter grace
// period then fails a RayJob that was never looked at).
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace kubesim::controllers {

class WorkQueue {
 public:
  using Clock = std::chrono::steady_clock;

  void Add(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu_);
    AddLocked(key);
  }

  // Adds `key` once `delay` has passed (an earlier pending delayed add wins).
  void AddAfter(const std::string& key, std::chrono::milliseconds delay) {
    if (delay.count() <= 0) return Add(key);
    std::lock_guard<std::mutex> lock(mu_);
    const auto when = Clock::now() + delay;
    auto it = delayed_.find(key);
    if (it == delayed_.end() || when < it->second) delayed_[key] = when;
    cv_.notify_all();
  }

  // Blocks until a key is ready or the queue is shut down (nullopt).
  std::optional<std::string> Get() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      if (shutdown_) return std::nullopt;
      PromoteLocked();
      if (!ready_.empty()) {
        std::string key = std::move(ready_.front());
        ready_.pop_front();
        queued_.erase(key);
        processing_.insert(key);
        return key;
      }
      auto next = Clock::now() + std::chrono::milliseconds(500);
      for (const auto& [k, when] : delayed_) {
        if (when < next) next = when;
      }
      cv_.wait_until(lock, next);
    }
  }

  // The worker is finished with `key`; a re-add that arrived meanwhile becomes ready.
  void Done(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu_);
    processing_.erase(key);
    if (dirty_.erase(key) != 0) {
      queued_.insert(key);
      ready_.push_back(key);
      cv_.notify_all();
    }
  }

  void ShutDown() {
    std::lock_guard<std::mutex> lock(mu_);
    shutdown_ = true;
    cv_.notify_all();
  }

 private:
  void AddLocked(const std::string& key) {
    if (processing_.count(key) != 0) {
      dirty_.insert(key);
      return;
    }
    if (!queued_.insert(key).second) return;  // already waiting: it keeps its place
    ready_.push_back(key);
    cv_.notify_all();
  }
  void PromoteLocked() {
    const auto now = Clock::now();
    std::vector<std::pair<Clock::time_point, std::string>> due;
    for (auto it = delayed_.begin(); it != delayed_.end();) {
      if (it->second <= now) {
        due.emplace_back(it->second, it->first);
        it = delayed_.erase(it);
      } else {
        ++it;
      }
    }
    std::sort(due.begin(), due.end());  // the longest due first
    for (const auto& d : due)
      AddLocked(d.second);
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> ready_;  // FIFO
  std::set<std::string> queued_;   // the keys in ready_
  std::set<std::string> processing_;
  std::set<std::string> dirty_;
  std::map<std::string, Clock::time_point> delayed_;
  bool shutdown_ = false;
};

}  // namespace kubesim::controllers
