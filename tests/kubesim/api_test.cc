// API-level tests of kubesim: each test starts the real binary on an ephemeral port (via
// --port-file) and talks to it with a raw HTTP client, checking what kube-apiserver would answer.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "support/kubesim.h"

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// The pure API server (--controllers none: these tests predate the controllers).
class Kubesim {
 public:
  explicit Kubesim(std::vector<std::string> extra = {}) {
    std::vector<std::string> flags = {"--bookmark-interval-ms", "200", "--controllers", "none"};
    flags.insert(flags.end(), extra.begin(), extra.end());
    process_.Start(KUBESIM_BIN, flags);
  }
  int port() const { return process_.port(); }
  const fs::path& dir() const { return process_.dir(); }
  httplib::Client Client() const {
    httplib::Client c("127.0.0.1", port());
    c.set_read_timeout(20, 0);
    return c;
  }

 private:
  starforge::support::KubesimProcess process_;
};

const char* kJson = "application/json";
const std::string kRj = "/apis/ray.io/v1/namespaces/default/rayjobs";
const std::string kPods = "/api/v1/namespaces/default/pods";

json RayJob(const std::string& name) {
  return {{"apiVersion", "ray.io/v1"},
          {"kind", "RayJob"},
          {"metadata", {{"name", name}}},
          {"spec", {{"entrypoint", "python main.py"}}}};
}

json Pod(const std::string& name, json owner_refs = json()) {
  json p = {{"apiVersion", "v1"},
            {"kind", "Pod"},
            {"metadata", {{"name", name}}},
            {"spec", {{"containers", json::array({{{"name", "main"}, {"image", "busybox"}}})}}}};
  if (!owner_refs.is_null()) p["metadata"]["ownerReferences"] = owner_refs;
  return p;
}

json Body(const httplib::Result& r) {
  EXPECT_TRUE(r) << "no response";
  if (!r) return json();
  return json::parse(r->body, nullptr, false);
}

json Post(httplib::Client& c, const std::string& path, const json& body, int want = 201) {
  auto r = c.Post(path, body.dump(), kJson);
  EXPECT_TRUE(r);
  if (!r) return json();
  EXPECT_EQ(r->status, want) << r->body;
  return json::parse(r->body);
}

json OwnerRef(const json& owner, bool block = false) {
  return json::array({{{"apiVersion", owner["apiVersion"]},
                       {"kind", owner["kind"]},
                       {"name", owner["metadata"]["name"]},
                       {"uid", owner["metadata"]["uid"]},
                       {"blockOwnerDeletion", block}}});
}

// Reads a watch stream until `stop` returns true for the events so far or the stream ends.
std::vector<json> ReadWatch(httplib::Client& c, const std::string& path,
                            std::function<bool(const std::vector<json>&)> stop,
                            int* status = nullptr) {
  std::vector<json> events;
  std::string buf;
  auto r = c.Get(path, [&](const char* data, size_t len) {
    buf.append(data, len);
    size_t nl;
    while ((nl = buf.find('\n')) != std::string::npos) {
      events.push_back(json::parse(buf.substr(0, nl)));
      buf.erase(0, nl + 1);
    }
    return !stop(events);
  });
  if (status != nullptr && r) *status = r->status;
  return events;
}

TEST(Kubesim, CrudAndSystemFields) {
  Kubesim k;
  ASSERT_GT(k.port(), 0);
  auto c = k.Client();
  json created = Post(c, kRj, RayJob("rj1"));
  const json& md = created["metadata"];
  EXPECT_FALSE(md["uid"].get<std::string>().empty());
  EXPECT_FALSE(md["resourceVersion"].get<std::string>().empty());
  EXPECT_EQ(md["generation"], 1);
  EXPECT_EQ(md["namespace"], "default");
  EXPECT_TRUE(md.contains("creationTimestamp"));
  // CRD defaulting from the schema.
  EXPECT_EQ(created["spec"]["submissionMode"], "K8sJobMode");
  EXPECT_EQ(created["spec"]["backoffLimit"], 0);

  auto got = c.Get(kRj + "/rj1");
  ASSERT_EQ(got->status, 200);
  EXPECT_EQ(Body(got)["metadata"]["uid"], md["uid"]);

  Post(c, kRj, RayJob("rj1"), 409);
  auto dup = c.Post(kRj, RayJob("rj1").dump(), kJson);
  EXPECT_EQ(Body(dup)["reason"], "AlreadyExists");
  EXPECT_EQ(Body(dup)["message"], "rayjobs.ray.io \"rj1\" already exists");

  auto missing = c.Get(kRj + "/nope");
  EXPECT_EQ(missing->status, 404);
  EXPECT_EQ(Body(missing)["message"], "rayjobs.ray.io \"nope\" not found");
  EXPECT_EQ(Body(missing)["details"]["kind"], "rayjobs");

  // Update with the current rv bumps rv and generation.
  json upd = Body(got);
  upd["spec"]["entrypoint"] = "python other.py";
  auto put = c.Put(kRj + "/rj1", upd.dump(), kJson);
  ASSERT_EQ(put->status, 200) << put->body;
  json after = Body(put);
  EXPECT_EQ(after["metadata"]["generation"], 2);
  EXPECT_NE(after["metadata"]["resourceVersion"], md["resourceVersion"]);

  // Stale resourceVersion: 409 Conflict with the real message.
  auto stale = c.Put(kRj + "/rj1", upd.dump(), kJson);
  EXPECT_EQ(stale->status, 409);
  EXPECT_EQ(Body(stale)["reason"], "Conflict");
  EXPECT_EQ(Body(stale)["message"],
            "Operation cannot be fulfilled on rayjobs.ray.io \"rj1\": the object has been "
            "modified; please apply your changes to the latest version and try again");

  // PUT without resourceVersion on a custom resource: 422.
  json norv = after;
  norv["metadata"].erase("resourceVersion");
  auto bad = c.Put(kRj + "/rj1", norv.dump(), kJson);
  EXPECT_EQ(bad->status, 422);
  EXPECT_EQ(Body(bad)["message"],
            "RayJob.ray.io \"rj1\" is invalid: metadata.resourceVersion: Invalid value: 0: must "
            "be specified for an update");
  // ... but allowed on a built-in kind (unconditional update).
  Post(c, "/api/v1/namespaces/default/configmaps",
       {{"apiVersion", "v1"},
        {"kind", "ConfigMap"},
        {"metadata", {{"name", "cm"}}},
        {"data", {{"a", "1"}}}});
  json cm = {{"apiVersion", "v1"},
             {"kind", "ConfigMap"},
             {"metadata", {{"name", "cm"}}},
             {"data", {{"a", "2"}}}};
  EXPECT_EQ(c.Put("/api/v1/namespaces/default/configmaps/cm", cm.dump(), kJson)->status, 200);

  // Merge patch and JSON patch; rv in a patch is a precondition.
  auto mp =
      c.Patch(kRj + "/rj1", R"({"metadata":{"labels":{"a":"b"}}})", "application/merge-patch+json");
  ASSERT_EQ(mp->status, 200) << mp->body;
  EXPECT_EQ(Body(mp)["metadata"]["labels"]["a"], "b");
  EXPECT_EQ(Body(mp)["metadata"]["generation"], 2);  // metadata-only change
  auto jp = c.Patch(kRj + "/rj1", R"([{"op":"replace","path":"/spec/entrypoint","value":"x"}])",
                    "application/json-patch+json");
  ASSERT_EQ(jp->status, 200) << jp->body;
  EXPECT_EQ(Body(jp)["spec"]["entrypoint"], "x");
  auto pre = c.Patch(kRj + "/rj1", R"({"metadata":{"resourceVersion":"1"}})",
                     "application/merge-patch+json");
  EXPECT_EQ(pre->status, 409);
  auto smp = c.Patch(kRj + "/rj1", "{}", "application/strategic-merge-patch+json");
  EXPECT_EQ(smp->status, 415);

  // Delete of a CR without finalizers: Status Success.
  auto del = c.Delete(kRj + "/rj1");
  ASSERT_EQ(del->status, 200);
  EXPECT_EQ(Body(del)["kind"], "Status");
  EXPECT_EQ(Body(del)["status"], "Success");
  EXPECT_EQ(Body(del)["details"]["kind"], "rayjobs");
  EXPECT_EQ(c.Get(kRj + "/rj1")->status, 404);
  EXPECT_EQ(c.Delete(kRj + "/rj1")->status, 404);
}

// kube-apiserver (Go) answers with TCP_NODELAY set; with Nagle on, every response after the
// first on a kept-alive connection waited for the client's delayed ACK (Linux: at least 40 ms),
// which cost each of StarForge's requests, and each of kubesim's own controllers', 40 ms. The
// median of many round trips is far below that floor whatever the machine's load.
TEST(Kubesim, AnswersAtOnceOnAKeptAliveConnection) {
  Kubesim k;
  httplib::Client c = k.Client();
  c.set_keep_alive(true);
  Post(c, kRj, RayJob("rj"));
  std::vector<double> ms;
  for (int i = 0; i < 21; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    auto r = c.Get(kRj + "/rj");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200);
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  EXPECT_LT(ms[ms.size() / 2], 20.0) << "median round trip in ms on one connection (a Nagle "
                                        "stall waits for the delayed ACK, 40 ms or more)";
}

