// Watches (api/watch.h) against a real store in a temp dir: what each Poll sends as the store's
// jobs change, with no server in between.
#include "starforge/api/watch.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "api_test_support.h"

namespace starforge::api {
namespace {

using nlohmann::json;
using testing::ParseSse;
using testing::TempDir;

std::vector<testing::SseEvent> Events(std::string text) {
  int comments = 0;
  auto events = ParseSse(&text, &comments);
  EXPECT_EQ(text, "") << "an incomplete event";
  return events;
}

class WatchTest : public ::testing::Test {
 protected:
  store::Job Create(const std::string& owner, const std::string& name,
                    const std::string& fleet = "local") {
    store::Job j;
    j.owner = owner;
    j.name = name;
    j.fleet = fleet;
    j.spec_json = R"({"name":")" + name + R"("})";
    return store_->CreateJob(j, "api");
  }
  void Move(const std::string& id, store::Phase to) {
    store_->UpdateJob(id, nullptr, store::PhaseChange{to, "", "", "test"});
  }
  TempDir tmp_;
  std::unique_ptr<store::Store> store_ = store::Store::Open(tmp_ / "db");
};

TEST(ResourceVersion, IsOpaqueToClientsButBoundToItsServerRun) {
  EXPECT_EQ(EncodeResourceVersion("1700", 42), "1700.42");
  EXPECT_EQ(DecodeResourceVersion("1700.42", "1700"), 42);
  EXPECT_EQ(DecodeResourceVersion("1700.0", "1700"), 0);
  EXPECT_FALSE(DecodeResourceVersion("1699.42", "1700")) << "another run's";
  EXPECT_FALSE(DecodeResourceVersion("17000.42", "1700"));
  EXPECT_FALSE(DecodeResourceVersion("1700.", "1700"));
  EXPECT_FALSE(DecodeResourceVersion("1700.-1", "1700"));
  EXPECT_FALSE(DecodeResourceVersion("42", "1700"));
}

TEST_F(WatchTest, AJobsWatchSendsEachChangedJobOnceWithItsStateNowAndItsFilters) {
  const store::Job before = Create("alice", "old");
  JobsWatch all(*store_, "e", store_->LastChange(), {});
  JobsWatchFilter by_owner;
  by_owner.owner = "alice";
  JobsWatchFilter by_name;
  by_name.name = "b";
  JobsWatch alices(*store_, "e", store_->LastChange(), by_owner);
  JobsWatch named(*store_, "e", store_->LastChange(), by_name);
  EXPECT_EQ(all.Poll(), "") << "nothing changed since the start";
  const store::Job a = Create("alice", "a");
  const store::Job b = Create("bob", "b", "kuberay");
  Move(a.id, store::Phase::kPackaging);
  Move(a.id, store::Phase::kRunning);
  auto events = Events(all.Poll());
  ASSERT_EQ(events.size(), 2u) << "a changed three times: sent once";
  EXPECT_EQ(events[0].event, "job");
  EXPECT_EQ(json::parse(events[0].data)["id"], b.id);
  EXPECT_EQ(json::parse(events[1].data)["id"], a.id);
  EXPECT_EQ(json::parse(events[1].data)["phase"], "Running");
  EXPECT_FALSE(json::parse(events[1].data).contains("spec")) << "as in the list";
  EXPECT_EQ(events[1].id, EncodeResourceVersion("e", store_->LastChange()));
  EXPECT_EQ(events[0].id, events[1].id);
  EXPECT_EQ(all.Poll(), "");

  events = Events(alices.Poll());
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(json::parse(events[0].data)["id"], a.id);
  events = Events(named.Poll());
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(json::parse(events[0].data)["id"], b.id);

  // An event recorded for the old job sends it again (its row is what a list shows).
  store_->RecordEvent(before.id, "Normal", "X", "y", "test");
  events = Events(all.Poll());
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(json::parse(events[0].data)["name"], "old");
  EXPECT_FALSE(all.done());
}

TEST_F(WatchTest, AJobsWatchThatFallsBehindTheJournalSaysExpiredAndEnds) {
  store_->SetJournalSizeForTesting(4);
  const store::Job a = Create("alice", "a");
  JobsWatch w(*store_, "e", store_->LastChange(), {});
  for (int i = 0; i < 5; ++i)
    store_->RecordEvent(a.id, "Normal", "Tick", std::to_string(i), "test");
  auto events = Events(w.Poll());
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].event, "expired");
  EXPECT_THAT(json::parse(events[0].data).value("message", ""),
              ::testing::HasSubstr("list the jobs again"));
  EXPECT_TRUE(w.done());
  EXPECT_EQ(w.Poll(), "");
}

