// kubesim's server-side printers (tools/kubesim/apiserver/table.h): the cells kube-apiserver 1.32
// fills for the kinds kubesim serves, the CRD columns, Accept negotiation and the Table envelope.
#include "apiserver/table.h"

#include "apiserver/status.h"

#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace {

using nlohmann::json;
namespace table = kubesim::table;

const int64_t kNow = 1767225600;                 // 2026-01-01T00:00:00Z
const char kCreated[] = "2025-12-31T23:55:00Z";  // 5m before kNow

table::Printer Builtin(const std::string& group, const std::string& plural) {
  return {group, plural, false, nullptr};
}

json Pod(json status, json spec = json::object()) {
  if (!spec.contains("containers")) spec["containers"] = json::array({{{"name", "main"}}});
  return {{"metadata", {{"name", "p"}, {"namespace", "default"}, {"creationTimestamp", kCreated}}},
          {"spec", spec},
          {"status", status}};
}

std::string PodStatus(const json& pod) {
  return table::Cells(Builtin("", "pods"), pod, kNow)[2].get<std::string>();
}

std::vector<std::string> Names(const json& columns) {
  std::vector<std::string> out;
  for (const json& c : columns)
    out.push_back(c["name"].get<std::string>() + (c["priority"] == 0 ? "" : "*"));
  return out;
}

TEST(KubesimTable, HumanDurationMatchesApimachinery) {
  EXPECT_EQ(table::HumanDuration(-5), "<invalid>");
  EXPECT_EQ(table::HumanDuration(-1), "0s");
  EXPECT_EQ(table::HumanDuration(119), "119s");
  EXPECT_EQ(table::HumanDuration(120), "2m");
  EXPECT_EQ(table::HumanDuration(5 * 60 + 3), "5m3s");
  EXPECT_EQ(table::HumanDuration(42 * 60 + 59), "42m");
  EXPECT_EQ(table::HumanDuration(3 * 3600 + 20 * 60), "3h20m");
  EXPECT_EQ(table::HumanDuration(30 * 3600), "30h");
  EXPECT_EQ(table::HumanDuration(3 * 86400 + 4 * 3600), "3d4h");
  EXPECT_EQ(table::HumanDuration(100 * 86400), "100d");
  EXPECT_EQ(table::HumanDuration(int64_t{3} * 365 * 86400 + 2 * 86400), "3y2d");
}

TEST(KubesimTable, ParsesRfc3339WithFractionAndOffset) {
  EXPECT_EQ(table::ParseRfc3339("2026-01-01T00:00:00Z"), kNow);
  EXPECT_EQ(table::ParseRfc3339("2026-01-01T00:00:00.123456Z"), kNow);
  EXPECT_EQ(table::ParseRfc3339("2026-01-01T01:00:00+01:00"), kNow);
  EXPECT_FALSE(table::ParseRfc3339("yesterday"));
  EXPECT_FALSE(table::ParseRfc3339("2026-01-01"));
}

TEST(KubesimTable, NegotiatesTheFirstAcceptableMediaType) {
  const std::string kubectl =
      "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;"
      "g=meta.k8s.io,application/json";
  EXPECT_EQ(table::NegotiateTable(kubectl), "meta.k8s.io/v1");
  EXPECT_EQ(table::NegotiateTable("application/json;as=Table;v=v1beta1;g=meta.k8s.io"),
            "meta.k8s.io/v1beta1");
  EXPECT_EQ(table::NegotiateTable("application/json, application/json;as=Table;v=v1;g=meta.k8s.io"),
            std::nullopt);
  EXPECT_EQ(table::NegotiateTable(""), std::nullopt);
  EXPECT_EQ(table::NegotiateTable("application/json;as=Table;v=v2;g=meta.k8s.io"), std::nullopt);
  // An unknown `as` is skipped, the next entry decides.
  EXPECT_EQ(table::NegotiateTable("application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"
                                  ", application/json;as=Table;v=v1;g=meta.k8s.io"),
            "meta.k8s.io/v1");
  EXPECT_THROW(table::ParseIncludeObject("Everything"), kubesim::ApiError);
  EXPECT_EQ(table::ParseIncludeObject(""), table::IncludeObject::kMetadata);
}

