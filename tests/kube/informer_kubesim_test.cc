// The informer against tools/kubesim: sync, resume after a dropped stream, relist after 410 in
// both forms (HTTP 410 and an ERROR event inside a 200 stream), and a cache equal to the server's
// list after churn.
#include <atomic>
#include <memory>
#include <random>
#include <set>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kubesim_fixture.h"
#include "starforge/kube/informer.h"
#include "support/poll.h"

namespace starforge::kube {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;
using support::Eventually;

// Records handler calls as "add:name", "update:name", "delete:name".
class Recorder {
 public:
  InformerHandlers Handlers() {
    return {[this](const json& o) { Add("add:" + Name(o)); },
            [this](const json&, const json& o) { Add("update:" + Name(o)); },
            [this](const json& o) { Add("delete:" + Name(o)); }};
  }
  std::vector<std::string> Events() {
    std::lock_guard lock(mu_);
    return events_;
  }
  bool Saw(const std::string& e) {
    auto v = Events();
    return std::find(v.begin(), v.end(), e) != v.end();
  }

 private:
  static std::string Name(const json& o) { return o["metadata"].value("name", ""); }
  void Add(std::string e) {
    std::lock_guard lock(mu_);
    events_.push_back(std::move(e));
  }
  std::mutex mu_;
  std::vector<std::string> events_;
};

class InformerKubesimTest : public ::testing::Test {
 public:
  static void SetUpTestSuite() { sim_ = testing::StartKubesim({}, &sim_error_); }
  static void TearDownTestSuite() { sim_.reset(); }
  void SetUp() override {
    ASSERT_TRUE(sim_) << sim_error_;
    kNs = testing::TestNamespace("i-");
    ClientConfig c;
    c.server = sim_->url();
    ClientOptions o;
    o.backoff_base = 10ms;
    o.backoff_cap = 50ms;
    client_ = std::make_unique<Client>(c, o);
    client_->Create(resources::kNamespaces, "", {{"metadata", {{"name", kNs}}}});
    Faults({{"rules", json::array()}});
    client_->Raw("DELETE", "/kubesim/requests");
  }
  // Waits until kubesim has received `n` watch requests and the latest is serving.
  void WaitWatching(int64_t n) {
    ASSERT_TRUE(Eventually([&] {
      json c = json::parse(client_->Raw("GET", "/kubesim/requests"))["requests"];
      return c.value("watch configmaps", int64_t{0}) >= n;
    }));
    std::this_thread::sleep_for(100ms);
  }
  InformerOptions Options() {
    InformerOptions o;
    o.resource = resources::kConfigMaps;
    o.ns = kNs;
    o.page_size = 2;  // forces paging on the initial list
    o.backoff_base = 20ms;
    o.backoff_cap = 200ms;
    return o;
  }
  void Create(const std::string& name) {
    client_->Create(resources::kConfigMaps, kNs,
                    {{"metadata", {{"name", name}}}, {"data", {{"v", "0"}}}});
  }
  void Set(const std::string& name, const std::string& v) {
    client_->MergePatch(resources::kConfigMaps, kNs, name, {{"data", {{"v", v}}}});
  }
  void Delete(const std::string& name) { client_->Delete(resources::kConfigMaps, kNs, name); }
  void Faults(const json& body) {
    client_->Raw("POST", "/kubesim/faults", {}, body.dump(), "application/json");
  }
  // name -> data.v of the server's objects.
  std::map<std::string, std::string> ServerState() {
    std::map<std::string, std::string> out;
    json list = client_->ListAll(resources::kConfigMaps, kNs);
    for (auto& item : list["items"]) {
      out[item["metadata"]["name"]] = item["data"].value("v", "");
    }
    return out;
  }
  std::map<std::string, std::string> CacheState(const Informer& inf) {
    std::map<std::string, std::string> out;
    for (auto& [key, obj] : inf.Snapshot()) {
      out[obj["metadata"]["name"]] = obj["data"].value("v", "");
      EXPECT_EQ(key, std::string(kNs) + "/" + obj["metadata"]["name"].get<std::string>());
    }
    return out;
  }

