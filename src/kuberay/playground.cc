// A playground's Pod and Service. Shape decisions and their reasons: docs/playground.md.
#include "starforge/kuberay/playground.h"

#include "starforge/kuberay/constants.h"
#include "starforge/kuberay/render.h"

namespace starforge::kuberay {

using nlohmann::json;

namespace {

json Labels(const PlaygroundRender& in) {
  return {{kLabelPlaygroundId, in.id},
          {kLabelPool, kPlaygroundPool},
          {kLabelManagedBy, kManagedByValue}};
}

bool HasFlag(const std::vector<std::string>& args, const std::string& flag) {
  for (const auto& a : args) {
    if (a == flag || a.rfind(flag + "=", 0) == 0) return true;
  }
  return false;
}

}  // namespace

std::string PlaygroundObjectName(const std::string& id) {
  return RayJobName(id);
}

json RenderPlaygroundPod(const PlaygroundRender& in, const config::Config& cfg) {
  // `vllm serve` is the image's own OpenAI-compatible server. Arguments go through exec (no
  // shell), so nothing in a model path or an extra argument is interpreted.
  json command = {"vllm",
                  "serve",
                  in.model,
                  "--host",
                  "0.0.0.0",
                  "--port",
                  std::to_string(kVllmPort),
                  "--served-model-name",
                  in.served_name};
  if (in.machine.gpus_per_machine > 1 && !HasFlag(in.extra_args, "--tensor-parallel-size")) {
    command.push_back("--tensor-parallel-size");
    command.push_back(std::to_string(in.machine.gpus_per_machine));
  }
  for (const auto& a : in.extra_args)
    command.push_back(a);

  json mounts = json::array({{{"name", kShmVolume}, {"mountPath", "/dev/shm"}}});
  json volumes = json::array({ShmVolume(cfg)});
  if (!in.storage_subpath.empty() && !cfg.k8s_storage_pvc.empty()) {
    // Only the directory of the job that wrote the model, read-only: a playground can neither
    // change a checkpoint nor read another job's files.
    mounts.push_back({{"name", kStorageVolume},
                      {"mountPath", cfg.PodStorageMount() + "/" + in.storage_subpath},
                      {"subPath", in.storage_subpath},
                      {"readOnly", true}});
    volumes.push_back(
        {{"name", kStorageVolume},
         {"persistentVolumeClaim", {{"claimName", cfg.k8s_storage_pvc}, {"readOnly", true}}}});
  }
  json container = {
      {"name", kVllmContainerName},
      {"image", in.image},
      {"command", command},
      {"ports", {{{"containerPort", kVllmPort}, {"name", kVllmPortName}}}},
      // Ready = vLLM answers /health: the Service sends traffic only then, and StarForge shows
      // the playground Ready from the pod's Ready condition.
      {"readinessProbe",
       {{"httpGet", {{"path", kVllmHealthPath}, {"port", kVllmPortName}}},
        {"periodSeconds", 5},
        {"failureThreshold", 3}}},
      {"volumeMounts", mounts},
  };
  if (json r = MachineResources(in.machine, cfg); !r.is_null()) container["resources"] = r;

  json spec = {
      {"containers", json::array({container})},
      {"volumes", volumes},
      // A crashed vLLM is a failed playground, shown as such, not a restart loop holding GPUs.
      {"restartPolicy", "Never"},
      // The fallback when StarForge is down: the kubelet ends the pod after this long.
      {"activeDeadlineSeconds", in.deadline_seconds},
      // Service links would put VLLM_PORT=tcp://… into the environment of a pod near a service
      // named "vllm", which vLLM reads as its own setting.
      {"enableServiceLinks", false},
      {"automountServiceAccountToken", false},
  };
  PlaceOnSeries(spec, in.machine, cfg);
  return json{{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata",
               {{"name", PlaygroundObjectName(in.id)},
                {"namespace", cfg.k8s_namespace},
                {"labels", Labels(in)},
                {"annotations", {{"starforge/owner", in.owner}}}}},
              {"spec", spec}};
}

json RenderPlaygroundService(const PlaygroundRender& in, const config::Config& cfg) {
  return json{
      {"apiVersion", "v1"},
      {"kind", "Service"},
      {"metadata",
       {{"name", PlaygroundObjectName(in.id)},
        {"namespace", cfg.k8s_namespace},
        {"labels", Labels(in)}}},
      {"spec",
       {{"selector", {{kLabelPlaygroundId, in.id}}},
        {"ports",
         {{{"name", kVllmPortName}, {"port", kVllmPort}, {"targetPort", kVllmPortName}}}}}},
  };
}

jobspec::JobSpec PlaygroundAsJobSpec(const PlaygroundRender& in) {
  jobspec::JobSpec spec;
  spec.name = in.id;
  spec.fleet = "kuberay";
  spec.image = in.image;
  spec.recipe = "none";
  spec.entrypoint = {"vllm", "serve", in.model};
  spec.pre_running_seconds = 1;  // a valid JobSpec: admission dry-renders it as a RayJob
  jobspec::Pool pool = in.machine;
  pool.name = kPlaygroundPool;
  pool.machines = 1;
  spec.pools = {pool};
  return spec;
}

}  // namespace starforge::kuberay
