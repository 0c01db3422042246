// The client against tools/kubesim: every verb, every error type (faults injected through
// kubesim's admin API), retries, tokens over TLS, logs and watch.
#include <atomic>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kubesim_fixture.h"
#include "starforge/kube/client.h"

namespace starforge::kube {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;

ClientOptions FastOptions() {
  ClientOptions o;
  o.backoff_base = 10ms;
  o.backoff_cap = 50ms;
  o.request_timeout = 20s;
  return o;
}

class ClientKubesimTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { sim_ = testing::StartKubesim({}, &sim_error_); }
  static void TearDownTestSuite() { sim_.reset(); }
  void SetUp() override {
    ASSERT_TRUE(sim_) << sim_error_;
    kNs = testing::TestNamespace("t-");
    ClientConfig c;
    c.server = sim_->url();
    client_ = std::make_unique<Client>(c, FastOptions());
    client_->Create(resources::kNamespaces, "", {{"metadata", {{"name", kNs}}}});
    Faults({{"rules", json::array()}});
    client_->Raw("DELETE", "/kubesim/requests");
  }
  void Faults(const json& body) {
    client_->Raw("POST", "/kubesim/faults", {}, body.dump(), "application/json");
  }
  json Counts() { return json::parse(client_->Raw("GET", "/kubesim/requests")); }
  int64_t Count(const std::string& key) {
    json c = Counts()["requests"];
    return c.contains(key) ? c[key].get<int64_t>() : 0;
  }
  static json ConfigMap(const std::string& name, json labels = json::object()) {
    return {{"apiVersion", "v1"},
            {"kind", "ConfigMap"},
            {"metadata", {{"name", name}, {"labels", labels}}},
            {"data", {{"k", "v"}}}};
  }

  static std::unique_ptr<testing::Kubesim> sim_;
  static std::string sim_error_;
  std::unique_ptr<Client> client_;
  std::string kNs;
};

std::unique_ptr<testing::Kubesim> ClientKubesimTest::sim_;
std::string ClientKubesimTest::sim_error_;

TEST_F(ClientKubesimTest, CrudVerbs) {
  const auto& cm = resources::kConfigMaps;
  json created = client_->Create(cm, kNs, ConfigMap("a", {{"app", "x"}}));
  EXPECT_EQ(created["metadata"]["namespace"], kNs);
  std::string uid = created["metadata"]["uid"];
  std::string rv = created["metadata"]["resourceVersion"];
  EXPECT_FALSE(rv.empty());

  json got = client_->Get(cm, kNs, "a");
  EXPECT_EQ(got["data"]["k"], "v");

  client_->Create(cm, kNs, ConfigMap("b", {{"app", "y"}}));
  json list = client_->List(cm, kNs, {.label_selector = "app=x"});
  ASSERT_EQ(list["items"].size(), 1u);
  EXPECT_EQ(list["items"][0]["metadata"]["name"], "a");
  EXPECT_FALSE(list["metadata"]["resourceVersion"].get<std::string>().empty());
  EXPECT_EQ(client_->List(cm, kNs, {.field_selector = "metadata.name=b"})["items"].size(), 1u);

  // PUT with the current resourceVersion succeeds; with a stale one it is a Conflict.
  got["data"]["k"] = "v2";
  json updated = client_->Update(cm, kNs, got);
  EXPECT_EQ(updated["data"]["k"], "v2");
  got["data"]["k"] = "v3";
  try {
    client_->Update(cm, kNs, got);
    FAIL() << "expected Conflict";
  } catch (const ApiError& e) {
    EXPECT_TRUE(IsConflict(e)) << e.what();
    EXPECT_EQ(e.code(), 409);
  }

  json patched = client_->MergePatch(cm, kNs, "a", {{"data", {{"extra", "1"}}}});
  EXPECT_EQ(patched["data"]["extra"], "1");
  EXPECT_EQ(patched["data"]["k"], "v2");

  // Delete preconditions: a wrong uid is refused, the right one deletes.
  try {
    client_->Delete(cm, kNs, "a", {.precondition_uid = "not-the-uid"});
    FAIL() << "expected Conflict";
  } catch (const ApiError& e) {
    EXPECT_TRUE(IsConflict(e)) << e.what();
  }
  client_->Delete(cm, kNs, "a", {.propagation_policy = "Background", .precondition_uid = uid});
  try {
    client_->Get(cm, kNs, "a");
    FAIL() << "expected NotFound";
  } catch (const ApiError& e) {
    EXPECT_TRUE(IsNotFound(e));
    EXPECT_THAT(e.message(), HasSubstr("\"a\" not found"));
  }
}

