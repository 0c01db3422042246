// Behaviour of Render: the RayJob shape the spec requires, item by item (docs/kuberay-fleet.md).
#include "starforge/kuberay/render.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>
#include <set>

#include "starforge/common/names.h"
#include "starforge/common/yaml_json.h"
#include "starforge/kuberay/constants.h"
#include "starforge/kuberay/shell.h"
#include "test_support.h"

namespace starforge::kuberay {
namespace {

using nlohmann::json;
using testing::ConfigFrom;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::JobFrom;

const std::string kSha(64, 'a');
const CapsuleRef kHttps{
    "https://s3.example.com/b/capsules/sha256-" + kSha + ".zip?X-Amz-Signature=x", kSha};
const CapsuleRef kHttp{"http://minio:9000/b/capsules/sha256-" + kSha + ".zip?X-Amz-Signature=x",
                       kSha};

const char* kTwoPool = R"(
name: grpo
image: img:1
entrypoint: python train.py
pools:
  - {name: train, gpuSeries: h200, machines: 2, gpusPerMachine: 8, cpusPerMachine: 32, memoryPerMachine: 256Gi}
  - {name: rollout, gpuSeries: h100, machines: 4, gpusPerMachine: 8}
)";

const char* kOneGpu = R"(
name: one
image: img:1
entrypoint: [python, x.py]
pools: [{name: gpu, gpuSeries: h200, gpusPerMachine: 8}]
)";

const char* kOneCpu = R"(
name: cpu
image: img:1
entrypoint: [python, x.py]
pools: [{name: main}]
)";

json MustRender(const char* job, const std::map<std::string, std::string>& env = {},
                const CapsuleRef& capsule = kHttps, const std::string& id = "j-1") {
  const config::Config cfg = ConfigFrom(env);
  RenderResult r = Render(JobFrom(job, cfg), id, capsule, cfg);
  EXPECT_TRUE(r.ok()) << JoinErrors(r.errors);
  return r.rayjob;
}

FieldErrors RenderErrors(const char* job, const std::map<std::string, std::string>& env,
                         const CapsuleRef& capsule = kHttps, const std::string& id = "j-1") {
  const config::Config cfg = ConfigFrom(env);
  RenderResult r = Render(JobFrom(job, cfg), id, capsule, cfg);
  EXPECT_TRUE(r.rayjob.is_null());
  return r.errors;
}

