// A rate-free work queue in the shape of client-go's workqueue: first in, first out; keys are
// deduplicated while waiting (a re-add keeps the key's place), a key being processed is not
// handed to a second worker (a re-add while processing is kept and queued after Done), and
// AddAfter schedules a delayed add (a requeue). FIFO matters under load: with more ready keys
// than workers, any other order can starve a key for minutes (KubeRay's 30 s submitter grace
// period then fails a RayJob that was never looked at).
//
// With `events_first`, keys added by Add (a watch event: something changed) are handed out
// before keys whose AddAfter came due (periodic polls), as controller-runtime's priority queue
// ranks resyncs low: kubesim's reconciles read through the API and are far slower than a real
// operator's cached ones, and a poll round over hundreds of busy objects must not delay the
// reaction to an event (a submitter Job completing) by the length of the round.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
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

  explicit WorkQueue(bool events_first = false) : events_first_(events_first) {}

  void Add(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu_);
    AddLocked(key, true);
  }

  // Adds `key` once `delay` has passed (an earlier pending delayed add wins).
  void AddAfter(const std::string& key, std::chrono::milliseconds delay) {
    if (delay.count() <= 0) return Add(key);
    std::lock_guard<std::mutex> lock(mu_);
    const auto when = Clock::now() + delay;
    auto it = delayed_.find(key);
    if (it != delayed_.end()) {
      if (it->second <= when) return;
      by_time_.erase({it->second, key});
    }
    delayed_[key] = when;
    by_time_.emplace(when, key);
    // Idle workers sleep until the earliest requeue: only a new earliest changes that, and one
    // worker awake is enough to take it when due.
    if (by_time_.begin()->second == key) cv_.notify_one();
  }

  // Blocks until a key is ready or the queue is shut down (nullopt).
  std::optional<std::string> Get() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      if (shutdown_) return std::nullopt;
      PromoteLocked();
      for (auto* q : {&events_, &due_}) {
        while (!q->empty()) {
          auto [key, seq] = std::move(q->front());
          q->pop_front();
          auto it = queued_.find(key);
          if (it == queued_.end() || it->second.seq != seq) continue;  // moved to events_
          queued_.erase(it);
          processing_.insert(key);
          return key;
        }
      }
      auto next = Clock::now() + std::chrono::milliseconds(500);
      if (!by_time_.empty() && by_time_.begin()->first < next) next = by_time_.begin()->first;
      cv_.wait_until(lock, next);
    }
  }

  // The worker is finished with `key`; a re-add that arrived meanwhile becomes ready.
  void Done(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu_);
    processing_.erase(key);
    auto it = dirty_.find(key);
    if (it != dirty_.end()) {
      const bool event = it->second;
      dirty_.erase(it);
      Enqueue(key, event);
    }
  }

  void ShutDown() {
    std::lock_guard<std::mutex> lock(mu_);
    shutdown_ = true;
    cv_.notify_all();
  }

 private:
  // `event`: from Add (else a requeue that came due).
  void AddLocked(const std::string& key, bool event) {
    if (processing_.count(key) != 0) {
      dirty_[key] = dirty_[key] || event;
      return;
    }
    auto q = queued_.find(key);
    if (q == queued_.end()) return Enqueue(key, event);
    // Already waiting: it keeps its place, unless an event lifts a due poll to the events (its
    // entry in due_ is left behind, stale: Get skips it by its sequence number).
    if (event && events_first_ && !q->second.event) {
      q->second = {true, ++seq_};
      events_.emplace_back(key, q->second.seq);
    }
  }
  void Enqueue(const std::string& key, bool event) {
    const bool to_events = (event && events_first_) || !events_first_;
    queued_[key] = {to_events, ++seq_};
    (to_events ? events_ : due_).emplace_back(key, seq_);
    // One key, one worker: with all of them (16 RayJob workers) woken for each key, 5 % of
    // kubesim's profile at 1,000 RayJobs was workers waking to find nothing.
    cv_.notify_one();
  }
  // The requeues that came due, the longest due first: by_time_ is in that order, so this costs
  // what is due, not what waits (a scan of every delayed key on every Get was a tenth of
  // kubesim's CPU at 1,000 RayJobs).
  void PromoteLocked() {
    const auto now = Clock::now();
    while (!by_time_.empty() && by_time_.begin()->first <= now) {
      auto node = by_time_.extract(by_time_.begin());
      delayed_.erase(node.value().second);
      AddLocked(node.value().second, false);
    }
  }

  const bool events_first_;
  std::mutex mu_;
  std::condition_variable cv_;
  // A waiting key: in events_ (event) or due_, as the entry with this sequence number.
  struct Queued {
    bool event = false;
    uint64_t seq = 0;
  };
  using Entry = std::pair<std::string, uint64_t>;  // key, sequence number
  std::deque<Entry> events_;                       // FIFO (every key when !events_first_)
  std::deque<Entry> due_;                 // FIFO of requeues that came due (events_first_ only)
  std::map<std::string, Queued> queued_;  // the one live entry of each waiting key
  uint64_t seq_ = 0;
  std::set<std::string> processing_;
  std::map<std::string, bool> dirty_;  // re-added while processing; true = by an event
  std::map<std::string, Clock::time_point> delayed_;             // key → when it is due
  std::set<std::pair<Clock::time_point, std::string>> by_time_;  // the same, by when
  bool shutdown_ = false;
};

}  // namespace kubesim::controllers