TEST_F(ClientKubesimTest, CreateErrorsAreTyped) {
  const auto& cm = resources::kConfigMaps;
  client_->Create(cm, kNs, ConfigMap("dup"));
  try {
    client_->Create(cm, kNs, ConfigMap("dup"));
    FAIL() << "expected AlreadyExists";
  } catch (const ApiError& e) {
    EXPECT_TRUE(IsAlreadyExists(e)) << e.what();
  }
  try {
    client_->Create(cm, kNs, ConfigMap("Not_Valid"));
    FAIL() << "expected Invalid";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.reason(), Reason::kInvalid) << e.what();
    EXPECT_EQ(e.code(), 422);
    ASSERT_FALSE(e.causes().empty());
    EXPECT_EQ(e.causes()[0].field, "metadata.name");
  }
  try {
    client_->List(cm, kNs, {.field_selector = "spec.nope=1"});
    FAIL() << "expected BadRequest";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.reason(), Reason::kBadRequest) << e.what();
    EXPECT_THAT(e.message(), HasSubstr("field label not supported"));
  }
}

TEST_F(ClientKubesimTest, PagingAndListAll) {
  for (int i = 0; i < 7; ++i)
    client_->Create(resources::kConfigMaps, kNs, ConfigMap("cm" + std::to_string(i)));
  json page = client_->List(resources::kConfigMaps, kNs, {.limit = 3});
  EXPECT_EQ(page["items"].size(), 3u);
  EXPECT_FALSE(page["metadata"].value("continue", "").empty());
  client_->Raw("DELETE", "/kubesim/requests");
  json all = client_->ListAll(resources::kConfigMaps, kNs, {}, 3);
  // The 7 and the namespace's kube-root-ca.crt (in every namespace, as on kube-apiserver).
  EXPECT_EQ(all["items"].size(), 8u);
  EXPECT_FALSE(all["metadata"].contains("continue"));
  EXPECT_EQ(Count("list configmaps"), 3);
}

TEST_F(ClientKubesimTest, StatusSubresource) {
  const ResourceRef rj{"ray.io", "v1", "rayjobs", true, "RayJob"};  // a CRD with /status
  json job = {{"apiVersion", "ray.io/v1"},
              {"kind", "RayJob"},
              {"metadata", {{"name", "rj"}}},
              {"spec", {{"entrypoint", "python -c 'print(1)'"}}}};
  json created = client_->Create(rj, kNs, job);
  // The main resource ignores status; the subresource sets it.
  json with_status =
      client_->MergePatchStatus(rj, kNs, "rj", {{"status", {{"jobStatus", "RUNNING"}}}});
  EXPECT_EQ(with_status["status"]["jobStatus"], "RUNNING");
  with_status["status"]["jobStatus"] = "SUCCEEDED";
  json put = client_->UpdateStatus(rj, kNs, with_status);
  EXPECT_EQ(put["status"]["jobStatus"], "SUCCEEDED");
  json ignored = client_->MergePatch(rj, kNs, "rj", {{"status", {{"jobStatus", "FAILED"}}}});
  EXPECT_EQ(ignored["status"]["jobStatus"], "SUCCEEDED");
  json deleted = client_->Delete(rj, kNs, "rj");
  EXPECT_EQ(deleted["kind"], "Status");
}

TEST_F(ClientKubesimTest, ClusterScopedAndDryRun) {
  json ns_list = client_->List(resources::kNamespaces, "");
  EXPECT_GE(ns_list["items"].size(), 1u);
  client_->Create(resources::kConfigMaps, kNs, ConfigMap("dry"), {.dry_run = true});
  EXPECT_THROW(client_->Get(resources::kConfigMaps, kNs, "dry"), ApiError);
}

