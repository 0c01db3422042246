// The work queue: dedup, one worker per key, delays, per-key backoff, shutdown.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "starforge/controller/work_queue.h"

namespace starforge::controller {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::chrono::milliseconds Since(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t);
}

TEST(WorkQueueTest, AKeyIsQueuedOnce) {
  WorkQueue q(10ms, 100ms);
  q.Add("a");
  q.Add("b");
  q.Add("a");
  EXPECT_EQ(q.Len(), 2u);
  EXPECT_EQ(q.Get(), "a");
  EXPECT_EQ(q.Get(), "b");
  EXPECT_EQ(q.Len(), 0u);
}

TEST(WorkQueueTest, AKeyBeingProcessedIsNotHandedOutAgainButIsRequeuedWhenDone) {
  WorkQueue q(10ms, 100ms);
  q.Add("a");
  ASSERT_EQ(q.Get(), "a");
  q.Add("a");  // changed while a worker holds it: dirty
  q.Add("a");
  EXPECT_EQ(q.Len(), 0u);
  auto second = std::async(std::launch::async, [&] { return q.Get(); });
  EXPECT_EQ(second.wait_for(100ms), std::future_status::timeout);  // not while processing
  q.Done("a");
  ASSERT_EQ(second.wait_for(2s), std::future_status::ready);
  EXPECT_EQ(second.get(), "a");
  q.Done("a");
  EXPECT_EQ(q.Len(), 0u);  // the two Adds while processing made one more round, not two
}

TEST(WorkQueueTest, DoneWithoutChangesDoesNotRequeue) {
  WorkQueue q(10ms, 100ms);
  q.Add("a");
  ASSERT_EQ(q.Get(), "a");
  q.Done("a");
  EXPECT_EQ(q.Len(), 0u);
}

TEST(WorkQueueTest, CleanupBeforeEventsBeforeResyncsAndAKeyMovesUpOnly) {
  WorkQueue q(10ms, 100ms);
  q.Add("resync-1", Lane::kResync);
  q.Add("event-1");
  q.Add("resync-2", Lane::kResync);
  q.Add("cleanup-1", Lane::kCleanup);
  q.Add("resync-2", Lane::kCleanup);  // moves up
  q.Add("event-1", Lane::kResync);    // never down
  EXPECT_EQ(q.Len(), 4u);
  EXPECT_EQ(q.Get(), "cleanup-1");
  EXPECT_EQ(q.Get(), "resync-2");
  EXPECT_EQ(q.Get(), "event-1");
  EXPECT_EQ(q.Get(), "resync-1");
  EXPECT_EQ(q.Len(), 0u);
}

TEST(WorkQueueTest, ACleanupWorkerTakesOnlyCleanupWork) {
  WorkQueue q(10ms, 100ms);
  q.Add("live");
  auto cleanup = std::async(std::launch::async, [&] { return q.Get(Lane::kCleanup); });
  EXPECT_EQ(cleanup.wait_for(100ms), std::future_status::timeout);
  q.Add("ended", Lane::kCleanup);
  ASSERT_EQ(cleanup.wait_for(2s), std::future_status::ready);
  EXPECT_EQ(cleanup.get(), "ended");
  EXPECT_EQ(q.Get(), "live");
  // A key re-added while processed keeps the best lane asked for.
  q.Add("ended", Lane::kResync);
  q.Add("ended", Lane::kCleanup);
  q.Done("ended");
  EXPECT_EQ(q.Get(Lane::kCleanup), "ended");
}

TEST(WorkQueueTest, AddAfterDelaysAndTheEarliestDelayWins) {
  WorkQueue q(10ms, 100ms);
  const auto start = Clock::now();
  q.AddAfter("a", 60ms);
  EXPECT_EQ(q.Len(), 0u);
  EXPECT_EQ(q.Get(), "a");
  EXPECT_GE(Since(start), 60ms);
  q.Done("a");

  const auto t = Clock::now();
  q.AddAfter("b", 600ms);
  q.AddAfter("b", 10ms);   // sooner: replaces
  q.AddAfter("b", 900ms);  // later: ignored
  EXPECT_EQ(q.Get(), "b");
  EXPECT_LT(Since(t), 500ms);
  q.Done("b");
  std::this_thread::sleep_until(t + 700ms);  // the replaced 600 ms entry must be gone
  EXPECT_EQ(q.Len(), 0u);

  q.AddAfter("c", 0ms);  // no delay: at once
  EXPECT_EQ(q.Len(), 1u);
}