// Every pod template of the RayJob: the head's first, then each worker group's.
std::vector<json> PodTemplates(const json& rayjob) {
  std::vector<json> pods = {rayjob["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]};
  for (const auto& g : rayjob["spec"]["rayClusterSpec"].value("workerGroupSpecs", json::array())) {
    pods.push_back(g["template"]);
  }
  return pods;
}

json RuntimeEnv(const json& rayjob) {
  return ParseYaml(rayjob["spec"]["runtimeEnvYAML"].get<std::string>()).value();
}

TEST(Render, MetadataNamesLabelsAndNamespace) {
  json rj = MustRender(kTwoPool, {{"FORGE_K8S_NAMESPACE", "ml"}}, kHttps, "j-42");
  EXPECT_EQ(rj["apiVersion"], "ray.io/v1");
  EXPECT_EQ(rj["kind"], "RayJob");
  EXPECT_EQ(rj["metadata"]["namespace"], "ml");
  EXPECT_EQ(rj["metadata"]["name"], "sf-j-42");
  EXPECT_EQ(rj["metadata"]["labels"][kLabelJobId], "j-42");
  EXPECT_EQ(rj["metadata"]["labels"][kLabelManagedBy], "starforge");
  EXPECT_FALSE(rj["metadata"]["labels"].contains(kLabelKueueQueue));
}

TEST(Render, LifecycleFieldsFollowTheSpec) {
  json spec = MustRender(kTwoPool, {{"FORGE_KUBERAY_TTL_SECONDS", "42"}})["spec"];
  EXPECT_EQ(spec["shutdownAfterJobFinishes"], true);
  EXPECT_EQ(spec["backoffLimit"], 0);
  EXPECT_EQ(spec["ttlSecondsAfterFinished"], 42);
  EXPECT_EQ(spec["submissionMode"], "K8sJobMode");
  EXPECT_EQ(spec["rayClusterSpec"]["rayVersion"], "2.60.0");
  EXPECT_FALSE(spec.contains("activeDeadlineSeconds"));

  spec = MustRender(kTwoPool, {{"FORGE_KUBERAY_SUBMISSION_MODE", "HTTPMode"},
                               {"FORGE_KUBERAY_RAY_VERSION", "2.49.0"}})["spec"];
  EXPECT_EQ(spec["submissionMode"], "HTTPMode");
  EXPECT_EQ(spec["rayClusterSpec"]["rayVersion"], "2.49.0");
}

TEST(Render, ActiveDeadlineCoversPendingPlusRunning) {
  const std::string job =
      std::string(kOneGpu) + "deadlines: {preRunningSeconds: 600, runningSeconds: 3600}\n";
  EXPECT_EQ(MustRender(job.c_str())["spec"]["activeDeadlineSeconds"], 4200);
}

TEST(Render, EntrypointStartsTheRunnerAndCarriesNoUserText) {
  const char* job = R"(
name: x
image: img:1
entrypoint: "python train.py '$(rm -rf /)' ';' \"it's\""
pools: [{name: main}]
)";
  json rj = MustRender(job);
  EXPECT_EQ(rj["spec"]["entrypoint"], "python3 .starforge/runner.pyz run");
  EXPECT_EQ(rj["metadata"]["annotations"][kAnnotationEntrypoint],
            ShellJoin({"python", "train.py", "$(rm -rf /)", ";", "it's"}));
}

TEST(Render, HeadIsMachineZeroOfThePrimaryPool) {
  json head = MustRender(kTwoPool)["spec"]["rayClusterSpec"]["headGroupSpec"];
  json pod = head["template"]["spec"];
  EXPECT_EQ(pod["nodeSelector"], json({{"starforge/gpu-series", "h200"}}));
  const json amounts = {{"cpu", "32"}, {"memory", "256Gi"}, {"nvidia.com/gpu", "8"}};
  EXPECT_EQ(pod["containers"][0]["resources"]["limits"], amounts);
  EXPECT_EQ(pod["containers"][0]["resources"]["requests"], amounts);
  EXPECT_EQ(head["rayStartParams"]["num-gpus"], "8");
  EXPECT_EQ(head["rayStartParams"]["resources"], "'{\"pool_train\":8}'");
  std::map<std::string, int> ports;
  for (const auto& p : pod["containers"][0]["ports"])
    ports[p["name"]] = p["containerPort"];
  EXPECT_EQ(ports, (std::map<std::string, int>{
                       {"gcs-server", 6379}, {"dashboard", 8265}, {"client", 10001}}));
}

TEST(Render, OneWorkerGroupPerPoolWithFixedReplicas) {
  json groups = MustRender(kTwoPool)["spec"]["rayClusterSpec"]["workerGroupSpecs"];
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0]["groupName"], "train");
  EXPECT_EQ(groups[1]["groupName"], "rollout");
  for (const auto& [g, n] : {std::pair{groups[0], 1}, std::pair{groups[1], 4}}) {
    EXPECT_EQ(g["replicas"], n);
    EXPECT_EQ(g["minReplicas"], n);
    EXPECT_EQ(g["maxReplicas"], n);
  }
  EXPECT_EQ(groups[1]["template"]["spec"]["nodeSelector"]["starforge/gpu-series"], "h100");
  EXPECT_EQ(groups[1]["rayStartParams"]["resources"], "'{\"pool_rollout\":8}'");
  // The primary pool's head and extra machines carry the same pool resource.
  EXPECT_EQ(groups[0]["rayStartParams"]["resources"], "'{\"pool_train\":8}'");
}

TEST(Render, PrimaryPoolOfOneMachineHasNoWorkerGroup) {
  json cluster = MustRender(kOneGpu)["spec"]["rayClusterSpec"];
  EXPECT_FALSE(cluster.contains("workerGroupSpecs"));
}

