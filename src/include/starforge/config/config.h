// Every FORGE_* setting, parsed in one place (config.cc holds the table of names, defaults,
// types and help). Nothing else in StarForge reads FORGE_* variables from the environment.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "starforge/common/field_error.h"
#include "starforge/common/secret.h"
#include "starforge/jobspec/parse.h"

namespace starforge::kube {
struct ApiServerSettings;  // kube/client_config.h
}  // namespace starforge::kube

namespace starforge::config {

enum class FleetKind { kLocal, kKuberay };
enum class SubmissionMode { kK8sJobMode, kHTTPMode };
// KubeRay's RayJob spec.submissionMode values: the two StarForge renders (SubmissionMode) and the
// two it refuses (config.cc says why).
inline constexpr const char* kK8sJobModeName = "K8sJobMode";
inline constexpr const char* kHTTPModeName = "HTTPMode";
inline constexpr const char* kInteractiveModeName = "InteractiveMode";
inline constexpr const char* kSidecarModeName = "SidecarMode";
enum class S3Addressing { kPath, kVirtual };

std::string ToString(FleetKind kind);       // "local" | "kuberay"
std::string ToString(SubmissionMode mode);  // "K8sJobMode" | "HTTPMode"
std::string ToString(S3Addressing mode);    // "path" | "virtual"
std::optional<FleetKind> ParseFleetKind(const std::string& text);

// The node label whose value is a node's GPU series, unless FORGE_K8S_GPU_NODE_LABEL says.
inline constexpr const char* kDefaultGpuNodeLabel = "starforge/gpu-series";

struct Config {
  // Fleet and recipes.
  FleetKind default_fleet_kind = FleetKind::kLocal;  // FORGE_DEFAULT_FLEET_KIND
  std::string image_nemo_rl;                         // FORGE_IMAGE_NEMO_RL ("" = unset)
  std::string nemo_rl_dir = "/opt/nemo-rl";          // FORGE_NEMO_RL_DIR
  std::string image_vllm;                            // FORGE_IMAGE_VLLM ("" = unset)
  std::string local_vllm_command = "vllm";           // FORGE_LOCAL_VLLM_COMMAND

  // Kubernetes connection.
  std::string k8s_api_server;                 // FORGE_K8S_API_SERVER ("" = kubeconfig/in-cluster)
  Secret k8s_token;                           // FORGE_K8S_TOKEN
  std::string k8s_ca_file;                    // FORGE_K8S_CA_FILE
  bool k8s_insecure_skip_tls_verify = false;  // FORGE_K8S_INSECURE_SKIP_TLS_VERIFY (tests only)
  std::string k8s_context;                    // FORGE_K8S_CONTEXT (kubeconfig context)

  // What StarForge creates in the cluster.
  std::string k8s_namespace = "starforge";                // FORGE_K8S_NAMESPACE
  std::string k8s_gpu_node_label = kDefaultGpuNodeLabel;  // FORGE_K8S_GPU_NODE_LABEL
  std::string k8s_shm_size = "64Gi";                      // FORGE_K8S_SHM_SIZE (quantity)
  std::string k8s_storage_pvc;      // FORGE_K8S_STORAGE_PVC ("" = no storage volume)
  bool k8s_storage_shared = true;   // FORGE_K8S_STORAGE_SHARED
  std::string k8s_corpus_pvc;       // FORGE_K8S_CORPUS_PVC ("" = none)
  std::string k8s_storage_mount;    // FORGE_K8S_STORAGE_MOUNT ("" = storage_root)
  bool k8s_gpu_passthrough = true;  // FORGE_K8S_GPU_PASSTHROUGH
  std::string k8s_fetch_image;      // FORGE_K8S_FETCH_IMAGE ("" = the job's image)
  std::string k8s_s3_ca_configmap;  // FORGE_K8S_S3_CA_CONFIGMAP ("" = the images' trust)

  // KubeRay.
  // The Ray version the tests run in the pods (scripts/ray-requirements.txt), so that the
  // default is one StarForge was checked against; clusters set their images' version.
  std::string kuberay_ray_version = "2.60.0";    // FORGE_KUBERAY_RAY_VERSION
  int64_t kuberay_ttl_seconds = 600;             // FORGE_KUBERAY_TTL_SECONDS
  int64_t kuberay_prerunning_deadline_s = 1800;  // FORGE_KUBERAY_PRERUNNING_DEADLINE_S
  SubmissionMode kuberay_submission_mode = SubmissionMode::kK8sJobMode;
  int64_t kueue_max_worker_groups = 6;  // FORGE_KUEUE_MAX_WORKER_GROUPS

