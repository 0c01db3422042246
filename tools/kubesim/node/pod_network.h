// kubesim's pod network, without network namespaces: every pod gets a loopback address of its own
// (127.B.x.y in a block of this kubesim's own, see IpPool; Linux routes all of 127/8 to `lo`) as
// status.podIP, its processes are told it in KUBESIM_POD_IP and bind there, and name resolution
// goes through a per-pod /etc/hosts that maps service names to the address of a pod behind them.
// The same endpoint choice serves the API server's service proxy. Pure functions over Pod/Service
// JSON.
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
// — inside a real pod localhost is the pod itself — then `service_lines`. `localhost_ip`, when
// given, is what `localhost` resolves to instead (127.0.0.1 in a pod's own network namespace).
std::string RenderHosts(const nlohmann::json& pod, const std::string& pod_ip,
                        const std::string& service_lines, const std::string& localhost_ip = "");

// Hands out pod addresses from a block 127.B.0.0/16 that this process holds alone among the
// kubesim processes of the host (several run at once under ctest -j, or a test beside a bench):
// with a shared range, a pod of one kubesim would reach a pod of another at the same address.
// Addresses go round-robin through the block, as the host-local CNI plugin allocates, so a
// released address is not handed out again while stale /etc/hosts lines may still name it.
// Thread-safe.
class IpPool {
 public:
  IpPool() = default;
  ~IpPool();
  IpPool(const IpPool&) = delete;
  IpPool& operator=(const IpPool&) = delete;

  // Claims the lowest block B >= 10 that no other live kubesim holds (an abstract unix socket
  // "kubesim-pod-network/127.B" per block, bound for this process's life: the kernel frees it at
  // exit, and its scope, the network namespace, is that of the loopback addresses) and in which
  // no TCP/UDP socket has an address. Throws std::runtime_error when every block is taken.
  // Acquire claims one itself if needed.
  void ClaimBlock();
  // "127.B" once claimed, else "".
  std::string Block();
  // The address of `owner` (a pod uid): the one it already holds, else the next free one.
  std::string Acquire(const std::string& owner);
  void Release(const std::string& owner);

 private:
  void ClaimBlockLocked();
  std::mutex mu_;
  int block_fd_ = -1;
  uint32_t block_ = 0;  // B
  uint32_t next_ = 1;   // host part (16 bits) tried first
  std::map<std::string, uint32_t> by_owner_;
  std::set<uint32_t> used_;
};

}  // namespace kubesim::node
