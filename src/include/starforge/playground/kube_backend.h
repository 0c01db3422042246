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
#include "starforge/kube/client.h"
#include "starforge/kuberay/playground.h"
#include "starforge/playground/backend.h"

namespace starforge::playground {

struct KubeBackendOptions {
  config::Config config;
  kube::ClientConfig client;
  kube::ClientOptions client_options;
  fleet::Fleet* admission = nullptr;  // the kuberay fleet: Admit() of a one-machine JobSpec
};

class KubeBackend : public Backend {
 public:
  // Makes no request. Throws kube::ConfigError when the client configuration is unusable.
  explicit KubeBackend(KubeBackendOptions options);
  ~KubeBackend() override;

  std::string Kind() const override { return "kuberay"; }
  fleet::Admission Admit(const store::Playground& row, const Spec& spec) override;
  // Creates the Service, then the Pod; 409 on either = already created.
  Status Create(const store::Playground& row, const Spec& spec) override;
  // GET of the pod; when it is not ready, its events (and, unscheduled, nodes and pods) for
  // the diagnosis.
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