TEST_F(ClientKubesimTest, TooManyRequestsIsRetriedAfterRetryAfter) {
  Faults({{"rules",
           {{{"verb", "get"},
             {"resource", "configmaps"},
             {"code", 429},
             {"retryAfter", 1},
             {"count", 2}}}}});
  client_->Create(resources::kConfigMaps, kNs, ConfigMap("x"));
  auto start = std::chrono::steady_clock::now();
  int64_t retries_before = client_->stats().retries;
  EXPECT_EQ(client_->Get(resources::kConfigMaps, kNs, "x")["metadata"]["name"], "x");
  EXPECT_EQ(client_->stats().retries - retries_before, 2);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 1900ms);  // two Retry-After: 1 waits
  EXPECT_EQ(Count("get configmaps"), 3);
}

TEST_F(ClientKubesimTest, TooManyRequestsGivesUpAfterMaxAttempts) {
  ClientConfig c;
  c.server = sim_->url();
  ClientOptions o = FastOptions();
  o.max_attempts = 2;
  o.max_retry_after = 10ms;
  Client client(c, o);
  Faults({{"rules", {{{"verb", "list"}, {"resource", "configmaps"}, {"code", 429}}}}});
  try {
    client.List(resources::kConfigMaps, kNs);
    FAIL() << "expected TooManyRequests";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.reason(), Reason::kTooManyRequests) << e.what();
    EXPECT_EQ(e.retry_after(), std::chrono::seconds(1));
  }
  EXPECT_EQ(Count("list configmaps"), 2);
}

TEST_F(ClientKubesimTest, ServerErrorsRetriedOnlyForReads) {
  const auto& cm = resources::kConfigMaps;
  client_->Create(cm, kNs, ConfigMap("r"));
  for (int code : {500, 503, 504}) {
    Faults(
        {{"rules", {{{"verb", "get"}, {"resource", "configmaps"}, {"code", code}, {"count", 1}}}}});
    EXPECT_EQ(client_->Get(cm, kNs, "r")["metadata"]["name"], "r") << code;
  }
  // A create is not resent after a 500 without Retry-After: it might have been applied.
  client_->Raw("DELETE", "/kubesim/requests");
  Faults(
      {{"rules", {{{"verb", "create"}, {"resource", "configmaps"}, {"code", 500}, {"count", 1}}}}});
  try {
    client_->Create(cm, kNs, ConfigMap("w"));
    FAIL() << "expected InternalError";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.reason(), Reason::kInternalError) << e.what();
    EXPECT_EQ(e.code(), 500);
  }
  EXPECT_EQ(Count("create configmaps"), 1);
  for (auto [code, reason] : std::vector<std::pair<int, Reason>>{{503, Reason::kServiceUnavailable},
                                                                 {504, Reason::kTimeout}}) {
    Faults({{"rules",
             {{{"verb", "patch"}, {"resource", "configmaps"}, {"code", code}, {"count", 1}}}}});
    try {
      client_->MergePatch(cm, kNs, "r", {{"data", {{"z", "1"}}}});
      FAIL() << "expected " << code;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.reason(), reason) << e.what();
    }
  }
  // With Retry-After the server asks for a retry: even a create is resent.
  client_->Raw("DELETE", "/kubesim/requests");
  Faults({{"rules",
           {{{"verb", "create"},
             {"resource", "configmaps"},
             {"code", 503},
             {"retryAfter", 1},
             {"count", 1}}}}});
  client_->Create(cm, kNs, ConfigMap("w2"));
  EXPECT_EQ(Count("create configmaps"), 2);
}

TEST_F(ClientKubesimTest, AuthErrorsAreNotRetried) {
  client_->Raw("DELETE", "/kubesim/requests");
  Faults({{"rules",
           {{{"verb", "list"}, {"resource", "pods"}, {"code", 403}},
            {{"verb", "list"}, {"resource", "nodes"}, {"code", 401}}}}});
  try {
    client_->List(resources::kPods, kNs);
    FAIL();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.reason(), Reason::kForbidden) << e.what();
    EXPECT_THAT(e.message(), HasSubstr("forbidden"));
  }
  try {
    client_->List(resources::kNodes, "");
    FAIL();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.reason(), Reason::kUnauthorized) << e.what();
  }
  EXPECT_EQ(Count("list pods"), 1);
  EXPECT_EQ(Count("list nodes"), 1);
}