TEST(Render, CpuOnlyPoolGetsPoolResourceOfOneAndNoSelector) {
  json head = MustRender(kOneCpu)["spec"]["rayClusterSpec"]["headGroupSpec"];
  EXPECT_EQ(head["rayStartParams"]["num-gpus"], "0");
  EXPECT_EQ(head["rayStartParams"]["resources"], "'{\"pool_main\":1}'");
  EXPECT_FALSE(head["template"]["spec"].contains("nodeSelector"));
  EXPECT_FALSE(head["template"]["spec"].contains("tolerations"));
  EXPECT_FALSE(head["template"]["spec"]["containers"][0].contains("resources"));
}

TEST(Render, GpuNodeLabelKeyComesFromConfig) {
  json pod = MustRender(
      kOneGpu,
      {{"FORGE_K8S_GPU_NODE_LABEL",
        "example.com/card"}})["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"];
  EXPECT_EQ(pod["nodeSelector"], json({{"example.com/card", "h200"}}));
}

TEST(Render, EveryPodHasShmStorageAndLabels) {
  json rj =
      MustRender(kTwoPool, {{"FORGE_K8S_STORAGE_PVC", "data"}, {"FORGE_K8S_SHM_SIZE", "32Gi"}});
  for (const json& pod : PodTemplates(rj)) {
    EXPECT_EQ(pod["metadata"]["labels"][kLabelJobId], "j-1");
    const json& spec = pod["spec"];
    EXPECT_THAT(
        spec["volumes"].dump(),
        HasSubstr(R"({"emptyDir":{"medium":"Memory","sizeLimit":"32Gi"},"name":"shared-mem"})"));
    EXPECT_THAT(
        spec["volumes"].dump(),
        HasSubstr(R"({"name":"starforge-storage","persistentVolumeClaim":{"claimName":"data"}})"));
    const json& mounts = spec["containers"][0]["volumeMounts"];
    EXPECT_THAT(mounts.dump(), HasSubstr(R"({"mountPath":"/dev/shm","name":"shared-mem"})"));
    // Only the job's own directory of the storage volume: nothing else of it is reachable.
    int storage_mounts = 0;
    for (const json& m : mounts) {
      if (m["name"] != "starforge-storage") continue;
      ++storage_mounts;
      EXPECT_EQ(m["mountPath"], "/starforge/jobs/j-1");
      EXPECT_EQ(m["subPath"], "jobs/j-1");
    }
    EXPECT_EQ(storage_mounts, 1);
  }
  EXPECT_EQ(RuntimeEnv(rj)["env_vars"]["FORGE_STORAGE_ROOT"], "/starforge");
}

TEST(Render, StorageMountOverride) {
  json rj = MustRender(
      kOneCpu, {{"FORGE_K8S_STORAGE_PVC", "data"}, {"FORGE_K8S_STORAGE_MOUNT", "/mnt/forge"}});
  EXPECT_THAT(PodTemplates(rj)[0]["spec"]["containers"][0]["volumeMounts"].dump(),
              HasSubstr(R"({"mountPath":"/mnt/forge/jobs/j-1","name":"starforge-storage",)"
                        R"("subPath":"jobs/j-1"})"));
  EXPECT_EQ(RuntimeEnv(rj)["env_vars"]["FORGE_STORAGE_ROOT"], "/mnt/forge");
}

TEST(Render, CorpusIsMountedReadOnlyInEveryPod) {
  const std::string job = std::string(kTwoPool) + "corpus: true\n";
  json rj = MustRender(job.c_str(),
                       {{"FORGE_K8S_STORAGE_PVC", "data"}, {"FORGE_K8S_CORPUS_PVC", "corpus"}});
  for (const json& pod : PodTemplates(rj)) {
    EXPECT_THAT(
        pod["spec"]["volumes"].dump(),
        HasSubstr(
            R"({"name":"starforge-corpus","persistentVolumeClaim":{"claimName":"corpus","readOnly":true}})"));
    EXPECT_THAT(
        pod["spec"]["containers"][0]["volumeMounts"].dump(),
        HasSubstr(
            R"({"mountPath":"/starforge/corpus","name":"starforge-corpus","readOnly":true})"));
  }
  EXPECT_EQ(RuntimeEnv(rj)["env_vars"]["FORGE_CORPUS_DIR"], "/starforge/corpus");
}