TEST(WorkQueueTest, AddAfterOfAQueuedKeyDoesNotDuplicateIt) {
  WorkQueue q(10ms, 100ms);
  q.Add("a");
  q.AddAfter("a", 10ms);
  std::this_thread::sleep_for(30ms);
  EXPECT_EQ(q.Len(), 1u);
}

TEST(WorkQueueTest, RateLimitedBackoffGrowsIsCappedAndForgotten) {
  WorkQueue q(10ms, 40ms);
  std::vector<std::chrono::milliseconds> waited;
  for (int i = 0; i < 6; ++i) {
    const auto t = Clock::now();
    q.AddRateLimited("a");
    ASSERT_EQ(q.Get(), "a");
    waited.push_back(Since(t));
    q.Done("a");
  }
  EXPECT_EQ(q.Failures("a"), 6);
  // 10, 20, 40, then the cap 40 (uncapped, the sixth would wait 320).
  EXPECT_GE(waited[0], 10ms);
  EXPECT_GE(waited[1], 20ms);
  EXPECT_GE(waited[2], 40ms);
  EXPECT_GE(waited[5], 40ms);
  EXPECT_LT(waited[5], 250ms);

  q.Forget("a");
  EXPECT_EQ(q.Failures("a"), 0);
  q.AddRateLimited("a");
  EXPECT_EQ(q.Failures("a"), 1);  // counting again from the base delay
  EXPECT_EQ(q.Failures("b"), 0);  // per key
}

TEST(WorkQueueTest, ManyFailuresDoNotOverflowTheDelay) {
  WorkQueue q(1ms, 2ms);
  for (int i = 0; i < 70; ++i) {
    q.AddRateLimited("a");
    ASSERT_EQ(q.Get(), "a");
    q.Done("a");
  }
  const auto t = Clock::now();
  q.AddRateLimited("a");
  ASSERT_EQ(q.Get(), "a");
  EXPECT_LT(Since(t), 200ms);
}

TEST(WorkQueueTest, ShutDownWakesBlockedGets) {
  WorkQueue q(10ms, 100ms);
  q.AddAfter("later", 10s);
  auto a = std::async(std::launch::async, [&] { return q.Get(); });
  auto b = std::async(std::launch::async, [&] { return q.Get(); });
  EXPECT_EQ(a.wait_for(50ms), std::future_status::timeout);
  q.ShutDown();
  ASSERT_EQ(a.wait_for(2s), std::future_status::ready);
  ASSERT_EQ(b.wait_for(2s), std::future_status::ready);
  EXPECT_FALSE(a.get());
  EXPECT_FALSE(b.get());
  q.Add("x");  // ignored after shutdown
  EXPECT_FALSE(q.Get());
}

// Workers hammering a few keys that keep being re-added: never two workers on one key, and
// every key is processed after its last Add.
TEST(WorkQueueTest, ConcurrentWorkersNeverShareAKey) {
  WorkQueue q(1ms, 10ms);
  std::mutex mu;
  std::set<std::string> in_flight;
  std::map<std::string, int> processed_after_last_add;
  std::atomic<bool> overlap{false};
  std::vector<std::thread> workers;
  for (int w = 0; w < 4; ++w) {
    workers.emplace_back([&] {
      while (auto key = q.Get()) {
        {
          std::lock_guard lock(mu);
          if (!in_flight.insert(*key).second) overlap = true;
          processed_after_last_add[*key]++;
        }
        std::this_thread::sleep_for(1ms);
        {
          std::lock_guard lock(mu);
          in_flight.erase(*key);
        }
        q.Done(*key);
      }
    });
  }
  for (int round = 0; round < 200; ++round) {
    const std::string key = "k" + std::to_string(round % 5);
    {
      std::lock_guard lock(mu);
      processed_after_last_add[key] = 0;
    }
    q.Add(key);
    if (round % 7 == 0) std::this_thread::sleep_for(1ms);
  }
  const auto deadline = Clock::now() + 5s;
  for (;;) {
    {
      std::lock_guard lock(mu);
      bool all = true;
      for (int k = 0; k < 5; ++k)
        all = all && processed_after_last_add["k" + std::to_string(k)] > 0;
      if (all) break;
    }
    ASSERT_LT(Clock::now(), deadline) << "a key added was never processed";
    std::this_thread::sleep_for(5ms);
  }
  q.ShutDown();
  for (auto& t : workers)
    t.join();
  EXPECT_FALSE(overlap);
}

}  // namespace
}  // namespace starforge::controller
