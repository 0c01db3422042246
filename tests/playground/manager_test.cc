// playground::Manager with a fake backend: ownership, the model checks, admission, the
// reconciler's steps (create, observe, TTL, stop, release) and adoption after a restart.
#include "starforge/playground/manager.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

#include "support/temp_dir.h"

namespace starforge::playground {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using store::PlaygroundState;
using ::testing::HasSubstr;

// Records what the manager asks; answers what the test sets.
class FakeBackend : public Backend {
 public:
  std::string Kind() const override { return "kuberay"; }
  fleet::Admission Admit(const store::Playground&, const Spec& spec) override {
    if (spec.gpus > 8) return {false, "series h200 has nodes of 8 GPUs at most", "gpus"};
    return {};
  }
  Status Create(const store::Playground& row, const Spec&) override {
    ++creates;
    if (!create_error.ok()) return create_error;
    created.insert(row.id);
    return Status::Ok();
  }
  Observation Observe(const store::Playground& row, const Spec&) override {
    Observation o;
    o.state = ready.count(row.id) ? PlaygroundState::kReady : PlaygroundState::kPending;
    if (o.state == PlaygroundState::kPending) o.reason = "ImagePullFailed";
    return o;
  }
  Status Delete(const store::Playground& row) override {
    created.erase(row.id);
    return Status::Ok();
  }
  ProxyReply Proxy(const store::Playground&, const ProxyCall& call,
                   const std::function<bool(std::string_view)>&,
                   const std::atomic<bool>*) override {
    return {200, "application/json", "{\"path\":\"" + call.path + "\"}", ""};
  }
  Status Logs(const store::Playground&, int64_t, std::string* out) override {
    *out = "INFO vllm\n";
    return Status::Ok();
  }
  int creates = 0;
  Status create_error = Status::Ok();
  std::set<std::string> created;
  std::set<std::string> ready;
};

class ManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = store::Store::Open(dir_.path() / "state" / "s.db");
    options_.config.storage_root = (dir_.path() / "root").string();
    options_.config.image_vllm = "vllm/vllm-openai:v0.11.0";
    options_.config.default_fleet_kind = config::FleetKind::kKuberay;
    options_.storage_root = dir_.path() / "root";
    alice_ = db_->EnsureUser("alice", false);
    bob_ = db_->EnsureUser("bob", false);
    store::Job job;
    job.id = "j-0000000001";
    job.owner = "alice";
    job.name = "train";
    job.fleet = "kuberay";
    job.spec_json = "{}";
    db_->CreateJob(job, "api");
    fs::create_directories(options_.storage_root / "jobs/j-0000000001/ckpt");
    manager_ = std::make_unique<Manager>(*db_, std::map<std::string, Backend*>{{"kuberay", &fake_}},
                                         options_);
  }
  json Body(json extra = json::object()) {
    json b = {{"model", "jobs/j-0000000001/ckpt"}, {"series", "h200"}, {"ttlSeconds", 600}};
    b.merge_patch(extra);
    return b;
  }
  // The code of `r`'s Status (kOk with a value); `*message` gets its message.
  template <typename T>
  static Code ErrorCode(const StatusOr<T>& r, std::string* message = nullptr) {
    if (message != nullptr) *message = r.status().message();
    return r.status().code();
  }

  support::TempDir dir_;
  std::unique_ptr<store::Store> db_;
  ManagerOptions options_;
  FakeBackend fake_;
  std::unique_ptr<Manager> manager_;
  store::User alice_, bob_;
};

TEST_F(ManagerTest, StartsObservesAndServesOnlyItsOwner) {
  const store::Playground p = manager_->Create(alice_, Body()).value();
  EXPECT_EQ(p.state, PlaygroundState::kStarting);
  EXPECT_TRUE(manager_->Reconcile(p.id));  // create
  EXPECT_EQ(fake_.created.count(p.id), 1u);
  EXPECT_EQ(manager_->Get(alice_, p.id).value().state, PlaygroundState::kPending);
  manager_->Reconcile(p.id);
  EXPECT_EQ(manager_->Get(alice_, p.id).value().reason, "ImagePullFailed");
  std::string message;
  EXPECT_EQ(ErrorCode(manager_->Proxy(alice_, p.id, {"GET", "v1/models", "", ""}, nullptr, nullptr),
                      &message),
            Code::kFailedPrecondition);
  EXPECT_THAT(message, HasSubstr("Pending"));
  fake_.ready.insert(p.id);
  manager_->Reconcile(p.id);
  EXPECT_EQ(manager_->Get(alice_, p.id).value().state, PlaygroundState::kReady);
  EXPECT_EQ(
      manager_->Proxy(alice_, p.id, {"GET", "v1/models", "", ""}, nullptr, nullptr).value().body,
      "{\"path\":\"v1/models\"}");
  // Bob: as if it did not exist, on every route.
  EXPECT_EQ(ErrorCode(manager_->Get(bob_, p.id)), Code::kNotFound);
  EXPECT_EQ(ErrorCode(manager_->Stop(bob_, p.id)), Code::kNotFound);
  EXPECT_EQ(ErrorCode(manager_->Extend(bob_, p.id, 60)), Code::kNotFound);
  EXPECT_EQ(ErrorCode(manager_->Logs(bob_, p.id, 0)), Code::kNotFound);
  EXPECT_EQ(ErrorCode(manager_->Proxy(bob_, p.id, {"GET", "v1/models", "", ""}, nullptr, nullptr)),
            Code::kNotFound);
  EXPECT_TRUE(manager_->List(bob_).empty());
  EXPECT_EQ(manager_->List(alice_).size(), 1u);
}