TEST(Render, CorpusWithoutCorpusPvcIsRefused) {
  const std::string job = std::string(kOneCpu) + "corpus: true\n";
  FieldErrors errors = RenderErrors(job.c_str(), {});
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].path, "corpus");
  EXPECT_THAT(errors[0].message, HasSubstr("FORGE_K8S_CORPUS_PVC is not set"));
}

// resumeFrom: each earlier job's directory, read-only, by subPath, in every pod; nothing else of
// the storage volume (docs/security.md, "Resuming from an earlier job").
TEST(Render, ResumeFromMountsEarlierJobsReadOnlyInEveryPod) {
  const std::string job = std::string(kTwoPool) + "resumeFrom: [j-old1, j-old2]\n";
  json rj = MustRender(job.c_str(), {{"FORGE_K8S_STORAGE_PVC", "data"}});
  for (const json& pod : PodTemplates(rj)) {
    std::vector<std::string> mounts;
    for (const json& m : pod["spec"]["containers"][0]["volumeMounts"]) {
      if (m["name"] != "starforge-storage") continue;
      mounts.push_back(m.dump());
    }
    EXPECT_THAT(mounts,
                ElementsAre(R"({"mountPath":"/starforge/jobs/j-1","name":"starforge-storage",)"
                            R"("subPath":"jobs/j-1"})",
                            R"({"mountPath":"/starforge/jobs/j-old1","name":"starforge-storage",)"
                            R"("readOnly":true,"subPath":"jobs/j-old1"})",
                            R"({"mountPath":"/starforge/jobs/j-old2","name":"starforge-storage",)"
                            R"("readOnly":true,"subPath":"jobs/j-old2"})"));
  }
  EXPECT_EQ(RuntimeEnv(rj)["env_vars"]["FORGE_RESUME_DIRS"],
            "/starforge/jobs/j-old1:/starforge/jobs/j-old2");
  // Without it: no other mount of the storage volume, and no variable.
  json plain = MustRender(kTwoPool, {{"FORGE_K8S_STORAGE_PVC", "data"}});
  EXPECT_FALSE(RuntimeEnv(plain)["env_vars"].contains("FORGE_RESUME_DIRS"));
}

TEST(Render, ResumeFromWithoutStoragePvcIsRefused) {
  const std::string job = std::string(kOneCpu) + "resumeFrom: [j-old1]\n";
  FieldErrors errors = RenderErrors(job.c_str(), {});
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].path, "resumeFrom");
  EXPECT_THAT(errors[0].message, HasSubstr("FORGE_K8S_STORAGE_PVC is not set"));
}

TEST(Render, HttpsCapsuleGoesToRayDirectly) {
  json rj = MustRender(kTwoPool, {}, kHttps);
  EXPECT_EQ(RuntimeEnv(rj)["working_dir"], kHttps.url);
  for (const json& pod : PodTemplates(rj))
    EXPECT_FALSE(pod["spec"].contains("initContainers"));
  EXPECT_EQ(rj.dump().find(kCapsuleVolume), std::string::npos);
}