TEST_F(ClientKubesimTest, ConnectionRefusedIsATransportError) {
  ClientConfig c;
  c.server = "http://127.0.0.1:1";
  ClientOptions o = FastOptions();
  o.max_attempts = 3;
  Client client(c, o);
  try {
    client.Create(resources::kConfigMaps, kNs, ConfigMap("x"));
    FAIL();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.reason(), Reason::kTransport) << e.what();
    EXPECT_TRUE(e.nothing_sent());
  }
  // Nothing was sent, so even the create was tried again.
  EXPECT_EQ(client.stats().requests, 3);
}

TEST_F(ClientKubesimTest, WatchStreamsEventsAndStops) {
  const auto& cm = resources::kConfigMaps;
  json list = client_->List(cm, kNs);
  std::string rv = list["metadata"]["resourceVersion"];
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::vector<std::pair<WatchEventType, std::string>> events;
  std::optional<WatchEnd> end;
  std::thread watcher([&] {
    end = client_->Watch(
        cm, kNs, {.resource_version = rv, .timeout_seconds = 60},
        [&](const WatchEvent& e) {
          std::lock_guard lock(mu);
          events.emplace_back(e.type, e.object["metadata"].value("name", ""));
          return true;
        },
        &stop);
  });
  client_->Create(cm, kNs, ConfigMap("w"));
  client_->MergePatch(cm, kNs, "w", {{"data", {{"k", "2"}}}});
  client_->Delete(cm, kNs, "w");
  auto deadline = std::chrono::steady_clock::now() + 5s;
  auto count_named = [&] {
    std::lock_guard lock(mu);
    return std::count_if(events.begin(), events.end(), [](auto& e) { return e.second == "w"; });
  };
  while (count_named() < 3 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(10ms);
  auto stop_at = std::chrono::steady_clock::now();
  stop = true;
  watcher.join();
  EXPECT_LT(std::chrono::steady_clock::now() - stop_at, 2s);  // Stop is prompt
  ASSERT_EQ(end, WatchEnd::kStopped);
  std::vector<WatchEventType> types;
  for (auto& [t, n] : events)
    if (n == "w") types.push_back(t);
  EXPECT_EQ(types, (std::vector<WatchEventType>{WatchEventType::kAdded, WatchEventType::kModified,
                                                WatchEventType::kDeleted}));
}

TEST_F(ClientKubesimTest, WatchEndsWhenTheServerClosesIt) {
  auto start = std::chrono::steady_clock::now();
  WatchEnd end = client_->Watch(resources::kConfigMaps, kNs, {.timeout_seconds = 1},
                                [](const WatchEvent&) { return true; });
  EXPECT_EQ(end, WatchEnd::kServerClosed);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

TEST_F(ClientKubesimTest, WatchTooOldResourceVersionBothForms) {
  const auto& cm = resources::kConfigMaps;
  std::string old_rv = client_->List(cm, kNs)["metadata"]["resourceVersion"];
  client_->Create(cm, kNs, ConfigMap("c1"));
  client_->Raw("POST", "/kubesim/compact");
  for (const char* form : {"event", "http"}) {
    Faults({{"rules", json::array()}, {"watchExpiredAs", form}});
    try {
      client_->Watch(cm, kNs, {.resource_version = old_rv, .timeout_seconds = 5},
                     [](const WatchEvent&) { return true; });
      FAIL() << form;
    } catch (const ApiError& e) {
      EXPECT_TRUE(IsExpired(e)) << form << ": " << e.what();
      EXPECT_EQ(e.code(), 410);
      EXPECT_THAT(e.message(), HasSubstr("too old resource version"));
    }
  }
}

TEST_F(ClientKubesimTest, PodLogsPlainAndFollow) {
  json pod = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", "p"}}},
              {"spec", {{"containers", {{{"name", "main"}, {"image", "busybox"}}}}}}};
  client_->Create(resources::kPods, kNs, pod);
  client_->Raw("PUT", std::string("/kubesim/logs/") + kNs + "/p", {}, "one\ntwo\nthree\n",
               "text/plain");
  EXPECT_EQ(client_->PodLogs(kNs, "p"), "one\ntwo\nthree\n");
  EXPECT_EQ(client_->PodLogs(kNs, "p", {.container = "main", .tail_lines = 1}), "three\n");
  try {
    client_->PodLogs(kNs, "p", {.container = "nope"});
    FAIL();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.reason(), Reason::kBadRequest) << e.what();
  }

  std::atomic<bool> stop{false};
  std::mutex mu;
  std::string streamed;
  std::thread follower([&] {
    client_->StreamPodLogs(
        kNs, "p", {.follow = true},
        [&](std::string_view data) {
          std::lock_guard lock(mu);
          streamed.append(data);
          return true;
        },
        &stop);
  });
  client_->Raw("POST", std::string("/kubesim/logs/") + kNs + "/p", {}, "four\n", "text/plain");
  auto deadline = std::chrono::steady_clock::now() + 5s;
  auto has_four = [&] {
    std::lock_guard lock(mu);
    return streamed.find("four\n") != std::string::npos;
  };
  while (!has_four() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(10ms);
  stop = true;
  follower.join();
  EXPECT_EQ(streamed, "one\ntwo\nthree\nfour\n");
}

TEST_F(ClientKubesimTest, ServiceProxyErrorsFromTheApiServerAreTyped) {
  json svc = {{"apiVersion", "v1"},
              {"kind", "Service"},
              {"metadata", {{"name", "head-svc"}}},
              {"spec", {{"ports", {{{"name", "dashboard"}, {"port", 8265}}}}}}};
  client_->Create(resources::kServices, kNs, svc);
  try {
    client_->ServiceProxy({.ns = kNs, .service = "head-svc", .port = "8265", .path = "api/jobs/"});
    FAIL();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.reason(), Reason::kServiceUnavailable) << e.what();
    EXPECT_THAT(e.what(), HasSubstr("/services/head-svc:8265/proxy/api/jobs/"));
  }
}