TEST(KubesimTable, PodColumnsAreKubectlsWithWideOnesAtPriorityOne) {
  EXPECT_EQ(Names(table::Columns(Builtin("", "pods"))),
            (std::vector<std::string>{"Name", "Ready", "Status", "Restarts", "Age", "IP*", "Node*",
                                      "Nominated Node*", "Readiness Gates*"}));
}

TEST(KubesimTable, RunningPodShowsReadyCountsIpAndNode) {
  json pod = Pod({{"phase", "Running"},
                  {"podIPs", json::array({{{"ip", "10.0.0.7"}}})},
                  {"conditions", json::array({{{"type", "Ready"}, {"status", "True"}}})},
                  {"containerStatuses", json::array({{{"name", "main"},
                                                      {"ready", true},
                                                      {"restartCount", 0},
                                                      {"state", {{"running", json::object()}}}}})}},
                 {{"nodeName", "gpu-node-1"}, {"containers", json::array({{{"name", "main"}}})}});
  EXPECT_EQ(table::Cells(Builtin("", "pods"), pod, kNow),
            json::array(
                {"p", "1/1", "Running", "0", "5m", "10.0.0.7", "gpu-node-1", "<none>", "<none>"}));
}

TEST(KubesimTable, PodStatusFollowsTheWaitingOrTerminatedReason) {
  auto with_state = [](json state, json extra = json::object()) {
    json cs = {{"name", "main"}, {"ready", false}, {"restartCount", 0}, {"state", state}};
    cs.update(extra);
    return Pod({{"phase", "Pending"}, {"containerStatuses", json::array({cs})}});
  };
  EXPECT_EQ(PodStatus(with_state({{"waiting", {{"reason", "ImagePullBackOff"}}}})),
            "ImagePullBackOff");
  EXPECT_EQ(PodStatus(with_state({{"waiting", {{"reason", "ContainerCreating"}}}})),
            "ContainerCreating");
  EXPECT_EQ(PodStatus(with_state({{"terminated", {{"reason", "Completed"}, {"exitCode", 0}}}})),
            "Completed");
  EXPECT_EQ(PodStatus(with_state({{"terminated", {{"exitCode", 3}}}})), "ExitCode:3");
  EXPECT_EQ(PodStatus(with_state({{"terminated", {{"signal", 9}, {"exitCode", 137}}}})),
            "Signal:9");
  EXPECT_EQ(PodStatus(Pod({{"phase", "Pending"}})), "Pending");
  // Restarts with the time of the last one.
  json crash = with_state(
      {{"waiting", {{"reason", "CrashLoopBackOff"}}}},
      {{"restartCount", 4},
       {"lastState", {{"terminated", {{"exitCode", 1}, {"finishedAt", "2025-12-31T23:59:00Z"}}}}}});
  json cells = table::Cells(Builtin("", "pods"), crash, kNow);
  EXPECT_EQ(cells[2], "CrashLoopBackOff");
  EXPECT_EQ(cells[3], "4 (60s ago)");
}

TEST(KubesimTable, PodStatusShowsInitContainerProgress) {
  json spec = {{"initContainers", json::array({{{"name", "a"}}, {{"name", "b"}}})},
               {"containers", json::array({{{"name", "main"}}})}};
  json a_done = {{"name", "a"},
                 {"state", {{"terminated", {{"exitCode", 0}, {"reason", "Completed"}}}}}};
  json b_running = {{"name", "b"}, {"state", {{"running", json::object()}}}};
  json main_waiting = {{"name", "main"}, {"state", {{"waiting", {{"reason", "PodInitializing"}}}}}};
  EXPECT_EQ(PodStatus(Pod({{"phase", "Pending"},
                           {"initContainerStatuses", json::array({a_done, b_running})},
                           {"containerStatuses", json::array({main_waiting})}},
                          spec)),
            "Init:1/2");
  json b_failed = {{"name", "b"},
                   {"state", {{"terminated", {{"exitCode", 2}, {"reason", "Error"}}}}}};
  EXPECT_EQ(PodStatus(Pod(
                {{"phase", "Pending"}, {"initContainerStatuses", json::array({a_done, b_failed})}},
                spec)),
            "Init:Error");
  json b_pull = {{"name", "b"}, {"state", {{"waiting", {{"reason", "ErrImagePull"}}}}}};
  EXPECT_EQ(
      PodStatus(Pod(
          {{"phase", "Pending"}, {"initContainerStatuses", json::array({a_done, b_pull})}}, spec)),
      "Init:ErrImagePull");
}

