#include "kueue.h"

#include <vector>

#include "status.h"
#include "validation.h"

namespace kubesim::kueue {

using json = nlohmann::json;

namespace {

const json& At(const json& obj, const char* key) {
  static const json kNull;
  if (!obj.is_object()) return kNull;
  auto it = obj.find(key);
  return it == obj.end() ? kNull : *it;
}

bool Suspended(const json& obj) {
  const json& s = At(At(obj, "spec"), "suspend");
  return s.is_boolean() && s.get<bool>();
}

}  // namespace

std::string QueueName(const json& obj) {
  const json& v = At(At(At(obj, "metadata"), "labels"), kQueueLabel);
  return v.is_string() ? v.get<std::string>() : "";
}

void DefaultRayJob(json& obj) {
  if (QueueName(obj).empty()) return;
  obj["spec"]["suspend"] = true;  // queued until Kueue admits the Workload
}

std::string ValidateRayJob(const json& obj, const json* old) {
  const std::string queue = QueueName(obj);
  if (queue.empty()) return "";
  const std::string label_path = std::string("metadata.labels[") + kQueueLabel + "]";
  FieldErrs errs;
  // Update: the queue may change only while the job is suspended (validateUpdateForQueueName).
  if (old != nullptr && !Suspended(obj) && queue != QueueName(*old)) {
    errs.push_back(Invalid(label_path, queue, "field is immutable"));
  }
  // validateCreate (run on update too).
  const json& spec = At(obj, "spec");
  const json& selector = At(spec, "clusterSelector");
  const bool has_selector = selector.is_object() && !selector.empty();
  const json& cluster = At(spec, "rayClusterSpec");
  const bool has_cluster = cluster.is_object();
  if (has_selector && has_cluster) {
    errs.push_back(Invalid("spec.clusterSelector", selector,
                           "a kueue managed job should not use an existing cluster"));
  } else if (has_selector) {
    // A job on an existing cluster: nothing else is checked.
  } else if (!has_cluster) {
    errs.push_back(Required("spec.rayClusterSpec",
                            "rayClusterSpec is required for Kueue-managed jobs that don't use "
                            "clusterSelector"));
  } else {
    const json& shutdown = At(spec, "shutdownAfterJobFinishes");
    if (!(shutdown.is_boolean() && shutdown.get<bool>())) {
      errs.push_back(Invalid("spec.shutdownAfterJobFinishes", false,
                             "a kueue managed job should delete the cluster after finishing"));
    }
    const json& autoscaling = At(cluster, "enableInTreeAutoscaling");
    if (autoscaling.is_boolean() && autoscaling.get<bool>()) {
      errs.push_back(Invalid("spec.rayClusterSpec.enableInTreeAutoscaling", true,
                             "a kueue managed job should only use autoscaling when workload "
                             "slicing is enabled"));
    }
    const json& groups = At(cluster, "workerGroupSpecs");
    if (groups.is_array()) {
      // 8 PodSets at most, and the head takes one (the submitter is not counted here).
      if (groups.size() > 7) {
        errs.push_back(
            FieldErr{"FieldValueTooMany", "spec.rayClusterSpec.workerGroupSpecs",
                     "Too many: " + std::to_string(groups.size()) + ": must have at most 7 items",
                     json(), false});
      }
      for (size_t i = 0; i < groups.size(); ++i) {
        if (At(groups[i], "groupName") == "head") {
          errs.push_back(
              Forbidden("spec.rayClusterSpec.workerGroupSpecs[" + std::to_string(i) + "].groupName",
                        "\"head\" is reserved for the head group"));
        }
      }
    }
  }
  // ValidateJobOnCreate: the queue name is a CRD (LocalQueue) name.
  if (!has_selector || has_cluster) {
    for (const std::string& msg : IsDns1123Subdomain(queue)) {
      errs.push_back(Invalid(label_path, queue, msg));
    }
  }
  if (errs.empty()) return "";
  return "admission webhook \"vrayjob.kb.io\" denied the request: " + AggregateMessage(errs);
}

}  // namespace kubesim::kueue
