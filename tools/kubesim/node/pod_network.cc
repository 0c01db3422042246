#include "node/pod_network.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <tuple>

#include "starforge/common/json_read.h"

namespace kubesim::node {

using nlohmann::json;

namespace {

// Never-throwing reads (common/json_read.h); Obj is this file's name for Field.
constexpr auto& Obj = starforge::json_read::Field;
using starforge::json_read::Str;

}  // namespace

bool PodIsReady(const json& pod) {
  const json& conds = Obj(Obj(pod, "status"), "conditions");
  if (!conds.is_array()) return false;
  for (const auto& c : conds) {
    if (Str(c, "type") == "Ready") return Str(c, "status") == "True";
  }
  return false;
}

bool SelectorSelects(const json& service, const json& pod) {
  const json& selector = Obj(Obj(service, "spec"), "selector");
  if (!selector.is_object() || selector.empty()) return false;
  const json& labels = Obj(Obj(pod, "metadata"), "labels");
  for (const auto& [k, v] : selector.items()) {
    if (!labels.is_object() || !labels.contains(k) || labels[k] != v) return false;
  }
  return true;
}

const json* PickEndpoint(const json& service, const std::vector<const json*>& pods) {
  const bool not_ready_ok = Obj(Obj(service, "spec"), "publishNotReadyAddresses") == json(true);
  const json* best = nullptr;
  auto order = [](const json* p) {
    return std::make_tuple(Str(Obj(*p, "metadata"), "creationTimestamp"),
                           Str(Obj(*p, "metadata"), "name"));
  };
  for (const json* p : pods) {
    if (!SelectorSelects(service, *p)) continue;
    const json& status = Obj(*p, "status");
    if (Str(status, "podIP").empty() || Str(status, "phase") != "Running") continue;
    if (Obj(*p, "metadata").contains("deletionTimestamp")) continue;
    if (!not_ready_ok && !PodIsReady(*p)) continue;
    if (best == nullptr || order(p) < order(best)) best = p;
  }
  return best;
}

int64_t ResolveTargetPort(const json& service_port, const json& pod) {
  const json& target = Obj(service_port, "targetPort");
  if (target.is_number_integer()) return target.get<int64_t>();
  if (target.is_string() && !target.get<std::string>().empty()) {
    const std::string name = target.get<std::string>();
    if (name.find_first_not_of("0123456789") == std::string::npos) return std::stoll(name);
    const json& containers = Obj(Obj(pod, "spec"), "containers");
    if (containers.is_array()) {
      for (const auto& c : containers) {
        const json& ports = Obj(c, "ports");
        if (!ports.is_array()) continue;
        for (const auto& p : ports) {
          if (Str(p, "name") == name && Obj(p, "containerPort").is_number_integer()) {
            return p["containerPort"].get<int64_t>();
          }
        }
      }
    }
    return -1;
  }
  const json& port = Obj(service_port, "port");
  return port.is_number_integer() ? port.get<int64_t>() : -1;
}

std::string RenderServiceLines(const std::string& ns, const std::vector<ServiceAddress>& services) {
  std::vector<ServiceAddress> sorted = services;
  std::sort(sorted.begin(), sorted.end(), [](const ServiceAddress& a, const ServiceAddress& b) {
    return std::tie(a.ns, a.name) < std::tie(b.ns, b.name);
  });
  std::string out;
  for (const auto& s : sorted) {
    if (s.ip.empty()) continue;
    std::string line = s.ip + "\t";
    if (s.ns == ns) line += s.name + " ";
    line += s.name + "." + s.ns + " " + s.name + "." + s.ns + ".svc " + s.name + "." + s.ns +
            ".svc.cluster.local";
    out += line + "\n";
  }
  return out;
}

std::string RenderHosts(const json& pod, const std::string& pod_ip,
                        const std::string& service_lines, const std::string& localhost_ip) {
  const json& md = Obj(pod, "metadata");
  const json& spec = Obj(pod, "spec");
  const std::string ns = Str(md, "namespace");
  std::string hostname = Str(spec, "hostname");
  if (hostname.empty()) hostname = Str(md, "name").substr(0, 63);
  std::string out =
      "# Kubernetes-managed hosts file (kubesim: localhost is this pod's own address).\n";
  out += (localhost_ip.empty() ? pod_ip : localhost_ip) + "\tlocalhost\n";
  out += "::1\tip6-localhost ip6-loopback\n";
  out += "fe00::0\tip6-localnet\n";
  out += "fe00::0\tip6-mcastprefix\n";
  out += "fe00::1\tip6-allnodes\n";
  out += "fe00::2\tip6-allrouters\n";
  std::string self = pod_ip + "\t" + hostname;
  const std::string subdomain = Str(spec, "subdomain");
  if (!subdomain.empty()) {
    self += "\t" + hostname + "." + subdomain + "." + ns + ".svc.cluster.local";
  }
  return out + self + "\n" + service_lines;
}

namespace {

// A TCP or UDP socket of this network namespace has a local address in 127.<b>.0.0/16 (a program
// that does not claim blocks, e.g. an older kubesim, is using it).
bool BlockInUse(uint32_t b) {
  for (const char* table : {"/proc/net/tcp", "/proc/net/udp"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream ss(line);
      std::string slot, local;
      ss >> slot >> local;
      const auto colon = local.find(':');
      if (colon != 8) continue;
      // The kernel prints the address's network-order bytes as a host-order word.
      const auto word = static_cast<uint32_t>(std::stoul(local.substr(0, 8), nullptr, 16));
      unsigned char bytes[4];
      std::memcpy(bytes, &word, sizeof bytes);
      if (bytes[0] == 127 && bytes[1] == b) return true;
    }
  }
  return false;
}

}  // namespace

IpPool::~IpPool() {
  if (block_fd_ >= 0) close(block_fd_);
}

void IpPool::ClaimBlock() {
  std::lock_guard<std::mutex> lock(mu_);
  ClaimBlockLocked();
}

void IpPool::ClaimBlockLocked() {
  if (block_fd_ >= 0) return;
  for (uint32_t b = 10; b <= 254; ++b) {
    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) break;
    const std::string name = "kubesim-pod-network/127." + std::to_string(b);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    // An abstract name: sun_path starts with a NUL byte and the length says where it ends.
    std::memcpy(addr.sun_path + 1, name.data(), name.size());
    const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
    if (bind(fd, reinterpret_cast<const sockaddr*>(&addr), len) == 0) {
      if (BlockInUse(b)) {
        close(fd);
        continue;
      }
      block_fd_ = fd;
      block_ = b;
      return;
    }
    const int err = errno;
    close(fd);
    if (err != EADDRINUSE) {
      throw std::runtime_error("kubesim: claiming the pod address block 127." + std::to_string(b) +
                               ".0.0/16: " + std::strerror(err));
    }
  }
  throw std::runtime_error(
      "kubesim: every pod address block 127.10.0.0/16 .. 127.254.0.0/16 is held by another "
      "kubesim process on this host; stop some of them");
}