TEST(Kubesim, GenerateNameAndNamespaces) {
  Kubesim k;
  auto c = k.Client();
  json rj = RayJob("");
  rj["metadata"] = {{"generateName", "job-"}};
  json created = Post(c, kRj, rj);
  const std::string name = created["metadata"]["name"];
  ASSERT_EQ(name.size(), 9u);
  EXPECT_EQ(name.substr(0, 4), "job-");
  for (char ch : name.substr(4)) {
    EXPECT_NE(std::string("bcdfghjklmnpqrstvwxz2456789").find(ch), std::string::npos);
  }
  json noname = RayJob("");
  noname["metadata"] = json::object();
  auto r = c.Post(kRj, noname.dump(), kJson);
  EXPECT_EQ(r->status, 422);
  EXPECT_EQ(Body(r)["details"]["causes"][0]["message"],
            "Required value: name or generateName is required");
  // Unknown namespace.
  auto ns = c.Post("/apis/ray.io/v1/namespaces/nope/rayjobs", RayJob("x").dump(), kJson);
  EXPECT_EQ(ns->status, 404);
  EXPECT_EQ(Body(ns)["message"], "namespaces \"nope\" not found");
}

TEST(Kubesim, MetadataValidation) {
  Kubesim k;
  auto c = k.Client();
  auto r = c.Post(kRj, RayJob("Bad_Name").dump(), kJson);
  ASSERT_EQ(r->status, 422);
  json st = Body(r);
  EXPECT_EQ(st["reason"], "Invalid");
  EXPECT_EQ(st["details"]["kind"], "RayJob");
  EXPECT_EQ(st["details"]["group"], "ray.io");
  EXPECT_EQ(st["details"]["causes"][0]["field"], "metadata.name");
  EXPECT_EQ(st["details"]["causes"][0]["reason"], "FieldValueInvalid");
  EXPECT_EQ(st["message"].get<std::string>().rfind(
                "RayJob.ray.io \"Bad_Name\" is invalid: metadata.name: Invalid value: "
                "\"Bad_Name\": a lowercase RFC 1123 subdomain",
                0),
            0u)
      << st["message"];

  json long_label = RayJob("ok");
  long_label["metadata"]["labels"] = {{"app", std::string(64, 'a')}};
  r = c.Post(kRj, long_label.dump(), kJson);
  ASSERT_EQ(r->status, 422);
  EXPECT_EQ(Body(r)["details"]["causes"][0]["field"], "metadata.labels");
  EXPECT_NE(Body(r)["message"].get<std::string>().find("must be no more than 63 characters"),
            std::string::npos);

  json bad_key = RayJob("ok");
  bad_key["metadata"]["labels"] = {{"-bad", "x"}};
  EXPECT_EQ(c.Post(kRj, bad_key.dump(), kJson)->status, 422);

  // Services need DNS-1035 names (cannot start with a digit).
  json svc = {{"apiVersion", "v1"},
              {"kind", "Service"},
              {"metadata", {{"name", "1svc"}}},
              {"spec", {{"ports", json::array({{{"port", 80}}})}}}};
  EXPECT_EQ(c.Post("/api/v1/namespaces/default/services", svc.dump(), kJson)->status, 422);
}

TEST(Kubesim, SchemaValidationAndFieldValidation) {
  Kubesim k;
  auto c = k.Client();
  json bad = RayJob("typed");
  bad["spec"]["entrypoint"] = 5;
  auto r = c.Post(kRj, bad.dump(), kJson);
  ASSERT_EQ(r->status, 422) << r->body;
  json st = Body(r);
  EXPECT_EQ(st["details"]["causes"][0]["field"], "spec.entrypoint");
  EXPECT_EQ(st["message"],
            "RayJob.ray.io \"typed\" is invalid: spec.entrypoint: Invalid value: \"integer\": "
            "spec.entrypoint in body must be of type string: \"integer\"");

  json unknown = RayJob("unknown");
  unknown["spec"]["bogus"] = true;
  r = c.Post(kRj + "?fieldValidation=Strict", unknown.dump(), kJson);
  ASSERT_EQ(r->status, 400);
  EXPECT_EQ(Body(r)["message"],
            "RayJob in version \"v1\" cannot be handled as a RayJob: strict decoding error: "
            "unknown field \"spec.bogus\"");
  r = c.Post(kRj, unknown.dump(), kJson);  // default: pruned silently
  ASSERT_EQ(r->status, 201);
  EXPECT_FALSE(Body(r)["spec"].contains("bogus"));
  r = c.Post(kRj + "?fieldValidation=Warn", RayJob("w").dump(), kJson);
  EXPECT_EQ(r->status, 201);

  // CEL: deletionStrategy needs both legacy policies or deletionRules.
  json cel = RayJob("cel");
  cel["spec"]["deletionStrategy"] = {{"onSuccess", {{"policy", "DeleteCluster"}}}};
  r = c.Post(kRj, cel.dump(), kJson);
  EXPECT_EQ(r->status, 422) << r->body;
  EXPECT_EQ(Body(r)["details"]["causes"][0]["field"], "spec.deletionStrategy");
}

TEST(Kubesim, StatusSubresource) {
  Kubesim k;
  auto c = k.Client();
  json rj = RayJob("st");
  rj["status"] = {{"jobStatus", "RUNNING"}};
  json created = Post(c, kRj, rj);
  EXPECT_FALSE(created.contains("status"));  // dropped on create
  json s = created;
  s["status"] = {{"jobStatus", "RUNNING"}};
  s["spec"]["entrypoint"] = "ignored";
  auto r = c.Put(kRj + "/st/status", s.dump(), kJson);
  ASSERT_EQ(r->status, 200) << r->body;
  json after = Body(r);
  EXPECT_EQ(after["status"]["jobStatus"], "RUNNING");
  EXPECT_EQ(after["spec"]["entrypoint"], "python main.py");
  EXPECT_EQ(after["metadata"]["generation"], 1);
  // The main resource ignores status.
  after["status"]["jobStatus"] = "FAILED";
  after["spec"]["entrypoint"] = "new";
  r = c.Put(kRj + "/st", after.dump(), kJson);
  ASSERT_EQ(r->status, 200);
  EXPECT_EQ(Body(r)["status"]["jobStatus"], "RUNNING");
  EXPECT_EQ(Body(r)["metadata"]["generation"], 2);
  r = c.Patch(kRj + "/st/status", R"({"status":{"jobDeploymentStatus":"Complete"}})",
              "application/merge-patch+json");
  ASSERT_EQ(r->status, 200);
  EXPECT_EQ(Body(r)["status"]["jobDeploymentStatus"], "Complete");
  EXPECT_EQ(Body(r)["status"]["jobStatus"], "RUNNING");
}

TEST(Kubesim, FinalizersAndGarbageCollection) {
  Kubesim k;
  auto c = k.Client();
  json rj = RayJob("fin");
  rj["metadata"]["finalizers"] = {"ray.io/rayjob-finalizer"};
  Post(c, kRj, rj);
  auto d = c.Delete(kRj + "/fin");
  ASSERT_EQ(d->status, 200);
  json obj = Body(d);
  EXPECT_EQ(obj["kind"], "RayJob");  // still there: the object, not a Status
  EXPECT_TRUE(obj["metadata"].contains("deletionTimestamp"));
  // No new finalizers once deleting.
  auto add =
      c.Patch(kRj + "/fin", R"({"metadata":{"finalizers":["ray.io/rayjob-finalizer","x.io/y"]}})",
              "application/merge-patch+json");
  EXPECT_EQ(add->status, 422);
  auto rm =
      c.Patch(kRj + "/fin", R"({"metadata":{"finalizers":null}})", "application/merge-patch+json");
  EXPECT_EQ(rm->status, 200);
  EXPECT_EQ(c.Get(kRj + "/fin")->status, 404);

  // Background: dependents go after the owner.
  json owner = Post(c, kRj, RayJob("owner"));
  Post(c, kPods, Pod("dep1", OwnerRef(owner)));
  EXPECT_EQ(c.Delete(kRj + "/owner")->status, 200);
  EXPECT_EQ(c.Get(kPods + "/dep1")->status, 404);

  // Orphan: dependents stay, without the ownerReference.
  owner = Post(c, kRj, RayJob("owner2"));
  Post(c, kPods, Pod("dep2", OwnerRef(owner)));
  EXPECT_EQ(c.Delete(kRj + "/owner2", R"({"propagationPolicy":"Orphan"})", kJson)->status, 200);
  EXPECT_EQ(c.Get(kRj + "/owner2")->status, 404);
  auto dep = c.Get(kPods + "/dep2");
  ASSERT_EQ(dep->status, 200);
  EXPECT_TRUE(Body(dep)["metadata"]["ownerReferences"].empty());

  // Foreground: the owner waits (foregroundDeletion) while a dependent has a finalizer.
  owner = Post(c, kRj, RayJob("owner3"));
  json p = Pod("dep3", OwnerRef(owner, true));
  p["metadata"]["finalizers"] = {"example.com/hold"};
  Post(c, kPods, p);
  auto fd = c.Delete(kRj + "/owner3?propagationPolicy=Foreground");
  ASSERT_EQ(fd->status, 200);
  auto o3 = Body(c.Get(kRj + "/owner3"));
  EXPECT_TRUE(o3["metadata"].contains("deletionTimestamp"));
  EXPECT_EQ(o3["metadata"]["finalizers"], json::array({"foregroundDeletion"}));
  EXPECT_TRUE(Body(c.Get(kPods + "/dep3"))["metadata"].contains("deletionTimestamp"));
  c.Patch(kPods + "/dep3", R"({"metadata":{"finalizers":null}})", "application/merge-patch+json");
  EXPECT_EQ(c.Get(kPods + "/dep3")->status, 404);
  EXPECT_EQ(c.Get(kRj + "/owner3")->status, 404);
}

