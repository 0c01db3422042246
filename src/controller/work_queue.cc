#include "starforge/controller/work_queue.h"

#include <algorithm>

namespace starforge::controller {

namespace {

bool Better(Lane a, Lane b) {
  return static_cast<int>(a) < static_cast<int>(b);
}

}  // namespace

WorkQueue::WorkQueue(std::chrono::milliseconds base_delay, std::chrono::milliseconds max_delay)
    : base_(base_delay), max_(std::max(max_delay, base_delay)) {}

// Queues `key` in `lane` unless it already waits there or in a better lane (a worse one is left
// for this one); a key being processed is marked dirty instead (Done queues it again).
void WorkQueue::AddLocked(const std::string& key, Lane lane) {
  if (auto it = queued_.find(key); it != queued_.end()) {
    if (!Better(lane, it->second)) return;
    it->second = lane;  // the entry in the worse lane goes stale
    lanes_[static_cast<int>(lane)].push_back(key);
    cv_.notify_all();
    return;
  }
  if (processing_.count(key) != 0) {
    auto [it, fresh] = dirty_.emplace(key, lane);
    if (!fresh && Better(lane, it->second)) it->second = lane;
    return;
  }
  queued_.emplace(key, lane);
  lanes_[static_cast<int>(lane)].push_back(key);
  // notify_all: a cleanup-only worker may be the one waiting.
  cv_.notify_all();
}

void WorkQueue::PromoteLocked(Clock::time_point now) {
  while (!delayed_.empty() && delayed_.begin()->first <= now) {
    const std::string key = delayed_.begin()->second;
    delayed_.erase(delayed_.begin());
    auto d = delayed_by_key_.find(key);
    const Lane lane = d == delayed_by_key_.end() ? Lane::kResync : d->second.lane;
    if (d != delayed_by_key_.end()) delayed_by_key_.erase(d);
    AddLocked(key, lane);
  }
}

std::optional<std::string> WorkQueue::PopLocked(Lane worst) {
  for (int l = 0; l <= static_cast<int>(worst); ++l) {
    auto& lane = lanes_[l];
    while (!lane.empty()) {
      std::string key = std::move(lane.front());
      lane.pop_front();
      auto it = queued_.find(key);
      if (it == queued_.end() || static_cast<int>(it->second) != l) continue;  // stale
      queued_.erase(it);
      processing_.insert(key);
      return key;
    }
  }
  return std::nullopt;
}

void WorkQueue::Add(const std::string& key, Lane lane) {
  std::lock_guard lock(mu_);
  if (shutdown_) return;
  AddLocked(key, lane);
}

void WorkQueue::AddAfter(const std::string& key, std::chrono::milliseconds delay, Lane lane) {
  if (delay <= std::chrono::milliseconds::zero()) return Add(key, lane);
  std::lock_guard lock(mu_);
  if (shutdown_) return;
  const Clock::time_point at = Clock::now() + delay;
  // One pending delay per key, the earliest: a later AddAfter never postpones the key.
  if (auto it = delayed_by_key_.find(key); it != delayed_by_key_.end()) {
    if (it->second.at <= at) {
      if (it->second.at == at && Better(lane, it->second.lane)) it->second.lane = lane;
      return;
    }
    auto [first, last] = delayed_.equal_range(it->second.at);
    for (auto d = first; d != last; ++d) {
      if (d->second == key) {
        delayed_.erase(d);
        break;
      }
    }
    delayed_by_key_.erase(it);
  }
  delayed_.emplace(at, key);
  delayed_by_key_[key] = {at, lane};
  cv_.notify_all();  // a waiting Get may now have to wake earlier
}

std::chrono::milliseconds WorkQueue::AddRateLimited(const std::string& key, Lane lane) {
  std::chrono::milliseconds delay;
  {
    std::lock_guard lock(mu_);
    const int n = failures_[key]++;
    // Shifts beyond 30 overflow; the cap is reached long before anyway.
    delay = n >= 30 ? max_ : std::min(max_, base_ * (int64_t{1} << n));
  }
  AddAfter(key, delay, lane);
  return delay;
}

void WorkQueue::Forget(const std::string& key) {
  std::lock_guard lock(mu_);
  failures_.erase(key);
}

int WorkQueue::Failures(const std::string& key) {
  std::lock_guard lock(mu_);
  auto it = failures_.find(key);
  return it == failures_.end() ? 0 : it->second;
}

std::optional<std::string> WorkQueue::Get(Lane worst) {
  std::unique_lock lock(mu_);
  for (;;) {
    if (shutdown_) return std::nullopt;
    PromoteLocked(Clock::now());
    if (auto key = PopLocked(worst)) return key;
    if (delayed_.empty()) {
      cv_.wait(lock);
    } else {
      // A copy: another thread may erase that map node while this one waits, and the wait
      // reads the deadline again when it wakes.
      const Clock::time_point until = delayed_.begin()->first;
      cv_.wait_until(lock, until);
    }
  }
}

void WorkQueue::Done(const std::string& key) {
  std::lock_guard lock(mu_);
  processing_.erase(key);
  auto it = dirty_.find(key);
  if (it == dirty_.end()) return;
  const Lane lane = it->second;
  dirty_.erase(it);
  if (!shutdown_) AddLocked(key, lane);
}

void WorkQueue::ShutDown() {
  std::lock_guard lock(mu_);
  shutdown_ = true;
  cv_.notify_all();
}

size_t WorkQueue::Len() {
  std::lock_guard lock(mu_);
  PromoteLocked(Clock::now());
  return queued_.size();
}

}  // namespace starforge::controller
