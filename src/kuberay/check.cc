// The RayJob controller's validation (KubeRay controllers/ray/utils/validation.go), reproduced so
// that a job the operator would reject fails at submit time with the same words, instead of
// later as `ValidationFailed` in the cluster. Order and wording follow upstream-facts §1.2.
#include <string>

#include "starforge/common/names.h"
#include "starforge/kuberay/constants.h"
#include "starforge/kuberay/render.h"

namespace starforge::kuberay {
namespace {

using nlohmann::json;

constexpr const char* kSpecInvalid = "The RayJob spec is invalid: ";
constexpr const char* kMetadataInvalid = "The RayJob metadata is invalid: ";

const json* Find(const json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

bool BoolField(const json& obj, const char* key) {
  const json* v = Find(obj, key);
  return v != nullptr && v->is_boolean() && v->get<bool>();
}

// Returns true when present, storing the value.
bool IntField(const json& obj, const char* key, int64_t* out) {
  const json* v = Find(obj, key);
  if (v == nullptr || !v->is_number_integer()) return false;
  *out = v->get<int64_t>();
  return true;
}

void CheckGroup(const json& group, const std::string& path, bool worker, bool autoscaling,
                FieldErrors* errors) {
  const json* containers = nullptr;
  if (const json* tmpl = Find(group, "template"); tmpl != nullptr) {
    if (const json* pod = Find(*tmpl, "spec"); pod != nullptr)
      containers = Find(*pod, "containers");
  }
  if (containers == nullptr || !containers->is_array() || containers->empty()) {
    errors->push_back({path + ".template.spec.containers",
                       std::string(kSpecInvalid) + (worker ? "workerGroupSpec" : "headGroupSpec") +
                           " should have at least one container"});
  }
  if (worker) {
    int64_t min = 0;
    int64_t max = 0;
    int64_t replicas = 0;
    const bool has_min = IntField(group, "minReplicas", &min);
    const bool has_max = IntField(group, "maxReplicas", &max);
    if (!autoscaling && (!has_min || !has_max)) {
      errors->push_back({path, std::string(kSpecInvalid) +
                                   "minReplicas and maxReplicas are required when autoscaling "
                                   "is disabled"});
    }
    if ((has_min && min < 0) || (has_max && max < 0) ||
        (IntField(group, "replicas", &replicas) && replicas < 0)) {
      errors->push_back({path, std::string(kSpecInvalid) + "replicas must be non-negative"});
    }
    if (has_min && has_max && min > max) {
      errors->push_back(
          {path, std::string(kSpecInvalid) + "minReplicas must not be greater than maxReplicas"});
    }
  }
  // rayStartParams and the group `resources` map both feed `ray start`; KubeRay refuses the mix.
  const json* params = Find(group, "rayStartParams");
  const json* resources = Find(group, "resources");
  if (params != nullptr && resources != nullptr && resources->is_object() && !resources->empty()) {
    for (const char* key : {"num-cpus", "num-gpus", "memory", "resources"}) {
      if (Find(*params, key) != nullptr) {
        errors->push_back({path + ".rayStartParams." + key,
                           std::string(kSpecInvalid) + "rayStartParams['" + key +
                               "'] cannot be used together with the group's resources field"});
      }
    }
  }
  if (params != nullptr && Find(*params, "labels") != nullptr) {
    errors->push_back({path + ".rayStartParams.labels",
                       std::string(kSpecInvalid) +
                           "rayStartParams['labels'] is not supported; use the group's labels"});
  }
}

void CheckHeadPorts(const json& head, FieldErrors* errors) {
  const json* tmpl = Find(head, "template");
  const json* pod = tmpl ? Find(*tmpl, "spec") : nullptr;
  const json* containers = pod ? Find(*pod, "containers") : nullptr;
  if (containers == nullptr || !containers->is_array() || containers->empty()) return;
  const json* ports = Find((*containers)[0], "ports");
  if (ports == nullptr || !ports->is_array() || ports->empty()) return;
  for (const auto& p : *ports) {
    if (const json* name = Find(p, "name"); name != nullptr && *name == kDashboardPortName) return;
  }
  // Not a validation error in the operator: the RayJob silently never leaves Initializing
  // ("dashboard port is not found", upstream-facts §3.2), which is worse.
  errors->push_back({"spec.rayClusterSpec.headGroupSpec.template.spec.containers[0].ports",
                     "the head container declares ports but none is named \"dashboard\"; "
                     "KubeRay would never find the dashboard and the job would never start"});
}

}  // namespace

FieldErrors CheckRayJob(const json& rayjob, const json& runtime_env) {
  FieldErrors errors;
  const json empty = json::object();
  const json* metadata = Find(rayjob, "metadata");
  const std::string name =
      metadata && Find(*metadata, "name") && Find(*metadata, "name")->is_string()
          ? Find(*metadata, "name")->get<std::string>()
          : "";
  if (name.size() > kMaxRayJobNameLength) {
    errors.push_back({"metadata.name", std::string(kMetadataInvalid) +
                                           "RayJob name should be no more than 47 characters"});
  } else if (std::string reason = CheckDns1035Label(name); !reason.empty()) {
    errors.push_back(
        {"metadata.name",
         std::string(kMetadataInvalid) + "RayJob name should be a valid DNS1035 label: " + reason});
  }

  const json* spec_ptr = Find(rayjob, "spec");
  const json& spec = spec_ptr ? *spec_ptr : empty;
  const bool shutdown = BoolField(spec, "shutdownAfterJobFinishes");
  int64_t ttl = 0;
  IntField(spec, "ttlSecondsAfterFinished", &ttl);
  if (BoolField(spec, "suspend") && !shutdown) {
    errors.push_back({"spec.suspend", std::string(kSpecInvalid) +
                                          "a RayJob with shutdownAfterJobFinishes set to false is "
                                          "not allowed to be suspended"});
  }
  if (ttl < 0) {
    errors.push_back({"spec.ttlSecondsAfterFinished",
                      std::string(kSpecInvalid) + "TTLSecondsAfterFinished must be a non-negative "
                                                  "integer"});
  }
  if (!shutdown && ttl > 0) {
    errors.push_back({"spec.ttlSecondsAfterFinished",
                      std::string(kSpecInvalid) + "a RayJob with shutdownAfterJobFinishes set to "
                                                  "false cannot have TTLSecondsAfterFinished"});
  }

  const json* cluster = Find(spec, "rayClusterSpec");
  if (cluster == nullptr && Find(spec, "clusterSelector") == nullptr) {
    errors.push_back({"spec", std::string(kSpecInvalid) +
                                  "one of RayClusterSpec or ClusterSelector must be set"});
  }
  if (cluster != nullptr) {
    const bool autoscaling = BoolField(*cluster, "enableInTreeAutoscaling");
    const json* head = Find(*cluster, "headGroupSpec");
    CheckGroup(head ? *head : empty, "spec.rayClusterSpec.headGroupSpec", false, autoscaling,
               &errors);
    if (head) CheckHeadPorts(*head, &errors);
    if (const json* workers = Find(*cluster, "workerGroupSpecs"); workers && workers->is_array()) {
      for (size_t i = 0; i < workers->size(); ++i) {
        CheckGroup((*workers)[i], "spec.rayClusterSpec.workerGroupSpecs[" + std::to_string(i) + "]",
                   true, autoscaling, &errors);
      }
    }
  }

  // The operator unmarshals runtimeEnvYAML into a map; checked on what it was emitted from.
  if (!runtime_env.is_object()) {
    errors.push_back(
        {"spec.runtimeEnvYAML", "failed to unmarshal RuntimeEnvYAML: not a YAML mapping"});
  }

  for (const char* key : {"activeDeadlineSeconds", "preRunningDeadlineSeconds"}) {
    int64_t v = 0;
    if (IntField(spec, key, &v) && v <= 0) {
      errors.push_back({std::string("spec.") + key,
                        std::string(kSpecInvalid) + key + " must be a positive integer"});
    }
  }
  if (int64_t v = 0; IntField(spec, "backoffLimit", &v) && v < 0) {
    errors.push_back({"spec.backoffLimit",
                      std::string(kSpecInvalid) + "backoffLimit must be a positive integer"});
  }
  // The CRD has no enum here: an unknown mode is accepted and then waits forever (upstream-facts
  // §1).
  if (const json* mode = Find(spec, "submissionMode"); mode != nullptr) {
    static const char* kModes[] = {config::kK8sJobModeName, config::kHTTPModeName,
                                   config::kInteractiveModeName, config::kSidecarModeName};
    bool known = false;
    for (const char* m : kModes)
      known = known || (*mode == m);
    if (!known) {
      errors.push_back(
          {"spec.submissionMode", "unknown submission mode " + mode->dump() +
                                      "; KubeRay would accept it and then wait forever"});
    }
  }
  return errors;
}

}  // namespace starforge::kuberay