// The collector keeps a graph of owners and dependents from each write instead of scanning
// every object: the cases where that graph could go stale.
TEST(Kubesim, GarbageCollectionFollowsEachWrite) {
  Kubesim k;
  auto c = k.Client();
  const std::string merge = "application/merge-patch+json";

  // An owner deleted before its dependent is created, and a new object of the same name (a new
  // uid) created meanwhile: the dependent names the old uid, so it is collected at once.
  json gone = Post(c, kRj, RayJob("reborn"));
  ASSERT_EQ(c.Delete(kRj + "/reborn")->status, 200);
  json reborn = Post(c, kRj, RayJob("reborn"));
  ASSERT_NE(reborn["metadata"]["uid"], gone["metadata"]["uid"]);
  Post(c, kPods, Pod("late", OwnerRef(gone)));
  EXPECT_EQ(c.Get(kPods + "/late")->status, 404);
  // One owner of two gone: the dependent stays, without the dangling reference.
  json both = OwnerRef(gone);
  both.push_back(OwnerRef(reborn)[0]);
  Post(c, kPods, Pod("half", both));
  auto h = c.Get(kPods + "/half");
  ASSERT_EQ(h->status, 200);
  EXPECT_EQ(Body(h)["metadata"]["ownerReferences"], OwnerRef(reborn));

  // A dependent deleted and created again under the same name without an owner: the new one
  // is not the old one's entry in the graph, and outlives the owner.
  Post(c, kPods, Pod("again", OwnerRef(reborn)));
  ASSERT_EQ(c.Delete(kPods + "/again")->status, 200);
  Post(c, kPods, Pod("again"));
  ASSERT_EQ(c.Delete(kRj + "/reborn")->status, 200);
  EXPECT_EQ(c.Get(kPods + "/half")->status, 404);
  EXPECT_EQ(c.Get(kPods + "/again")->status, 200);

  // ownerReferences patched away: the former dependent outlives its owner.
  json owner = Post(c, kRj, RayJob("patched"));
  Post(c, kPods, Pod("freed", OwnerRef(owner)));
  ASSERT_EQ(c.Patch(kPods + "/freed", R"({"metadata":{"ownerReferences":null}})", merge)->status,
            200);
  ASSERT_EQ(c.Delete(kRj + "/patched")->status, 200);
  EXPECT_EQ(c.Get(kPods + "/freed")->status, 200);
  // ... and patched onto an object: it goes with its new owner.
  owner = Post(c, kRj, RayJob("adopter"));
  json adopt = {{"metadata", {{"ownerReferences", OwnerRef(owner)}}}};
  ASSERT_EQ(c.Patch(kPods + "/freed", adopt.dump(), merge)->status, 200);
  ASSERT_EQ(c.Delete(kRj + "/adopter")->status, 200);
  EXPECT_EQ(c.Get(kPods + "/freed")->status, 404);

  // A foreground owner waiting for a held dependent finishes when the dependent's reference is
  // patched away (not only when the dependent goes).
  owner = Post(c, kRj, RayJob("waiting"));
  json held = Pod("held", OwnerRef(owner, true));
  held["metadata"]["finalizers"] = {"example.com/hold"};
  Post(c, kPods, held);
  ASSERT_EQ(c.Delete(kRj + "/waiting?propagationPolicy=Foreground")->status, 200);
  EXPECT_EQ(c.Get(kRj + "/waiting")->status, 200);
  ASSERT_EQ(c.Patch(kPods + "/held", R"({"metadata":{"ownerReferences":null}})", merge)->status,
            200);
  EXPECT_EQ(c.Get(kRj + "/waiting")->status, 404);
  auto still = c.Get(kPods + "/held");
  ASSERT_EQ(still->status, 200);
  EXPECT_TRUE(Body(still)["metadata"].contains("deletionTimestamp"));
  c.Patch(kPods + "/held", R"({"metadata":{"finalizers":null}})", merge);

  // Foreground through two levels: the middle object waits for its own dependent, the top for
  // the middle, and both go when the bottom's finalizer is removed.
  json top = Post(c, kRj, RayJob("top"));
  json mid = RayJob("mid");
  mid["metadata"]["ownerReferences"] = OwnerRef(top, true);
  mid = Post(c, kRj, mid);
  json bottom = Pod("bottom", OwnerRef(mid, true));
  bottom["metadata"]["finalizers"] = {"example.com/hold"};
  Post(c, kPods, bottom);
  ASSERT_EQ(c.Delete(kRj + "/top?propagationPolicy=Foreground")->status, 200);
  EXPECT_EQ(Body(c.Get(kRj + "/mid"))["metadata"]["finalizers"],
            json::array({"foregroundDeletion"}));
  EXPECT_EQ(c.Get(kRj + "/top")->status, 200);
  c.Patch(kPods + "/bottom", R"({"metadata":{"finalizers":null}})", merge);
  EXPECT_EQ(c.Get(kPods + "/bottom")->status, 404);
  EXPECT_EQ(c.Get(kRj + "/mid")->status, 404);
  EXPECT_EQ(c.Get(kRj + "/top")->status, 404);
}

TEST(Kubesim, SelectorsAndPaging) {
  Kubesim k;
  auto c = k.Client();
  for (int i = 0; i < 5; ++i) {
    json p = Pod("p" + std::to_string(i));
    p["metadata"]["labels"] = {{"app", i % 2 ? "odd" : "even"}, {"idx", std::to_string(i)}};
    if (i == 4) p["metadata"]["labels"].erase("app");
    Post(c, kPods, p);
  }
  auto count = [&](const std::string& q) {
    auto r = c.Get(kPods + "?" + q);
    EXPECT_EQ(r->status, 200) << r->body;
    return Body(r)["items"].size();
  };
  EXPECT_EQ(count("labelSelector=app%3Deven"), 2u);
  EXPECT_EQ(count("labelSelector=app%3D%3Dodd"), 2u);
  EXPECT_EQ(count("labelSelector=app%21%3Deven"), 3u);  // includes the unlabelled p4
  EXPECT_EQ(count("labelSelector=idx%20in%20(1,2,3)"), 3u);
  EXPECT_EQ(count("labelSelector=idx%20notin%20(1,2,3)"), 2u);
  EXPECT_EQ(count("labelSelector=app"), 4u);
  EXPECT_EQ(count("labelSelector=%21app"), 1u);
  EXPECT_EQ(count("labelSelector=app,idx%3D1"), 1u);
  EXPECT_EQ(count("fieldSelector=metadata.name%3Dp3"), 1u);
  EXPECT_EQ(count("fieldSelector=status.phase%3DPending"), 5u);
  EXPECT_EQ(count("fieldSelector=metadata.name%21%3Dp3"), 4u);
  auto bad = c.Get(kPods + "?fieldSelector=spec.bogus%3Dx");
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(Body(bad)["message"], "field label not supported: spec.bogus");
  EXPECT_EQ(c.Get(kRj + "?fieldSelector=spec.entrypoint%3Dx")->status, 400);

  // Paging.
  std::vector<std::string> names;
  std::string cont;
  std::string first_rv;
  for (int guard = 0; guard < 10; ++guard) {
    auto r = c.Get(kPods + "?limit=2" + (cont.empty() ? "" : "&continue=" + cont));
    json l = Body(r);
    if (first_rv.empty()) first_rv = l["metadata"]["resourceVersion"];
    for (const auto& i : l["items"])
      names.push_back(i["metadata"]["name"]);
    cont = l["metadata"].value("continue", "");
    if (cont.empty()) break;
  }
  EXPECT_EQ(names, (std::vector<std::string>{"p0", "p1", "p2", "p3", "p4"}));
  EXPECT_FALSE(first_rv.empty());
}

