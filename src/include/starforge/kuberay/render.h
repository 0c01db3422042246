// Rendering a JobSpec into the one RayJob that runs it. Pure and deterministic.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "starforge/common/field_error.h"
#include "starforge/config/config.h"
#include "starforge/jobspec/jobspec.h"

namespace starforge::kuberay {

// Where the job's capsule is and what its bytes hash to.
struct CapsuleRef {
  std::string url;     // https:// (handed to Ray) or http:// (fetched by an init container)
  std::string sha256;  // 64 lower-case hex digits
};

struct RenderResult {
  nlohmann::json rayjob;  // set iff errors is empty
  FieldErrors errors;     // why the job cannot run on this cluster configuration
  bool ok() const { return errors.empty(); }
};

// The RayJob name for a job id: "sf-<id>", lower-cased, with characters outside [a-z0-9-]
// replaced by '-'; when that changes the id or exceeds 47 characters, a hash of the id keeps
// distinct ids distinct. Always a DNS-1035 label of ≤ 47 characters.
std::string RayJobName(const std::string& job_id);

// "jobs/<job id>": the job's directory on the storage volume, relative to its root (a pod's
// subPath; forge serve's <FORGE_STORAGE_ROOT>/jobs/<job id>).
std::string JobSubPath(const std::string& job_id);

// Checks a job id: a valid label value (1-63 chars of [A-Za-z0-9_.-], alphanumeric ends).
// Returns "" when valid, else a reason.
std::string CheckJobId(const std::string& job_id);

// Why a job cannot run with this cluster's settings, and who would change what.
struct Refusal {
  enum class Kind {
    kField,    // the user: `name` is the JobSpec field, e.g. "corpus", "env.X", "pools[1].name"
    kSetting,  // the operator: `name` is the FORGE_* setting, e.g. "FORGE_K8S_STORAGE_SHARED"
  };
  Kind kind = Kind::kField;
  std::string name;
  std::string message;  // what is wrong and what to do, to follow `name`
};

// What this cluster could not run of `spec` (already validated by jobspec::Parse), whatever its
// capsule: multi-machine jobs on RWO storage, corpus or resumeFrom without their volumes, too
// many worker groups for Kueue, values KubeRay's submitter shell would mangle. Empty = Render
// renders it. The admission check at submit; Render refuses the same.
std::vector<Refusal> CheckOnCluster(const jobspec::JobSpec& spec, const config::Config& config);

// Renders the RayJob for `spec` (already validated by jobspec::Parse) with the cluster settings
// in `config`. Refuses, with errors naming the setting or field to change, what CheckOnCluster
// refuses, a malformed job id or capsule, and anything the operator's own validation
// (CheckRayJob) would reject.
RenderResult Render(const jobspec::JobSpec& spec, const std::string& job_id,
                    const CapsuleRef& capsule, const config::Config& config);

// What one machine of `pool` gets, shared by RayJob pods and playground pods so that both are
// placed and counted alike. Container resources with requests = limits (cpu, memory, and
// nvidia.com/gpu unless FORGE_K8S_GPU_PASSTHROUGH=0); null when there are none.
nlohmann::json MachineResources(const jobspec::Pool& pool, const config::Config& config);
// Sets `pod_spec`'s nodeSelector (the card series label) and the nvidia.com/gpu toleration.
void PlaceOnSeries(nlohmann::json& pod_spec, const jobspec::Pool& pool,
                   const config::Config& config);
// The memory-backed /dev/shm volume (FORGE_K8S_SHM_SIZE).
nlohmann::json ShmVolume(const config::Config& config);

// The RayJob controller's own validation (KubeRay utils/validation.go, upstream-facts §1.2) applied
// to a RayJob object, with the operator's wording; the RayJob fields StarForge may render are
// covered. `runtime_env` is what the RayJob's runtimeEnvYAML was emitted from: checked as that
// value, not parsed back. Empty = the operator would accept it.
FieldErrors CheckRayJob(const nlohmann::json& rayjob, const nlohmann::json& runtime_env);

}  // namespace starforge::kuberay