TEST(KubesimTable, PodBeingDeletedIsTerminatingUnlessFinished) {
  json pod = Pod({{"phase", "Running"}});
  pod["metadata"]["deletionTimestamp"] = kCreated;
  EXPECT_EQ(PodStatus(pod), "Terminating");
  pod["status"]["phase"] = "Succeeded";
  EXPECT_EQ(PodStatus(pod), "Succeeded");
  pod["status"]["reason"] = "NodeLost";
  EXPECT_EQ(PodStatus(pod), "Unknown");
}

TEST(KubesimTable, CompletedPodRowCarriesTheCompletedCondition) {
  json t = table::ToTable(Builtin("", "pods"), {Pod({{"phase", "Succeeded"}})}, nullptr, {}, kNow);
  EXPECT_EQ(t["rows"][0]["conditions"][0]["type"], "Completed");
  EXPECT_EQ(t["rows"][0]["conditions"][0]["reason"], "Succeeded");
}

TEST(KubesimTable, CordonedNodeIsReadySchedulingDisabled) {
  json node = {{"metadata",
                {{"name", "n1"},
                 {"creationTimestamp", kCreated},
                 {"labels",
                  {{"node-role.kubernetes.io/control-plane", ""}, {"kubernetes.io/role", "gpu"}}}}},
               {"spec", {{"unschedulable", true}}},
               {"status",
                {{"conditions", json::array({{{"type", "Ready"}, {"status", "True"}}})},
                 {"nodeInfo", {{"kubeletVersion", "v1.32.0"}}},
                 {"addresses", json::array({{{"type", "InternalIP"}, {"address", "10.1.0.1"}}})}}}};
  EXPECT_EQ(table::Cells(Builtin("", "nodes"), node, kNow),
            json::array({"n1", "Ready,SchedulingDisabled", "control-plane,gpu", "5m", "v1.32.0",
                         "10.1.0.1", "<none>", "<unknown>", "<unknown>", "<unknown>"}));
  node["status"]["conditions"][0]["status"] = "False";
  node["spec"].erase("unschedulable");
  EXPECT_EQ(table::Cells(Builtin("", "nodes"), node, kNow)[1], "NotReady");
  node["status"].erase("conditions");
  EXPECT_EQ(table::Cells(Builtin("", "nodes"), node, kNow)[1], "Unknown");
}

TEST(KubesimTable, EventRowInBothEventApis) {
  json core = {{"metadata", {{"name", "rj.1"}, {"creationTimestamp", kCreated}}},
               {"involvedObject", {{"kind", "RayJob"}, {"name", "rj"}}},
               {"reason", "CreatedRayCluster"},
               {"message", " Created RayCluster default/rj-raycluster\n"},
               {"type", "Normal"},
               {"source", {{"component", "rayjob-controller"}}},
               {"lastTimestamp", "2025-12-31T23:59:30Z"},
               {"firstTimestamp", kCreated},
               {"count", 2}};
  const json want =
      json::array({"30s", "Normal", "CreatedRayCluster", "rayjob/rj", "", "rayjob-controller",
                   "Created RayCluster default/rj-raycluster", "5m", 2, "rj.1"});
  EXPECT_EQ(table::Cells(Builtin("", "events"), core, kNow), want);
  json modern = {{"metadata", core["metadata"]},
                 {"regarding", core["involvedObject"]},
                 {"reason", core["reason"]},
                 {"note", core["message"]},
                 {"type", "Normal"},
                 {"deprecatedSource", core["source"]},
                 {"deprecatedLastTimestamp", core["lastTimestamp"]},
                 {"deprecatedFirstTimestamp", core["firstTimestamp"]},
                 {"deprecatedCount", 2}};
  EXPECT_EQ(table::Cells(Builtin("events.k8s.io", "events"), modern, kNow), want);
  EXPECT_EQ(Names(table::Columns(Builtin("", "events"))),
            (std::vector<std::string>{"Last Seen", "Type", "Reason", "Object", "Subobject*",
                                      "Source*", "Message", "First Seen*", "Count*", "Name*"}));
}