// Lists and watches with a `k=v` label selector are answered from the store's label index: the
// same objects in the same order as a scan, after relabelling, deleting and in other namespaces,
// and the rest of the selector still applies.
TEST(Kubesim, LabelIndexAnswersAsAScan) {
  Kubesim k;
  auto c = k.Client();
  Post(c, "/api/v1/namespaces", {{"metadata", {{"name", "other"}}}});
  for (int i = 0; i < 6; ++i) {
    json p = Pod("q" + std::to_string(i));
    p["metadata"]["labels"] = {{"cluster", i < 4 ? "a" : "b"}, {"idx", std::to_string(i)}};
    Post(c, kPods, p);
  }
  json elsewhere = Pod("q9");
  elsewhere["metadata"]["labels"] = {{"cluster", "a"}};
  Post(c, "/api/v1/namespaces/other/pods", elsewhere);
  auto names = [&](const std::string& path) {
    auto r = c.Get(path);
    EXPECT_EQ(r->status, 200) << r->body;
    std::vector<std::string> out;
    const json body = Body(r);
    for (const auto& i : body["items"])
      out.push_back(i["metadata"]["namespace"].get<std::string>() + "/" +
                    i["metadata"]["name"].get<std::string>());
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(names(kPods + "?labelSelector=cluster%3Da"),
            (V{"default/q0", "default/q1", "default/q2", "default/q3"}));
  EXPECT_EQ(names("/api/v1/pods?labelSelector=cluster%3Da"),
            (V{"default/q0", "default/q1", "default/q2", "default/q3", "other/q9"}));
  EXPECT_EQ(names(kPods + "?labelSelector=cluster%20in%20(b)"), (V{"default/q4", "default/q5"}));
  EXPECT_EQ(names(kPods + "?labelSelector=cluster%3Da,idx%21%3D1"),
            (V{"default/q0", "default/q2", "default/q3"}));
  EXPECT_EQ(names(kPods + "?labelSelector=cluster%3Dc"), V{});
  // Relabel q1 to b, drop q2's label, delete q3: the index follows.
  auto r = c.Patch(kPods + "/q1", R"({"metadata":{"labels":{"cluster":"b"}}})",
                   "application/merge-patch+json");
  ASSERT_EQ(r->status, 200) << r->body;
  r = c.Patch(kPods + "/q2", R"({"metadata":{"labels":{"cluster":null}}})",
              "application/merge-patch+json");
  ASSERT_EQ(r->status, 200) << r->body;
  ASSERT_EQ(c.Delete(kPods + "/q3?gracePeriodSeconds=0")->status, 200);
  EXPECT_EQ(names(kPods + "?labelSelector=cluster%3Da"), (V{"default/q0"}));
  EXPECT_EQ(names(kPods + "?labelSelector=cluster%3Db"),
            (V{"default/q1", "default/q4", "default/q5"}));
  // Paging over the index.
  auto page = Body(c.Get(kPods + "?labelSelector=cluster%3Db&limit=2"));
  ASSERT_EQ(page["items"].size(), 2u);
  EXPECT_EQ(page["metadata"]["remainingItemCount"], 1);
  const std::string cont = page["metadata"]["continue"];
  EXPECT_EQ(names(kPods + "?labelSelector=cluster%3Db&limit=2&continue=" + cont),
            (V{"default/q5"}));
  // A watch without a resourceVersion starts with the same objects.
  auto events = ReadWatch(c, kPods + "?watch=1&timeoutSeconds=1&labelSelector=cluster%3Db",
                          [](const std::vector<json>& e) { return e.size() >= 3; });
  V added;
  for (const auto& e : events) {
    EXPECT_EQ(e["type"], "ADDED");
    added.push_back("default/" + e["object"]["metadata"]["name"].get<std::string>());
  }
  EXPECT_EQ(added, (V{"default/q1", "default/q4", "default/q5"}));
}

TEST(Kubesim, EventsBothApis) {
  Kubesim k;
  auto c = k.Client();
  json ev = {{"apiVersion", "v1"},
             {"kind", "Event"},
             {"metadata", {{"name", "rj.1"}}},
             {"involvedObject", {{"kind", "RayJob"}, {"name", "rj"}, {"namespace", "default"}}},
             {"reason", "Created"},
             {"message", "hello"},
             {"type", "Normal"}};
  Post(c, "/api/v1/namespaces/default/events", ev);
  auto r =
      c.Get("/apis/events.k8s.io/v1/namespaces/default/events?fieldSelector=regarding.name%3Drj");
  ASSERT_EQ(r->status, 200) << r->body;
  json l = Body(r);
  ASSERT_EQ(l["items"].size(), 1u);
  EXPECT_EQ(l["items"][0]["note"], "hello");
  EXPECT_EQ(l["items"][0]["regarding"]["name"], "rj");
  EXPECT_EQ(l["items"][0]["apiVersion"], "events.k8s.io/v1");
  r = c.Get("/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3Dother");
  EXPECT_TRUE(Body(r)["items"].empty());
}

TEST(Kubesim, WatchBookmarksAndExpiry) {
  Kubesim k({"--history", "50"});
  auto c = k.Client();
  json a = Post(c, kRj, RayJob("w1"));
  const std::string rv0 = a["metadata"]["resourceVersion"];
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    auto c2 = k.Client();
    Post(c2, kRj, RayJob("w2"));
    c2.Patch(kRj + "/w2", R"({"spec":{"entrypoint":"y"}})", "application/merge-patch+json");
    c2.Delete(kRj + "/w2");
  });
  auto events = ReadWatch(
      c, kRj + "?watch=true&allowWatchBookmarks=true&timeoutSeconds=5&resourceVersion=" + rv0,
      [](const std::vector<json>& ev) {
        int n = 0;
        for (const auto& e : ev)
          n += e["type"] != "BOOKMARK";
        return n >= 3;
      });
  writer.join();
  std::vector<std::string> types;
  for (const auto& e : events) {
    if (e["type"] != "BOOKMARK") types.push_back(e["type"]);
  }
  EXPECT_EQ(types, (std::vector<std::string>{"ADDED", "MODIFIED", "DELETED"}));

  // Without rv: synthetic ADDED for what exists; bookmarks carry only the rv.
  events = ReadWatch(c, kRj + "?watch=1&allowWatchBookmarks=true&timeoutSeconds=3",
                     [](const std::vector<json>& ev) { return ev.size() >= 2; });
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events[0]["type"], "ADDED");
  EXPECT_EQ(events[0]["object"]["metadata"]["name"], "w1");
  EXPECT_EQ(events[1]["type"], "BOOKMARK");
  EXPECT_EQ(events[1]["object"]["metadata"].size(), 1u);

  // timeoutSeconds ends the stream.
  auto t0 = std::chrono::steady_clock::now();
  events = ReadWatch(c,
                     kRj + "?watch=1&timeoutSeconds=1&resourceVersion=" +
                         Body(c.Get(kRj))["metadata"]["resourceVersion"].get<std::string>(),
                     [](const std::vector<json>&) { return false; });
  EXPECT_TRUE(events.empty());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(4));

  // Too old: ERROR 410 inside a 200 stream after compaction ...
  ASSERT_EQ(c.Post("/kubesim/compact", "", kJson)->status, 200);
  int status = 0;
  events = ReadWatch(
      c, kRj + "?watch=1&resourceVersion=" + rv0, [](const std::vector<json>&) { return false; },
      &status);
  EXPECT_EQ(status, 200);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["type"], "ERROR");
  EXPECT_EQ(events[0]["object"]["code"], 410);
  EXPECT_EQ(events[0]["object"]["reason"], "Expired");
  EXPECT_EQ(events[0]["object"]["message"].get<std::string>().rfind(
                "too old resource version: " + rv0, 0),
            0u);
  // ... or as HTTP 410 when configured.
  c.Post("/kubesim/faults", R"({"rules":[],"watchExpiredAs":"http"})", kJson);
  auto r = c.Get(kRj + "?watch=1&resourceVersion=" + rv0);
  EXPECT_EQ(r->status, 410);
  EXPECT_EQ(Body(r)["reason"], "Expired");
}

// kube-apiserver reads `watch` as apimachinery converts a query string to bool: every value but
// "0" and "false" (any case) is true. The official Python client sends `watch=True`.
TEST(Kubesim, WatchParameterReadAsKubeApiserverReadsIt) {
  Kubesim k;
  auto c = k.Client();
  Post(c, kRj, RayJob("b1"));
  for (const std::string v : {"True", "TRUE", "yes", "", "1"}) {
    auto events = ReadWatch(c, kRj + "?timeoutSeconds=1&watch=" + v,
                            [](const std::vector<json>& ev) { return !ev.empty(); });
    ASSERT_EQ(events.size(), 1u) << "watch=" << v;
    EXPECT_EQ(events[0]["type"], "ADDED") << "watch=" << v;
  }
  for (const std::string v : {"false", "False", "0"}) {
    auto r = c.Get(kRj + "?watch=" + v);
    ASSERT_EQ(r->status, 200) << "watch=" << v;
    EXPECT_EQ(Body(r)["kind"], "RayJobList") << "watch=" << v;
  }
}

