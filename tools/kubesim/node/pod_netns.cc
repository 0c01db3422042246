#include "node/pod_netns.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace kubesim::node {

namespace {

// Runs `ip ARGS…` (iproute2, found on PATH); returns its output, or throws with the command and
// what it printed.
std::string Ip(const std::vector<std::string>& args) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + strerror(errno));
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  std::vector<std::string> full = {"ip"};
  full.insert(full.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : full)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, "ip", &fa, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  close(fds[1]);
  std::string cmd;
  for (const auto& a : full)
    cmd += (cmd.empty() ? "" : " ") + a;
  if (rc != 0) {
    close(fds[0]);
    throw std::runtime_error("cannot run `" + cmd + "`: " + strerror(rc) +
                             " (--pod-network netns needs iproute2's ip on PATH)");
  }
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = read(fds[0], buf, sizeof buf);
    if (n > 0) {
      out.append(buf, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    while (!out.empty() && out.back() == '\n')
      out.pop_back();
    throw std::runtime_error("`" + cmd + "` failed: " + out);
  }
  return out;
}

void IpQuiet(const std::vector<std::string>& args) {
  try {
    Ip(args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kubesim: kubelet: %s\n", e.what());
  }
}

// The pid in a name "<prefix><pid>[-…]" when that process is gone, else 0.
pid_t DeadOwner(const std::string& name, const std::string& prefix) {
  if (name.rfind(prefix, 0) != 0) return 0;
  const std::string rest = name.substr(prefix.size());
  const auto end = rest.find_first_not_of("0123456789");
  if (end == 0 || (end != std::string::npos && rest[end] != '-')) return 0;
  const pid_t pid = static_cast<pid_t>(std::stol(rest.substr(0, end)));
  if (pid <= 0 || pid == getpid()) return 0;
  return (kill(pid, 0) != 0 && errno == ESRCH) ? pid : 0;
}

// A new veth's carrier reaches the bridge and the pod's eth0 through the kernel's linkwatch
// work, which may run up to a second later; until then the bridge port is disabled and eth0 has
// no queue, so the pod's first packets could vanish. A CNI plugin's ADD returns a usable interface:
// wait until the bridge port forwards (brport/state 3 = BR_STATE_FORWARDING) and eth0's operational
// state is UP.
void WaitUsable(const std::string& veth, const std::string& netns) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::string state, link;
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream in("/sys/class/net/" + veth + "/brport/state");
    state.clear();
    if (in >> state && state == "3") {
      link = Ip({"-n", netns, "-o", "link", "show", "eth0"});
      if (link.find(" state UP ") != std::string::npos) return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  throw std::runtime_error("the pod interface " + veth +
                           " did not come up within 10 s (bridge port state " +
                           (state.empty() ? "unknown" : state) + ", eth0: " + link + ")");
}

// Link names of the host ("ip -o link" lines: "N: name@peer: <…>").
std::vector<std::string> LinkNames() {
  std::vector<std::string> names;
  std::istringstream in(Ip({"-o", "link", "show"}));
  std::string line;
  while (std::getline(in, line)) {
    const auto a = line.find(": ");
    if (a == std::string::npos) continue;
    std::string name = line.substr(a + 2);
    name = name.substr(0, name.find_first_of(":@"));
    names.push_back(name);
  }
  return names;
}

}  // namespace

bool Cidr::Contains(uint32_t ip) const {
  const uint32_t mask = prefix == 0 ? 0 : ~uint32_t{0} << (32 - prefix);
  return (ip & mask) == addr;
}

bool Cidr::Overlaps(const Cidr& other) const {
  return prefix <= other.prefix ? Contains(other.addr) : other.Contains(addr);
}

std::string Cidr::ToString() const {
  return FormatIp(addr) + "/" + std::to_string(prefix);
}

std::string FormatIp(uint32_t ip) {
  return std::to_string(ip >> 24) + "." + std::to_string((ip >> 16) & 0xff) + "." +
         std::to_string((ip >> 8) & 0xff) + "." + std::to_string(ip & 0xff);
}