TEST(KubesimTable, JobStatusCompletionsAndDuration) {
  json job = {
      {"metadata", {{"name", "j"}, {"creationTimestamp", kCreated}}},
      {"spec",
       {{"completions", 1},
        {"selector", {{"matchLabels", {{"job-name", "j"}}}}},
        {"template",
         {{"spec", {{"containers", json::array({{{"name", "c"}, {"image", "busybox"}}})}}}}}}},
      {"status", {{"startTime", kCreated}}}};
  EXPECT_EQ(table::Cells(Builtin("batch", "jobs"), job, kNow),
            json::array({"j", "Running", "0/1", "5m", "5m", "c", "busybox", "job-name=j"}));
  job["status"]["succeeded"] = 1;
  job["status"]["completionTime"] = "2025-12-31T23:56:40Z";
  job["status"]["conditions"] = json::array({{{"type", "Complete"}, {"status", "True"}}});
  json cells = table::Cells(Builtin("batch", "jobs"), job, kNow);
  EXPECT_EQ(cells[1], "Complete");
  EXPECT_EQ(cells[2], "1/1");
  EXPECT_EQ(cells[3], "100s");
  job["spec"].erase("completions");
  job["spec"]["parallelism"] = 3;
  EXPECT_EQ(table::Cells(Builtin("batch", "jobs"), job, kNow)[2], "1/1 of 3");
}

TEST(KubesimTable, ServiceConfigMapSecretNamespace) {
  json svc = {
      {"metadata", {{"name", "s"}, {"creationTimestamp", kCreated}}},
      {"spec",
       {{"type", "ClusterIP"},
        {"clusterIP", "None"},
        {"selector", {{"ray.io/node-type", "head"}}},
        {"ports", json::array({{{"port", 8265}}, {{"port", 6379}, {"protocol", "TCP"}}})}}}};
  EXPECT_EQ(table::Cells(Builtin("", "services"), svc, kNow),
            json::array({"s", "ClusterIP", "None", "<none>", "8265/TCP,6379/TCP", "5m",
                         "ray.io/node-type=head"}));
  json cm = {{"metadata", {{"name", "c"}, {"creationTimestamp", kCreated}}},
             {"data", {{"a", "1"}, {"b", "2"}}}};
  EXPECT_EQ(table::Cells(Builtin("", "configmaps"), cm, kNow), json::array({"c", 2, "5m"}));
  json secret = {{"metadata", {{"name", "x"}, {"creationTimestamp", kCreated}}},
                 {"data", {{"token", "c2VjcmV0"}}}};
  json cells = table::Cells(Builtin("", "secrets"), secret, kNow);
  EXPECT_EQ(cells, json::array({"x", "Opaque", 1, "5m"}));
  EXPECT_EQ(cells.dump().find("c2VjcmV0"), std::string::npos);
  json ns = {{"metadata", {{"name", "default"}, {"creationTimestamp", kCreated}}},
             {"status", {{"phase", "Active"}}}};
  EXPECT_EQ(table::Cells(Builtin("", "namespaces"), ns, kNow),
            json::array({"default", "Active", "5m"}));
}

TEST(KubesimTable, OtherKindsGetNameAndCreatedAt) {
  table::Printer pvc = Builtin("", "persistentvolumeclaims");
  EXPECT_EQ(Names(table::Columns(pvc)), (std::vector<std::string>{"Name", "Created At"}));
  EXPECT_EQ(table::Columns(pvc)[1]["type"], "date");
  json obj = {{"metadata", {{"name", "v"}, {"creationTimestamp", kCreated}}}};
  EXPECT_EQ(table::Cells(pvc, obj, kNow), json::array({"v", kCreated}));
}

