// Playgrounds on the kuberay fleet's cluster: one Pod running `vllm serve` and one Service
// selecting it (kuberay/playground.h renders both), reached through kube-apiserver's
// services/proxy, so that neither users nor their browsers get cluster credentials or network
// access to the pod. Admission is the kuberay fleet's own (the playground as a one-machine job);
// a Pending pod gets the jobs' diagnosis (kuberay::DiagnosePod).
#pragma once

#include <memory>
#include <string>

#include "starforge/config/config.h"
#include "starforge/fleet/fleet.h"
#include "starforge/fleet/kuberay_fleet.h"
#include "starforge/kube/client.h"
#include "starforge/kuberay/playground.h"
#include "starforge/playground/backend.h"

namespace starforge::playground {

struct KubeBackendOptions {
  config::Config config;
  kube::ClientConfig client;
  kube::ClientOptions client_options;
  fleet::Fleet* admission = nullptr;  // the kuberay fleet: Admit() of a one-machine JobSpec
  // The kuberay fleet's informers: the pod, its events (and nodes) are read from their cache;
  // null, not synced yet, or the pod not (yet) in it: one GET (and a list of events) instead.
  const fleet::KubeRayFleet* cache = nullptr;
};

class KubeBackend : public Backend {
 public:
  // Makes no request. `options.client` must pass kube::CheckClientConfig.
  explicit KubeBackend(KubeBackendOptions options);
  ~KubeBackend() override;

  std::string Kind() const override { return "kuberay"; }
  fleet::Admission Admit(const store::Playground& row, const Spec& spec) override;
  // Creates the Service, then the Pod; 409 on either = already created.
  Status Create(const store::Playground& row, const Spec& spec) override;
  // The pod; when it is not ready, its events (and, unscheduled, nodes and pods) for the
  // diagnosis. From the informers' cache when there is one (no request), else from the server.
  Observation Observe(const store::Playground& row, const Spec& spec) override;
  Status Delete(const store::Playground& row) override;
  ProxyReply Proxy(const store::Playground& row, const ProxyCall& call,
                   const std::function<bool(std::string_view)>& on_data,
                   const std::atomic<bool>* stop) override;
  Status Logs(const store::Playground& row, int64_t tail_lines, std::string* out) override;
  int64_t ApiRequests() const override;

  // The Pod and Service of `row` as they would be created (pure; `forge playground` tests).
  kuberay::PlaygroundRender RenderInput(const store::Playground& row, const Spec& spec) const;

 private:
  KubeBackendOptions options_;
  std::unique_ptr<kube::Client> client_;
};

}  // namespace starforge::playground
