// kubesim's controller work queue (tools/kubesim/controllers/workqueue.h): client-go's semantics,
// first in, first out, so that no key starves while others keep being requeued.
#include "controllers/workqueue.h"

#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace {

using kubesim::controllers::WorkQueue;
using namespace std::chrono_literals;

TEST(KubesimWorkQueue, KeysComeOutInTheOrderTheyWereAdded) {
  WorkQueue q;
  for (const char* k : {"default/scale-9", "default/scale-10", "default/scale-1"})
    q.Add(k);
  q.Add("default/scale-9");  // already waiting: keeps its place, not queued twice
  std::vector<std::string> out;
  for (int i = 0; i < 3; ++i) {
    out.push_back(*q.Get());
    q.Done(out.back());
  }
  EXPECT_EQ(out,
            (std::vector<std::string>{"default/scale-9", "default/scale-10", "default/scale-1"}));
}

TEST(KubesimWorkQueue, AKeyReaddedWhileProcessingGoesBehindTheOthers) {
  WorkQueue q;
  q.Add("a");
  q.Add("b");
  const std::string first = *q.Get();
  ASSERT_EQ(first, "a");
  q.Add("a");  // processing: handed out again only after Done, behind "b"
  q.Add("c");
  q.Done("a");
  EXPECT_EQ(*q.Get(), "b");
  EXPECT_EQ(*q.Get(), "c");
  EXPECT_EQ(*q.Get(), "a");
}

TEST(KubesimWorkQueue, ANewKeyIsServedWhileBusyKeysKeepBeingRequeued) {
  // Ten keys that every reconcile requeues at once (busy RayJobs), then one that sorts after all
  // of them: it must come out within one round, not wait until the others go quiet.
  WorkQueue q;
  for (int i = 0; i < 10; ++i)
    q.Add("default/a-" + std::to_string(i));
  q.Add("default/z");
  int served_after = -1;
  for (int n = 0; n < 100 && served_after < 0; ++n) {
    const std::string k = *q.Get();
    q.Done(k);
    if (k == "default/z") {
      served_after = n;
    } else {
      q.Add(k);
    }
  }
  EXPECT_EQ(served_after, 10);
}

TEST(KubesimWorkQueue, DueRequeuesComeOutLongestDueFirst) {
  WorkQueue q;
  q.AddAfter("late", 60ms);
  q.AddAfter("early", 20ms);
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(*q.Get(), "early");
  EXPECT_EQ(*q.Get(), "late");
}

TEST(KubesimWorkQueue, EventsFirstHandsOutChangesBeforeDuePolls) {
  WorkQueue q(/*events_first=*/true);
  for (const char* k : {"poll-1", "poll-2", "both"})
    q.AddAfter(k, 1ms);
  std::this_thread::sleep_for(20ms);
  ASSERT_EQ(*q.Get(), "poll-1");  // due polls are handed out while no event waits
  q.Add("changed");
  q.Add("both");  // a due poll with an event: lifted to the events, not queued twice
  std::vector<std::string> out;
  for (int i = 0; i < 3; ++i)
    out.push_back(*q.Get());
  EXPECT_EQ(out, (std::vector<std::string>{"changed", "both", "poll-2"}));
}

TEST(KubesimWorkQueue, TheEarlierRequeueWinsAndALiftedPollComesOutOnce) {
  WorkQueue q(/*events_first=*/true);
  q.AddAfter("a", 10s);
  q.AddAfter("a", 1ms);  // earlier: replaces the 10 s requeue
  q.AddAfter("b", 2ms);
  q.AddAfter("b", 10s);  // later: the 2 ms requeue stands
  q.AddAfter("c", 3ms);
  std::this_thread::sleep_for(30ms);
  q.Add("b");  // b's due poll lifted to the events: handed out first, and only once
  std::vector<std::string> out;
  for (int i = 0; i < 3; ++i) {
    out.push_back(*q.Get());
    q.Done(out.back());
  }
  EXPECT_EQ(out, (std::vector<std::string>{"b", "a", "c"}));
  std::thread stop([&q] {
    std::this_thread::sleep_for(100ms);
    q.ShutDown();
  });
  EXPECT_EQ(q.Get(), std::nullopt) << "a key came out twice";
  stop.join();
}

}  // namespace