class ClientKubesimTlsTest : public ::testing::Test {
 protected:
  static constexpr const char* kToken = "kubesim-s3cret-token";
  static void SetUpTestSuite() {
    sim_ =
        testing::StartKubesim({"--tls", "--cert-file", "{cert}", "--token", kToken}, &sim_error_);
  }
  void SetUp() override { ASSERT_TRUE(sim_) << sim_error_; }
  static void TearDownTestSuite() { sim_.reset(); }
  ClientConfig Config() const {
    ClientConfig c;
    c.server = sim_->url();
    c.ca_file = sim_->cert_file();
    return c;
  }
  static std::unique_ptr<testing::Kubesim> sim_;
  static std::string sim_error_;
};

std::unique_ptr<testing::Kubesim> ClientKubesimTlsTest::sim_;
std::string ClientKubesimTlsTest::sim_error_;

TEST_F(ClientKubesimTlsTest, BearerTokenOverTls) {
  ClientConfig c = Config();
  c.token = Secret(kToken);
  Client client(c, FastOptions());
  EXPECT_GE(client.List(resources::kNamespaces, "")["items"].size(), 1u);
}

TEST_F(ClientKubesimTlsTest, WrongTokenIsUnauthorizedAndNeverPrinted) {
  ClientConfig c = Config();
  c.token = Secret("wrong-s3cret-value");
  Client client(c, FastOptions());
  try {
    client.Get(resources::kNamespaces, "", "default");
    FAIL();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.reason(), Reason::kUnauthorized) << e.what();
    EXPECT_THAT(e.what(), Not(HasSubstr("wrong-s3cret-value")));
    EXPECT_THAT(e.what(), Not(HasSubstr(kToken)));
  }
  EXPECT_EQ(client.stats().requests, 1);  // a static token cannot change: no retry
}

TEST_F(ClientKubesimTlsTest, UntrustedCertificateIsATransportError) {
  ClientConfig c = Config();
  c.ca_file.clear();
  c.token = Secret(kToken);
  ClientOptions o = FastOptions();
  o.max_attempts = 1;
  Client client(c, o);
  try {
    client.List(resources::kNamespaces, "");
    FAIL();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.reason(), Reason::kTransport) << e.what();
    EXPECT_THAT(e.what(), Not(HasSubstr(kToken)));
  }
  c.insecure_skip_tls_verify = true;
  Client insecure(c, o);
  EXPECT_NO_THROW(insecure.List(resources::kNamespaces, ""));
}

