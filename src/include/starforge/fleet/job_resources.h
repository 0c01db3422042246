// What a job asks of its fleet and what it used, as the job's page shows them (GET
// /api/v1/jobs/{id}, `resources`): the pods a kuberay job's RayJob requests, and the use the
// runner recorded of the job's processes in status.json.
#pragma once

#include <filesystem>
#include <optional>

#include <nlohmann/json.hpp>

#include "starforge/config/config.h"
#include "starforge/jobspec/jobspec.h"

namespace starforge::fleet {

// The Ray pods the job's RayJob asks for, in kuberay::Render's shape: the head (the primary
// pool's first machine), then a worker group for the primary pool's other machines and one per
// further pool. Each: {group, pool, pods, requests: {cpu?, memory?, gpus}} — the Ray
// container's requests (= its limits), as Kubernetes quantities; gpus is what the pod asks of
// nvidia.com/gpu (0 when FORGE_K8S_GPU_PASSTHROUGH is off).
nlohmann::json KubeRayPodRequests(const jobspec::JobSpec& spec, const config::Config& config);

// The use the runner recorded in <job dir>/status.json when the job's entrypoint ended
// ("usage": {cpuSeconds, maxRssBytes}), as numbers checked to be finite and ≥ 0; nullopt when
// there is none (a job still running, an older runner) or it is malformed. The job writes its
// directory: a symlink or FIFO there is not followed (local::ReadJson).
std::optional<nlohmann::json> RecordedUsage(const std::filesystem::path& job_dir);

}  // namespace starforge::fleet