  static std::unique_ptr<testing::Kubesim> sim_;
  static std::string sim_error_;
  std::unique_ptr<Client> client_;
  std::string kNs;
};

std::unique_ptr<testing::Kubesim> InformerKubesimTest::sim_;
std::string InformerKubesimTest::sim_error_;

TEST_F(InformerKubesimTest, SyncsThenFollowsChanges) {
  for (const char* n : {"a", "b", "c"})
    Create(n);
  Recorder rec;
  Informer inf(*client_, Options(), rec.Handlers());
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync(10s));
  // a, b, c and the namespace's kube-root-ca.crt (kube-apiserver's root-CA publisher puts one in
  // every namespace; kubesim does too).
  EXPECT_EQ(CacheState(inf).size(), 4u);
  EXPECT_EQ(CacheState(inf).count("kube-root-ca.crt"), 1u);
  EXPECT_TRUE(rec.Saw("add:a") && rec.Saw("add:b") && rec.Saw("add:c"));
  Create("d");
  Set("a", "1");
  Delete("b");
  ASSERT_TRUE(Eventually([&] { return CacheState(inf) == ServerState(); }));
  EXPECT_TRUE(
      Eventually([&] { return rec.Saw("add:d") && rec.Saw("update:a") && rec.Saw("delete:b"); }));
  EXPECT_EQ(inf.Get(std::string(kNs) + "/a").value()["data"]["v"], "1");
  EXPECT_FALSE(inf.Get(std::string(kNs) + "/b").has_value());
  // Select copies what the predicate accepts, from the same cache.
  const auto selected = inf.Select([](const json& o) {
    const std::string name = o["metadata"].value("name", "");
    return name == "a" || name == "b" || name == "d";
  });
  std::set<std::string> names;
  for (const json& o : selected)
    names.insert(o["metadata"].value("name", ""));
  EXPECT_EQ(names, (std::set<std::string>{"a", "d"}));
  EXPECT_TRUE(inf.Select([](const json&) { return false; }).empty());
  auto stop_at = std::chrono::steady_clock::now();
  inf.Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - stop_at, 2s);
  EXPECT_EQ(inf.stats().lists, 1);
}

TEST_F(InformerKubesimTest, ResumesAfterAForcedWatchCloseWithoutRelisting) {
  Create("a");
  Recorder rec;
  Informer inf(*client_, Options(), rec.Handlers());
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync(10s));
  WaitWatching(1);
  int64_t watches = inf.stats().watches;
  client_->Raw("POST", "/kubesim/watches/close");
  ASSERT_TRUE(Eventually([&] { return inf.stats().watches > watches; }));
  Create("after-close");
  ASSERT_TRUE(Eventually([&] { return rec.Saw("add:after-close"); }));
  EXPECT_EQ(inf.stats().lists, 1);  // resumed from the last rv, no relist
  EXPECT_EQ(inf.stats().relists_after_expired, 0);
  EXPECT_EQ(CacheState(inf), ServerState());
}

// Makes the informer's next watch start from a compacted resourceVersion: the re-watch request
// is delayed by kubesim while objects change and history is compacted.
void ExpireInformer(InformerKubesimTest* t, Informer& inf, const std::string& form,
                    const std::function<void()>& changes) {
  (void)inf;
  t->Faults({{"rules",
              {{{"verb", "watch"}, {"resource", "configmaps"}, {"latencyMs", 1500}, {"count", 1}}}},
             {"watchExpiredAs", form}});
  t->client_->Raw("POST", "/kubesim/watches/close");
  std::this_thread::sleep_for(300ms);  // the informer is now waiting on the delayed watch
  changes();
  t->client_->Raw("POST", "/kubesim/compact");
}

class InformerExpiredTest : public InformerKubesimTest,
                            public ::testing::WithParamInterface<std::string> {};