TEST(Render, HttpCapsuleIsFetchedAndVerifiedInEveryPod) {
  json rj = MustRender(kTwoPool,
                       {{"FORGE_S3_ENDPOINT", "http://minio:9000"},
                        {"FORGE_S3_BUCKET", "starforge"},
                        {"FORGE_S3_ACCESS_KEY", "AKIDEXAMPLE"},
                        {"FORGE_S3_SECRET_KEY", "wJalrXUtnFEMI/K7MDENG"}},
                       kHttp);
  const std::string path = std::string(kCapsuleDir) + "/" + kSha + ".zip";
  EXPECT_EQ(RuntimeEnv(rj)["working_dir"], "file://" + path);
  const auto pods = PodTemplates(rj);
  ASSERT_EQ(pods.size(), 3u);
  for (const json& pod : pods) {
    const json& init = pod["spec"]["initContainers"];
    ASSERT_EQ(init.size(), 1u);
    EXPECT_EQ(init[0]["name"], kFetchContainerName);
    EXPECT_EQ(init[0]["image"], "img:1");  // FORGE_K8S_FETCH_IMAGE unset: the job's image
    EXPECT_EQ(init[0]["args"], json({kHttp.url, kSha, path}));
    EXPECT_FALSE(init[0].contains("env"));  // no credentials: the presigned URL is enough
    EXPECT_EQ(init[0]["volumeMounts"][0]["mountPath"], kCapsuleDir);
    EXPECT_THAT(
        pod["spec"]["containers"][0]["volumeMounts"].dump(),
        HasSubstr(
            R"({"mountPath":"/starforge-capsule","name":"starforge-capsule","readOnly":true})"));
  }
  EXPECT_EQ(rj.dump().find("wJalrXUtnFEMI"), std::string::npos);
}

TEST(Render, FetchImageOverride) {
  json rj = MustRender(kOneCpu, {{"FORGE_K8S_FETCH_IMAGE", "busybox-python:1"}}, kHttp);
  EXPECT_EQ(PodTemplates(rj)[0]["spec"]["initContainers"][0]["image"], "busybox-python:1");
}

TEST(Render, S3CaConfigMapIsTrustedByEveryContainerThatFetchesTheCapsule) {
  const json ca_mount = {{"mountPath", kS3CaDir}, {"name", kS3CaVolume}, {"readOnly", true}};
  const json ca_env =
      json::array({{{"name", "REQUESTS_CA_BUNDLE"}, {"value", std::string(kS3CaDir) + "/ca.crt"}},
                   {{"name", "SSL_CERT_FILE"}, {"value", std::string(kS3CaDir) + "/ca.crt"}}});
  for (const CapsuleRef& capsule : {kHttps, kHttp}) {
    json rj = MustRender(kTwoPool, {{"FORGE_K8S_S3_CA_CONFIGMAP", "s3-ca"}}, capsule);
    const auto pods = PodTemplates(rj);
    ASSERT_EQ(pods.size(), 3u);
    for (const json& pod : pods) {
      EXPECT_THAT(pod["spec"]["volumes"].dump(),
                  HasSubstr(R"({"configMap":{"name":"s3-ca"},"name":"starforge-s3-ca"})"));
      std::vector<json> containers = {pod["spec"]["containers"][0]};
      if (capsule.url == kHttp.url) containers.push_back(pod["spec"]["initContainers"][0]);
      for (const json& c : containers) {
        EXPECT_THAT(c["volumeMounts"].dump(), HasSubstr(ca_mount.dump())) << c["name"];
        EXPECT_EQ(c["env"], ca_env) << c["name"];
      }
    }
  }
  // Unset: nothing of it.
  EXPECT_EQ(MustRender(kTwoPool, {}, kHttps).dump().find(kS3CaVolume), std::string::npos);
}

TEST(Render, RuntimeEnvCarriesUserEnvAndJobIdentity) {
  const char* job = R"(
name: x
image: img:1
entrypoint: [python]
env: {WANDB_PROJECT: demo, QUOTE: "a \"b\" 'c'\nline2"}
pools: [{name: main}]
)";
  json env = RuntimeEnv(MustRender(job, {}, kHttps, "job-7"))["env_vars"];
  EXPECT_EQ(env["WANDB_PROJECT"], "demo");
  EXPECT_EQ(env["QUOTE"], "a \"b\" 'c'\nline2");
  EXPECT_EQ(env["FORGE_JOB_ID"], "job-7");
  EXPECT_EQ(env["FORGE_CAPSULE_SHA256"], kSha);
  EXPECT_EQ(env["RAY_JOB_STOP_WAIT_TIME_S"], "45");  // Ray's 3 s would cut the runner's grace
}

