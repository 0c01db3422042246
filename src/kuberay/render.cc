// JobSpec -> RayJob. Every shape decision cites its reason; the operator's behaviour it relies on
// is in docs/upstream-facts.md (§1 spec, §3 objects, §4 rayStartParams), the RayJob StarForge
// renders in docs/kuberay-fleet.md.
#include "starforge/kuberay/render.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>

#include "starforge/common/names.h"
#include "starforge/common/sha256.h"
#include "starforge/common/yaml_json.h"
#include "starforge/kuberay/constants.h"
#include "starforge/kuberay/fetch_script.h"
#include "starforge/kuberay/shell.h"

namespace starforge::kuberay {
namespace {

using jobspec::JobSpec;
using jobspec::Pool;
using nlohmann::json;

bool IsLowerHex(std::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// Characters that KubeRay's K8sJobMode submitter would interpret: it pastes the runtime env as
// `--runtime-env-json "<strconv.Quote(json)>"` into `bash -ce`, and inside double quotes bash
// still expands `$…` and backquotes (upstream-facts §3.1).
bool HasBashDoubleQuoteExpansion(std::string_view s) {
  return s.find('$') != std::string_view::npos || s.find('`') != std::string_view::npos;
}

// Control characters other than tab and newline: Go's strconv.Quote writes them as \a, \v or
// \xNN, which the JSON decoder on the Ray side rejects.
bool HasUnsafeControl(std::string_view s) {
  return std::any_of(s.begin(), s.end(), [](char c) {
    auto u = static_cast<unsigned char>(c);
    return (u < 0x20 && c != '\t' && c != '\n') || u == 0x7f;
  });
}

std::string CheckCapsuleUrl(const std::string& url) {
  const bool https = url.rfind("https://", 0) == 0;
  const bool http = url.rfind("http://", 0) == 0;
  if (!https && !http) return "must be an http:// or https:// URL, got \"" + url + "\"";
  const size_t host_start = url.find("://") + 3;
  const size_t path_start = url.find('/', host_start);
  const std::string authority = url.substr(host_start, path_start - host_start);
  // Never echo the URL back when it carries credentials: they would land in logs.
  if (authority.find('@') != std::string::npos) {
    return "must not carry credentials (user:password@); use a presigned URL";
  }
  if (authority.empty()) return "has no host";
  for (char c : url) {
    if (std::isspace(static_cast<unsigned char>(c)) || c == '"' || c == '\\' || c == '$' ||
        c == '`' || c == '\'') {
      return "contains a character that is not allowed in a URL (whitespace, quote, backslash, "
             "'$' or '`'); percent-encode it";
    }
  }
  // Ray accepts only .zip archives for a remote working_dir and checks the URL's path, not its
  // query (ray._private.runtime_env.packaging: a remote URI must end in ".zip").
  const size_t query = url.find_first_of("?#");
  const std::string path =
      path_start == std::string::npos
          ? ""
          : url.substr(path_start,
                       query == std::string::npos ? std::string::npos : query - path_start);
  if (path.size() < 4 || path.compare(path.size() - 4, 4, ".zip") != 0) {
    return "must name a .zip object (Ray accepts only zip archives as a remote working_dir)";
  }
  return "";
}

int64_t WorkerGroupCount(const JobSpec& spec) {
  return static_cast<int64_t>(spec.pools.size()) - (spec.PrimaryPool().machines == 1 ? 1 : 0);
}

std::string PoolSummary(const JobSpec& spec) {
  std::string out;
  for (const auto& p : spec.pools) {
    if (!out.empty()) out += ", ";
    out += p.name + " × " + std::to_string(p.machines);
  }
  return out;
}

}  // namespace

std::vector<Refusal> CheckOnCluster(const JobSpec& spec, const config::Config& cfg) {
  using Kind = Refusal::Kind;
  std::vector<Refusal> errors;
  const int64_t machines = spec.TotalMachines();
  if (!cfg.k8s_storage_shared && machines > 1) {
    errors.push_back(
        {Kind::kSetting, "FORGE_K8S_STORAGE_SHARED",
         "is false: the storage volume is ReadWriteOnce and only one machine can mount it, but "
         "this job needs " +
             std::to_string(machines) + " machines (" + PoolSummary(spec) +
             "). Run it on one machine, or give StarForge a ReadWriteMany PVC and set "
             "FORGE_K8S_STORAGE_SHARED=true"});
  }
  if (spec.corpus && cfg.k8s_corpus_pvc.empty()) {
    errors.push_back({Kind::kField, "corpus",
                      "the job asks for the corpus volume, but this StarForge has none "
                      "(FORGE_K8S_CORPUS_PVC is not set); remove `corpus: true` or ask the "
                      "operator to configure it"});
  }
  if (!spec.resume_from.empty() && cfg.k8s_storage_pvc.empty()) {
    errors.push_back({Kind::kField, "resumeFrom",
                      "the job resumes from earlier jobs' directories, but this StarForge has no "
                      "storage volume (FORGE_K8S_STORAGE_PVC is not set); remove `resumeFrom` or "
                      "ask the operator to configure it"});
  }
  if (spec.queue && WorkerGroupCount(spec) > cfg.kueue_max_worker_groups) {
    errors.push_back({Kind::kField, "pools",
                      "Kueue admits at most " + std::to_string(cfg.kueue_max_worker_groups) +
                          " worker groups (FORGE_KUEUE_MAX_WORKER_GROUPS), and this job needs " +
                          std::to_string(WorkerGroupCount(spec)) +
                          " (one per pool; the primary pool's group holds its machines after the "
                          "head). Use fewer pools, or submit without `queue`"});
  }
  if (spec.queue) {
    // Kueue's RayJob webhook names the head's PodSet "head" and refuses a worker group of that
    // name (kueue pkg/controller/jobs/rayjob, ValidateOnCreate); say so at submit rather than
    // leave the job failing at create with the webhook's words.
    for (size_t i = 0; i < spec.pools.size(); ++i) {
      const Pool& pool = spec.pools[i];
      const bool is_worker_group = i > 0 || pool.machines > 1;
      if (is_worker_group && pool.name == "head") {
        errors.push_back({Kind::kField, "pools[" + std::to_string(i) + "].name",
                          "Kueue reserves the worker group name \"head\" for the Ray head; "
                          "rename the pool, or submit without `queue`"});
      }
    }
  }
  for (const auto& [key, value] : spec.env) {
    if (HasUnsafeControl(value)) {
      errors.push_back({Kind::kField, "env." + key,
                        "contains a control character; only tab and newline are allowed"});
    } else if (cfg.kuberay_submission_mode == config::SubmissionMode::kK8sJobMode &&
               HasBashDoubleQuoteExpansion(value)) {
      errors.push_back(
          {Kind::kField, "env." + key,
           "contains '$' or '`', which KubeRay's K8sJobMode submitter would expand in bash "
           "before Ray sees the value; remove it, or set FORGE_KUBERAY_SUBMISSION_MODE=HTTPMode"});
    }
  }
  return errors;
}

namespace {

// requests = limits: a training pod is Guaranteed QoS, so the kubelet never evicts it for
// memory pressure caused by a neighbour, and the scheduler's view equals what it may use.
json Resources(const Pool& pool, const config::Config& cfg) {
  return MachineResources(pool, cfg);
}

}  // namespace

json MachineResources(const Pool& pool, const config::Config& cfg) {
  json amounts = json::object();
  if (pool.cpus_per_machine) amounts["cpu"] = *pool.cpus_per_machine;
  if (pool.memory_per_machine) amounts["memory"] = *pool.memory_per_machine;
  if (pool.gpus_per_machine > 0 && cfg.k8s_gpu_passthrough) {
    amounts[kGpuResource] = std::to_string(pool.gpus_per_machine);
  }
  if (amounts.empty()) return nullptr;
  return json{{"limits", amounts}, {"requests", amounts}};
}

void PlaceOnSeries(json& pod_spec, const Pool& pool, const config::Config& cfg) {
  if (!pool.gpu_series.empty()) {
    pod_spec["nodeSelector"] = {{cfg.k8s_gpu_node_label, pool.gpu_series}};
  }
  if (pool.gpus_per_machine > 0 && cfg.k8s_gpu_passthrough) {
    // GPU nodes are commonly tainted nvidia.com/gpu:NoSchedule to keep CPU pods off them.
    pod_spec["tolerations"] = {
        {{"key", kGpuResource}, {"operator", "Exists"}, {"effect", kTaintNoSchedule}}};
  }
}

json ShmVolume(const config::Config& cfg) {
  return {{"name", kShmVolume},
          {"emptyDir", {{"medium", "Memory"}, {"sizeLimit", cfg.k8s_shm_size}}}};
}

namespace {

// num-gpus is always explicit: with FORGE_K8S_GPU_PASSTHROUGH=0 there is no nvidia.com/gpu limit
// for KubeRay to derive it from, and Ray must still see the pool's logical GPUs. The pool's
// custom resource (`pool_<name>`: max(gpus, 1) per machine) lets Ray work be pinned to a pool;
// KubeRay passes `--resources=<value>` through bash, hence the single quotes (upstream-facts §4).
json RayStartParams(const Pool& pool) {
  const int64_t units = std::max<int64_t>(pool.gpus_per_machine, 1);
  return json{
      {"num-gpus", std::to_string(pool.gpus_per_machine)},
      {"resources", "'{\"" + std::string(kPoolResourcePrefix) + pool.name +
                        "\":" + std::to_string(units) + "}'"},
  };
}

struct PodContext {
  const JobSpec& spec;
  const std::string& job_id;
  const CapsuleRef& capsule;
  const config::Config& cfg;
  bool fetch_capsule;  // http:// capsule: an init container downloads and verifies it
};

std::string CapsuleFilePath(const CapsuleRef& capsule) {
  return std::string(kCapsuleDir) + "/" + capsule.sha256 + ".zip";
}

json Volumes(const PodContext& ctx) {
  json volumes = json::array();
  volumes.push_back(ShmVolume(ctx.cfg));
  if (!ctx.cfg.k8s_storage_pvc.empty()) {
    volumes.push_back({{"name", kStorageVolume},
                       {"persistentVolumeClaim", {{"claimName", ctx.cfg.k8s_storage_pvc}}}});
  }
  if (ctx.spec.corpus) {
    volumes.push_back(
        {{"name", kCorpusVolume},
         {"persistentVolumeClaim", {{"claimName", ctx.cfg.k8s_corpus_pvc}, {"readOnly", true}}}});
  }
  if (ctx.fetch_capsule)
    volumes.push_back({{"name", kCapsuleVolume}, {"emptyDir", json::object()}});
  if (!ctx.cfg.k8s_s3_ca_configmap.empty()) {
    volumes.push_back(
        {{"name", kS3CaVolume}, {"configMap", {{"name", ctx.cfg.k8s_s3_ca_configmap}}}});
  }
  return volumes;
}

// FORGE_K8S_S3_CA_CONFIGMAP: the bundle, read-only, in a container that fetches the capsule.
void AddS3Ca(const PodContext& ctx, json& container) {
  if (ctx.cfg.k8s_s3_ca_configmap.empty()) return;
  container["volumeMounts"].push_back(
      {{"name", kS3CaVolume}, {"mountPath", kS3CaDir}, {"readOnly", true}});
  // Ray downloads an https working_dir with smart_open over `requests`, which trusts certifi's
  // bundle and ignores the system store unless REQUESTS_CA_BUNDLE names one; SSL_CERT_FILE is
  // OpenSSL's (Python's urllib: the init container).
  const std::string bundle = std::string(kS3CaDir) + "/" + kS3CaKey;
  json& env = container["env"];
  if (!env.is_array()) env = json::array();
  env.push_back({{"name", "REQUESTS_CA_BUNDLE"}, {"value", bundle}});
  env.push_back({{"name", "SSL_CERT_FILE"}, {"value", bundle}});
}

std::string CorpusMountPath(const config::Config& cfg) {
  return cfg.PodStorageMount() + "/" + kCorpusSubdir;
}

json RayVolumeMounts(const PodContext& ctx) {
  json mounts = json::array();
  mounts.push_back({{"name", kShmVolume}, {"mountPath", "/dev/shm"}});
  // Only the job's own directory of the storage volume (subPath): a job can neither read other
  // jobs' files nor write anything else on the shared volume (docs/security.md). forge serve
  // makes the directory before the RayJob (a kubelet would make it root-owned).
  if (!ctx.cfg.k8s_storage_pvc.empty()) {
    const std::string job_dir = JobSubPath(ctx.job_id);
    mounts.push_back({{"name", kStorageVolume},
                      {"mountPath", ctx.cfg.PodStorageMount() + "/" + job_dir},
                      {"subPath", job_dir}});
    // Earlier jobs of the same owner it resumes from (the API checked ownership at submit):
    // read-only, at the same paths they would have on the storage root.
    for (const std::string& id : ctx.spec.resume_from) {
      const std::string dir = JobSubPath(id);
      mounts.push_back({{"name", kStorageVolume},
                        {"mountPath", ctx.cfg.PodStorageMount() + "/" + dir},
                        {"subPath", dir},
                        {"readOnly", true}});
    }
  }
  if (ctx.spec.corpus) {
    mounts.push_back(
        {{"name", kCorpusVolume}, {"mountPath", CorpusMountPath(ctx.cfg)}, {"readOnly", true}});
  }
  // Ray copies the archive into its own cache before unpacking, so the original stays read-only.
  if (ctx.fetch_capsule) {
    mounts.push_back({{"name", kCapsuleVolume}, {"mountPath", kCapsuleDir}, {"readOnly", true}});
  }
  return mounts;
}

// Downloads the capsule and checks its SHA-256 before the Ray container starts, so a corrupted or
// substituted archive keeps the pod from starting. Arguments go through exec, not a shell, and the
// container gets no credentials: the presigned URL is all it needs.
json FetchInitContainer(const PodContext& ctx) {
  const std::string image =
      ctx.cfg.k8s_fetch_image.empty() ? ctx.spec.image : ctx.cfg.k8s_fetch_image;
  const json amounts_limit = {{"cpu", "1"}, {"memory", "512Mi"}};
  const json amounts_request = {{"cpu", "100m"}, {"memory", "128Mi"}};
  json container{
      {"name", kFetchContainerName},
      {"image", image},
      {"command", {kRunnerInterpreter, "-c", kFetchCapsuleScript, kFetchContainerName}},
      {"args", {ctx.capsule.url, ctx.capsule.sha256, CapsuleFilePath(ctx.capsule)}},
      {"resources", {{"limits", amounts_limit}, {"requests", amounts_request}}},
      {"volumeMounts", {{{"name", kCapsuleVolume}, {"mountPath", kCapsuleDir}}}},
  };
  AddS3Ca(ctx, container);
  return container;
}

json PodTemplate(const PodContext& ctx, const Pool& pool, bool head) {
  json container = {
      {"name", head ? kHeadContainerName : kWorkerContainerName},
      {"image", ctx.spec.image},
      {"volumeMounts", RayVolumeMounts(ctx)},
  };
  if (head) {
    // Named ports: KubeRay's head service exposes named ports only and finds the dashboard by
    // name; declaring ports without `dashboard` would leave the RayJob Initializing (upstream-facts
    // §3.2).
    container["ports"] = {{{"containerPort", kGcsPort}, {"name", kGcsPortName}},
                          {{"containerPort", kDashboardPort}, {"name", kDashboardPortName}},
                          {{"containerPort", kClientPort}, {"name", kClientPortName}}};
  }
  if (json r = Resources(pool, ctx.cfg); !r.is_null()) container["resources"] = r;
  AddS3Ca(ctx, container);

  json pod_spec = {{"containers", json::array({container})}, {"volumes", Volumes(ctx)}};
  PlaceOnSeries(pod_spec, pool, ctx.cfg);
  if (ctx.fetch_capsule) pod_spec["initContainers"] = json::array({FetchInitContainer(ctx)});

  // Pods do not inherit the RayJob's labels (upstream-facts §3.2): label them for diagnosis and
  // capacity.
  json labels = {
      {kLabelJobId, ctx.job_id}, {kLabelPool, pool.name}, {kLabelManagedBy, kManagedByValue}};
  return json{{"metadata", {{"labels", labels}}}, {"spec", pod_spec}};
}

json WorkerGroup(const PodContext& ctx, const Pool& pool, int64_t replicas) {
  // replicas = min = max: a training job has a fixed shape; KubeRay's autoscaler stays off.
  return json{{"groupName", pool.name},
              {"replicas", replicas},
              {"minReplicas", replicas},
              {"maxReplicas", replicas},
              {"rayStartParams", RayStartParams(pool)},
              {"template", PodTemplate(ctx, pool, /*head=*/false)}};
}

json RuntimeEnv(const PodContext& ctx) {
  json env_vars = json::object();
  env_vars[kEnvRayJobStopWait] = kRayJobStopWaitSeconds;
  for (const auto& [k, v] : ctx.spec.env)
    env_vars[k] = v;  // the user may choose another wait
  env_vars[kEnvJobId] = ctx.job_id;
  env_vars[kEnvCapsuleSha256] = ctx.capsule.sha256;
  if (!ctx.cfg.k8s_storage_pvc.empty()) env_vars[kEnvStorageRoot] = ctx.cfg.PodStorageMount();
  if (ctx.spec.corpus) env_vars[kEnvCorpusDir] = CorpusMountPath(ctx.cfg);
  if (!ctx.spec.resume_from.empty() && !ctx.cfg.k8s_storage_pvc.empty()) {
    std::string dirs;
    for (const std::string& id : ctx.spec.resume_from)
      dirs += (dirs.empty() ? "" : ":") + ctx.cfg.PodStorageMount() + "/" + JobSubPath(id);
    env_vars[kEnvResumeDirs] = dirs;
  }
  if (ctx.spec.recipe == "nemo-rl") env_vars[kEnvNemoRlDir] = ctx.cfg.nemo_rl_dir;
  const std::string working_dir =
      ctx.fetch_capsule ? "file://" + CapsuleFilePath(ctx.capsule) : ctx.capsule.url;
  return json{{"working_dir", working_dir}, {"env_vars", env_vars}};
}

}  // namespace

std::string JobSubPath(const std::string& job_id) {
  return "jobs/" + job_id;
}

std::string CheckJobId(const std::string& job_id) {
  if (job_id.empty()) return "must not be empty";
  if (std::string reason = CheckLabelValue(job_id); !reason.empty()) return reason;
  return "";
}

std::string RayJobName(const std::string& job_id) {
  std::string name = kRayJobNamePrefix;
  for (char c : job_id) {
    const char lower = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    name += (std::isalnum(static_cast<unsigned char>(lower)) != 0) ? lower : '-';
  }
  const bool changed = name.substr(std::string_view(kRayJobNamePrefix).size()) != job_id;
  if (!changed && name.size() <= kMaxRayJobNameLength && name.back() != '-') return name;
  // Lower-casing and replacing characters can map two ids to one name, and truncation can too:
  // a hash of the original id keeps them apart.
  const std::string suffix = "-" + Sha256Hex(job_id).substr(0, 8);
  name.resize(std::min(name.size(), kMaxRayJobNameLength - suffix.size()));
  while (!name.empty() && name.back() == '-')
    name.pop_back();
  return name + suffix;
}

RenderResult Render(const JobSpec& spec, const std::string& job_id, const CapsuleRef& capsule,
                    const config::Config& cfg) {
  RenderResult result;
  if (std::string r = CheckJobId(job_id); !r.empty()) result.errors.push_back({"job id", r});
  if (std::string r = CheckCapsuleUrl(capsule.url); !r.empty()) {
    result.errors.push_back({"capsule URL", r});
  }
  if (capsule.sha256.size() != 64 || !IsLowerHex(capsule.sha256)) {
    result.errors.push_back({"capsule SHA-256", "must be 64 lower-case hex digits"});
  }
  for (Refusal& r : CheckOnCluster(spec, cfg))
    result.errors.push_back({std::move(r.name), std::move(r.message)});
  if (!result.errors.empty()) return result;

  const PodContext ctx{spec, job_id, capsule, cfg, capsule.url.rfind("http://", 0) == 0};
  const Pool& primary = spec.PrimaryPool();

  json worker_groups = json::array();
  if (primary.machines > 1)
    worker_groups.push_back(WorkerGroup(ctx, primary, primary.machines - 1));
  for (size_t i = 1; i < spec.pools.size(); ++i) {
    worker_groups.push_back(WorkerGroup(ctx, spec.pools[i], spec.pools[i].machines));
  }

  json cluster_spec = {
      {"rayVersion", cfg.kuberay_ray_version},
      {"headGroupSpec",
       {{"rayStartParams", RayStartParams(primary)},
        {"template", PodTemplate(ctx, primary, /*head=*/true)}}},
  };
  if (!worker_groups.empty()) cluster_spec["workerGroupSpecs"] = worker_groups;

  json labels = {
      {kLabelJobId, job_id}, {kLabelJobName, spec.name}, {kLabelManagedBy, kManagedByValue}};
  if (spec.queue) labels[kLabelKueueQueue] = *spec.queue;

  // The runner reads the job's argv from the capsule's authoritative .starforge/jobspec.json
  // rather than from this string. Two shells parse the entrypoint: KubeRay's `bash -ce`
  // submitter, then Ray's job supervisor (shell=True) after `ray job submit` re-joins the words
  // with Windows-style subprocess.list2cmdline, which leaves `;`, `$(…)` and quotes live. No
  // single quoting survives both, so no user text goes through them. The annotation shows the
  // command for humans (kubectl describe).
  json annotations = {{kAnnotationCapsuleSha256, capsule.sha256},
                      {kAnnotationEntrypoint, ShellJoin(spec.entrypoint)}};

  const json runtime_env = RuntimeEnv(ctx);
  json rayjob_spec = {
      {"entrypoint", std::string(kRunnerInterpreter) + " " + kRunnerPath + " " + kRunnerCommand},
      {"runtimeEnvYAML", EmitYaml(runtime_env)},
      {"shutdownAfterJobFinishes", true},
      {"ttlSecondsAfterFinished", cfg.kuberay_ttl_seconds},
      // Training is never blindly retried: a retry would start a new cluster from scratch.
      {"backoffLimit", 0},
      {"submissionMode", config::ToString(cfg.kuberay_submission_mode)},
      {"rayClusterSpec", cluster_spec},
  };
  if (spec.running_seconds > 0) {
    // The operator's clock starts when the RayJob is initialised, not when it runs (upstream-facts
    // §1), so the pre-running allowance is added; StarForge enforces both deadlines precisely
    // itself.
    rayjob_spec["activeDeadlineSeconds"] = spec.pre_running_seconds + spec.running_seconds;
  }

  result.rayjob = {
      {"apiVersion", kRayApiVersion},
      {"kind", kRayJobKind},
      {"metadata",
       {{"name", RayJobName(job_id)},
        {"namespace", cfg.k8s_namespace},
        {"labels", labels},
        {"annotations", annotations}}},
      {"spec", rayjob_spec},
  };
  for (auto& e : CheckRayJob(result.rayjob, runtime_env))
    result.errors.push_back(std::move(e));
  if (!result.errors.empty()) result.rayjob = nullptr;
  return result;
}

}  // namespace starforge::kuberay