TEST(Kubesim, WatchSelectorTransitions) {
  Kubesim k;
  auto c = k.Client();
  json p = Pod("sel");
  p["metadata"]["labels"] = {{"app", "x"}};
  json created = Post(c, kPods, p);
  const std::string rv = created["metadata"]["resourceVersion"];
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    auto c2 = k.Client();
    c2.Patch(kPods + "/sel", R"({"metadata":{"labels":{"app":"y"}}})",
             "application/merge-patch+json");
  });
  auto events =
      ReadWatch(c, kPods + "?watch=1&timeoutSeconds=5&labelSelector=app%3Dx&resourceVersion=" + rv,
                [](const std::vector<json>& ev) { return !ev.empty(); });
  writer.join();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["type"], "DELETED");  // left the selector
}

TEST(Kubesim, FaultsAndCounters) {
  Kubesim k;
  auto c = k.Client();
  c.Delete("/kubesim/requests");
  auto r = c.Post("/kubesim/faults",
                  R"({"rules":[{"verb":"list","resource":"rayjobs","code":429,"count":1},
                               {"verb":"get","resource":"rayjobs","code":500,"count":1},
                               {"verb":"create","resource":"pods","code":503,"retryAfter":2,"count":1}]})",
                  kJson);
  ASSERT_EQ(r->status, 200);
  r = c.Get(kRj);
  EXPECT_EQ(r->status, 429);
  EXPECT_EQ(r->get_header_value("Retry-After"), "1");
  EXPECT_EQ(r->body, "Too many requests, please try again later.\n");
  EXPECT_EQ(c.Get(kRj)->status, 200);  // count exhausted
  r = c.Get(kRj + "/x");
  EXPECT_EQ(r->status, 500);
  EXPECT_EQ(Body(r)["reason"], "InternalError");
  EXPECT_FALSE(r->has_header("Retry-After"));
  r = c.Post(kPods, Pod("f").dump(), kJson);
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(r->get_header_value("Retry-After"), "2");
  EXPECT_EQ(Body(r)["details"]["retryAfterSeconds"], 2);

  // Latency.
  c.Post("/kubesim/faults", R"({"rules":[{"verb":"get","resource":"pods","latencyMs":300}]})",
         kJson);
  auto t0 = std::chrono::steady_clock::now();
  c.Get(kPods + "/none");
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(290));
  c.Delete("/kubesim/faults");

  json counts = Body(c.Get("/kubesim/requests"));
  EXPECT_EQ(counts["requests"]["list rayjobs"], 2);
  EXPECT_EQ(counts["requests"]["get rayjobs"], 1);
  EXPECT_EQ(counts["requests"]["create pods"], 1);
  EXPECT_EQ(counts["requests"]["get pods"], 1);
  c.Delete("/kubesim/requests");
  EXPECT_EQ(Body(c.Get("/kubesim/requests"))["total"], 0);

  // Forced watch close.
  std::thread closer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    auto c2 = k.Client();
    c2.Post("/kubesim/watches/close", "", kJson);
  });
  auto t1 = std::chrono::steady_clock::now();
  ReadWatch(c, kRj + "?watch=1&timeoutSeconds=30", [](const std::vector<json>&) { return false; });
  closer.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t1, std::chrono::seconds(5));
}

TEST(Kubesim, PodLogs) {
  Kubesim k;
  auto c = k.Client();
  Post(c, kPods, Pod("logger"));
  ASSERT_EQ(c.Put("/kubesim/logs/default/logger", "line1\nline2\nline3\n", "text/plain")->status,
            200);
  auto r = c.Get(kPods + "/logger/log");
  ASSERT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "line1\nline2\nline3\n");
  EXPECT_EQ(c.Get(kPods + "/logger/log?tailLines=1")->body, "line3\n");
  r = c.Get(kPods + "/logger/log?container=nope");
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(Body(r)["message"], "container nope is not valid for pod logger");
}

TEST(Kubesim, DiscoveryAndOpenApi) {
  Kubesim k;
  auto c = k.Client();
  httplib::Headers agg = {{"Accept",
                           "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
                           "application/json;g=apidiscovery.k8s.io;v=v2beta1;as="
                           "APIGroupDiscoveryList,application/json"}};
  auto r = c.Get("/apis", agg);
  ASSERT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Type"),
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList");
  EXPECT_EQ(Body(r)["kind"], "APIGroupDiscoveryList");
  r = c.Get("/apis");
  EXPECT_EQ(Body(r)["kind"], "APIGroupList");
  EXPECT_EQ(Body(c.Get("/api/v1"))["kind"], "APIResourceList");
  EXPECT_EQ(Body(c.Get("/apis/ray.io/v1"))["groupVersion"], "ray.io/v1");
  EXPECT_EQ(Body(c.Get("/version"))["minor"], "32");
  EXPECT_EQ(c.Get("/openapi/v2")->status, 404);
  json idx = Body(c.Get("/openapi/v3"));
  const std::string url = idx["paths"]["apis/ray.io/v1"]["serverRelativeURL"];
  json doc = Body(c.Get(url));
  json patch = doc["paths"]["/apis/ray.io/v1/namespaces/{namespace}/rayjobs/{name}"]["patch"];
  EXPECT_EQ(patch["x-kubernetes-group-version-kind"]["kind"], "RayJob");
  EXPECT_EQ(patch["parameters"][0]["name"], "fieldValidation");
}

TEST(Kubesim, TokenAndTls) {
  Kubesim k({"--tls", "--token", "s3cret"});
  ASSERT_GT(k.port(), 0);
  const std::string cert = (k.dir() / "port.crt").string();
  httplib::SSLClient c("127.0.0.1", k.port());
  c.set_ca_cert_path(cert.c_str());
  c.enable_server_certificate_verification(true);
  auto r = c.Get("/api/v1/namespaces");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 401);
  EXPECT_EQ(Body(r)["reason"], "Unauthorized");
  c.set_bearer_token_auth("s3cret");
  r = c.Get("/api/v1/namespaces");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_GE(Body(r)["items"].size(), 1u);
}

TEST(Kubesim, StrategicMergeAndServerSideApply) {
  Kubesim k;
  auto c = k.Client();
  json p = Pod("smp");
  p["spec"]["containers"].push_back({{"name", "side"}, {"image", "a"}});
  Post(c, kPods, p);
  auto r = c.Patch(kPods + "/smp",
                   R"({"spec":{"$setElementOrder/containers":[{"name":"main"},{"name":"side"}],
                       "containers":[{"name":"side","image":"b"}]}})",
                   "application/strategic-merge-patch+json");
  ASSERT_EQ(r->status, 200) << r->body;
  json c2 = Body(r)["spec"]["containers"];
  ASSERT_EQ(c2.size(), 2u);
  EXPECT_EQ(c2[0]["image"], "busybox");
  EXPECT_EQ(c2[1]["image"], "b");

  // SSA: create on missing (201), then update (200); fieldManager is required.
  json rj = RayJob("ssa");
  r = c.Patch(kRj + "/ssa?fieldManager=test", rj.dump(), "application/apply-patch+yaml");
  ASSERT_EQ(r->status, 201) << r->body;
  rj["spec"]["entrypoint"] = "changed";
  r = c.Patch(kRj + "/ssa?fieldManager=test", rj.dump(), "application/apply-patch+yaml");
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(Body(r)["spec"]["entrypoint"], "changed");
  EXPECT_EQ(c.Patch(kRj + "/ssa", rj.dump(), "application/apply-patch+yaml")->status, 422);
}

}  // namespace

// --- RBAC table (--rbac), SelfSubjectAccessReview, service proxy ---

namespace {

constexpr const char* kForge = "system:serviceaccount:starforge:forge";

// Writes an RBAC table to a temporary file, removed on destruction.
class RbacFile {
 public:
  explicit RbacFile(const std::string& yaml) {
    path_ = fs::temp_directory_path() / ("kubesim-rbac-" + std::to_string(getpid()) + "-" +
                                         std::to_string(counter_++) + ".yaml");
    std::ofstream(path_) << yaml;
  }
  ~RbacFile() {
    std::error_code ec;
    fs::remove(path_, ec);
  }
  std::string path() const { return path_.string(); }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

const char* kRbacTable = R"(users:
- name: system:serviceaccount:starforge:forge
  token: forge-token
  rules:
  - verbs: [get, list, watch, create]
    apiGroups: [ray.io]
    resources: [rayjobs]
    namespaces: [starforge]
  - verbs: [get]
    apiGroups: [""]
    resources: [pods]
    namespaces: [starforge]
  - verbs: [get, create]
    apiGroups: [""]
    resources: [services/proxy]
    namespaces: [starforge]
  - verbs: [list]
    apiGroups: [""]
    resources: [namespaces]
- name: admin
  token: admin-token
  rules:
  - verbs: ["*"]
    apiGroups: ["*"]
    resources: ["*"]
)";

// The Status of a 403, checked for reason, code and the authorizer's exact message.
void ExpectForbidden(const httplib::Result& r, const std::string& message) {
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 403) << r->body;
  json s = Body(r);
  EXPECT_EQ(s["kind"], "Status");
  EXPECT_EQ(s["reason"], "Forbidden");
  EXPECT_EQ(s["code"], 403);
  EXPECT_EQ(s["message"], message);
}

