#include "starforge/controller/work_queue.h"

#include <algorithm>

namespace starforge::controller {

namespace {

// Queues `key` unless it already waits; a key being processed is marked dirty instead (Done
// queues it again). Returns whether a worker should be woken.
bool AddLocked(const std::string& key, std::deque<std::string>& queue,
               std::set<std::string>& queued, const std::set<std::string>& processing,
               std::set<std::string>& dirty) {
  if (queued.count(key) != 0) return false;
  if (processing.count(key) != 0) {
    dirty.insert(key);
    return false;
  }
  queue.push_back(key);
  queued.insert(key);
  return true;
}

}  // namespace

WorkQueue::WorkQueue(std::chrono::milliseconds base_delay, std::chrono::milliseconds max_delay)
    : base_(base_delay), max_(std::max(max_delay, base_delay)) {}

void WorkQueue::Add(const std::string& key) {
  std::lock_guard lock(mu_);
  if (shutdown_) return;
  if (AddLocked(key, queue_, queued_, processing_, dirty_)) cv_.notify_one();
}

void WorkQueue::AddAfter(const std::string& key, std::chrono::milliseconds delay) {
  if (delay <= std::chrono::milliseconds::zero()) return Add(key);
  std::lock_guard lock(mu_);
  if (shutdown_) return;
  const Clock::time_point at = Clock::now() + delay;
  // One pending delay per key, the earliest: a later AddAfter never postpones the key.
  for (auto it = delayed_.begin(); it != delayed_.end(); ++it) {
    if (it->second != key) continue;
    if (it->first <= at) return;
    delayed_.erase(it);
    break;
  }
  delayed_.emplace(at, key);
  cv_.notify_all();  // a waiting Get may now have to wake earlier
}

std::chrono::milliseconds WorkQueue::AddRateLimited(const std::string& key) {
  std::chrono::milliseconds delay;
  {
    std::lock_guard lock(mu_);
    const int n = failures_[key]++;
    // Shifts beyond 30 overflow; the cap is reached long before anyway.
    delay = n >= 30 ? max_ : std::min(max_, base_ * (int64_t{1} << n));
  }
  AddAfter(key, delay);
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

std::optional<std::string> WorkQueue::Get() {
  std::unique_lock lock(mu_);
  for (;;) {
    if (shutdown_) return std::nullopt;
    const Clock::time_point now = Clock::now();
    while (!delayed_.empty() && delayed_.begin()->first <= now) {
      AddLocked(delayed_.begin()->second, queue_, queued_, processing_, dirty_);
      delayed_.erase(delayed_.begin());
    }
    if (!queue_.empty()) {
      std::string key = std::move(queue_.front());
      queue_.pop_front();
      queued_.erase(key);
      processing_.insert(key);
      return key;
    }
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
  if (dirty_.erase(key) != 0 && !shutdown_) {
    if (AddLocked(key, queue_, queued_, processing_, dirty_)) cv_.notify_one();
  }
}

void WorkQueue::ShutDown() {
  std::lock_guard lock(mu_);
  shutdown_ = true;
  cv_.notify_all();
}

size_t WorkQueue::Len() {
  std::lock_guard lock(mu_);
  const Clock::time_point now = Clock::now();
  while (!delayed_.empty() && delayed_.begin()->first <= now) {
    AddLocked(delayed_.begin()->second, queue_, queued_, processing_, dirty_);
    delayed_.erase(delayed_.begin());
  }
  return queue_.size();
}

}  // namespace starforge::controller
