// kubesim's pod network, without network namespaces: every pod gets a loopback address of its own
// (127.N.B.C, from 127.N.0.1 up; Linux routes all of 127/8 to `lo`) as status.podIP, its
// processes are told it in KUBESIM_POD_IP and bind there, and name resolution goes through a
// per-pod /etc/hosts that maps service names to the address of a pod behind them. The same
// endpoint choice serves the API server's service proxy. Pure functions over Pod/Service JSON.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kubesim::node {

// The pod's Ready condition is True.
bool PodIsReady(const nlohmann::json& pod);

// Does the service's (non-empty) spec.selector select `pod` (same namespace assumed)?
bool SelectorSelects(const nlohmann::json& service, const nlohmann::json& pod);

// The pod behind `service` among `pods` (of the service's namespace), or nullptr: a selected pod
// that has a podIP, is Running and not being deleted, and is Ready — or merely running when the
// service sets publishNotReadyAddresses (as the Endpoints controller publishes not-ready
// addresses then). Several candidates: the oldest (creationTimestamp, then name) wins, so the
// choice is stable. A service without a selector has no endpoints here.
const nlohmann::json* PickEndpoint(const nlohmann::json& service,
                                   const std::vector<const nlohmann::json*>& pods);

// The container port a service port reaches on `pod`: targetPort as a number, a named container
// port looked up in the pod's containers, or `port` when targetPort is absent. -1 when a named
// port is not declared by the pod.
int64_t ResolveTargetPort(const nlohmann::json& service_port, const nlohmann::json& pod);

// One service's names and address, for /etc/hosts.
struct ServiceAddress {
  std::string ns;
  std::string name;
  std::string ip;
};

// The service lines of /etc/hosts for pods of namespace `ns`: every service of `ns` under
// `<svc>`, and of every namespace under `<svc>.<ns>`, `<svc>.<ns>.svc` and
// `<svc>.<ns>.svc.cluster.local` (computed once per namespace, shared by its pods).
std::string RenderServiceLines(const std::string& ns, const std::vector<ServiceAddress>& services);

// The /etc/hosts of a pod: `localhost` (and the pod's hostname) resolve to the pod's own address
// — inside a real pod localhost is the pod itself — then `service_lines`.
std::string RenderHosts(const nlohmann::json& pod, const std::string& pod_ip,
                        const std::string& service_lines);

// Hands out pod addresses 127.N.0.1, 127.N.0.2, … of one /16 block N; a released address is
// reused (lowest first). Thread-safe.
class IpPool {
 public:
  // Block `block` (10..254): 127.<block>.0.1 up.
  explicit IpPool(uint32_t block = 10) : block_(block) {}
  // The address of `owner` (a pod uid): the one it already holds, else the lowest free one.
  std::string Acquire(const std::string& owner);
  void Release(const std::string& owner);

 private:
  uint32_t block_;
  std::mutex mu_;
  std::map<std::string, uint32_t> by_owner_;
  std::set<uint32_t> used_;
};

// Claims a /16 block of 127/8 that no other kubesim process on this machine uses, so that
// kubesims running side by side (parallel tests) never give two pods the same address: an
// exclusive flock on <lock_dir>/<N>.lock for the first free N of 10, 11, …, 254, held while the
// returned descriptor is open (a crashed kubesim frees it). Returns {N, fd}; {10, -1} when every
// block is taken or locking fails (the caller then shares block 10).
std::pair<uint32_t, int> ClaimPodNetworkBlock(const std::string& lock_dir);

}  // namespace kubesim::node