TEST_F(ManagerTest, ACreateThatMustWaitSaysWhyAndIsTriedAgain) {
  const store::Playground p = manager_->Create(alice_, Body()).value();
  fake_.create_error = Status::Retryable(
      "WaitingForResources", "waiting for 1 CPU and 1 GPU: 2 of 2 CPUs and 1 of 1 GPUs in use");
  manager_->Reconcile(p.id);
  store::Playground row = manager_->Get(alice_, p.id).value();
  EXPECT_EQ(row.state, PlaygroundState::kStarting);
  EXPECT_EQ(row.reason, "WaitingForResources");
  EXPECT_THAT(row.message, HasSubstr("in use"));
  fake_.create_error = Status::Ok();
  manager_->Reconcile(p.id);
  EXPECT_EQ(fake_.creates, 2);
  EXPECT_EQ(manager_->Get(alice_, p.id).value().state, PlaygroundState::kPending);
}

TEST_F(ManagerTest, TheModelMustBeAnExistingDirectoryOfTheUsersJob) {
  std::string message;
  EXPECT_EQ(ErrorCode(manager_->Create(bob_, Body()), &message), Code::kInvalidArgument);
  EXPECT_THAT(message, HasSubstr("no job j-0000000001 of yours"));
  EXPECT_EQ(ErrorCode(manager_->Create(alice_, Body({{"model", "jobs/j-0000000001/x"}})), &message),
            Code::kInvalidArgument);
  EXPECT_THAT(message, HasSubstr("does not exist"));
  EXPECT_EQ(ErrorCode(manager_->Create(alice_, Body({{"model", "jobs/j-9/ckpt"}})), &message),
            Code::kInvalidArgument);
  EXPECT_THAT(message, HasSubstr("no job j-9 of yours"));
  // A model name the image loads is not checked here.
  EXPECT_EQ(ErrorCode(manager_->Create(alice_, Body({{"model", "Qwen/Qwen2.5-0.5B"}}))), Code::kOk);
}

TEST_F(ManagerTest, WhatCanNeverFitIsRefusedWithWhatExists) {
  std::string message;
  EXPECT_EQ(ErrorCode(manager_->Create(alice_, Body({{"gpus", 16}})), &message),
            Code::kInvalidArgument);
  EXPECT_EQ(manager_->Create(alice_, Body({{"gpus", 16}})).status().reason(), "Rejected");
  EXPECT_THAT(message, HasSubstr("8 GPUs at most"));
  EXPECT_TRUE(db_->ListPlaygrounds("", false).empty());  // nothing recorded
}

TEST_F(ManagerTest, TheTtlEndsItAndItsObjectsAreDeleted) {
  const store::Playground p = manager_->Create(alice_, Body()).value();
  manager_->Reconcile(p.id);
  fake_.ready.insert(p.id);
  manager_->Reconcile(p.id);
  db_->UpdatePlayground(p.id, [](store::Playground& r) { r.expires_at = 1; });  // in the past
  EXPECT_FALSE(manager_->Reconcile(p.id));
  const store::Playground ended = manager_->Get(alice_, p.id).value();
  EXPECT_EQ(ended.state, PlaygroundState::kExpired);
  EXPECT_EQ(ended.reason, "TTLExpired");
  EXPECT_TRUE(ended.released);
  EXPECT_EQ(fake_.created.count(p.id), 0u);
  EXPECT_EQ(ErrorCode(manager_->Extend(alice_, p.id, 60)), Code::kFailedPrecondition);
}

TEST_F(ManagerTest, ExtendMovesTheEndWithinTheLongestLife) {
  const store::Playground p = manager_->Create(alice_, Body()).value();
  const store::Playground later = manager_->Extend(alice_, p.id, 3600).value();
  EXPECT_EQ(later.expires_at, p.expires_at + 3600'000);
  std::string message;
  EXPECT_EQ(ErrorCode(manager_->Extend(alice_, p.id, 8 * 3600), &message), Code::kInvalidArgument);
  EXPECT_THAT(message, HasSubstr("FORGE_PLAYGROUND_MAX_TTL_S"));
}

TEST_F(ManagerTest, StopDeletesAtOnce) {
  const store::Playground p = manager_->Create(alice_, Body()).value();
  manager_->Reconcile(p.id);
  const store::Playground stopped = manager_->Stop(alice_, p.id).value();
  EXPECT_EQ(stopped.state, PlaygroundState::kStopped);
  EXPECT_TRUE(stopped.released);
  EXPECT_TRUE(fake_.created.empty());
}

TEST_F(ManagerTest, ARestartedServerAdoptsAndStillEnforcesTheTtl) {
  const store::Playground p = manager_->Create(alice_, Body()).value();
  manager_->Reconcile(p.id);
  manager_.reset();  // the server goes away; the row stays
  db_->UpdatePlayground(p.id, [](store::Playground& r) { r.expires_at = 1; });
  options_.resync = std::chrono::milliseconds(10);
  manager_ = std::make_unique<Manager>(*db_, std::map<std::string, Backend*>{{"kuberay", &fake_}},
                                       options_);
  manager_->Start();
  for (int i = 0; i < 500 && !db_->GetPlayground(p.id)->released; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  manager_->Stop();
  EXPECT_EQ(db_->GetPlayground(p.id)->state, PlaygroundState::kExpired);
  EXPECT_TRUE(db_->GetPlayground(p.id)->released);
  EXPECT_EQ(fake_.creates, 1);  // created once, by the first server
}

}  // namespace
}  // namespace starforge::playground