Cidr ParseCidr(const std::string& text) {
  const auto slash = text.find('/');
  in_addr a{};
  const std::string host = text.substr(0, slash);
  if (slash == std::string::npos || inet_pton(AF_INET, host.c_str(), &a) != 1 ||
      text.find_first_not_of("0123456789", slash + 1) != std::string::npos ||
      slash + 1 == text.size() || text.size() - slash > 3) {
    throw std::invalid_argument("'" + text + "' is not an IPv4 CIDR such as 10.244.0.0/16");
  }
  Cidr c;
  c.addr = ntohl(a.s_addr);
  c.prefix = std::stoi(text.substr(slash + 1));
  if (c.prefix < 8 || c.prefix > 30) {
    throw std::invalid_argument("'" + text + "': the prefix length must be 8..30");
  }
  if (!c.Contains(c.addr) || (c.addr & ~(~uint32_t{0} << (32 - c.prefix))) != 0) {
    throw std::invalid_argument("'" + text + "' has host bits set; the network is " +
                                FormatIp(c.addr & (~uint32_t{0} << (32 - c.prefix))) + "/" +
                                std::to_string(c.prefix));
  }
  if ((c.addr >> 24) == 127) {
    throw std::invalid_argument("'" + text + "' is loopback; pick a private range (10.244.0.0/16)");
  }
  return c;
}

uint32_t GatewayOf(const Cidr& cluster) {
  return cluster.addr + 1;
}

Cidr NodePodCidr(const Cidr& cluster, int index) {
  // A /24 per node, or half the cluster's prefix length's room for small clusters.
  const int prefix = cluster.prefix <= 16 ? 24 : std::min(30, cluster.prefix + 4);
  const uint64_t count = uint64_t{1} << (prefix - cluster.prefix);
  // Subnet 0 holds the gateway.
  if (index < 0 || static_cast<uint64_t>(index) + 1 >= count) {
    throw std::invalid_argument("--pod-cidr " + cluster.ToString() + " has no room for node #" +
                                std::to_string(index + 1) + " (a /" + std::to_string(prefix) +
                                " each); pick a larger range");
  }
  Cidr c;
  c.prefix = prefix;
  c.addr =
      cluster.addr + static_cast<uint32_t>((static_cast<uint64_t>(index) + 1) << (32 - prefix));
  return c;
}

void PodNetns::DeleteLinks(const Attachment& a) {
  // The veth pair first, from the host's side: a namespace lives on while anything still holds
  // it (once seen here with no process, mount or fd left in it), and its veth would stay with it.
  IpQuiet({"link", "delete", a.veth});
  IpQuiet({"netns", "delete", a.netns});
}

PodNetns::~PodNetns() {
  Close();
}

void PodNetns::SweepLeftovers() {
  // Namespaces first: deleting one deletes its end of a veth pair, and so the pair.
  if (DIR* d = opendir("/run/netns")) {
    std::vector<std::string> dead;
    while (dirent* e = readdir(d)) {
      if (DeadOwner(e->d_name, "ks") != 0) dead.push_back(e->d_name);
    }
    closedir(d);
    for (const auto& n : dead)
      IpQuiet({"netns", "delete", n});
  }
  for (const auto& link : LinkNames()) {
    if (DeadOwner(link, "ksv") != 0 || DeadOwner(link, "ksbr") != 0) {
      IpQuiet({"link", "delete", link});
    }
  }
}

void PodNetns::Open(const Cidr& cluster) {
  std::lock_guard<std::mutex> lock(mu_);
  if (open_) return;
  SweepLeftovers();
  std::istringstream routes(Ip({"-4", "-o", "route", "show", "table", "all"}));
  std::string line;
  while (std::getline(routes, line)) {
    std::istringstream words(line);
    std::string dst;
    words >> dst;
    if (dst == "local" || dst == "broadcast" || dst == "unreachable") words >> dst;
    if (dst == "default" || dst.empty()) continue;
    if (dst.find('/') == std::string::npos) dst += "/32";
    Cidr r;
    try {
      const auto slash = dst.find('/');
      in_addr a{};
      if (inet_pton(AF_INET, dst.substr(0, slash).c_str(), &a) != 1) continue;
      r.addr = ntohl(a.s_addr);
      r.prefix = std::stoi(dst.substr(slash + 1));
    } catch (const std::exception&) {
      continue;
    }
    if ((r.addr >> 24) == 127) continue;
    if (r.Overlaps(cluster)) {
      throw std::runtime_error("--pod-cidr " + cluster.ToString() +
                               " overlaps a route of this host (`" + line +
                               "`): another kubesim-node, or a real network; pick another range");
    }
  }
  bridge_ = "ksbr" + std::to_string(getpid());
  const std::string gw = FormatIp(GatewayOf(cluster)) + "/" + std::to_string(cluster.prefix);
  try {
    Ip({"link", "add", bridge_, "type", "bridge"});
    Ip({"addr", "add", gw, "dev", bridge_});
    Ip({"link", "set", bridge_, "up"});
  } catch (...) {
    IpQuiet({"link", "delete", bridge_});
    throw;
  }
  cluster_ = cluster;
  open_ = true;
}