TEST_F(WatchTest, AJobWatchSendsTheJobAndItsEventsWhenEachChangesThenEnds) {
  const store::Job a = Create("alice", "a");
  const store::Job other = Create("alice", "other");
  JobWatch w(*store_, a.id);
  auto events = Events(w.Poll());
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].event, "job");
  const json first = json::parse(events[0].data);
  EXPECT_EQ(first["phase"], "Queued");
  EXPECT_EQ(first["spec"]["name"], "a") << "as GET /jobs/{id} answers";
  EXPECT_EQ(first["timeline"].size(), 1u);
  EXPECT_EQ(events[1].event, "events");
  EXPECT_EQ(json::parse(events[1].data), json({{"items", json::array()}}));
  EXPECT_EQ(w.Poll(), "");

  // Another job's change: nothing. An event of this one: only the events.
  Move(other.id, store::Phase::kRunning);
  EXPECT_EQ(w.Poll(), "");
  store_->RecordEvent(a.id, "Warning", "Unschedulable", "no node", "kubernetes");
  events = Events(w.Poll());
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].event, "events");
  EXPECT_EQ(json::parse(events[0].data)["items"][0]["reason"], "Unschedulable");
  // The same event again bumps its count: sent again.
  store_->RecordEvent(a.id, "Warning", "Unschedulable", "no node", "kubernetes");
  events = Events(w.Poll());
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(json::parse(events[0].data)["items"][0]["count"], 2);
  // A phase change: the job, with its timeline.
  Move(a.id, store::Phase::kRunning);
  events = Events(w.Poll());
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].event, "job");
  EXPECT_EQ(json::parse(events[0].data)["timeline"].size(), 2u);

  // Terminal is not the end while cleanup is left; archived and released is.
  Move(a.id, store::Phase::kSucceeded);
  events = Events(w.Poll());
  ASSERT_EQ(events.size(), 1u);
  EXPECT_FALSE(w.done());
  store_->UpdateJob(a.id, [](store::Job& j) {
    j.logs_archived = true;
    j.released = true;
  });
  events = Events(w.Poll());
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].event, "job");
  EXPECT_EQ(events[1].event, "end");
  EXPECT_EQ(json::parse(events[1].data)["phase"], "Succeeded");
  EXPECT_TRUE(w.done());
  EXPECT_EQ(w.Poll(), "");
}

TEST_F(WatchTest, AJobWatchThatLostTrackOfTheJournalLooksAgain) {
  store_->SetJournalSizeForTesting(2);
  const store::Job a = Create("alice", "a");
  const store::Job b = Create("alice", "b");
  JobWatch w(*store_, a.id);
  ASSERT_EQ(Events(w.Poll()).size(), 2u);
  Move(a.id, store::Phase::kRunning);
  for (int i = 0; i < 3; ++i)
    store_->RecordEvent(b.id, "Normal", "Tick", std::to_string(i), "test");
  auto events = Events(w.Poll());
  ASSERT_EQ(events.size(), 1u) << "the change to a, though the journal no longer names it";
  EXPECT_EQ(json::parse(events[0].data)["phase"], "Running");
}

}  // namespace
}  // namespace starforge::api
