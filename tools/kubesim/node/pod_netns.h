// The kubelet's second pod network (`--pod-network netns`): a network namespace per pod, as a
// container runtime's pause sandbox plus the bridge CNI plugin make one. The pod's namespace has
// `lo` up and an `eth0` (one end of a veth pair whose other end is a port of a host bridge), a
// private address from its node's podCIDR and a default route via the bridge's address. Every
// container of the pod joins it (sandbox.h, SandboxSpec::netns). The host reaches pod addresses
// through the bridge; pods reach the host at the bridge's address (services the host binds to
// 127.0.0.1 are not reachable from pods: bind them to the bridge address or to every address).
//
// Made with iproute2's `ip` (the commands a CNI plugin's netlink calls amount to), named after
// this process's pid so that what a killed kubelet left behind is recognised and removed by the
// next one: bridge `ksbr<pid>`, namespaces `ks<pid>-<n>` (under /run/netns), host-side veths
// `ksv<pid>-<n>`. The loopback network (pod_network.h) stays the default: it costs nothing per
// pod, and kubesim runs hundreds.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace kubesim::node {

// An IPv4 prefix, e.g. 10.244.0.0/16 (addr is the network address, host byte order).
struct Cidr {
  uint32_t addr = 0;
  int prefix = 0;
  // The number of addresses it spans.
  uint64_t Size() const { return uint64_t{1} << (32 - prefix); }
  bool Contains(uint32_t ip) const;
  bool Overlaps(const Cidr& other) const;
  std::string ToString() const;
};

// Parses "a.b.c.d/n" (the network address: host bits must be zero). Throws
// std::invalid_argument naming the value.
Cidr ParseCidr(const std::string& text);
std::string FormatIp(uint32_t ip);

// The bridge's address in `cluster`: its first host address (10.244.0.1 for 10.244.0.0/16).
uint32_t GatewayOf(const Cidr& cluster);

// The podCIDR of the node at `index` (0-based) of an inventory in `cluster`: the /24s after the
// gateway's, 10.244.1.0/24, 10.244.2.0/24, … for 10.244.0.0/16 (a /24 each, as
// kube-controller-manager's default --node-cidr-mask-size; smaller clusters are halved). Throws
// std::invalid_argument when the cluster has no room for it.
Cidr NodePodCidr(const Cidr& cluster, int index);

class PodNetns {
 public:
  PodNetns() = default;
  ~PodNetns();
  PodNetns(const PodNetns&) = delete;
  PodNetns& operator=(const PodNetns&) = delete;

  // Removes what dead kubelets left behind (their bridges, namespaces and veths), checks that no
  // route of the host overlaps `cluster` (another kubesim-node's bridge, a real network), then
  // creates and brings up this process's bridge with the gateway address. Throws
  // std::runtime_error saying what to fix.
  void Open(const Cidr& cluster);
  // The bridge's address ("" before Open).
  std::string Gateway() const;

  // A namespace for `owner` (a pod uid), with an address from `pod_cidr` (the node's podCIDR;
  // must lie in the cluster range): the one it already has, else a new one. Returns its address;
  // NamespacePath names the namespace for setns(2).
  std::string Attach(const std::string& owner, const Cidr& pod_cidr);
  // /run/netns/<name> of `owner`'s namespace ("" when it has none).
  std::string NamespacePath(const std::string& owner);
  // Deletes `owner`'s namespace (and with it the veth pair). Its processes must be gone first.
  void Detach(const std::string& owner);
  // Detaches every pod and deletes the bridge (also done by the destructor).
  void Close();

 private:
  struct Attachment {
    uint32_t ip = 0;
    std::string netns, veth;
  };
  void SweepLeftovers();
  static void DeleteLinks(const Attachment& a);
  std::mutex mu_;
  bool open_ = false;
  Cidr cluster_;
  std::string bridge_;
  uint64_t next_id_ = 0;
  std::map<std::string, Attachment> by_owner_;
  std::set<uint32_t> used_;
  std::map<uint32_t, uint32_t> next_host_;  // per podCIDR (its network address): round-robin
};

}  // namespace kubesim::node