json Review(const json& attrs) {
  return {{"apiVersion", "authorization.k8s.io/v1"},
          {"kind", "SelfSubjectAccessReview"},
          {"spec", {{"resourceAttributes", attrs}}}};
}

}  // namespace

TEST(Kubesim, RbacForbiddenWording) {
  RbacFile table(kRbacTable);
  Kubesim k({"--rbac", table.path()});
  ASSERT_GT(k.port(), 0);
  auto admin = k.Client();
  admin.set_bearer_token_auth("admin-token");
  Post(admin, "/api/v1/namespaces", {{"metadata", {{"name", "starforge"}}}});
  Post(admin, "/api/v1/namespaces/starforge/pods", Pod("p"));
  admin.Delete("/kubesim/requests");

  auto c = k.Client();
  c.set_bearer_token_auth("forge-token");
  const std::string rj = "/apis/ray.io/v1/namespaces/starforge/rayjobs";
  const std::string who = std::string("User \"") + kForge + "\"";
  // Allowed by the table.
  Post(c, rj, RayJob("x"));
  EXPECT_EQ(c.Get(rj + "/x")->status, 200);
  EXPECT_EQ(c.Get(rj)->status, 200);
  EXPECT_EQ(c.Get("/api/v1/namespaces")->status, 200);  // cluster-wide rule
  EXPECT_EQ(c.Get("/apis")->status, 200);               // discovery: any authenticated user
  EXPECT_EQ(c.Get("/api/v1/namespaces/starforge/pods/p")->status, 200);

  // Named, namespaced.
  ExpectForbidden(c.Delete(rj + "/x"),
                  "rayjobs.ray.io \"x\" is forbidden: " + who +
                      " cannot delete resource \"rayjobs\" in API group \"ray.io\" in the "
                      "namespace \"starforge\"");
  json details = Body(c.Delete(rj + "/x"))["details"];
  EXPECT_EQ(details, json({{"name", "x"}, {"group", "ray.io"}, {"kind", "rayjobs"}}));
  // Collection verbs carry no name; other namespaces and all namespaces are not granted.
  ExpectForbidden(c.Get("/apis/ray.io/v1/namespaces/default/rayjobs"),
                  "rayjobs.ray.io is forbidden: " + who +
                      " cannot list resource \"rayjobs\" in API group \"ray.io\" in the "
                      "namespace \"default\"");
  ExpectForbidden(c.Get("/apis/ray.io/v1/rayjobs"),
                  "rayjobs.ray.io is forbidden: " + who +
                      " cannot list resource \"rayjobs\" in API group \"ray.io\" at the cluster "
                      "scope");
  ExpectForbidden(c.Post("/api/v1/namespaces/starforge/pods", Pod("q").dump(), kJson),
                  "pods is forbidden: " + who +
                      " cannot create resource \"pods\" in API group \"\" in the namespace "
                      "\"starforge\"");
  ExpectForbidden(c.Get("/api/v1/namespaces/starforge/pods?watch=true"),
                  "pods is forbidden: " + who +
                      " cannot watch resource \"pods\" in API group \"\" in the namespace "
                      "\"starforge\"");
  ExpectForbidden(c.Delete("/api/v1/namespaces/starforge/pods"),
                  "pods is forbidden: " + who +
                      " cannot deletecollection resource \"pods\" in API group \"\" in the "
                      "namespace \"starforge\"");
  // Subresources are "resource/sub"; the name stays the object's.
  ExpectForbidden(c.Get("/api/v1/namespaces/starforge/pods/p/log"),
                  "pods \"p\" is forbidden: " + who +
                      " cannot get resource \"pods/log\" in API group \"\" in the namespace "
                      "\"starforge\"");
  ExpectForbidden(c.Patch(rj + "/x/status", R"({"status":{}})", "application/merge-patch+json"),
                  "rayjobs.ray.io \"x\" is forbidden: " + who +
                      " cannot patch resource \"rayjobs/status\" in API group \"ray.io\" in the "
                      "namespace \"starforge\"");
  ExpectForbidden(c.Delete("/api/v1/namespaces/starforge/services/head:8265/proxy/api/jobs/1"),
                  "services \"head:8265\" is forbidden: " + who +
                      " cannot delete resource \"services/proxy\" in API group \"\" in the "
                      "namespace \"starforge\"");
  // Cluster-scoped.
  ExpectForbidden(c.Get("/api/v1/nodes"),
                  "nodes is forbidden: " + who +
                      " cannot list resource \"nodes\" in API group \"\" at the cluster scope");
  ExpectForbidden(c.Get("/api/v1/nodes/n1"),
                  "nodes \"n1\" is forbidden: " + who +
                      " cannot get resource \"nodes\" in API group \"\" at the cluster scope");
  // A namespace object is addressed inside its own namespace (requestinfo.go).
  ExpectForbidden(c.Delete("/api/v1/namespaces/starforge"),
                  "namespaces \"starforge\" is forbidden: " + who +
                      " cannot delete resource \"namespaces\" in API group \"\" in the "
                      "namespace \"starforge\"");
  // kubectl delete's wait lists with metadata.name: the name is part of the attributes.
  ExpectForbidden(
      c.Get("/apis/ray.io/v1/namespaces/default/rayjobs?fieldSelector=metadata.name%3Dy"),
      "rayjobs.ray.io \"y\" is forbidden: " + who +
          " cannot list resource \"rayjobs\" in API group \"ray.io\" in the "
          "namespace \"default\"");
  EXPECT_EQ(Body(c.Get("/api/v1/namespaces/starforge/pods/p"))["metadata"]["name"], "p");

  // No token: system:anonymous (discovery too is refused; /version is public). Unknown: 401.
  auto anon = k.Client();
  ExpectForbidden(anon.Get("/api/v1/namespaces"),
                  "namespaces is forbidden: User \"system:anonymous\" cannot list resource "
                  "\"namespaces\" in API group \"\" at the cluster scope");
  ExpectForbidden(anon.Get("/apis"),
                  "forbidden: User \"system:anonymous\" cannot get path \"/apis\"");
  EXPECT_EQ(anon.Get("/version")->status, 200);
  auto wrong = k.Client();
  wrong.set_bearer_token_auth("nope");
  EXPECT_EQ(wrong.Get("/api/v1/namespaces")->status, 401);

  // Refused requests are counted like any other.
  json counts = Body(admin.Get("/kubesim/requests"))["requests"];
  EXPECT_EQ(counts.value("delete rayjobs", 0), 2);
  EXPECT_EQ(counts.value("get pods/log", 0), 1);
}

TEST(Kubesim, RbacTableIsChecked) {
  RbacFile bad(
      "users:\n- name: u\n  token: t\n  rules:\n  - verbs: [get]\n    resources: [pods]\n");
  const std::string cmd =
      std::string(KUBESIM_BIN) + " --listen 127.0.0.1:0 --rbac " + bad.path() + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[256];
  while (fgets(buf, sizeof buf, p) != nullptr)
    out += buf;
  const int status = pclose(p);
  EXPECT_NE(status, 0);
  EXPECT_NE(out.find("users[0].rules[0]: `apiGroups` is required"), std::string::npos) << out;
}

