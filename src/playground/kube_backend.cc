#include "starforge/playground/kube_backend.h"

#include "starforge/common/api_errors.h"
#include "starforge/common/json_read.h"
#include "starforge/kube/errors.h"
#include "starforge/kube/resource.h"
#include "starforge/kuberay/capacity.h"
#include "starforge/kuberay/constants.h"
#include "starforge/kuberay/diagnose.h"

namespace starforge::playground {

using json_read::Arr;
using json_read::Field;
using json_read::Int;
using json_read::Str;
using nlohmann::json;
namespace res = kube::resources;

namespace {

constexpr const char* kCreateFailed = "PlaygroundCreationFailed";
constexpr const char* kDeleteFailed = "PlaygroundDeletionFailed";

bool PodReady(const json& pod) {
  for (const json& c : Arr(Field(pod, "status"), "conditions")) {
    if (Str(c, "type") == "Ready") return Str(c, "status") == "True";
  }
  return false;
}

}  // namespace

KubeBackend::KubeBackend(KubeBackendOptions options)
    : options_(std::move(options)),
      client_(std::make_unique<kube::Client>(options_.client, options_.client_options)) {}

KubeBackend::~KubeBackend() = default;

int64_t KubeBackend::ApiRequests() const {
  return client_->stats().requests;
}

kuberay::PlaygroundRender KubeBackend::RenderInput(const store::Playground& row,
                                                   const Spec& spec) const {
  const config::Config& cfg = options_.config;
  kuberay::PlaygroundRender in;
  in.id = row.id;
  in.owner = row.owner;
  in.image = spec.image;
  in.served_name = spec.served_name;
  in.extra_args = spec.args;
  // A path Admit refused is taken as a model name here: nothing is mounted for it.
  const StatusOr<ModelLocation> located = Locate(spec.model, cfg.storage_root);
  const ModelLocation loc = located.ok() ? *located : ModelLocation{};
  if (loc.on_storage) {
    in.model = cfg.PodStorageMount() + "/" + loc.relative;
    in.storage_subpath = "jobs/" + loc.job_id;
  } else {
    in.model = spec.model;
  }
  in.machine.name = kuberay::kPlaygroundPool;
  in.machine.gpu_series = spec.series;
  in.machine.gpus_per_machine = spec.gpus;
  in.machine.cpus_per_machine = spec.cpus;
  in.machine.memory_per_machine = spec.memory;
  // The pod's own deadline counts from its start; the longest life any playground may have
  // (FORGE_PLAYGROUND_MAX_TTL_S), since Kubernetes lets activeDeadlineSeconds only shrink and
  // `extend` must not be cut short by it. StarForge itself deletes the pod at the TTL.
  in.deadline_seconds = cfg.playground_max_ttl_s;
  return in;
}

fleet::Admission KubeBackend::Admit(const store::Playground& row, const Spec& spec) {
  const kuberay::PlaygroundRender in = RenderInput(row, spec);
  if (!in.storage_subpath.empty() && options_.config.k8s_storage_pvc.empty()) {
    return {false,
            "the model is on the storage volume, but this StarForge mounts none in pods "
            "(FORGE_K8S_STORAGE_PVC is not set); name a model the image can load instead",
            "model"};
  }
  if (options_.admission == nullptr) return {};
  return AdmitAsJob(*options_.admission, kuberay::PlaygroundAsJobSpec(in));
}

Status KubeBackend::Create(const store::Playground& row, const Spec& spec) {
  const kuberay::PlaygroundRender in = RenderInput(row, spec);
  const std::string& ns = options_.config.k8s_namespace;
  // The Service first: once the pod is ready it is reachable at once.
  for (const json& object : {kuberay::RenderPlaygroundService(in, options_.config),
                             kuberay::RenderPlaygroundPod(in, options_.config)}) {
    const bool pod = Str(object, "kind") == "Pod";
    const Status made =
        kube::Try([&] { client_->Create(pod ? res::kPods : res::kServices, ns, object); });
    if (made.ok() || made.code() == Code::kAlreadyExists)
      continue;  // (already: created before a restart, same name, same id)
    const std::string what = std::string(pod ? "Pod" : "Service") + " " +
                             kuberay::PlaygroundObjectName(row.id) + ": " + made.message();
    return made.retryable() ? Status::Retryable(kCreateFailed, what)
                            : Status::Permanent(kCreateFailed, what);
  }
  return Status::Ok();
}

Observation KubeBackend::Observe(const store::Playground& row, const Spec& spec) {
  Observation o;
  const std::string& ns = options_.config.k8s_namespace;
  const std::string name = kuberay::PlaygroundObjectName(row.id);
  // A failed read of the cluster: observed again later.
  auto unread = [&o](const Status& s) {
    o.retryable_error = true;
    o.message = s.message();
    return o;
  };
  std::optional<fleet::KubeRayFleet::PodView> view;
  if (options_.cache != nullptr) view = options_.cache->CachedPod(name);
  // Not in the cache: just created (the watch has not brought it yet) or gone; ask.
  if (view && !view->pod) view.reset();
  json pod;
  if (view) {
    pod = *view->pod;
  } else {
    StatusOr<json> got = kube::Try([&] { return client_->Get(res::kPods, ns, name); });
    if (!got.ok() && got.status().code() != Code::kNotFound) return unread(got.status());
    if (!got.ok()) {
      o.state = store::PlaygroundState::kFailed;
      o.reason = "PodDeleted";
      o.message = "its pod " + name + " was deleted outside StarForge";
      return o;
    }
    pod = std::move(got).value();
  }
  const std::string phase = Str(Field(pod, "status"), "phase");
  if (phase == kuberay::kPodFailed || phase == kuberay::kPodSucceeded) {
    o.state = store::PlaygroundState::kFailed;
    const std::string reason = Str(Field(pod, "status"), "reason");
    o.reason = reason == kuberay::kPodDeadlineExceeded ? "PodDeadlineExceeded" : "ServerExited";
    std::string detail = Str(Field(pod, "status"), "message");
    for (const json& s : Arr(Field(pod, "status"), "containerStatuses")) {
      const json& t = Field(Field(s, "state"), "terminated");
      if (t.is_object()) {
        detail = "vLLM exited with code " + std::to_string(Int(t, "exitCode", -1)) +
                 (Str(t, "reason").empty() ? "" : " (" + Str(t, "reason") + ")") +
                 (detail.empty() ? "" : "; " + detail);
      }
    }
    o.message = "pod " + name + " ended: " + (detail.empty() ? phase : detail) +
                " (forge playground logs " + row.id + ")";
    return o;
  }
  if (PodReady(pod)) {
    o.state = store::PlaygroundState::kReady;
    return o;
  }
  // Not ready: the jobs' diagnosis, over the pod, its events and, while it is unscheduled,
  // the nodes and their pods (for the free GPUs of the series).
  kuberay::DiagnosisInput in;
  in.cluster_pods = {pod};
  in.gpu_label = options_.config.k8s_gpu_node_label;
  in.pools = {kuberay::PlaygroundAsJobSpec(RenderInput(row, spec)).pools.front()};
  if (view) {
    in.events = std::move(view->events);
    in.nodes = std::move(view->nodes);
    in.node_pods = std::move(view->node_pods);
  } else {
    kube::ListOptions events;
    events.field_selector = "involvedObject.name=" + name;
    // (Each list is kept in a variable: a range over a member of a temporary would dangle.)
    const StatusOr<json> event_list =
        kube::Try([&] { return client_->List(res::kEvents, ns, events); });
    if (!event_list.ok()) return unread(event_list.status());
    for (const json& e : Arr(*event_list, "items"))
      in.events.push_back(e);
    if (Str(Field(pod, "spec"), "nodeName").empty()) {
      const StatusOr<json> node_list = kube::Try([&] { return client_->List(res::kNodes, ""); });
      if (!node_list.ok()) return unread(node_list.status());
      for (const json& n : Arr(*node_list, "items"))
        in.nodes.push_back(n);
      kube::ListOptions bound;
      bound.field_selector = "status.phase!=Succeeded,status.phase!=Failed";
      const StatusOr<json> pod_list =
          kube::Try([&] { return client_->List(res::kPods, "", bound); });
      if (!pod_list.ok()) return unread(pod_list.status());
      for (const json& p : Arr(*pod_list, "items")) {
        if (!Str(Field(p, "spec"), "nodeName").empty()) in.node_pods.push_back(p);
      }
    }
  }
  const kuberay::Diagnosis d = kuberay::DiagnosePod(in);
  o.state = store::PlaygroundState::kPending;
  o.reason = d.reason;
  o.message = d.message;
  for (const auto& e : d.events)
    o.events.push_back(kuberay::ToJson(e));
  return o;
}

Status KubeBackend::Delete(const store::Playground& row) {
  const std::string& ns = options_.config.k8s_namespace;
  const std::string name = kuberay::PlaygroundObjectName(row.id);
  for (const kube::ResourceRef* ref : {&res::kPods, &res::kServices}) {
    kube::DeleteOptions d;
    d.propagation_policy = "Background";
    const Status deleted = kube::Try([&] { client_->Delete(*ref, ns, name, d); });
    if (!deleted.ok() && deleted.code() != Code::kNotFound)
      return Status::Retryable(kDeleteFailed, deleted.message());
  }
  return Status::Ok();
}

ProxyReply KubeBackend::Proxy(const store::Playground& row, const ProxyCall& call,
                              const std::function<bool(std::string_view)>& on_data,
                              const std::atomic<bool>* stop) {
  kube::ProxyRequest r;
  r.method = call.method;
  r.ns = options_.config.k8s_namespace;
  r.service = kuberay::PlaygroundObjectName(row.id);
  r.port = kuberay::kVllmPortName;
  r.path = call.path;
  r.body = call.body;
  r.content_type = call.content_type;
  ProxyReply out;
  const StatusOr<kube::ProxyResponse> resp = kube::Try([&] {
    return on_data ? client_->StreamServiceProxy(r, on_data, stop) : client_->ServiceProxy(r);
  });
  if (!resp.ok()) {
    out.status = 0;
    out.message =
        "the Kubernetes API server could not reach the model server: " + resp.status().message();
    return out;
  }
  out.status = resp->status;
  auto ct = resp->headers.find("content-type");
  if (ct != resp->headers.end()) out.content_type = ct->second;
  out.body = resp->body;
  return out;
}

Status KubeBackend::Logs(const store::Playground& row, int64_t tail_lines, std::string* out) {
  kube::LogOptions o;
  o.container = kuberay::kVllmContainerName;
  if (tail_lines > 0) o.tail_lines = tail_lines;
  StatusOr<std::string> log = kube::Try([&] {
    return client_->PodLogs(options_.config.k8s_namespace, kuberay::PlaygroundObjectName(row.id),
                            o);
  });
  if (log.ok()) {
    *out = std::move(log).value();
    return Status::Ok();
  }
  if (log.status().code() == Code::kNotFound)
    return Status::Permanent(api_errors::kNotFound,
                             "the playground's pod is gone, and its log with it");
  return Status::Retryable("LogsUnavailable", log.status().message());
}

}  // namespace starforge::playground