TEST_F(ClientKubesimTlsTest, RotatedTokenFileIsReReadAfter401) {
  std::string file = sim_->dir() + "/token";
  std::ofstream(file) << "stale-token";
  ClientConfig c = Config();
  c.token_file = file;
  ClientOptions o = FastOptions();
  o.token_recheck = std::chrono::seconds(3600);  // only the 401 makes it look again
  Client client(c, o);
  EXPECT_THROW(client.List(resources::kNamespaces, ""), ApiError);
  std::ofstream(file) << kToken;
  EXPECT_NO_THROW(client.List(resources::kNamespaces, ""));
}

// A configuration CheckClientConfig refuses is a caller's bug (the loaders never return one).
TEST(ClientTest, NoServerIsRefused) {
  EXPECT_THROW(Client(ClientConfig{}), std::invalid_argument);
  ClientConfig c;
  c.server = "ftp://x";
  EXPECT_THROW(Client{c}, std::invalid_argument);
}

// --- Service proxy success paths: kubesim proxies a Service annotated with
// kubesim.starforge.dev/proxy-target to that address; here the backend is kubesim itself, so
// its /version, a create and a following log stream travel through the proxy.

json SelfProxyService(const std::string& url) {
  const std::string target = url.substr(url.find("://") + 3);  // 127.0.0.1:PORT
  return {{"apiVersion", "v1"},
          {"kind", "Service"},
          {"metadata",
           {{"name", "self"}, {"annotations", {{"kubesim.starforge.dev/proxy-target", target}}}}},
          {"spec", {{"ports", {{{"name", "dashboard"}, {"port", 8265}}}}}}};
}

TEST_F(ClientKubesimTest, ServiceProxyRoundTrip) {
  client_->Create(resources::kServices, kNs, SelfProxyService(sim_->url()));
  ProxyResponse r =
      client_->ServiceProxy({.ns = kNs, .service = "self", .port = "8265", .path = "version"});
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(json::parse(r.body)["minor"], "32");
  EXPECT_THAT(r.headers["content-type"], HasSubstr("application/json"));

  // POST with a body, by port name; the backend's 201 comes back as it is.
  const std::string cms = "api/v1/namespaces/" + kNs + "/configmaps";
  r = client_->ServiceProxy({.method = "POST",
                             .ns = kNs,
                             .service = "self",
                             .port = "dashboard",
                             .path = cms,
                             .body = ConfigMap("via-proxy", {{"app", "x"}}).dump(),
                             .content_type = "application/json"});
  EXPECT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(client_->Get(resources::kConfigMaps, kNs, "via-proxy")["data"]["k"], "v");
  // The query reaches the backend.
  client_->Create(resources::kConfigMaps, kNs, ConfigMap("other"));
  r = client_->ServiceProxy({.ns = kNs,
                             .service = "self",
                             .port = "8265",
                             .path = cms,
                             .query = {{"labelSelector", "app=x"}}});
  ASSERT_EQ(r.status, 200) << r.body;
  json items = json::parse(r.body)["items"];
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0]["metadata"]["name"], "via-proxy");
}

