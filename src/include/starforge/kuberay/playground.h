// The Kubernetes objects of a playground (docs/playground.md): one Pod running `vllm serve` and
// one Service that selects it, through whose services/proxy forge serve reaches vLLM. Rendering
// and reading a pod's state are pure; placement, GPU requests and /dev/shm are the RayJob's own
// (render.h), so a playground lands, and is counted, exactly like a job's machine.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "starforge/config/config.h"
#include "starforge/jobspec/jobspec.h"

namespace starforge::kuberay {

inline constexpr const char* kLabelPlaygroundId = "starforge/playground-id";
inline constexpr const char* kPlaygroundPool = "playground";  // its starforge/pool label
inline constexpr const char* kVllmContainerName = "vllm";
inline constexpr const char* kVllmPortName = "http";
inline constexpr int kVllmPort = 8000;
inline constexpr const char* kVllmHealthPath = "/health";

struct PlaygroundRender {
  std::string id;           // "p-…"; the objects' name is RayJobName(id) ("sf-p-…")
  std::string owner;        // annotation, for people reading the cluster
  std::string image;        // FORGE_IMAGE_VLLM or the request's
  std::string model;        // what `vllm serve` loads: a path inside the pod, or a model name
  std::string served_name;  // --served-model-name: the `model` clients send
  // "jobs/<job id>" when the model is on the storage volume: that directory is mounted
  // read-only at the path jobs see it; "" = nothing of the storage volume is mounted.
  std::string storage_subpath;
  std::vector<std::string> extra_args;  // more `vllm serve` arguments, after StarForge's
  jobspec::Pool machine;                // series, GPUs (gpusPerMachine), cpus, memory
  int64_t deadline_seconds = 0;         // spec.activeDeadlineSeconds
};

// The objects' name for a playground id (same rule as RayJobName).
std::string PlaygroundObjectName(const std::string& id);

nlohmann::json RenderPlaygroundPod(const PlaygroundRender& in, const config::Config& config);
nlohmann::json RenderPlaygroundService(const PlaygroundRender& in, const config::Config& config);

// A playground pod's machine as a one-pool JobSpec: admission (capacity.h CheckFits) and the
// Pending diagnosis (diagnose.h) treat it like a job of one machine.
jobspec::JobSpec PlaygroundAsJobSpec(const PlaygroundRender& in);

}  // namespace starforge::kuberay
