// Playgrounds without servers: the request's validation, where a model lives, the Pod and
// Service they become (kuberay/playground.h), the pod diagnosis, and the store's rows.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "starforge/kuberay/diagnose.h"
#include "starforge/kuberay/playground.h"
#include "starforge/playground/spec.h"
#include "starforge/store/store.h"
#include "support/temp_dir.h"

namespace starforge::playground {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

config::Config Cfg() {
  config::Config c;
  c.storage_root = "/starforge";
  c.k8s_storage_pvc = "data";
  c.image_vllm = "vllm/vllm-openai:v0.11.0";
  c.default_fleet_kind = config::FleetKind::kKuberay;
  return c;
}

std::string ErrorsOf(const json& body) {
  return JoinErrors(Parse(body, Cfg()).errors);
}

TEST(Spec, DefaultsComeFromTheSettingsAndTheModel) {
  const ParseResult r = Parse({{"model", "jobs/j-abc/ckpt/final"}, {"series", "h200"}}, Cfg());
  ASSERT_TRUE(r.ok()) << JoinErrors(r.errors);
  EXPECT_EQ(r.spec.fleet, "kuberay");
  EXPECT_EQ(r.spec.image, "vllm/vllm-openai:v0.11.0");
  EXPECT_EQ(r.spec.gpus, 1);
  EXPECT_EQ(r.spec.ttl_seconds, kDefaultTtlSeconds);
  EXPECT_EQ(r.spec.served_name, "final");
  EXPECT_EQ(FromJson(ToJson(r.spec)).served_name, "final");
}

TEST(Spec, RefusesWhatWouldBreakTheServerOrTheCluster) {
  EXPECT_THAT(ErrorsOf({{"series", "h200"}}), HasSubstr("model: required"));
  EXPECT_THAT(ErrorsOf({{"model", "m"}}), HasSubstr("series: required with GPUs"));
  EXPECT_THAT(ErrorsOf({{"model", "m"}, {"series", "h200"}, {"ttlSeconds", 5}}),
              HasSubstr("ttlSeconds: must be between 60 and 28800"));
  EXPECT_THAT(ErrorsOf({{"model", "m"}, {"series", "h200"}, {"args", {"--port=9"}}}),
              HasSubstr("args[0]: --port is set by StarForge"));
  EXPECT_THAT(ErrorsOf({{"model", "m"}, {"series", "h200"}, {"colour", "red"}}),
              HasSubstr("colour: unknown field"));
  EXPECT_THAT(ErrorsOf({{"model", "m"}, {"series", "h200"}, {"memory", "lots"}}),
              HasSubstr("memory: must be a positive Kubernetes quantity"));
  config::Config no_image = Cfg();
  no_image.image_vllm.clear();
  EXPECT_THAT(JoinErrors(Parse({{"model", "m"}, {"series", "h200"}}, no_image).errors),
              HasSubstr("FORGE_IMAGE_VLLM"));
}

TEST(Spec, ModelPathsNameTheirJobAndStayInIt) {
  StatusOr<ModelLocation> l = Locate("jobs/j-abc/ckpt/./final/", "/starforge");
  ASSERT_TRUE(l.ok()) << l.status().message();
  EXPECT_TRUE(l->on_storage);
  EXPECT_EQ(l->job_id, "j-abc");
  EXPECT_EQ(l->relative, "jobs/j-abc/ckpt/final");
  l = Locate("/starforge/jobs/j-abc/ckpt", "/starforge");
  EXPECT_EQ(l.value().relative, "jobs/j-abc/ckpt");
  l = Locate("jobs/j-abc/../j-other/ckpt", "/starforge");
  EXPECT_EQ(l.status().code(), Code::kInvalidArgument);
  EXPECT_THAT(l.status().message(), HasSubstr("leaves its job's directory"));
  l = Locate("/etc/passwd", "/starforge");
  EXPECT_THAT(l.status().message(), HasSubstr("under the storage root"));
  l = Locate("jobs/", "/starforge");
  EXPECT_THAT(l.status().message(), HasSubstr("names no job"));
  l = Locate("Qwen/Qwen2.5-0.5B-Instruct", "/starforge");
  ASSERT_TRUE(l.ok());
  EXPECT_FALSE(l->on_storage);
}

TEST(Spec, Durations) {
  EXPECT_EQ(ParseDuration("90"), 90);
  EXPECT_EQ(ParseDuration("15m"), 900);
  EXPECT_EQ(ParseDuration("2h"), 7200);
  EXPECT_EQ(ParseDuration("1d"), 86400);
  EXPECT_FALSE(ParseDuration("2 hours"));
  EXPECT_FALSE(ParseDuration("-5m"));
}

kuberay::PlaygroundRender Input() {
  kuberay::PlaygroundRender in;
  in.id = "p-abcdefghij";
  in.owner = "alice";
  in.image = "vllm/vllm-openai:v0.11.0";
  in.model = "/starforge/jobs/j-abc/ckpt";
  in.served_name = "ckpt";
  in.storage_subpath = "jobs/j-abc";
  in.machine.name = kuberay::kPlaygroundPool;
  in.machine.gpu_series = "h200";
  in.machine.gpus_per_machine = 2;
  in.deadline_seconds = 28800;
  return in;
}

TEST(Render, OnePodPlacedAndCountedLikeAJobsMachine) {
  const json pod = kuberay::RenderPlaygroundPod(Input(), Cfg());
  EXPECT_EQ(pod["metadata"]["name"], "sf-p-abcdefghij");
  EXPECT_EQ(pod["metadata"]["labels"]["starforge/playground-id"], "p-abcdefghij");
  const json& spec = pod["spec"];
  EXPECT_EQ(spec["nodeSelector"], json({{"starforge/gpu-series", "h200"}}));
  EXPECT_EQ(spec["tolerations"][0]["key"], "nvidia.com/gpu");
  EXPECT_EQ(spec["activeDeadlineSeconds"], 28800);
  EXPECT_EQ(spec["restartPolicy"], "Never");
  EXPECT_EQ(spec["enableServiceLinks"], false);
  const json& c = spec["containers"][0];
  EXPECT_EQ(c["resources"]["limits"]["nvidia.com/gpu"], "2");
  EXPECT_EQ(c["resources"]["requests"], c["resources"]["limits"]);
  EXPECT_EQ(c["command"],
            json({"vllm", "serve", "/starforge/jobs/j-abc/ckpt", "--host", "0.0.0.0", "--port",
                  "8000", "--served-model-name", "ckpt", "--tensor-parallel-size", "2"}));
  EXPECT_EQ(c["readinessProbe"]["httpGet"]["path"], "/health");
  // The job's directory only, read-only, at the path jobs see it.
  json storage_mount, storage_volume;
  for (const json& m : c["volumeMounts"])
    if (m["name"] == "starforge-storage") storage_mount = m;
  for (const json& v : spec["volumes"])
    if (v["name"] == "starforge-storage") storage_volume = v;
  EXPECT_EQ(storage_mount, json({{"name", "starforge-storage"},
                                 {"mountPath", "/starforge/jobs/j-abc"},
                                 {"subPath", "jobs/j-abc"},
                                 {"readOnly", true}}));
  EXPECT_EQ(storage_volume["persistentVolumeClaim"]["readOnly"], true);
  EXPECT_EQ(c["volumeMounts"][0]["mountPath"], "/dev/shm");
}

TEST(Render, PassthroughOffRequestsNoGpuAndAModelNameMountsNothing) {
  config::Config cfg = Cfg();
  cfg.k8s_gpu_passthrough = false;
  kuberay::PlaygroundRender in = Input();
  in.storage_subpath.clear();
  in.model = "Qwen/Qwen2.5-0.5B-Instruct";
  const json pod = kuberay::RenderPlaygroundPod(in, cfg);
  EXPECT_FALSE(pod["spec"]["containers"][0].contains("resources"));
  EXPECT_FALSE(pod["spec"].contains("tolerations"));
  EXPECT_EQ(pod["spec"]["nodeSelector"]["starforge/gpu-series"], "h200");
  EXPECT_EQ(pod["spec"]["volumes"].size(), 1u);  // /dev/shm only
}

TEST(Render, TheServiceSelectsThePodByItsId) {
  const json svc = kuberay::RenderPlaygroundService(Input(), Cfg());
  EXPECT_EQ(svc["metadata"]["name"], "sf-p-abcdefghij");
  EXPECT_EQ(svc["spec"]["selector"], json({{"starforge/playground-id", "p-abcdefghij"}}));
  EXPECT_EQ(svc["spec"]["ports"][0]["targetPort"], "http");
  const jobspec::JobSpec as_job = kuberay::PlaygroundAsJobSpec(Input());
  ASSERT_EQ(as_job.pools.size(), 1u);
  EXPECT_EQ(as_job.pools[0].gpus_per_machine, 2);
  EXPECT_EQ(as_job.pools[0].gpu_series, "h200");
}

json PendingPod(const json& status, const std::string& node = "") {
  json pod = kuberay::RenderPlaygroundPod(Input(), Cfg());
  if (!node.empty()) pod["spec"]["nodeName"] = node;
  pod["status"] = status;
  return pod;
}

TEST(DiagnosePod, ImagePullFailureIsNamedLikeAJobs) {
  kuberay::DiagnosisInput in;
  in.cluster_pods = {
      PendingPod({{"phase", "Pending"},
                  {"containerStatuses",
                   {{{"name", "vllm"},
                     {"image", "vllm/vllm-openai:nope"},
                     {"state",
                      {{"waiting",
                        {{"reason", "ImagePullBackOff"},
                         {"message", "Back-off pulling image \"vllm/vllm-openai:nope\""}}}}}}}}},
                 "h200-a")};
  in.pools = kuberay::PlaygroundAsJobSpec(Input()).pools;
  const kuberay::Diagnosis d = kuberay::DiagnosePod(in);
  EXPECT_EQ(d.reason, "ImagePullFailed");
  EXPECT_THAT(d.message, HasSubstr("vllm/vllm-openai:nope"));
}

TEST(DiagnosePod, UnschedulableSaysWhatTheSeriesHas) {
  kuberay::DiagnosisInput in;
  in.cluster_pods = {
      PendingPod({{"phase", "Pending"},
                  {"conditions",
                   {{{"type", "PodScheduled"},
                     {"status", "False"},
                     {"reason", "Unschedulable"},
                     {"message", "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."}}}}})};
  in.pools = kuberay::PlaygroundAsJobSpec(Input()).pools;
  in.nodes = {
      {{"metadata", {{"name", "h200-a"}, {"labels", {{"starforge/gpu-series", "h200"}}}}},
       {"status",
        {{"capacity", {{"nvidia.com/gpu", "8"}}}, {"allocatable", {{"nvidia.com/gpu", "8"}}}}}}};
  json busy = PendingPod({{"phase", "Running"}}, "h200-a");
  busy["metadata"]["name"] = "other";
  busy["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "7";
  in.node_pods = {busy};
  const kuberay::Diagnosis d = kuberay::DiagnosePod(in);
  EXPECT_EQ(d.reason, "Unschedulable");
  EXPECT_THAT(d.message, HasSubstr("h200"));
  EXPECT_THAT(d.message, HasSubstr("Insufficient nvidia.com/gpu"));
}

TEST(DiagnosePod, ARunningServerNotYetAnsweringIsRunning) {
  kuberay::DiagnosisInput in;
  in.cluster_pods = {PendingPod({{"phase", "Running"}}, "h200-a")};
  EXPECT_EQ(kuberay::DiagnosePod(in).reason, "Running");
  in.cluster_pods[0]["status"]["conditions"] = {{{"type", "Ready"}, {"status", "True"}}};
  EXPECT_EQ(kuberay::DiagnosePod(in).reason, "");
}

TEST(Store, PlaygroundRowsMoveForwardOnlyAndSurviveReopening) {
  support::TempDir dir;
  auto db = store::Store::Open(dir.path() / "s.db");
  store::Playground p;
  p.owner = "alice";
  p.fleet = "kuberay";
  p.spec_json = "{}";
  p.expires_at = 123;
  const store::Playground made = db->CreatePlayground(p);
  EXPECT_THAT(made.id, ::testing::MatchesRegex("p-[a-z0-9]{10}"));
  EXPECT_EQ(made.state, store::PlaygroundState::kStarting);
  auto ready = db->UpdatePlayground(
      made.id, [](store::Playground& r) { r.state = store::PlaygroundState::kReady; });
  ASSERT_TRUE(ready);
  EXPECT_GT(ready->ready_at, 0);
  EXPECT_FALSE(db->UpdatePlayground(
      made.id, [](store::Playground& r) { r.state = store::PlaygroundState::kPending; }));
  db->UpdatePlayground(made.id,
                       [](store::Playground& r) { r.state = store::PlaygroundState::kExpired; });
  EXPECT_FALSE(db->UpdatePlayground(
      made.id, [](store::Playground& r) { r.state = store::PlaygroundState::kReady; }));
  EXPECT_EQ(db->ListPlaygrounds("alice", true).size(), 1u);  // not released yet
  db->UpdatePlayground(made.id, [](store::Playground& r) { r.released = true; });
  EXPECT_TRUE(db->ListPlaygrounds("alice", true).empty());
  EXPECT_TRUE(db->ListPlaygrounds("bob", false).empty());
  db.reset();
  db = store::Store::Open(dir.path() / "s.db");
  EXPECT_EQ(db->GetPlayground(made.id)->state, store::PlaygroundState::kExpired);
}

}  // namespace
}  // namespace starforge::playground