TEST(Kubesim, SelfSubjectAccessReview) {
  RbacFile table(kRbacTable);
  Kubesim k({"--rbac", table.path()});
  ASSERT_GT(k.port(), 0);
  auto c = k.Client();
  c.set_bearer_token_auth("forge-token");
  const std::string path = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";

  json r = Post(c, path,
                Review({{"namespace", "starforge"},
                        {"verb", "create"},
                        {"group", "ray.io"},
                        {"resource", "rayjobs"}}));
  EXPECT_EQ(r["kind"], "SelfSubjectAccessReview");
  EXPECT_EQ(r["apiVersion"], "authorization.k8s.io/v1");
  EXPECT_EQ(r["spec"]["resourceAttributes"]["verb"], "create");
  EXPECT_EQ(r["status"]["allowed"], true);
  EXPECT_FALSE(r["status"].value("reason", "").empty());

  r = Post(c, path,
           Review({{"namespace", "starforge"},
                   {"verb", "delete"},
                   {"group", "ray.io"},
                   {"resource", "rayjobs"},
                   {"name", "x"}}));
  EXPECT_EQ(r["status"]["allowed"], false);
  EXPECT_FALSE(r["status"].contains("denied"));  // RBAC has no opinion; it never denies
  // Subresource, other namespace, cluster scope.
  EXPECT_EQ(Post(c, path,
                 Review({{"namespace", "starforge"},
                         {"verb", "get"},
                         {"resource", "pods"},
                         {"subresource", "log"}}))["status"]["allowed"],
            false);
  EXPECT_EQ(Post(c, path,
                 Review({{"namespace", "starforge"},
                         {"verb", "create"},
                         {"resource", "services"},
                         {"subresource", "proxy"}}))["status"]["allowed"],
            true);
  EXPECT_EQ(Post(c, path,
                 Review({{"namespace", "default"},
                         {"verb", "get"},
                         {"group", "ray.io"},
                         {"resource", "rayjobs"}}))["status"]["allowed"],
            false);
  EXPECT_EQ(
      Post(c, path, Review({{"verb", "list"}, {"resource", "namespaces"}}))["status"]["allowed"],
      true);
  EXPECT_EQ(Post(c, path, Review({{"verb", "list"}, {"resource", "nodes"}}))["status"]["allowed"],
            false);
  // kubectl auth can-i sends protobuf (and accepts JSON back): the bytes kubectl 1.32 sent for
  // `auth can-i create rayjobs -n starforge`.
  auto field = [](int n, const std::string& v) {
    return std::string(1, static_cast<char>(n << 3 | 2)) + static_cast<char>(v.size()) + v;
  };
  const std::string attrs = field(1, "starforge") + field(2, "create") + field(3, "ray.io") +
                            field(4, "") + field(5, "rayjobs") + field(6, "") + field(7, "");
  const std::string raw = field(1, std::string("\x0a\x00\x12\x00\x1a\x00\x22\x00\x2a\x00\x32"
                                               "\x00\x38\x00\x42\x00",
                                               16)) +
                          field(2, field(1, attrs)) +
                          field(3, std::string("\x08\x00\x12\x00\x1a\x00\x20\x00", 8));
  const std::string envelope =
      std::string("k8s\0", 4) +
      field(1, field(1, "authorization.k8s.io/v1") + field(2, "SelfSubjectAccessReview")) +
      field(2, raw) + field(3, "") + field(4, "");
  ASSERT_EQ(envelope.size(), 136u);
  auto pb = c.Post(path, {{"Accept", "application/vnd.kubernetes.protobuf,application/json"}},
                   envelope, "application/vnd.kubernetes.protobuf");
  ASSERT_TRUE(pb);
  ASSERT_EQ(pb->status, 201) << pb->body;
  EXPECT_EQ(Body(pb)["spec"]["resourceAttributes"]["resource"], "rayjobs");
  EXPECT_EQ(Body(pb)["status"]["allowed"], true);

  // Exactly one of resourceAttributes / nonResourceAttributes.
  json bad = Post(c, path, {{"spec", json::object()}}, 422);
  EXPECT_EQ(bad["reason"], "Invalid");
  EXPECT_EQ(bad["details"]["causes"][0]["field"], "spec.resourceAttributes");
  auto admin = k.Client();
  admin.set_bearer_token_auth("admin-token");
  EXPECT_EQ(admin.Get(path)->status, 405);
  EXPECT_EQ(c.Get(path)->status, 403);  // authorization comes before routing
  // Anonymous callers may not ask.
  EXPECT_EQ(k.Client().Post(path, Review({{"verb", "get"}}).dump(), kJson)->status, 403);

  // Discovery lists it with the create verb only.
  json rl = Body(c.Get("/apis/authorization.k8s.io/v1"));
  ASSERT_EQ(rl["resources"].size(), 1u);
  EXPECT_EQ(rl["resources"][0]["name"], "selfsubjectaccessreviews");
  EXPECT_EQ(rl["resources"][0]["verbs"], json::array({"create"}));
}

TEST(Kubesim, SelfSubjectAccessReviewWithoutRbacAllowsAll) {
  Kubesim k;
  auto c = k.Client();
  json r = Post(c, "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                Review({{"verb", "delete"}, {"resource", "nodes"}}));
  EXPECT_EQ(r["status"]["allowed"], true);
}

namespace {

// A small HTTP backend for the proxy tests, on an ephemeral port.
class Backend {
 public:
  Backend() {
    srv_.Get("/api/jobs/", [](const httplib::Request& req, httplib::Response& res) {
      json echo = {{"method", req.method},
                   {"path", req.path},
                   {"x", req.get_param_value("x")},
                   {"forwardedUri", req.get_header_value("X-Forwarded-Uri")},
                   {"authorization", req.get_header_value("Authorization")},
                   {"custom", req.get_header_value("X-Custom")}};
      res.set_header("X-Backend", "yes");
      res.set_content(echo.dump(), "application/json");
    });
    srv_.Post("/api/jobs/", [](const httplib::Request& req, httplib::Response& res) {
      res.status = 200;
      res.set_content(json({{"method", req.method},
                            {"body", req.body},
                            {"contentType", req.get_header_value("Content-Type")}})
                          .dump(),
                      "application/json");
    });
    srv_.Get("/missing", [](const httplib::Request&, httplib::Response& res) {
      res.status = 404;
      res.set_content("404: Not Found", "text/plain");
    });
    // Writes "first", then waits until the test has read it (proving the proxy streams).
    srv_.Get("/stream", [this](const httplib::Request&, httplib::Response& res) {
      res.set_chunked_content_provider(
          "text/plain", [this](size_t offset, httplib::DataSink& sink) {
            if (offset == 0) return sink.write("first\n", 6);
            for (int i = 0; i < 500 && !release; ++i)
              std::this_thread::sleep_for(std::chrono::milliseconds(10));
            const std::string last = release ? "second\n" : "second (not streamed)\n";
            sink.write(last.data(), last.size());
            sink.done();
            return true;
          });
    });
    // Writes until its reader goes away.
    srv_.Get("/forever", [this](const httplib::Request&, httplib::Response& res) {
      res.set_chunked_content_provider(
          "text/plain",
          [](size_t, httplib::DataSink& sink) {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            return sink.write("tick\n", 5);
          },
          [this](bool) { forever_ended = true; });
    });
    port_ = srv_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { srv_.listen_after_bind(); });
  }
  ~Backend() {
    srv_.stop();
    thread_.join();
  }
  int port() const { return port_; }

  std::atomic<bool> release{false};
  std::atomic<bool> forever_ended{false};

 private:
  httplib::Server srv_;
  int port_ = 0;
  std::thread thread_;
};

json Service(const std::string& name, const std::string& target) {
  json svc = {
      {"apiVersion", "v1"},
      {"kind", "Service"},
      {"metadata", {{"name", name}}},
      {"spec",
       {{"ports",
         {{{"name", "dashboard"}, {"port", 8265}}, {{"name", "metrics"}, {"port", 8080}}}}}}};
  if (!target.empty()) {
    svc["metadata"]["annotations"] = {{"kubesim.starforge.dev/proxy-target", target}};
  }
  return svc;
}

}  // namespace

TEST(Kubesim, ServiceProxyForwardsToTheAnnotatedBackend) {
  Backend backend;
  Kubesim k;
  auto c = k.Client();
  const std::string svcs = "/api/v1/namespaces/default/services";
  const std::string addr = "127.0.0.1:" + std::to_string(backend.port());
  Post(c, svcs, Service("head", "dashboard=" + addr));

  // GET with a query, by port number: the backend sees the path after /proxy and the query;
  // Authorization is not passed on; X-Forwarded-Uri is the original request.
  const std::string uri = svcs + "/head:8265/proxy/api/jobs/?x=a%20b";
  auto r = c.Get(uri, {{"Authorization", "Bearer not-for-the-backend"}, {"X-Custom", "1"}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->get_header_value("X-Backend"), "yes");
  EXPECT_EQ(r->get_header_value("Content-Type"), "application/json");
  json echo = Body(r);
  EXPECT_EQ(echo["method"], "GET");
  EXPECT_EQ(echo["path"], "/api/jobs/");
  EXPECT_EQ(echo["x"], "a b");
  EXPECT_EQ(
      echo["forwardedUri"].get<std::string>().rfind(svcs + "/head:8265/proxy/api/jobs/?x=", 0), 0u)
      << r->body;
  EXPECT_EQ(echo["authorization"], "");
  EXPECT_EQ(echo["custom"], "1");
  // By port name and with the scheme.
  EXPECT_EQ(c.Get(svcs + "/head:dashboard/proxy/api/jobs/")->status, 200);
  EXPECT_EQ(c.Get(svcs + "/http:head:dashboard/proxy/api/jobs/")->status, 200);

  // POST: the body and its type reach the backend.
  r = c.Post(svcs + "/head:8265/proxy/api/jobs/", R"({"entrypoint":"python x.py"})", kJson);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  echo = Body(r);
  EXPECT_EQ(echo["method"], "POST");
  EXPECT_EQ(echo["body"], R"({"entrypoint":"python x.py"})");
  EXPECT_EQ(echo["contentType"], kJson);

  // The backend's own errors pass through as they are (not a Status).
  r = c.Get(svcs + "/head:8265/proxy/missing");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(r->body, "404: Not Found");

  // Errors of the API server itself.
  auto status_of = [&](const std::string& path, int code, const std::string& message) {
    auto res = c.Get(path);
    ASSERT_TRUE(res) << path;
    EXPECT_EQ(res->status, code) << path << ": " << res->body;
    json s = Body(res);
    EXPECT_EQ(s["kind"], "Status") << path;
    EXPECT_EQ(s["message"], message) << path;
  };
  status_of(svcs + "/head:9999/proxy/", 503, "no service port 9999 found for service \"head\"");
  status_of(svcs + "/head:8080/proxy/", 503, "no endpoints available for service \"head:8080\"");
  status_of(svcs + "/nope:8265/proxy/", 404, "services \"nope\" not found");
  status_of(svcs + "/a:b:c:d/proxy/", 400, "invalid service request \"a:b:c:d\"");
  Post(c, svcs, Service("plain", ""));
  status_of(svcs + "/plain:8265/proxy/", 503, "no endpoints available for service \"plain\"");
  // A backend that is not listening.
  int closed_port = 0;
  {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(sa);
    ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&sa), len), 0);
    ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len), 0);
    closed_port = ntohs(sa.sin_port);
    close(fd);
  }
  Post(c, svcs, Service("down", "127.0.0.1:" + std::to_string(closed_port)));
  status_of(svcs + "/down:8265/proxy/", 503,
            "error trying to reach service: dial tcp 127.0.0.1:" + std::to_string(closed_port) +
                ": connect: connection refused");
}