TEST(Render, UserMayChooseRaysStopWait) {
  const char* job = R"(
name: x
image: img:1
entrypoint: [python]
env: {RAY_JOB_STOP_WAIT_TIME_S: "120"}
pools: [{name: main}]
)";
  EXPECT_EQ(RuntimeEnv(MustRender(job))["env_vars"]["RAY_JOB_STOP_WAIT_TIME_S"], "120");
}

TEST(Render, RwoStorageRefusesMultiMachineJobsNamingTheSetting) {
  FieldErrors errors = RenderErrors(kTwoPool, {{"FORGE_K8S_STORAGE_SHARED", "false"}});
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].path, "FORGE_K8S_STORAGE_SHARED");
  EXPECT_THAT(errors[0].message, HasSubstr("ReadWriteOnce"));
  EXPECT_THAT(errors[0].message, HasSubstr("6 machines (train × 2, rollout × 4)"));
  // One machine is fine.
  MustRender(kOneGpu, {{"FORGE_K8S_STORAGE_SHARED", "false"}});
}

TEST(Render, PassthroughOffRequestsNoGpusButRayKeepsThem) {
  json rj = MustRender(kTwoPool, {{"FORGE_K8S_GPU_PASSTHROUGH", "0"}});
  EXPECT_EQ(rj.dump().find("nvidia.com/gpu"), std::string::npos);
  EXPECT_EQ(rj["spec"]["rayClusterSpec"]["headGroupSpec"]["rayStartParams"]["num-gpus"], "8");
  EXPECT_EQ(rj["spec"]["rayClusterSpec"]["workerGroupSpecs"][1]["rayStartParams"]["num-gpus"], "8");
  // The node selector still places the job on its card series.
  EXPECT_EQ(PodTemplates(rj)[0]["spec"]["nodeSelector"]["starforge/gpu-series"], "h200");
}

TEST(Render, QueueAddsKueueLabelAndLimitsWorkerGroups) {
  const std::string job = std::string(kTwoPool) + "queue: team-a\n";
  json rj = MustRender(job.c_str());
  EXPECT_EQ(rj["metadata"]["labels"][kLabelKueueQueue], "team-a");

  FieldErrors errors = RenderErrors(job.c_str(), {{"FORGE_KUEUE_MAX_WORKER_GROUPS", "1"}});
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].path, "pools");
  EXPECT_THAT(errors[0].message, HasSubstr("at most 1 worker groups"));
  EXPECT_THAT(errors[0].message, HasSubstr("needs 2"));
  // Without a queue Kueue's limit does not apply.
  MustRender(kTwoPool, {{"FORGE_KUEUE_MAX_WORKER_GROUPS", "1"}});
}

TEST(Render, QueueRefusesAWorkerGroupNamedHead) {
  std::string job = std::string(kTwoPool) + "queue: team-a\n";
  job.replace(job.find("name: rollout"), 13, "name: head");
  FieldErrors errors = RenderErrors(job.c_str(), {});
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].path, "pools[1].name");
  EXPECT_THAT(errors[0].message, HasSubstr("reserves the worker group name \"head\""));
  // A one-machine primary pool is the head itself, not a worker group: its name is free.
  MustRender(R"(
name: one
image: img:1
entrypoint: [python, x.py]
queue: team-a
pools: [{name: head, gpuSeries: h200, gpusPerMachine: 8}]
)");
  // Without a queue there is no Kueue webhook to refuse it.
  job.replace(job.find("queue: team-a\n"), 14, "");
  MustRender(job.c_str());
}