  // Storage.
  std::string storage_root = "/starforge";  // FORGE_STORAGE_ROOT (absolute path)
  std::string state_dir;  // FORGE_STATE_DIR ("" = <storage_root>-state); never under storage_root
  int64_t capsule_max_bytes = 512LL << 20;  // FORGE_CAPSULE_MAX_BYTES
  int64_t submit_deadline_s = 1800;         // FORGE_SUBMIT_DEADLINE_S
  int64_t playground_max_ttl_s = 28800;     // FORGE_PLAYGROUND_MAX_TTL_S

  // Object storage.
  std::string s3_endpoint;  // FORGE_S3_ENDPOINT ("" = filesystem store under storage_root)
  std::string s3_bucket;    // FORGE_S3_BUCKET
  Secret s3_access_key;     // FORGE_S3_ACCESS_KEY
  Secret s3_secret_key;     // FORGE_S3_SECRET_KEY
  std::string s3_region = "us-east-1";               // FORGE_S3_REGION
  S3Addressing s3_addressing = S3Addressing::kPath;  // FORGE_S3_ADDRESSING
  std::string s3_ca_file;  // FORGE_S3_CA_FILE ("" = the system trust store)

  // Control plane.
  std::string listen = "127.0.0.1:8080";  // FORGE_LISTEN

  // The `forge` CLI (a client of the control plane).
  std::string server;  // FORGE_SERVER ("" = the saved login, else http://127.0.0.1:8080)
  Secret token;        // FORGE_TOKEN ("" = the saved login)

  // The control plane's own directory (store, serve.lock, uploads): FORGE_STATE_DIR, else the
  // storage root's sibling "<storage root>-state". Jobs never see it (docs/security.md).
  std::string StateDir() const { return state_dir.empty() ? storage_root + "-state" : state_dir; }

  // FORGE_K8S_API_SERVER, _TOKEN, _CA_FILE, _INSECURE_SKIP_TLS_VERIFY and _CONTEXT, as the
  // Kubernetes client takes them: kube::LoadClientConfig(config, …) converts through this, and
  // kube knows nothing of the other settings.
  operator kube::ApiServerSettings() const;  // NOLINT(google-explicit-constructor)

  // The mount path of the storage root inside Ray pods.
  const std::string& PodStorageMount() const {
    return k8s_storage_mount.empty() ? storage_root : k8s_storage_mount;
  }
};

// One setting as documented: name, default ("" when none), meaning, and whether it is a secret.
struct SettingInfo {
  std::string name;
  std::string default_value;
  std::string type;  // e.g. "local|kuberay", "non-negative integer", "quantity", "path", "secret"
  std::string help;
  bool secret = false;
};

// Every FORGE_* setting, in documentation order.
const std::vector<SettingInfo>& Settings();

struct LoadResult {
  Config config;
  FieldErrors errors;                 // one per bad value, path = the variable name
  std::vector<std::string> warnings;  // e.g. an unknown FORGE_* name, with a "did you mean"
  // The warnings about unknown FORGE_* names only (also in `warnings`): what a client command
  // shows, since the others concern the server's settings.
  std::vector<std::string> name_warnings;
  bool ok() const { return errors.empty(); }
};

// Builds the configuration from an environment (name -> value). Pure: tests pass a map.
// An empty value counts as unset. Every bad value is reported, e.g.
// `FORGE_KUBERAY_TTL_SECONDS: expected a non-negative integer, got "ten"`; error messages never
// contain a secret's value.
LoadResult Load(const std::map<std::string, std::string>& env);

// The process environment as a map (only FORGE_* variables).
std::map<std::string, std::string> ProcessEnvironment();

// The effective configuration as JSON keyed by setting name; secrets appear as "***".
nlohmann::json Dump(const Config& config);

// The JobSpec defaults these settings supply (FORGE_DEFAULT_FLEET_KIND, FORGE_IMAGE_NEMO_RL,
// FORGE_KUBERAY_PRERUNNING_DEADLINE_S): what `forge validate`, `forge submit` and the API use.
jobspec::Defaults JobDefaults(const Config& config);

}  // namespace starforge::config