TEST_P(InformerExpiredTest, RelistsAndEmitsTheDifferences) {
  for (const char* n : {"keep", "change", "remove"})
    Create(n);
  Recorder rec;
  Informer inf(*client_, Options(), rec.Handlers());
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync(10s));
  WaitWatching(1);
  ExpireInformer(this, inf, GetParam(), [&] {
    Set("change", "1");
    Delete("remove");
    Create("new");
  });
  ASSERT_TRUE(Eventually([&] { return inf.stats().relists_after_expired >= 1; }))
      << inf.stats().last_error;
  ASSERT_TRUE(Eventually([&] { return CacheState(inf) == ServerState(); }));
  EXPECT_GE(inf.stats().lists, 2);
  EXPECT_TRUE(Eventually(
      [&] { return rec.Saw("update:change") && rec.Saw("delete:remove") && rec.Saw("add:new"); }));
  EXPECT_FALSE(rec.Saw("update:keep"));  // unchanged objects produce no event
}

INSTANTIATE_TEST_SUITE_P(BothForms, InformerExpiredTest, ::testing::Values("event", "http"));

// Names of the objects `inf` files under `value` of index "v".
std::set<std::string> Indexed(const Informer& inf, const std::string& value) {
  std::set<std::string> out;
  for (const auto& o : inf.ByIndex("v", value))
    out.insert((*o)["metadata"].value("name", ""));
  return out;
}

// Indexes follow adds, updates (an object moves between values), deletes and a relist after
// 410; the transform applies to listed and watched objects alike.
TEST_F(InformerKubesimTest, IndexesAndTransformFollowEveryChange) {
  Create("a");
  Create("b");
  InformerOptions o = Options();
  o.transform = [](json& obj) {
    obj["metadata"].erase("managedFields");
    obj["trimmed"] = true;
  };
  Informer inf(*client_, o);
  inf.AddIndex("v", [](const json& obj) -> std::vector<std::string> {
    if (!obj.contains("data") || !obj["data"].contains("v")) return {};
    return {obj["data"]["v"].get<std::string>()};
  });
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync(10s));
  EXPECT_EQ(Indexed(inf, "0"), (std::set<std::string>{"a", "b"}));
  EXPECT_TRUE(inf.ByIndex("v", "1").empty());
  EXPECT_TRUE(inf.ByIndex("no-such-index", "0").empty());
  ASSERT_NE(inf.Find(kNs + "/a"), nullptr);
  EXPECT_TRUE(inf.Find(kNs + "/a")->value("trimmed", false)) << "listed objects are transformed";

  WaitWatching(1);
  Set("a", "1");
  Create("c");
  ASSERT_TRUE(Eventually([&] { return Indexed(inf, "1") == std::set<std::string>{"a"}; }));
  ASSERT_TRUE(Eventually([&] { return Indexed(inf, "0") == std::set<std::string>{"b", "c"}; }));
  EXPECT_TRUE(inf.Find(kNs + "/c")->value("trimmed", false)) << "watched objects too";
  Delete("b");
  ASSERT_TRUE(Eventually([&] { return Indexed(inf, "0") == std::set<std::string>{"c"}; }));

  ExpireInformer(this, inf, "http", [&] {
    Set("c", "1");
    Create("d");
  });
  ASSERT_TRUE(Eventually([&] { return inf.stats().relists_after_expired >= 1; }));
  ASSERT_TRUE(Eventually([&] { return Indexed(inf, "1") == std::set<std::string>{"a", "c"}; }));
  EXPECT_EQ(Indexed(inf, "0"), std::set<std::string>{"d"});
  EXPECT_EQ(inf.Size(), 4u);  // a, c, d and kube-root-ca.crt (no data.v: in no index value)
}