TEST(KubesimTable, CustomResourceColumnsComeFromTheCrd) {
  const json columns = json::array(
      {{{"jsonPath", ".status.jobStatus"}, {"name", "job status"}, {"type", "string"}},
       {{"jsonPath", ".status.desiredWorkerReplicas"},
        {"name", "desired workers"},
        {"type", "integer"}},
       {{"jsonPath", ".status.head"}, {"name", "head"}, {"type", "string"}, {"priority", 1}},
       {{"jsonPath", ".metadata.creationTimestamp"}, {"name", "age"}, {"type", "date"}},
       {{"jsonPath", ".status.items[0]"}, {"name", "unsupported"}, {"type", "string"}}});
  table::Printer p{"ray.io", "rayjobs", true, columns};
  json cols = table::Columns(p);
  EXPECT_EQ(Names(cols), (std::vector<std::string>{"Name", "job status", "desired workers", "head*",
                                                   "age", "unsupported"}));
  EXPECT_EQ(cols[1]["description"],
            "Custom resource definition column (in JSONPath format): .status.jobStatus");
  EXPECT_EQ(cols[4]["type"], "date");
  json rj = {{"metadata", {{"name", "rj"}, {"creationTimestamp", kCreated}}},
             {"status",
              {{"jobStatus", "RUNNING"},
               {"desiredWorkerReplicas", 2.0},
               {"head", {{"podIP", "10.0.0.1"}}},
               {"items", json::array({"a"})}}}};
  EXPECT_EQ(table::Cells(p, rj, kNow),
            json::array({"rj", "RUNNING", 2, "{\"podIP\":\"10.0.0.1\"}", "5m", nullptr}));
  // Before the operator wrote a status: empty cells, not errors.
  rj.erase("status");
  EXPECT_EQ(table::Cells(p, rj, kNow),
            json::array({"rj", nullptr, nullptr, nullptr, "5m", nullptr}));
  // A CRD without columns gets kube-apiserver's Age column.
  table::Printer bare{"ray.io", "rayjobs", true, json::array()};
  EXPECT_EQ(Names(table::Columns(bare)), (std::vector<std::string>{"Name", "Age"}));
}

TEST(KubesimTable, DottedPathOnly) {
  json o = {{"a", {{"b", {{"c", 1}}}}}};
  EXPECT_EQ(table::EvalDottedPath(o, ".a.b.c"), 1);
  EXPECT_EQ(table::EvalDottedPath(o, ".a.x"), nullptr);
  EXPECT_EQ(table::EvalDottedPath(o, ".a.b.c.d"), nullptr);
  EXPECT_EQ(table::EvalDottedPath(o, "a.b"), nullptr);
  EXPECT_EQ(table::EvalDottedPath(o, ".a[*]"), nullptr);
  EXPECT_EQ(table::EvalDottedPath(o, ".a..b"), nullptr);
}

TEST(KubesimTable, TableEnvelopeAndIncludeObject) {
  table::Printer p = Builtin("", "configmaps");
  json cm = {{"apiVersion", "v1"},
             {"kind", "ConfigMap"},
             {"metadata", {{"name", "c"}, {"namespace", "default"}, {"resourceVersion", "7"}}},
             {"data", {{"a", "1"}}}};
  table::Options o;
  json t = table::ToTable(p, {cm}, nullptr, o, kNow);
  EXPECT_EQ(t["kind"], "Table");
  EXPECT_EQ(t["apiVersion"], "meta.k8s.io/v1");
  EXPECT_EQ(t["metadata"], json({{"resourceVersion", "7"}}));
  EXPECT_EQ(t["columnDefinitions"].size(), 3u);
  EXPECT_EQ(t["rows"][0]["object"], json({{"kind", "PartialObjectMetadata"},
                                          {"apiVersion", "meta.k8s.io/v1"},
                                          {"metadata", cm["metadata"]}}));
  o.include = table::IncludeObject::kObject;
  o.group_version = "meta.k8s.io/v1beta1";
  t = table::ToTable(p, {cm, cm}, {{"resourceVersion", "9"}, {"continue", "abc"}}, o, kNow);
  EXPECT_EQ(t["apiVersion"], "meta.k8s.io/v1beta1");
  EXPECT_EQ(t["metadata"], json({{"resourceVersion", "9"}, {"continue", "abc"}}));
  EXPECT_EQ(t["rows"].size(), 2u);
  EXPECT_EQ(t["rows"][1]["object"], cm);
  o.include = table::IncludeObject::kNone;
  o.no_headers = true;
  t = table::ToTable(p, {}, {{"resourceVersion", "9"}}, o, kNow);
  EXPECT_TRUE(t["columnDefinitions"].is_null());
  EXPECT_EQ(t["rows"], json::array());
}

}  // namespace