std::string PodNetns::Gateway() const {
  return open_ ? FormatIp(GatewayOf(cluster_)) : "";
}

std::string PodNetns::Attach(const std::string& owner, const Cidr& pod_cidr) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!open_) throw std::runtime_error("the pod network is not set up");
  if (auto it = by_owner_.find(owner); it != by_owner_.end()) return FormatIp(it->second.ip);
  if (!cluster_.Contains(pod_cidr.addr) || pod_cidr.prefix < cluster_.prefix) {
    throw std::runtime_error("the node's podCIDR " + pod_cidr.ToString() +
                             " is outside --pod-cidr " + cluster_.ToString());
  }
  // Round-robin through the podCIDR, skipping its network and broadcast addresses and the
  // gateway, as the host-local IPAM plugin does.
  const uint32_t size = static_cast<uint32_t>(pod_cidr.Size());
  uint32_t& next = next_host_[pod_cidr.addr];
  uint32_t ip = 0;
  for (uint32_t tries = 0; tries < size; ++tries) {
    const uint32_t h = (next + tries) % size;
    const uint32_t candidate = pod_cidr.addr + h;
    if (h == 0 || h == size - 1 || candidate == GatewayOf(cluster_) || used_.count(candidate)) {
      continue;
    }
    ip = candidate;
    next = (h + 1) % size;
    break;
  }
  if (ip == 0) throw std::runtime_error("no free pod address left in " + pod_cidr.ToString());
  const std::string id = std::to_string(getpid()) + "-" + std::to_string(next_id_++ % 100000);
  Attachment a;
  a.ip = ip;
  a.netns = "ks" + id;
  a.veth = ("ksv" + id).substr(0, 15);  // IFNAMSIZ - 1
  try {
    Ip({"netns", "add", a.netns});
    Ip({"link", "add", a.veth, "type", "veth", "peer", "name", "eth0", "netns", a.netns});
    Ip({"link", "set", a.veth, "master", bridge_, "up"});
    Ip({"-n", a.netns, "addr", "add", FormatIp(ip) + "/" + std::to_string(cluster_.prefix), "dev",
        "eth0"});
    Ip({"-n", a.netns, "link", "set", "lo", "up"});
    Ip({"-n", a.netns, "link", "set", "eth0", "up"});
    Ip({"-n", a.netns, "route", "add", "default", "via", FormatIp(GatewayOf(cluster_))});
    WaitUsable(a.veth, a.netns);
  } catch (...) {
    IpQuiet({"netns", "delete", a.netns});
    throw;
  }
  used_.insert(ip);
  by_owner_[owner] = a;
  return FormatIp(ip);
}

std::string PodNetns::NamespacePath(const std::string& owner) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_owner_.find(owner);
  return it == by_owner_.end() ? "" : "/run/netns/" + it->second.netns;
}

void PodNetns::Detach(const std::string& owner) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_owner_.find(owner);
  if (it == by_owner_.end()) return;
  DeleteLinks(it->second);
  used_.erase(it->second.ip);
  by_owner_.erase(it);
}

void PodNetns::Close() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!open_) return;
  for (const auto& [owner, a] : by_owner_)
    DeleteLinks(a);
  by_owner_.clear();
  used_.clear();
  IpQuiet({"link", "delete", bridge_});
  open_ = false;
}

}  // namespace kubesim::node