TEST_F(ClientKubesimTest, StreamServiceProxyStreams) {
  client_->Create(resources::kServices, kNs, SelfProxyService(sim_->url()));
  json pod = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", "p"}}},
              {"spec", {{"containers", {{{"name", "main"}, {"image", "busybox"}}}}}}};
  client_->Create(resources::kPods, kNs, pod);
  client_->Raw("PUT", std::string("/kubesim/logs/") + kNs + "/p", {}, "one\n", "text/plain");

  std::atomic<bool> stop{false};
  std::mutex mu;
  std::string streamed;
  int status = 0;
  std::thread follower([&] {
    ProxyResponse r = client_->StreamServiceProxy(
        {.ns = kNs,
         .service = "self",
         .port = "8265",
         .path = "api/v1/namespaces/" + kNs + "/pods/p/log",
         .query = {{"follow", "true"}}},
        [&](std::string_view data) {
          std::lock_guard lock(mu);
          streamed.append(data);
          return true;
        },
        &stop);
    status = r.status;
    EXPECT_TRUE(r.body.empty());
  });
  auto seen = [&](const std::string& s) {
    std::lock_guard lock(mu);
    return streamed.find(s) != std::string::npos;
  };
  auto deadline = std::chrono::steady_clock::now() + 5s;
  while (!seen("one\n") && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(10ms);
  // Text appended later arrives on the same open response.
  client_->Raw("POST", std::string("/kubesim/logs/") + kNs + "/p", {}, "two\n", "text/plain");
  deadline = std::chrono::steady_clock::now() + 5s;
  while (!seen("two\n") && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(10ms);
  stop = true;
  follower.join();
  EXPECT_EQ(status, 200);
  EXPECT_EQ(streamed, "one\ntwo\n");
}

// --- RBAC (--rbac) over TLS: the token picks the user; SelfSubjectAccessReview and typed 403s.

class ClientKubesimRbacTest : public ::testing::Test {
 protected:
  static constexpr const char* kForgeToken = "forge-s3cret-token";
  static void SetUpTestSuite() {
    table_ = (std::filesystem::temp_directory_path() /
              ("client-rbac-" + std::to_string(getpid()) + ".yaml"))
                 .string();
    std::ofstream(table_) << "users:\n"
                             "- name: system:serviceaccount:starforge:forge\n"
                             "  token: "
                          << kForgeToken
                          << "\n"
                             "  rules:\n"
                             "  - verbs: [get, list, watch, create]\n"
                             "    apiGroups: [ray.io]\n"
                             "    resources: [rayjobs]\n"
                             "    namespaces: [starforge]\n"
                             "  - verbs: [get]\n"
                             "    apiGroups: [\"\"]\n"
                             "    resources: [pods/log]\n";
    sim_ = testing::StartKubesim({"--tls", "--cert-file", "{cert}", "--rbac", table_}, &sim_error_);
  }
  static void TearDownTestSuite() {
    sim_.reset();
    std::error_code ec;
    std::filesystem::remove(table_, ec);
  }
  void SetUp() override {
    ASSERT_TRUE(sim_) << sim_error_;
    ClientConfig c;
    c.server = sim_->url();
    c.ca_file = sim_->cert_file();
    c.token = Secret(kForgeToken);
    client_ = std::make_unique<Client>(c, FastOptions());
  }
  static std::unique_ptr<testing::Kubesim> sim_;
  static std::string sim_error_;
  static std::string table_;
  std::unique_ptr<Client> client_;
};

std::unique_ptr<testing::Kubesim> ClientKubesimRbacTest::sim_;
std::string ClientKubesimRbacTest::sim_error_;
std::string ClientKubesimRbacTest::table_;

TEST_F(ClientKubesimRbacTest, SelfSubjectAccessReviewAllowedAndDenied) {
  AccessReviewResult r = client_->SelfSubjectAccessReview(
      {.verb = "create", .group = "ray.io", .resource = "rayjobs", .ns = "starforge"});
  EXPECT_TRUE(r.allowed);
  EXPECT_FALSE(r.denied);
  EXPECT_FALSE(r.reason.empty());

  r = client_->SelfSubjectAccessReview(
      {.verb = "delete", .group = "ray.io", .resource = "rayjobs", .ns = "starforge", .name = "x"});
  EXPECT_FALSE(r.allowed);
  EXPECT_FALSE(r.denied);  // RBAC has no opinion; it never denies outright
  r = client_->SelfSubjectAccessReview(
      {.verb = "get", .resource = "pods", .subresource = "log", .ns = "anywhere"});
  EXPECT_TRUE(r.allowed);
  r = client_->SelfSubjectAccessReview({.verb = "list", .resource = "nodes"});
  EXPECT_FALSE(r.allowed);
}

TEST_F(ClientKubesimRbacTest, ForbiddenIsTypedWithTheAuthorizerMessage) {
  try {
    client_->List(resources::kNodes, "");
    FAIL();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.reason(), Reason::kForbidden) << e.what();
    EXPECT_THAT(e.what(),
                HasSubstr("nodes is forbidden: User \"system:serviceaccount:starforge:forge\" "
                          "cannot list resource \"nodes\" in API group \"\" at the cluster "
                          "scope"));
    EXPECT_THAT(e.what(), Not(HasSubstr(kForgeToken)));
  }
  EXPECT_EQ(client_->stats().requests, 1);  // 403 is never retried
}

}  // namespace
}  // namespace starforge::kube