// `keep` holds objects nobody will read out of the cache and from the handlers; Refilter drops
// the cached ones it rejects once what it depends on changed (the fleet: a released job's Events).
TEST_F(InformerKubesimTest, KeepAndRefilterDropWhatNoReaderNeeds) {
  Create("a");
  Create("b");
  std::mutex mu;
  std::set<std::string> rejected;  // values of data.v not kept
  InformerOptions o = Options();
  o.keep = [&](const json& obj) {
    std::lock_guard lock(mu);
    return rejected.count(obj["data"].value("v", "")) == 0;
  };
  Recorder rec;
  Informer inf(*client_, o, rec.Handlers());
  inf.AddIndex("v", [](const json& obj) -> std::vector<std::string> {
    if (!obj.contains("data") || !obj["data"].contains("v")) return {};
    return {obj["data"]["v"].get<std::string>()};
  });
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync(10s));
  WaitWatching(1);
  Set("b", "1");
  ASSERT_TRUE(Eventually([&] { return Indexed(inf, "1") == std::set<std::string>{"b"}; }));

  {
    std::lock_guard lock(mu);
    rejected.insert("0");
  }
  inf.Refilter("v", "0");
  EXPECT_TRUE(Indexed(inf, "0").empty());
  EXPECT_EQ(inf.Find(kNs + "/a"), nullptr) << "a leaves the cache";
  EXPECT_NE(inf.Find(kNs + "/b"), nullptr) << "b, under another value, stays";
  EXPECT_FALSE(rec.Saw("delete:a")) << "silently: the object was not deleted";

  Create("c");    // arrives rejected: never cached, never handed over
  Set("b", "0");  // a cached object turning rejected leaves
  Create("d");
  Set("d", "2");  // the watch's last word, to wait for
  ASSERT_TRUE(Eventually([&] { return Indexed(inf, "2") == std::set<std::string>{"d"}; }));
  EXPECT_EQ(inf.Find(kNs + "/b"), nullptr);
  EXPECT_EQ(inf.Find(kNs + "/c"), nullptr);
  EXPECT_TRUE(Indexed(inf, "0").empty());
  EXPECT_FALSE(rec.Saw("add:c"));
  const auto seen = rec.Events();
  EXPECT_EQ(std::count(seen.begin(), seen.end(), "update:b"), 1) << "only its move to 1";
  EXPECT_TRUE(rec.Saw("add:d")) << "first kept: an add";

  // A relist keeps out what `keep` rejects too.
  ExpireInformer(this, inf, "http", [&] { Create("e"); });
  ASSERT_TRUE(Eventually([&] { return inf.stats().relists_after_expired >= 1; }));
  ASSERT_TRUE(Eventually([&] { return inf.Find(kNs + "/d") != nullptr; }));
  EXPECT_EQ(inf.Find(kNs + "/e"), nullptr);
  EXPECT_EQ(inf.Find(kNs + "/a"), nullptr);
}

TEST_F(InformerKubesimTest, CacheEqualsServerAfterChurn) {
  Informer inf(*client_, Options());
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync(10s));
  std::mt19937 rng(7);
  std::set<std::string> live;
  for (int i = 0; i < 120; ++i) {
    std::string name = "o" + std::to_string(rng() % 15);
    if (!live.count(name)) {
      Create(name);
      live.insert(name);
    } else if (rng() % 3 == 0) {
      Delete(name);
      live.erase(name);
    } else {
      Set(name, std::to_string(i));
    }
    if (i % 40 == 20) client_->Raw("POST", "/kubesim/watches/close");  // dropped streams
    if (i == 70) client_->Raw("POST", "/kubesim/compact");
  }
  ASSERT_TRUE(Eventually([&] { return CacheState(inf) == ServerState(); }))
      << inf.stats().last_error;
}

TEST_F(InformerKubesimTest, BacksOffWhileTheServerFailsAndRecovers) {
  Faults(
      {{"rules", {{{"verb", "list"}, {"resource", "configmaps"}, {"code", 403}, {"count", 3}}}}});
  Create("a");
  Informer inf(*client_, Options());
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync(10s));
  EXPECT_GE(inf.stats().errors, 3);
  EXPECT_THAT(inf.stats().last_error, ::testing::HasSubstr("Forbidden"));
  EXPECT_EQ(CacheState(inf), ServerState());
}

TEST_F(InformerKubesimTest, StopIsPromptWhileWatching) {
  Informer inf(*client_, Options());
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync(10s));
  std::this_thread::sleep_for(200ms);
  auto start = std::chrono::steady_clock::now();
  inf.Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
}

}  // namespace
}  // namespace starforge::kube
