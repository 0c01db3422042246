// Kueue's admission webhooks for RayJobs (kubesim --kueue), as Kueue v0.17 applies them
// (kubernetes-sigs/kueue pkg/controller/jobs/rayjob/rayjob_webhook.go, jobframework/
// validation.go and jobs/raycluster/common.go); checked against the real Kueue on the real
// control plane (docs/kubesim.md, "Kueue"). No Workload, quota or admission is emulated.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace kubesim::kueue {

inline constexpr const char* kQueueLabel = "kueue.x-k8s.io/queue-name";

// The queue a RayJob names (its label), "" when none.
std::string QueueName(const nlohmann::json& obj);

// The mutating webhook (mrayjob.kb.io), on create: a RayJob with a queue is stored suspended.
void DefaultRayJob(nlohmann::json& obj);

// The validating webhook (vrayjob.kb.io) on create (old == nullptr) and update of a RayJob with a
// queue: "" when allowed, else the denial as kube-apiserver words it (a 403 Forbidden Status).
std::string ValidateRayJob(const nlohmann::json& obj, const nlohmann::json* old);

}  // namespace kubesim::kueue