TEST(Kubesim, ServiceProxyStreams) {
  Backend backend;
  Kubesim k;
  auto c = k.Client();
  const std::string svcs = "/api/v1/namespaces/default/services";
  Post(c, svcs, Service("head", "127.0.0.1:" + std::to_string(backend.port())));

  // The first chunk arrives while the backend is still waiting: the proxy does not buffer.
  std::string got;
  std::string transfer_encoding;
  auto r = c.Get(
      svcs + "/head:8265/proxy/stream",
      [&](const httplib::Response& head) {
        transfer_encoding = head.get_header_value("Transfer-Encoding");
        return true;
      },
      [&](const char* data, size_t len) {
        got.append(data, len);
        if (got.find("first\n") != std::string::npos) backend.release = true;
        return true;
      });
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(transfer_encoding, "chunked");
  EXPECT_EQ(got, "first\nsecond\n");

  // A reader that goes away ends the backend request too.
  int ticks = 0;
  c.Get(svcs + "/head:8265/proxy/forever", [&](const char*, size_t) { return ++ticks < 3; });
  for (int i = 0; i < 250 && !backend.forever_ended; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_TRUE(backend.forever_ended);
}

// Server-side Tables over HTTP (the printers themselves: table_test.cc; kubectl:
// kubectl_table.sh).
const std::string kTableAccept =
    "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;"
    "g=meta.k8s.io,application/json";

TEST(Kubesim, TableForListGetAndWatch) {
  Kubesim k;
  auto c = k.Client();
  Post(c, kRj, RayJob("rj1"));
  Post(c, kRj, RayJob("rj2"));
  const httplib::Headers accept = {{"Accept", kTableAccept}};
  auto list = c.Get(kRj + "?limit=1", accept);
  ASSERT_EQ(list->status, 200) << list->body;
  EXPECT_EQ(list->get_header_value("Content-Type"), "application/json;as=Table;v=v1;g=meta.k8s.io");
  json t = Body(list);
  EXPECT_EQ(t["kind"], "Table");
  EXPECT_EQ(t["columnDefinitions"][0]["name"], "Name");
  EXPECT_EQ(t["columnDefinitions"][1]["name"], "job status");
  EXPECT_EQ(t["rows"].size(), 1u);
  EXPECT_EQ(t["rows"][0]["cells"][0], "rj1");
  EXPECT_EQ(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
  EXPECT_EQ(t["rows"][0]["object"]["metadata"]["name"], "rj1");
  EXPECT_FALSE(t["metadata"]["continue"].get<std::string>().empty());  // paging kept
  EXPECT_EQ(t["metadata"]["remainingItemCount"], 1);

  json one = Body(c.Get(kRj + "/rj2?includeObject=Object", accept));
  EXPECT_EQ(one["rows"].size(), 1u);
  EXPECT_EQ(one["rows"][0]["object"]["kind"], "RayJob");
  EXPECT_EQ(one["metadata"]["resourceVersion"],
            one["rows"][0]["object"]["metadata"]["resourceVersion"]);
  auto bad = c.Get(kRj + "?includeObject=All", accept);
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(Body(bad)["message"], "unrecognized includeObject value: \"All\"");
  // Plain JSON first in the list, or no Accept: objects, never a Table.
  EXPECT_EQ(Body(c.Get(kRj, {{"Accept", "application/json, " + kTableAccept}}))["kind"],
            "RayJobList");
  EXPECT_EQ(Body(c.Get(kRj))["kind"], "RayJobList");
  // Status errors stay Status.
  EXPECT_EQ(Body(c.Get(kRj + "/nope", accept))["kind"], "Status");

  // Watch: one row per event, columns only on the first.
  httplib::Client w = k.Client();
  std::vector<json> got;
  std::string buf;
  w.Get(kRj + "?watch=1&timeoutSeconds=5&includeObject=None", accept,
        [&](const char* data, size_t len) {
          buf.append(data, len);
          size_t nl;
          while ((nl = buf.find('\n')) != std::string::npos) {
            got.push_back(json::parse(buf.substr(0, nl)));
            buf.erase(0, nl + 1);
          }
          return got.size() < 2;
        });
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0]["type"], "ADDED");
  EXPECT_EQ(got[0]["object"]["kind"], "Table");
  EXPECT_EQ(got[0]["object"]["rows"].size(), 1u);
  EXPECT_TRUE(got[0]["object"]["columnDefinitions"].is_array());
  EXPECT_TRUE(got[1]["object"]["columnDefinitions"].is_null());
  EXPECT_EQ(got[1]["object"]["rows"][0]["cells"][0], "rj2");
  EXPECT_TRUE(got[1]["object"]["rows"][0]["object"].is_null());
}

// --kueue: Kueue's RayJob webhooks as the real Kueue v0.17 answers them on the real control
// plane (scripts/e2e/kuberay_loop.py --real --kueue checks the same denial there): a queued RayJob
// is stored suspended; one Kueue would refuse is denied with its words; the queue may not change
// once the job runs.
TEST(Kubesim, KueueWebhooksSuspendAndRefuseQueuedRayJobs) {
  Kubesim k({"--kueue"});
  auto c = k.Client();
  const json head = {
      {"rayStartParams", json::object()},
      {"template",
       {{"spec", {{"containers", json::array({{{"name", "ray-head"}, {"image", "ray"}}})}}}}}};
  auto queued = [&](const std::string& name, bool shutdown) {
    json rj = RayJob(name);
    rj["metadata"]["labels"] = {{"kueue.x-k8s.io/queue-name", "team-a"}};
    rj["spec"]["shutdownAfterJobFinishes"] = shutdown;
    rj["spec"]["rayClusterSpec"] = {{"headGroupSpec", head}};
    return rj;
  };
  json created = Post(c, kRj, queued("q1", true));
  EXPECT_EQ(created["spec"]["suspend"], true);
  // Without the label Kueue leaves the job alone.
  json plain = RayJob("plain");
  plain["spec"]["rayClusterSpec"] = {{"headGroupSpec", head}};
  EXPECT_FALSE(Post(c, kRj, plain)["spec"].value("suspend", false));

  json denied = Post(c, kRj, queued("q2", false), 403);
  EXPECT_EQ(denied["reason"], "Forbidden");
  EXPECT_EQ(denied["message"],
            "admission webhook \"vrayjob.kb.io\" denied the request: "
            "spec.shutdownAfterJobFinishes: Invalid value: false: a kueue managed job should "
            "delete the cluster after finishing");

  // Admitted (unsuspended), then moved to another queue: refused; while suspended it may move.
  auto patch = [&](const std::string& body) {
    return c.Patch(kRj + "/q1", body, "application/merge-patch+json");
  };
  ASSERT_EQ(patch(R"({"spec":{"suspend":false}})")->status, 200);
  auto moved = patch(R"({"metadata":{"labels":{"kueue.x-k8s.io/queue-name":"team-b"}}})");
  ASSERT_EQ(moved->status, 403);
  EXPECT_EQ(Body(moved)["message"],
            "admission webhook \"vrayjob.kb.io\" denied the request: "
            "metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: \"team-b\": field is "
            "immutable");
  ASSERT_EQ(patch(R"({"spec":{"suspend":true}})")->status, 200);
  EXPECT_EQ(patch(R"({"metadata":{"labels":{"kueue.x-k8s.io/queue-name":"team-b"}}})")->status,
            200);
}