TEST(Render, NoSecretEverAppearsInTheOutput) {
  const std::map<std::string, std::string> env = {
      {"FORGE_K8S_API_SERVER", "https://k8s:6443"},
      {"FORGE_K8S_TOKEN", "eyJhbGciOiJSUzI1NiJ9.SECRET-TOKEN"},
      {"FORGE_S3_ENDPOINT", "http://minio:9000"},
      {"FORGE_S3_BUCKET", "starforge"},
      {"FORGE_S3_ACCESS_KEY", "AKIASECRETACCESS"},
      {"FORGE_S3_SECRET_KEY", "SECRETKEYSECRETKEY"}};
  for (const CapsuleRef& capsule : {kHttps, kHttp}) {
    const std::string text = EmitYaml(MustRender(kTwoPool, env, capsule));
    for (const auto& secret : {"SECRET-TOKEN", "AKIASECRETACCESS", "SECRETKEYSECRETKEY"}) {
      EXPECT_EQ(text.find(secret), std::string::npos) << secret;
    }
  }
}

TEST(Render, EnvValuesThatKubeRaysSubmitterWouldExpandAreRefusedInK8sJobMode) {
  const char* job = R"(
name: x
image: img:1
entrypoint: [python]
env: {PATHX: "$HOME/bin", CMD: "`id`"}
pools: [{name: main}]
)";
  FieldErrors errors = RenderErrors(job, {});
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0].path, "env.CMD");
  EXPECT_EQ(errors[1].path, "env.PATHX");
  EXPECT_THAT(errors[1].message, HasSubstr("FORGE_KUBERAY_SUBMISSION_MODE=HTTPMode"));
  // HTTPMode sends the runtime env as JSON in a request body: nothing expands it.
  MustRender(job, {{"FORGE_KUBERAY_SUBMISSION_MODE", "HTTPMode"}});
}

TEST(Render, BadCapsuleReferencesAreRefused) {
  const auto errors_for = [](const CapsuleRef& c) {
    return JoinErrors(RenderErrors(kOneCpu, {}, c));
  };
  EXPECT_THAT(errors_for({"s3://b/k.zip", kSha}), HasSubstr("capsule URL: must be an http://"));
  EXPECT_THAT(errors_for({"https://s3/b/k.tar.gz", kSha}), HasSubstr("must name a .zip object"));
  EXPECT_THAT(errors_for({"https://user:pw@s3/b/k.zip", kSha}),
              HasSubstr("must not carry credentials"));
  EXPECT_EQ(errors_for({"https://user:pw@s3/b/k.zip", kSha}).find("pw@"), std::string::npos);
  EXPECT_THAT(errors_for({"https://s3/b/$(x).zip", kSha}), HasSubstr("percent-encode"));
  EXPECT_THAT(errors_for({"https://s3/b/k.zip", "ABC"}),
              HasSubstr("capsule SHA-256: must be 64 lower-case hex digits"));
}

TEST(Render, BadJobIdsAreRefused) {
  EXPECT_THAT(JoinErrors(RenderErrors(kOneCpu, {}, kHttps, "")), HasSubstr("job id: "));
  EXPECT_THAT(JoinErrors(RenderErrors(kOneCpu, {}, kHttps, "a b")), HasSubstr("job id: "));
}

TEST(RayJobName, IsAShortDns1035LabelDistinctPerId) {
  EXPECT_EQ(RayJobName("j-42"), "sf-j-42");
  std::set<std::string> names;
  const std::vector<std::string> ids = {
      "A",       "a",      "x_y", "x-y", "x.y", std::string(63, 'z'), std::string(62, 'z') + "q",
      "01J9ZK3", "01j9zk3"};
  for (const auto& id : ids) {
    const std::string name = RayJobName(id);
    EXPECT_LE(name.size(), 47u) << id;
    EXPECT_EQ(CheckDns1035Label(name), "") << name;
    EXPECT_EQ(RayJobName(id), name) << "stable";
    names.insert(name);
  }
  EXPECT_EQ(names.size(), ids.size());
}

TEST(Render, IsDeterministic) {
  const std::map<std::string, std::string> env = {{"FORGE_K8S_STORAGE_PVC", "data"}};
  EXPECT_EQ(EmitYaml(MustRender(kTwoPool, env, kHttp)), EmitYaml(MustRender(kTwoPool, env, kHttp)));
}

}  // namespace
}  // namespace starforge::kuberay
