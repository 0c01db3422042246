// A container's environment, command line and volumes as the kubelet computes them
// (pkg/kubelet/kubelet_pods.go makeEnvironmentVariables, expansion.go, the volume plugins),
// over plain Pod JSON and a lookup of ConfigMaps, Secrets and PersistentVolumeClaims.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kubesim::node {

// Reads an object: kind is "configmaps", "secrets" or "persistentvolumeclaims". nullopt = not
// found; other failures throw (the caller retries later).
using ObjectLookup = std::function<std::optional<nlohmann::json>(
    const std::string& kind, const std::string& ns, const std::string& name)>;

// A configuration error the kubelet reports as CreateContainerConfigError with this message,
// e.g. `configmap "x" not found`, `couldn't find key k in Secret ns/s`.
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Values the kubelet knows about the running pod, for fieldRef.
struct PodFacts {
  std::string pod_ip;
  std::string host_ip;
};

// The container's environment in order (envFrom, then env; later names override earlier ones,
// keeping the first position), with $(VAR) references expanded against what precedes them.
// Throws ConfigError.
std::vector<std::pair<std::string, std::string>> ContainerEnv(const nlohmann::json& pod,
                                                              const nlohmann::json& container,
                                                              const PodFacts& facts,
                                                              const ObjectLookup& lookup);

// Kubernetes' $(VAR) expansion (third_party/forked/golang/expansion): $(NAME) is replaced when
// NAME is in `env`, left as is otherwise; $$ is an escaped $.
std::string ExpandVars(const std::string& text, const std::map<std::string, std::string>& env);

// command + args after expansion. Empty when the container has no command (kubesim has no image
// metadata to take a default ENTRYPOINT/CMD from).
std::vector<std::string> ContainerArgv(const nlohmann::json& container,
                                       const std::map<std::string, std::string>& env);

// Decoded Secret/ConfigMap payloads: data (ConfigMap: text; Secret: base64) and binaryData.
std::map<std::string, std::string> ConfigMapData(const nlohmann::json& cm);
std::map<std::string, std::string> SecretData(const nlohmann::json& secret);

}  // namespace kubesim::node