std::string IpPool::Block() {
  std::lock_guard<std::mutex> lock(mu_);
  return block_fd_ < 0 ? "" : "127." + std::to_string(block_);
}

std::string IpPool::Acquire(const std::string& owner) {
  std::lock_guard<std::mutex> lock(mu_);
  ClaimBlockLocked();
  uint32_t n = 0;
  auto it = by_owner_.find(owner);
  if (it != by_owner_.end()) {
    n = it->second;
  } else {
    // Host parts 0.1 .. 255.254 of the block, skipping .0 and .255 in the last octet; round-robin
    // from the one after the last handed out.
    auto usable = [this](uint32_t h) {
      return h > 0 && h < 0x10000 && (h & 0xff) != 0 && (h & 0xff) != 255 && used_.count(h) == 0;
    };
    uint32_t h = next_;
    for (uint32_t tries = 0; !usable(h); ++tries) {
      if (tries > 0x10000) throw std::runtime_error("kubesim: no free pod address left");
      h = (h + 1) & 0xffff;
    }
    n = h;
    next_ = (h + 1) & 0xffff;
    used_.insert(n);
    by_owner_[owner] = n;
  }
  return "127." + std::to_string(block_) + "." + std::to_string((n >> 8) & 0xff) + "." +
         std::to_string(n & 0xff);
}

void IpPool::Release(const std::string& owner) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_owner_.find(owner);
  if (it == by_owner_.end()) return;
  used_.erase(it->second);
  by_owner_.erase(it);
}

}  // namespace kubesim::node
