#include "node/kubelet.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <httplib.h>

#include "node/sandbox.h"
#include "starforge/common/atomic_file.h"
#include "starforge/common/format.h"
#include "starforge/common/json_read.h"
#include "starforge/common/quantity.h"

extern char** environ;

#ifndef KUBESIM_RAY_BIN_DIR
#define KUBESIM_RAY_BIN_DIR ""
#endif
#ifndef KUBESIM_REAL_RAY_BIN_DIR
#define KUBESIM_REAL_RAY_BIN_DIR ""
#endif

namespace kubesim::node {

using nlohmann::json;
namespace kube = starforge::kube;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

// Never-throwing reads (common/json_read.h); Obj is this file's name for Field.
constexpr auto& Obj = starforge::json_read::Field;
using starforge::json_read::Int;
using starforge::json_read::Str;

std::string Now() {
  return starforge::NowRfc3339();
}

// Go's time.Duration.String() for whole milliseconds: "0s", "500ms", "10s", "1m20s", "5m0s".
std::string GoDuration(milliseconds d) {
  int64_t ms = d.count();
  if (ms == 0) return "0s";
  if (ms < 1000) return std::to_string(ms) + "ms";
  std::string out;
  const int64_t h = ms / 3600000;
  ms %= 3600000;
  const int64_t m = ms / 60000;
  ms %= 60000;
  if (h > 0) out += std::to_string(h) + "h";
  if (h > 0 || m > 0) out += std::to_string(m) + "m";
  std::string secs = std::to_string(ms / 1000);
  if (ms % 1000 != 0) {
    char frac[8];
    std::snprintf(frac, sizeof frac, "%03lld", static_cast<long long>(ms % 1000));
    std::string f = frac;
    while (!f.empty() && f.back() == '0')
      f.pop_back();
    secs += "." + f;
  }
  return out + secs + "s";
}

// format.Pod: "name_namespace(uid)".
std::string FormatPod(const json& pod) {
  const json& md = Obj(pod, "metadata");
  return Str(md, "name") + "_" + Str(md, "namespace") + "(" + Str(md, "uid") + ")";
}

std::string RandomHex(size_t n) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < n; ++i)
    out += hex[rng() % 16];
  return out;
}

// Rewrites a file in place (same inode): it is bind-mounted into running containers. Not
// truncated first: a pod resolving a name meanwhile (its /etc/hosts) would read an empty file and
// fail with "Name or service not known"; the new text goes over the old, then the rest is cut.
void WriteInPlace(const std::string& path, const std::string& text) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return;
  size_t off = 0;
  while (off < text.size()) {
    const ssize_t n = pwrite(fd, text.data() + off, text.size() - off, static_cast<off_t>(off));
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
  if (off == text.size() && ftruncate(fd, static_cast<off_t>(off)) != 0) {
    // Left longer than the text: the old tail stays, which a resolver reads as more lines.
  }
  close(fd);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r'))
    s.pop_back();
  return s;
}

// A TCP connection to host:port (IPv4) succeeds within `timeout`.
bool TcpConnects(const std::string& host, int port, milliseconds timeout) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) return false;
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  bool ok = false;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    ok = true;
  } else if (errno == EINPROGRESS) {
    pollfd pfd{fd, POLLOUT, 0};
    if (poll(&pfd, 1, static_cast<int>(timeout.count())) == 1) {
      int err = 0;
      socklen_t len = sizeof err;
      ok = getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0;
    }
  }
  close(fd);
  return ok;
}

bool IsTerminalPhase(const std::string& phase) {
  return phase == "Succeeded" || phase == "Failed";
}

int ExitCode(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return 255;
}

int TerminatedCode(const json& state) {
  return static_cast<int>(Int(Obj(state, "terminated"), "exitCode", 0));
}

// The environment kubesim passes from its own to every container, standing in for an image's:
// PATH and locale settings and pyenv's, so the host's tools work as they do for kubesim.
std::vector<std::pair<std::string, std::string>> BaseEnv() {
  std::vector<std::pair<std::string, std::string>> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string kv = *e;
    const auto eq = kv.find('=');
    if (eq == std::string::npos) continue;
    const std::string k = kv.substr(0, eq);
    if (k == "PATH" || k == "LANG" || k == "TZ" || k.rfind("LC_", 0) == 0 ||
        k.rfind("PYENV_", 0) == 0) {
      out.emplace_back(k, kv.substr(eq + 1));
    }
  }
  return out;
}

// Whether resourceVersion `a` is older than `b`. kubesim's (and etcd's) are increasing integers
// shared by all resources; anything else is never older.
bool OlderRv(const std::string& a, const std::string& b) {
  char* end_a = nullptr;
  char* end_b = nullptr;
  const unsigned long long x = std::strtoull(a.c_str(), &end_a, 10);
  const unsigned long long y = std::strtoull(b.c_str(), &end_b, 10);
  if (a.empty() || b.empty() || *end_a != '\0' || *end_b != '\0') return false;
  return x < y;
}

kube::InformerOptions InformerFor(const kube::ResourceRef& r) {
  kube::InformerOptions o;
  o.resource = r;
  return o;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Lifecycle

Kubelet::~Kubelet() {
  Stop();
}

void Kubelet::Start(const controllers::ControllerContext& ctx) {
  const auto& f = ctx.flags;
  if (const std::string mode = f.Value("pods", "process"); mode != "process") {
    if (mode != "fake")
      throw std::invalid_argument("--pods wants process or fake, got '" + mode + "'");
    fake_ = std::make_unique<FakePods>();
    fake_->Start(ctx);
    return;
  }
  opts_.state_dir = f.Value("kubelet-dir");
  opts_.pv_root = f.Value("pv-root");
  const std::string ray = f.Value("ray", "emulator");
  if (ray != "emulator" && ray != "real") {
    throw std::invalid_argument("--ray wants emulator or real, got '" + ray + "'");
  }
  opts_.real_ray = ray == "real";
  opts_.ray_bin_dir =
      f.Value("ray-bin-dir", opts_.real_ray ? KUBESIM_REAL_RAY_BIN_DIR : KUBESIM_RAY_BIN_DIR);
  if (opts_.real_ray && ::access((opts_.ray_bin_dir + "/ray").c_str(), X_OK) != 0) {
    throw std::invalid_argument("--ray real: no ray program in " + opts_.ray_bin_dir +
                                " (scripts/bootstrap installs Ray's virtual environment in "
                                "build/tools/ray-venv; or point --ray-bin-dir at one's bin)");
  }
  opts_.launcher = DefaultLauncherPath();
  if (!f.Value("images").empty()) opts_.images = ImagePolicy::Load(f.Value("images"));
  auto ms_flag = [&](const char* name, milliseconds fallback) {
    const std::string v = f.Value(name);
    if (v.empty()) return fallback;
    const long long n = std::stoll(v);
    if (n < 0) throw std::invalid_argument(std::string("--") + name + " wants a number >= 0");
    return milliseconds(n);
  };
  opts_.sync = ms_flag("kubelet-sync-ms", opts_.sync);
  opts_.backoff = ms_flag("kubelet-backoff-ms", opts_.backoff);
  opts_.backoff_cap = opts_.backoff * 30;
  opts_.probe_cap = ms_flag("kubelet-probe-max-ms", opts_.probe_cap);
  if (!f.Value("kubelet-pod-cpu-shares").empty()) {
    const int n = std::stoi(f.Value("kubelet-pod-cpu-shares"));
    if (n != 0 && (n < 2 || n > 262144)) {
      throw std::invalid_argument("--kubelet-pod-cpu-shares wants 0 (none) or 2..262144");
    }
    opts_.pod_cpu_shares = n;
  }
  if (opts_.sync.count() == 0) opts_.sync = milliseconds(1);
  if (opts_.state_dir.empty()) {
    std::string tmpl = (fs::temp_directory_path() / "kubesim-kubelet-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) {
      throw std::runtime_error(std::string("kubelet: cannot make a state dir: ") +
                               std::strerror(errno));
    }
    opts_.state_dir = tmpl;
    own_state_dir_ = true;
  }
  opts_.state_dir = fs::absolute(opts_.state_dir).lexically_normal().string();
  fs::create_directories(opts_.state_dir + "/pods");
  if (opts_.pv_root.empty()) opts_.pv_root = opts_.state_dir + "/pv";
  opts_.pv_root = fs::absolute(opts_.pv_root).lexically_normal().string();
  fs::create_directories(opts_.pv_root);
  sandbox_error_ = CheckSandboxSupport(opts_.launcher, opts_.state_dir + "/check");
  std::error_code ec;
  fs::remove_all(opts_.state_dir + "/check", ec);
  if (!sandbox_error_.empty()) {
    std::fprintf(stderr,
                 "kubesim: kubelet: containers cannot run here (%s); every pod bound to a node "
                 "will fail with this message\n",
                 sandbox_error_.c_str());
  }

  SetUpPodCgroup();
  const std::string network = f.Value("pod-network", "loopback");
  if (network != "loopback" && network != "netns") {
    throw std::invalid_argument("--pod-network wants loopback or netns, got '" + network + "'");
  }
  opts_.netns = network == "netns";
  if (!f.Value("pod-cidr").empty()) opts_.pod_cidr = f.Value("pod-cidr");
  opts_.cluster_hosts_file = f.Value("cluster-hosts-file");
  if (opts_.netns) {
    const Cidr cidr = ParseCidr(opts_.pod_cidr);
    net_.Open(cidr);
    std::fprintf(stderr,
                 "kubesim: kubelet: a network namespace per pod, addresses from %s (bridge "
                 "address %s)\n",
                 cidr.ToString().c_str(), net_.Gateway().c_str());
  } else {
    ips_.ClaimBlock();
    std::fprintf(stderr, "kubesim: kubelet: pod addresses from %s.0.0/16\n", ips_.Block().c_str());
  }
  if (!opts_.cluster_hosts_file.empty()) {
    host_hosts_ = ReadFile("/etc/hosts");
    if (!host_hosts_.empty() && host_hosts_.back() != '\n') host_hosts_ += "\n";
    WriteClusterHosts({});
  }

  client_ = ctx.make_client("kubelet");
  auto enqueue = [this](const json& obj) { queue_.Add(kube::Informer::KeyOf(obj)); };
  kube::InformerHandlers ph;
  ph.on_add = [this, enqueue](const json& o) {
    ViewPod(o, false);
    enqueue(o);
    MarkHostsDirty();
  };
  ph.on_update = [this, enqueue](const json&, const json& o) {
    ViewPod(o, false);
    enqueue(o);
    MarkHostsDirty();
  };
  ph.on_delete = [this, enqueue](const json& o) {
    ViewPod(o, true);
    enqueue(o);
    MarkHostsDirty();
  };
  pods_ = std::make_unique<kube::Informer>(*client_, InformerFor(kube::resources::kPods), ph);
  kube::InformerHandlers sh;
  sh.on_add = [this](const json& o) {
    ViewService(o, false);
    MarkHostsDirty();
  };
  sh.on_update = [this](const json&, const json& o) {
    ViewService(o, false);
    MarkHostsDirty();
  };
  sh.on_delete = [this](const json& o) {
    ViewService(o, true);
    MarkHostsDirty();
  };
  services_ =
      std::make_unique<kube::Informer>(*client_, InformerFor(kube::resources::kServices), sh);
  kube::InformerHandlers nh;
  nh.on_add = [this](const json& node) {
    // Pods bound to a node that did not exist yet become ours now.
    const std::string name = Str(Obj(node, "metadata"), "name");
    if (!pods_) return;
    for (const auto& [key, pod] : pods_->Snapshot()) {
      if (Str(Obj(pod, "spec"), "nodeName") == name) queue_.Add(key);
    }
  };
  nodes_ = std::make_unique<kube::Informer>(*client_, InformerFor(kube::resources::kNodes), nh);
  kube::InformerHandlers ch;
  ch.on_add = [this](const json& o) { ObjectChanged("configmaps", o); };
  ch.on_update = [this](const json&, const json& o) { ObjectChanged("configmaps", o); };
  configmaps_ =
      std::make_unique<kube::Informer>(*client_, InformerFor(kube::resources::kConfigMaps), ch);
  kube::InformerHandlers xh;
  xh.on_add = [this](const json& o) { ObjectChanged("secrets", o); };
  xh.on_update = [this](const json&, const json& o) { ObjectChanged("secrets", o); };
  secrets_ = std::make_unique<kube::Informer>(*client_, InformerFor(kube::resources::kSecrets), xh);
  nodes_->Start();
  configmaps_->Start();
  secrets_->Start();
  services_->Start();
  pods_->Start();
  for (int i = 0; i < 3; ++i)
    threads_.emplace_back([this] { Worker(); });
  threads_.emplace_back([this] { Monitor(); });
  threads_.emplace_back([this] { Prober(); });
  threads_.emplace_back([this] { HostsUpdater(); });
}

void Kubelet::Stop() {
  if (fake_) return fake_->Stop();
  if (stop_.exchange(true)) return;
  queue_.ShutDown();
  hosts_cv_.notify_all();
  if (pods_) pods_->Stop();
  if (services_) services_->Stop();
  if (nodes_) nodes_->Stop();
  if (configmaps_) configmaps_->Stop();
  if (secrets_) secrets_->Stop();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
  // kubesim is going away: no container outlives it.
  std::map<std::string, std::shared_ptr<Pod>> pods;
  {
    std::lock_guard<std::mutex> lock(mu_);
    pods.swap(pods_rt_);
  }
  for (auto& [key, p] : pods) {
    std::lock_guard<std::mutex> lock(p->mu);
    Teardown(*p);
  }
  net_.Close();
  RemovePodCgroup();
  if (own_state_dir_) {
    std::error_code ec;
    fs::remove_all(opts_.state_dir, ec);
  }
}

bool Kubelet::OwnsNode(const std::string& node) {
  return nodes_ && nodes_->Get(node).has_value();
}

// ---------------------------------------------------------------------------------------------
// Threads

void Kubelet::Worker() {
  while (auto key = queue_.Get()) {
    try {
      Reconcile(*key);
    } catch (const std::exception& e) {
      if (!stop_) {
        std::fprintf(stderr, "kubesim: kubelet: %s: %s\n", key->c_str(), e.what());
        queue_.AddAfter(*key, milliseconds(500));
      }
    }
    queue_.Done(*key);
  }
}

void Kubelet::Monitor() {
  while (!stop_) {
    std::vector<std::shared_ptr<Pod>> pods;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& [k, p] : pods_rt_)
        pods.push_back(p);
    }
    for (auto& p : pods) {
      bool changed = false;
      std::string key;
      {
        std::lock_guard<std::mutex> lock(p->mu);
        key = p->key;
        for (auto* list : {&p->inits, &p->mains}) {
          for (Container& c : *list) {
            if (c.pid <= 0 || c.exited) continue;
            if (c.ns_fd < 0) PinNamespace(c);
            int status = 0;
            const pid_t r = waitpid(c.pid, &status, WNOHANG);
            if (r == c.pid || (r < 0 && errno == ECHILD)) {
              c.exited = true;
              c.wait_status = r == c.pid ? status : (137 << 8);
              changed = true;
            }
          }
        }
      }
      if (changed) queue_.Add(key);
    }
    std::this_thread::sleep_for(milliseconds(20));
  }
}

void Kubelet::MarkHostsDirty() {
  {
    std::lock_guard<std::mutex> lock(hosts_mu_);
    hosts_dirty_ = true;
  }
  hosts_cv_.notify_all();
}

void Kubelet::ViewPod(const json& pod, bool gone) {
  const std::string key = kube::Informer::KeyOf(pod);
  std::lock_guard<std::mutex> lock(view_mu_);
  if (gone) {
    pod_view_.erase(key);
    ++view_gen_;
    return;
  }
  const json& md = Obj(pod, "metadata");
  const json& spec = Obj(pod, "spec");
  const json& status = Obj(pod, "status");
  json v = {{"metadata",
             {{"name", Obj(md, "name")},
              {"namespace", Obj(md, "namespace")},
              {"creationTimestamp", Obj(md, "creationTimestamp")},
              {"labels", Obj(md, "labels")}}},
            {"spec", {{"hostname", Obj(spec, "hostname")}, {"subdomain", Obj(spec, "subdomain")}}},
            {"status", {{"podIP", Obj(status, "podIP")}, {"phase", Obj(status, "phase")}}}};
  if (md.contains("deletionTimestamp"))
    v["metadata"]["deletionTimestamp"] = md["deletionTimestamp"];
  json containers = json::array();
  for (const auto& c : Obj(spec, "containers").is_array() ? spec["containers"] : json::array())
    containers.push_back({{"ports", Obj(c, "ports")}});
  v["spec"]["containers"] = containers;
  json conds = json::array();
  for (const auto& c :
       Obj(status, "conditions").is_array() ? status["conditions"] : json::array()) {
    if (Str(c, "type") == "Ready") conds.push_back(c);
  }
  v["status"]["conditions"] = conds;
  pod_view_[key] = std::move(v);
  ++view_gen_;
}

void Kubelet::ViewService(const json& svc, bool gone) {
  const std::string key = kube::Informer::KeyOf(svc);
  const std::string rv = Str(Obj(svc, "metadata"), "resourceVersion");
  std::lock_guard<std::mutex> lock(view_mu_);
  if (gone) {
    service_view_.erase(key);
    ++view_gen_;
    service_gone_[key] = rv;
    return;
  }
  // RefreshServices may have put a newer version (or seen it deleted) before the informer
  // delivers this one.
  if (auto it = service_view_.find(key);
      it != service_view_.end() &&
      OlderRv(rv, Str(Obj(it->second, "metadata"), "resourceVersion"))) {
    return;
  }
  if (auto it = service_gone_.find(key); it != service_gone_.end()) {
    if (OlderRv(rv, it->second)) return;
    service_gone_.erase(it);
  }
  const json& spec = Obj(svc, "spec");
  ++view_gen_;
  service_view_[key] = {{"metadata", Obj(svc, "metadata")},
                        {"spec",
                         {{"selector", Obj(spec, "selector")},
                          {"publishNotReadyAddresses", Obj(spec, "publishNotReadyAddresses")}}}};
}

void Kubelet::RefreshServices() {
  json list;
  try {
    list = client_->List(kube::resources::kServices, "");
  } catch (const std::exception&) {
    return;  // the informer's view, as before
  }
  const json& items = Obj(list, "items");
  if (!items.is_array()) return;
  for (const auto& svc : items)
    ViewService(svc, false);
}

std::vector<ServiceAddress> Kubelet::ServiceAddresses(uint64_t* gen) {
  std::lock_guard<std::mutex> lock(view_mu_);
  if (gen != nullptr) *gen = view_gen_;
  // Pods that can be endpoints, indexed by "<ns>/<label>=<value>": a service only looks at the
  // pods carrying its rarest selector label (KubeRay's select one cluster's pods).
  std::map<std::string, std::vector<const json*>> by_label;
  for (const auto& [k, p] : pod_view_) {
    const json& status = Obj(p, "status");
    if (Str(status, "podIP").empty() || Str(status, "phase") != "Running") continue;
    const std::string ns = Str(Obj(p, "metadata"), "namespace");
    const json& labels = Obj(Obj(p, "metadata"), "labels");
    if (!labels.is_object()) continue;
    for (const auto& [lk, lv] : labels.items()) {
      if (lv.is_string()) by_label[ns + "/" + lk + "=" + lv.get<std::string>()].push_back(&p);
    }
  }
  static const std::vector<const json*> kNone;
  std::vector<ServiceAddress> addrs;
  for (const auto& [k, svc] : service_view_) {
    const std::string ns = Str(Obj(svc, "metadata"), "namespace");
    const json& selector = Obj(Obj(svc, "spec"), "selector");
    if (!selector.is_object() || selector.empty()) continue;
    const std::vector<const json*>* candidates = nullptr;
    for (const auto& [sk, sv] : selector.items()) {
      auto it = sv.is_string() ? by_label.find(ns + "/" + sk + "=" + sv.get<std::string>())
                               : by_label.end();
      const auto* list = it == by_label.end() ? &kNone : &it->second;
      if (candidates == nullptr || list->size() < candidates->size()) candidates = list;
    }
    const json* ep = PickEndpoint(svc, *candidates);
    if (ep == nullptr) continue;
    addrs.push_back({ns, Str(Obj(svc, "metadata"), "name"), Str(Obj(*ep, "status"), "podIP")});
  }
  return addrs;
}

void Kubelet::HostsUpdater() {
  while (!stop_) {
    {
      std::unique_lock<std::mutex> lock(hosts_mu_);
      hosts_cv_.wait_for(lock, std::chrono::seconds(1), [this] { return hosts_dirty_ || stop_; });
      if (stop_) return;
      if (!hosts_dirty_) continue;
      hosts_dirty_ = false;
    }
    std::vector<std::shared_ptr<Pod>> pods;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& [k, p] : pods_rt_)
        pods.push_back(p);
    }
    // One endpoint computation for all pods, one block of service lines per namespace.
    uint64_t gen = 0;
    const std::vector<ServiceAddress> addrs = ServiceAddresses(&gen);
    if (!opts_.cluster_hosts_file.empty()) WriteClusterHosts(addrs);
    std::map<std::string, std::string> lines;
    for (auto& p : pods) {
      auto l = lines.find(p->ns);
      if (l == lines.end()) l = lines.emplace(p->ns, RenderServiceLines(p->ns, addrs)).first;
      json view;
      {
        std::lock_guard<std::mutex> lock(p->mu);
        // A pod's hosts file changes only with its namespace's service lines.
        if (!p->sandbox || p->hosts_file.empty() || p->hosts_lines == l->second) continue;
      }
      {
        std::lock_guard<std::mutex> lock(view_mu_);
        auto it = pod_view_.find(p->key);
        if (it == pod_view_.end()) continue;
        view = it->second;
      }
      std::lock_guard<std::mutex> lock(p->mu);
      if (!p->sandbox || p->hosts_file.empty()) continue;
      // A sandbox made meanwhile got its lines from a newer view than these: they stay (what
      // changed the view since has marked the hosts dirty again).
      if (p->hosts_gen > gen) continue;
      const std::string text = RenderHosts(view, p->ip, l->second, LocalhostIp());
      p->hosts_lines = l->second;
      p->hosts_gen = gen;
      if (text == p->hosts_content) continue;
      WriteInPlace(p->hosts_file, text);
      p->hosts_content = text;
    }
    std::this_thread::sleep_for(milliseconds(100));  // coalesce bursts
  }
}

void Kubelet::Prober() {
  while (!stop_) {
    std::vector<std::shared_ptr<Pod>> pods;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& [k, p] : pods_rt_)
        pods.push_back(p);
    }
    for (auto& p : pods) {
      if (stop_) return;
      for (size_t i = 0;; ++i) {
        json probe;
        json container_spec;
        json pod_json;
        pid_t pid = 0;
        std::string spec_file, ip, name;
        {
          std::lock_guard<std::mutex> lock(p->mu);
          if (i >= p->mains.size()) break;
          Container& c = p->mains[i];
          probe = Obj(c.spec, "readinessProbe");
          if (!probe.is_object() || c.pid <= 0 || c.exited || p->killing) continue;
          if (Clock::now() < c.next_probe) continue;
          pid = c.pid;
          spec_file = c.spec_file;
          ip = p->ip;
          name = c.name;
          container_spec = c.spec;
        }
        // Run it without holding the pod.
        const milliseconds timeout(1000 * std::max<int64_t>(1, Int(probe, "timeoutSeconds", 1)));
        bool ok = false;
        std::string output;
        if (Obj(probe, "exec").is_object()) {
          std::vector<std::string> argv;
          for (const auto& a : Obj(probe["exec"], "command")) {
            if (a.is_string()) argv.push_back(a.get<std::string>());
          }
          const int rc = ExecInContainer(opts_.launcher, pid, spec_file, argv, timeout, &output);
          ok = rc == 0;
          if (rc < 0) {
            std::string joined;
            for (const auto& a : argv)
              joined += (joined.empty() ? "" : " ") + a;
            output = "command \"" + joined + "\" timed out";
          }
        } else if (Obj(probe, "httpGet").is_object() || Obj(probe, "tcpSocket").is_object()) {
          const bool http = Obj(probe, "httpGet").is_object();
          const json& h = http ? probe["httpGet"] : probe["tcpSocket"];
          json port_spec = {{"port", 0}, {"targetPort", Obj(h, "port")}};
          const int64_t port = ResolveTargetPort(
              port_spec, json{{"spec", {{"containers", json::array({container_spec})}}}});
          const std::string host = Str(h, "host").empty() ? ip : Str(h, "host");
          if (port <= 0) {
            output = "port not found";
          } else if (http) {
            httplib::Client cli(host, static_cast<int>(port));
            cli.set_connection_timeout(timeout.count() / 1000, (timeout.count() % 1000) * 1000);
            cli.set_read_timeout(timeout.count() / 1000, (timeout.count() % 1000) * 1000);
            std::string path = Str(h, "path");
            if (path.empty()) path = "/";
            auto res = cli.Get(path);
            ok = res && res->status >= 200 && res->status < 400;
            output = res ? "HTTP probe failed with statuscode: " + std::to_string(res->status)
                         : "Get \"http://" + host + ":" + std::to_string(port) + path +
                               "\": dial tcp " + host + ":" + std::to_string(port) +
                               ": connect: connection refused";
          } else {
            ok = TcpConnects(host, static_cast<int>(port), timeout);
            output =
                "dial tcp " + host + ":" + std::to_string(port) + ": connect: connection refused";
          }
        } else {
          ok = true;  // grpc probes: not run, counted as passing
        }
        bool changed = false;
        json pod_for_event;
        {
          std::lock_guard<std::mutex> lock(p->mu);
          if (i >= p->mains.size()) break;
          Container& c = p->mains[i];
          if (c.pid != pid) continue;  // restarted meanwhile
          milliseconds period(1000 * std::max<int64_t>(1, Int(probe, "periodSeconds", 10)));
          if (opts_.probe_cap.count() > 0) period = std::min(period, opts_.probe_cap);
          c.next_probe = Clock::now() + period;
          if (ok) {
            c.probe_failures = 0;
            if (++c.probe_successes >= std::max<int64_t>(1, Int(probe, "successThreshold", 1)) &&
                !c.ready) {
              c.ready = true;
              changed = true;
            }
          } else {
            c.probe_successes = 0;
            if (++c.probe_failures >= std::max<int64_t>(1, Int(probe, "failureThreshold", 3)) &&
                c.ready) {
              c.ready = false;
              changed = true;
            }
            auto cur = pods_->Get(p->key);
            if (cur)
              Event(*p, *cur, &c, "Warning", "Unhealthy",
                    "Readiness probe failed: " + Trim(output));
          }
        }
        if (changed) queue_.Add(p->key);
      }
    }
    std::this_thread::sleep_for(milliseconds(50));
  }
}

// ---------------------------------------------------------------------------------------------
// Reconcile

void Kubelet::Reconcile(const std::string& key) {
  std::optional<json> obj = pods_->Get(key);
  std::shared_ptr<Pod> p;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pods_rt_.find(key);
    if (it != pods_rt_.end()) p = it->second;
  }
  if (p && (!obj || Str(Obj(*obj, "metadata"), "uid") != p->uid)) {
    {
      std::lock_guard<std::mutex> lock(p->mu);
      Teardown(*p);
    }
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pods_rt_.find(key);
    if (it != pods_rt_.end() && it->second == p) pods_rt_.erase(it);
    p.reset();
    ForgetAwaits(key);
    MarkHostsDirty();
  }
  if (!obj) return;
  const json& pod = *obj;
  const json& md = Obj(pod, "metadata");
  const json& spec = Obj(pod, "spec");
  const std::string node = Str(spec, "nodeName");
  if (node.empty() || !OwnsNode(node)) return;
  if (!p) {
    // A pod that finished before this kubelet saw it (or that it ran and forgot) stays as is.
    if (IsTerminalPhase(Str(Obj(pod, "status"), "phase"))) return;
    p = std::make_shared<Pod>();
    p->key = key;
    p->uid = Str(md, "uid");
    p->ns = Str(md, "namespace");
    p->name = Str(md, "name");
    p->node = node;
    size_t i = 0;
    for (const auto& c :
         Obj(spec, "initContainers").is_array() ? spec["initContainers"] : json::array()) {
      Container k;
      k.name = Str(c, "name");
      k.init = true;
      k.index = i++;
      k.spec = c;
      p->inits.push_back(std::move(k));
    }
    i = 0;
    for (const auto& c : Obj(spec, "containers").is_array() ? spec["containers"] : json::array()) {
      Container k;
      k.name = Str(c, "name");
      k.index = i++;
      k.spec = c;
      p->mains.push_back(std::move(k));
    }
    std::lock_guard<std::mutex> lock(mu_);
    pods_rt_[key] = p;
  }
  std::lock_guard<std::mutex> lock(p->mu);
  if (md.contains("deletionTimestamp")) {
    Terminate(*p, pod);
    return;
  }
  if (p->done) return;
  const std::optional<milliseconds> left = DeadlineLeft(*p, pod);
  if (p->deadline_exceeded || (left && left->count() <= 0)) {
    ExceedDeadline(*p, pod);
    return;
  }
  SyncPod(*p, pod);
  // The active deadline handler asks for a sync when the deadline passes.
  if (const std::optional<milliseconds> again = DeadlineLeft(*p, pod)) {
    queue_.AddAfter(key, std::max(*again, milliseconds(1)));
  }
}

std::optional<milliseconds> Kubelet::DeadlineLeft(const Pod& p, const json& pod) {
  const json& spec = Obj(pod, "spec");
  if (!spec.contains("activeDeadlineSeconds") || !p.sandbox) return std::nullopt;
  const auto deadline = p.started + std::chrono::seconds(Int(spec, "activeDeadlineSeconds", 0));
  return std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
}

void Kubelet::ExceedDeadline(Pod& p, const json& pod) {
  // The real kubelet's words (pkg/kubelet/active_deadline.go): a Normal event, then the pod is
  // killed with its grace period and ends Failed with this reason and message. It is not
  // deleted: its owner (here StarForge) sees why it ended.
  static const std::string kReason = "DeadlineExceeded";
  static const std::string kMessage =
      "Pod was active on the node longer than the specified deadline";
  if (!p.deadline_exceeded) {
    p.deadline_exceeded = true;
    Event(p, pod, nullptr, "Normal", kReason, kMessage);
  }
  for (auto* list : {&p.inits, &p.mains}) {
    for (Container& c : *list) {
      if (c.pid > 0 && c.exited) ReapExit(p, pod, c);
    }
  }
  if (StopContainers(p, pod, Int(Obj(pod, "spec"), "terminationGracePeriodSeconds", 30))) return;
  json status = ComputeStatus(p, pod, true);
  status["phase"] = "Failed";
  status["reason"] = kReason;
  status["message"] = kMessage;
  client_->MergePatchStatus(kube::resources::kPods, p.ns, p.name, {{"status", status}});
  p.last_status = status;
  p.done = true;
}

bool Kubelet::StopContainers(Pod& p, const json& pod, int64_t grace) {
  if (!p.killing) {
    p.killing = true;
    p.kill_deadline = Clock::now() + std::chrono::seconds(std::max<int64_t>(0, grace));
    for (auto* list : {&p.inits, &p.mains}) {
      for (Container& c : *list) {
        if (c.pid <= 0) continue;
        Event(p, pod, &c, "Normal", "Killing", "Stopping container " + c.name);
        KillContainer(c, grace > 0 ? SIGTERM : SIGKILL);
      }
    }
  }
  bool running = false;
  for (auto* list : {&p.inits, &p.mains}) {
    for (Container& c : *list)
      running |= c.pid > 0;
  }
  if (!running) return false;
  const auto now = Clock::now();
  if (now >= p.kill_deadline && !p.sigkilled) {
    p.sigkilled = true;
    for (auto* list : {&p.inits, &p.mains}) {
      for (Container& c : *list) {
        if (c.pid > 0) KillContainer(c, SIGKILL);
      }
    }
  }
  queue_.AddAfter(p.key, now < p.kill_deadline
                             ? std::min(milliseconds(100), std::chrono::duration_cast<milliseconds>(
                                                               p.kill_deadline - now) +
                                                               milliseconds(1))
                             : milliseconds(50));
  return true;
}

void Kubelet::Event(const Pod& p, const json& pod, const Container* c, const std::string& type,
                    const std::string& reason, const std::string& note) {
  controllers::EventRecorder* rec = nullptr;
  {
    std::lock_guard<std::mutex> lock(recorders_mu_);
    auto& slot = recorders_[p.node];
    if (!slot) {
      slot = std::make_unique<controllers::EventRecorder>(
          *client_, controllers::EventSource{false, "kubelet", p.node});
    }
    rec = slot.get();
  }
  std::string field_path;
  if (c != nullptr) {
    field_path = std::string(c->init ? "spec.initContainers{" : "spec.containers{") + c->name + "}";
  }
  json regarding = pod;
  if (!regarding.contains("apiVersion")) regarding["apiVersion"] = "v1";
  if (!regarding.contains("kind")) regarding["kind"] = "Pod";
  rec->Emit(regarding, type, reason, "", note, field_path);
}

std::optional<json> Kubelet::Lookup(const std::string& kind, const std::string& ns,
                                    const std::string& name) {
  const kube::ResourceRef* ref = &kube::resources::kConfigMaps;
  if (kind == "secrets") ref = &kube::resources::kSecrets;
  if (kind == "persistentvolumeclaims") ref = &kube::resources::kPersistentVolumeClaims;
  try {
    return client_->Get(*ref, ns, name);
  } catch (const kube::ApiError& e) {
    if (e.reason() == kube::Reason::kNotFound) return std::nullopt;
    throw;
  }
}

void Kubelet::AwaitObject(const std::string& ref, const std::string& pod_key) {
  std::lock_guard<std::mutex> lock(awaits_mu_);
  awaits_[ref].insert(pod_key);
}

void Kubelet::ObjectChanged(const char* resource, const json& obj) {
  const json& md = Obj(obj, "metadata");
  const std::string ref =
      std::string(resource) + "/" + Str(md, "namespace") + "/" + Str(md, "name");
  std::set<std::string> keys;
  {
    std::lock_guard<std::mutex> lock(awaits_mu_);
    auto it = awaits_.find(ref);
    if (it == awaits_.end()) return;
    keys = std::move(it->second);
    awaits_.erase(it);
  }
  for (const auto& k : keys)
    queue_.Add(k);
}

void Kubelet::ForgetAwaits(const std::string& pod_key) {
  std::lock_guard<std::mutex> lock(awaits_mu_);
  for (auto it = awaits_.begin(); it != awaits_.end();) {
    it->second.erase(pod_key);
    it = it->second.empty() ? awaits_.erase(it) : std::next(it);
  }
}

void Kubelet::SetUpPodCgroup() {
  const std::string root = "/sys/fs/cgroup/cpu";
  if (opts_.pod_cpu_shares == 0 || !sandbox_error_.empty() || access(root.c_str(), W_OK) != 0) {
    return;
  }
  // Leftovers of kubesims that died without cleaning up (rmdir only removes empty cgroups).
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    const std::string n = e.path().filename().string();
    if (n.rfind("kubesim-pods-", 0) != 0) continue;
    const std::string pid = n.substr(13);
    if (pid != std::to_string(getpid()) && !fs::exists("/proc/" + pid)) rmdir(e.path().c_str());
  }
  const std::string dir = root + "/kubesim-pods-" + std::to_string(getpid());
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return;
  const int fd = open((dir + "/cpu.shares").c_str(), O_WRONLY | O_CLOEXEC);
  const std::string v = std::to_string(opts_.pod_cpu_shares);
  const bool ok = fd >= 0 && write(fd, v.data(), v.size()) == static_cast<ssize_t>(v.size());
  if (fd >= 0) close(fd);
  if (!ok) {
    rmdir(dir.c_str());
    return;
  }
  pod_cgroup_ = dir;
  std::fprintf(stderr, "kubesim: kubelet: containers share the CPU cgroup %s (cpu.shares %d)\n",
               dir.c_str(), opts_.pod_cpu_shares);
}

void Kubelet::RemovePodCgroup() {
  if (pod_cgroup_.empty()) return;
  // The last processes may take a moment to leave after SIGKILL.
  for (int i = 0; i < 50 && rmdir(pod_cgroup_.c_str()) != 0 && errno == EBUSY; ++i)
    std::this_thread::sleep_for(milliseconds(20));
  pod_cgroup_.clear();
}

std::string Kubelet::LocalhostIp() const {
  // Real Ray in a pod's own namespace binds its dashboard agent on the node address and on
  // `localhost`: that must be the namespace's 127.0.0.1, as on a cluster. The emulator binds only
  // the pod's address, and clients in the pod (KubeRay v1.4's exec probe) reach it as localhost.
  return opts_.netns && opts_.real_ray ? "127.0.0.1" : "";
}

void Kubelet::WriteClusterHosts(const std::vector<ServiceAddress>& addrs) {
  const std::string text =
      host_hosts_ + "# kubesim: the cluster's services\n" + RenderServiceLines("", addrs);
  std::lock_guard<std::mutex> lock(hosts_mu_);
  if (ReadFile(opts_.cluster_hosts_file) != text) WriteInPlace(opts_.cluster_hosts_file, text);
}

bool Kubelet::AttachNetwork(Pod& p, const json& pod) {
  if (!opts_.netns) {
    p.ip = ips_.Acquire(p.uid);
    return true;
  }
  try {
    // The node's podCIDR (kubesim-node sets one per node), else the whole range.
    Cidr range = ParseCidr(opts_.pod_cidr);
    if (auto node = nodes_->Get(p.node)) {
      const std::string cidr = Str(Obj(*node, "spec"), "podCIDR");
      if (!cidr.empty()) range = ParseCidr(cidr);
    }
    p.ip = net_.Attach(p.uid, range);
    p.netns = net_.NamespacePath(p.uid);
    return true;
  } catch (const std::exception& e) {
    Event(p, pod, nullptr, "Warning", "FailedCreatePodSandBox",
          std::string("Failed to create pod sandbox: ") + e.what());
    queue_.AddAfter(p.key, opts_.sync);
    return false;
  }
}

bool Kubelet::EnsureSandbox(Pod& p, const json& pod) {
  if (p.sandbox) return true;
  if (!AttachNetwork(p, pod)) return false;
  p.host_ip = "127.0.0.1";
  if (auto node = nodes_->Get(p.node)) {
    for (const auto& a : Obj(Obj(*node, "status"), "addresses")) {
      if (Str(a, "type") == "InternalIP" && !Str(a, "address").empty()) {
        p.host_ip = Str(a, "address");
      }
    }
  }
  p.dir = opts_.state_dir + "/pods/" + p.ns + "_" + p.name + "_" + p.uid;
  for (const char* sub : {"logs", "containers", "volumes"})
    fs::create_directories(p.dir + "/" + sub);
  p.hosts_file = p.dir + "/hosts";
  if (opts_.netns) {
    WriteInPlace(p.dir + "/resolv.conf",
                 "# kubesim: no cluster DNS; names resolve through /etc/hosts\n"
                 "nameserver " +
                     net_.Gateway() + "\nsearch " + p.ns +
                     ".svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n");
  }
  // Every service that exists now, as cluster DNS would answer. The services informer is a
  // stream of its own and can lag the pods' one (this pod and the endpoint pods it names are in
  // the pod view already: their events came before this pod's, in one stream): under load a pod
  // started after a service and its ready endpoint found no line for it.
  RefreshServices();
  p.hosts_lines = RenderServiceLines(p.ns, ServiceAddresses(&p.hosts_gen));
  p.hosts_content = RenderHosts(pod, p.ip, p.hosts_lines, LocalhostIp());
  WriteInPlace(p.hosts_file, p.hosts_content);
  p.start_time = Now();
  p.started = Clock::now();
  p.sandbox = true;
  MarkHostsDirty();
  return true;
}

bool Kubelet::EnsureVolumes(Pod& p, const json& pod) {
  if (p.volumes_ready) return true;
  const json& volumes = Obj(Obj(pod, "spec"), "volumes");
  std::vector<std::string> errors;       // MountVolume.SetUp failures
  std::vector<std::string> unprocessed;  // PVCs that could not be processed
  std::string pvc_error;
  std::map<std::string, std::string> dirs;
  std::map<std::string, bool> files;
  std::vector<std::string> tmpfs;
  for (const auto& v : volumes.is_array() ? volumes : json::array()) {
    const std::string name = Str(v, "name");
    const std::string dir = p.dir + "/volumes/" + name;
    if (Obj(v, "persistentVolumeClaim").is_object()) {
      const std::string claim = Str(v["persistentVolumeClaim"], "claimName");
      auto pvc = Lookup("persistentvolumeclaims", p.ns, claim);
      if (!pvc) {
        unprocessed.push_back(name);
        if (pvc_error.empty()) {
          pvc_error = "error processing PVC " + p.ns + "/" + claim +
                      ": failed to fetch PVC from API server: persistentvolumeclaims \"" + claim +
                      "\" not found";
        }
        continue;
      }
      std::string host = Str(Obj(Obj(*pvc, "metadata"), "annotations"), kHostPathAnnotation);
      if (host.empty()) host = opts_.pv_root + "/" + p.ns + "/" + claim;
      fs::create_directories(host);
      dirs[name] = host;
    } else if (Obj(v, "configMap").is_object() || Obj(v, "secret").is_object()) {
      const bool is_cm = Obj(v, "configMap").is_object();
      const json& src = is_cm ? v["configMap"] : v["secret"];
      const std::string obj_name = is_cm ? Str(src, "name") : Str(src, "secretName");
      const char* resource = is_cm ? "configmaps" : "secrets";
      // Registered before the GET: an object created in between still wakes the pod.
      AwaitObject(std::string(resource) + "/" + p.ns + "/" + obj_name, p.key);
      auto obj = Lookup(resource, p.ns, obj_name);
      std::map<std::string, std::string> data;
      if (!obj) {
        if (Obj(src, "optional") != json(true)) {
          errors.push_back("MountVolume.SetUp failed for volume \"" + name + "\" : " +
                           (is_cm ? "configmap" : "secret") + " \"" + obj_name + "\" not found");
          continue;
        }
      } else {
        data = is_cm ? ConfigMapData(*obj) : SecretData(*obj);
      }
      fs::remove_all(dir);
      fs::create_directories(dir);
      const mode_t def_mode = static_cast<mode_t>(Int(src, "defaultMode", 0644));
      // A file that cannot be written fails the mount, as the kubelet's would.
      auto write = [&](const fs::path& path, const std::string& text, mode_t mode) {
        if (starforge::Status written = starforge::WriteFileAtomic(path, text, mode); !written.ok())
          errors.push_back("MountVolume.SetUp failed for volume \"" + name +
                           "\" : " + written.message());
      };
      const json& items = Obj(src, "items");
      bool missing_key = false;
      if (items.is_array() && !items.empty()) {
        for (const auto& it : items) {
          const std::string key = Str(it, "key");
          auto d = data.find(key);
          if (d == data.end()) {
            if (obj && Obj(src, "optional") != json(true)) {
              errors.push_back("MountVolume.SetUp failed for volume \"" + name +
                               "\" : configmap references non-existent config key: " + key);
              missing_key = true;
            }
            continue;
          }
          const fs::path target = fs::path(dir) / Str(it, "path");
          fs::create_directories(target.parent_path());
          write(target, d->second, static_cast<mode_t>(Int(it, "mode", def_mode)));
        }
      } else {
        for (const auto& [k, val] : data)
          write(fs::path(dir) / k, val, def_mode);
      }
      if (missing_key) continue;
      dirs[name] = dir;
    } else if (Obj(v, "hostPath").is_object()) {
      const std::string path = Str(v["hostPath"], "path");
      const std::string type = Str(v["hostPath"], "type");
      if (type == "DirectoryOrCreate") fs::create_directories(path);
      if (type == "FileOrCreate" && !fs::exists(path)) {
        fs::create_directories(fs::path(path).parent_path());
        std::ofstream(path).close();
      }
      std::error_code ec;
      if (!fs::exists(path, ec)) {
        errors.push_back("MountVolume.SetUp failed for volume \"" + name +
                         "\" : hostPath type check failed: " + path + " is not a directory");
        continue;
      }
      dirs[name] = path;
      files[name] = !fs::is_directory(path, ec);
    } else {
      // emptyDir (and, as empty dirs, the volume types kubesim does not model).
      fs::create_directories(dir);
      const json& ed = Obj(v, "emptyDir");
      if (Str(ed, "medium") == "Memory") {
        std::string data = "mode=0777";
        if (Obj(ed, "sizeLimit").is_string()) {
          auto q = starforge::Quantity::Parse(ed["sizeLimit"].get<std::string>());
          if (q) data += ",size=" + std::to_string(q->Value());
        }
        if (mount("tmpfs", dir.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, data.c_str()) != 0) {
          errors.push_back("MountVolume.SetUp failed for volume \"" + name +
                           "\" : mount tmpfs: " + std::strerror(errno));
          continue;
        }
        tmpfs.push_back(dir);
      }
      dirs[name] = dir;
    }
  }
  p.tmpfs.insert(p.tmpfs.end(), tmpfs.begin(), tmpfs.end());
  if (!errors.empty() || !unprocessed.empty()) {
    for (const auto& e : errors)
      Event(p, pod, nullptr, "Warning", "FailedMount", e);
    if (!unprocessed.empty()) {
      std::string list;
      for (const auto& u : unprocessed)
        list += (list.empty() ? "" : " ") + u;
      Event(p, pod, nullptr, "Warning", "FailedMount",
            "Unable to attach or mount volumes: unmounted volumes=[" + list +
                "], unattached volumes=[" + list + "], failed to process volumes=[" + list +
                "]: " + pvc_error);
    }
    return false;
  }
  p.volume_dirs = dirs;
  p.volume_files = files;
  p.volumes_ready = true;
  ForgetAwaits(p.key);
  return true;
}

void Kubelet::SyncPod(Pod& p, const json& pod) {
  const json& spec = Obj(pod, "spec");
  if (!sandbox_error_.empty()) {
    const std::string msg = "kubesim cannot run containers on this machine: " + sandbox_error_;
    Event(p, pod, nullptr, "Warning", "FailedCreatePodSandBox",
          "Failed to create pod sandbox: " + msg);
    json status = {{"phase", "Failed"}, {"reason", "SandboxUnavailable"}, {"message", msg}};
    client_->MergePatchStatus(kube::resources::kPods, p.ns, p.name, {{"status", status}});
    p.done = true;
    return;
  }
  if (!EnsureSandbox(p, pod)) return;  // an event said why; retried at the next sync
  if (!EnsureVolumes(p, pod)) {
    WriteStatus(p, pod, false);
    // The volume manager's retry back-off (500 ms doubling), capped at the resync period; a
    // ConfigMap or Secret that appears wakes the pod at once (ObjectChanged).
    const milliseconds retry =
        std::min(opts_.sync, milliseconds(500) * (int64_t{1} << std::min(p.mount_step, 20)));
    ++p.mount_step;
    queue_.AddAfter(p.key, retry);
    return;
  }
  for (auto* list : {&p.inits, &p.mains}) {
    for (Container& c : *list) {
      if (c.pid > 0 && c.exited) ReapExit(p, pod, c);
    }
  }
  const std::string policy =
      Str(spec, "restartPolicy").empty() ? "Always" : Str(spec, "restartPolicy");
  bool inits_done = true;
  for (Container& c : p.inits) {
    if (c.pid > 0) {
      inits_done = false;
      break;
    }
    if (c.has_exit() && TerminatedCode(c.state) == 0) continue;
    inits_done = false;
    if (c.has_exit() || (c.started_once && !c.state.contains("running"))) {
      if (policy == "Never") break;  // the pod has failed
      MaybeRestart(p, pod, c);
    } else {
      StartContainer(p, pod, c);
    }
    break;
  }
  if (inits_done) {
    for (Container& c : p.mains) {
      if (c.pid > 0) continue;
      if (!c.started_once) {
        StartContainer(p, pod, c);
        continue;
      }
      if (c.has_exit()) {
        const int code = TerminatedCode(c.state);
        if (policy == "Always" || (policy == "OnFailure" && code != 0)) MaybeRestart(p, pod, c);
      } else {
        MaybeRestart(p, pod, c);  // waiting for a restart that failed to start
      }
    }
  }
  WriteStatus(p, pod, false);
}

void Kubelet::MaybeRestart(Pod& p, const json& pod, Container& c) {
  if (c.has_exit()) c.last_state = c.state;
  const milliseconds delay =
      c.crash_step == 0 ? milliseconds(0)
                        : std::min(opts_.backoff_cap,
                                   opts_.backoff * (int64_t{1} << std::min(c.crash_step - 1, 20)));
  const auto ready_at = c.finished_at + delay;
  const auto now = std::chrono::system_clock::now();
  if (now < ready_at) {
    c.state = {{"waiting",
                {{"reason", "CrashLoopBackOff"},
                 {"message", "back-off " + GoDuration(delay) + " restarting failed container=" +
                                 c.name + " pod=" + FormatPod(pod)}}}};
    Event(p, pod, &c, "Warning", "BackOff",
          "Back-off restarting failed container " + c.name + " in pod " + FormatPod(pod));
    queue_.AddAfter(p.key,
                    std::chrono::duration_cast<milliseconds>(ready_at - now) + milliseconds(1));
    return;
  }
  StartContainer(p, pod, c);
}

// The container waits with `reason` (its state says why) and the pod is synced again later.
bool Kubelet::WaitToStart(Pod& p, Container& c, const std::string& reason,
                          const std::string& message, milliseconds retry) {
  c.state = {{"waiting", {{"reason", reason}}}};
  if (!message.empty()) c.state["waiting"]["message"] = message;
  queue_.AddAfter(p.key, retry);
  return false;
}

bool Kubelet::StartContainer(Pod& p, const json& pod, Container& c) {
  if (!PullImage(p, pod, c)) return false;
  c.pull_step = 0;

  // Configuration: env (ConfigMaps, Secrets, fieldRefs), then the command line.
  const json& cs = c.spec;
  const PodFacts facts{p.ip, p.host_ip};
  std::vector<std::pair<std::string, std::string>> env;
  try {
    env = ContainerEnv(pod, cs, facts,
                       [this](const std::string& kind, const std::string& ns,
                              const std::string& name) { return Lookup(kind, ns, name); });
  } catch (const ConfigError& e) {
    Event(p, pod, &c, "Warning", "Failed", std::string("Error: ") + e.what());
    return WaitToStart(p, c, "CreateContainerConfigError", e.what(), opts_.sync);
  }
  std::map<std::string, std::string> env_map;
  for (const auto& [k, v] : env)
    env_map[k] = v;
  const std::vector<std::string> argv = ContainerArgv(cs, env_map);
  std::vector<SandboxMount> mounts;
  if (std::string err = VolumeMounts(p, pod, c, env_map, &mounts); !err.empty()) {
    Event(p, pod, &c, "Warning", "Failed", "Error: " + err);
    return WaitToStart(p, c, "CreateContainerConfigError", err, opts_.sync);
  }
  if (argv.empty()) {
    const std::string msg =
        "kubesim: container \"" + c.name +
        "\" has no command: kubesim runs host programs in place of images and has no image "
        "ENTRYPOINT/CMD to fall back to; set command (and args)";
    Event(p, pod, &c, "Warning", "Failed", "Error: " + msg);
    return WaitToStart(p, c, "CreateContainerError", msg, opts_.sync);
  }
  std::string hostname = Str(Obj(pod, "spec"), "hostname");
  if (hostname.empty()) hostname = p.name.substr(0, 63);
  SandboxSpec s;
  s.argv = argv;
  s.env = ProcessEnv(p, hostname, env, &mounts);
  s.cwd = Str(cs, "workingDir");
  s.mounts = std::move(mounts);
  if (!p.netns.empty()) s.hostname = hostname;
  return Launch(p, pod, c, std::move(s));
}

bool Kubelet::PullImage(Pod& p, const json& pod, Container& c) {
  const json& cs = c.spec;
  const std::string image = Str(cs, "image");
  const std::string img_ref = DefaultTag(image);
  std::string pull_policy = Str(cs, "imagePullPolicy");
  if (pull_policy.empty()) {
    const bool latest = img_ref.size() > 7 &&
                        img_ref.compare(img_ref.size() - 7, 7, ":latest") == 0 &&
                        image.find('@') == std::string::npos;
    pull_policy = latest ? "Always" : "IfNotPresent";
  }
  bool present = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    present = images_[p.node].count(img_ref) != 0;
  }
  const auto now = Clock::now();
  if (pull_policy == "Never") {
    if (!opts_.images.Exists(image)) {
      const std::string msg =
          "Container image \"" + img_ref + "\" is not present with pull policy of Never";
      Event(p, pod, &c, "Warning", "ErrImageNeverPull", msg);
      Event(p, pod, &c, "Warning", "Failed", "Error: ErrImageNeverPull");
      return WaitToStart(p, c, "ErrImageNeverPull", msg, opts_.sync);
    }
    Event(p, pod, &c, "Normal", "Pulled",
          "Container image \"" + img_ref + "\" already present on machine");
    return true;
  }
  if (pull_policy == "IfNotPresent" && present) {
    Event(p, pod, &c, "Normal", "Pulled",
          "Container image \"" + img_ref + "\" already present on machine");
    return true;
  }
  if (now < c.pull_backoff_until) {
    const std::string msg = "Back-off pulling image \"" + img_ref + "\"";
    Event(p, pod, &c, "Normal", "BackOff", msg);
    Event(p, pod, &c, "Warning", "Failed", "Error: ImagePullBackOff");
    return WaitToStart(
        p, c, "ImagePullBackOff", msg,
        std::chrono::duration_cast<milliseconds>(c.pull_backoff_until - now) + milliseconds(1));
  }
  Event(p, pod, &c, "Normal", "Pulling", "Pulling image \"" + img_ref + "\"");
  if (!opts_.images.Exists(image)) {
    const std::string full = NormalizeImage(image);
    const std::string err = "rpc error: code = NotFound desc = failed to pull and unpack image \"" +
                            full + "\": failed to resolve reference \"" + full + "\": " + full +
                            ": not found";
    Event(p, pod, &c, "Warning", "Failed", "Failed to pull image \"" + img_ref + "\": " + err);
    Event(p, pod, &c, "Warning", "Failed", "Error: ErrImagePull");
    const milliseconds delay =
        std::min(opts_.backoff_cap, opts_.backoff * (int64_t{1} << std::min(c.pull_step, 20)));
    ++c.pull_step;
    c.pull_backoff_until = now + delay;
    // The next sync falls inside the back-off (ImagePullBackOff); the one after it pulls again.
    return WaitToStart(p, c, "ErrImagePull", err, std::min(opts_.sync, delay / 2));
  }
  Event(p, pod, &c, "Normal", "Pulled",
        "Successfully pulled image \"" + img_ref +
            "\" in 0s (0s including waiting). Image size: 0 bytes.");
  std::lock_guard<std::mutex> lock(mu_);
  images_[p.node].insert(img_ref);
  return true;
}

std::string Kubelet::VolumeMounts(Pod& p, const json& pod, const Container& c,
                                  const std::map<std::string, std::string>& env_map,
                                  std::vector<SandboxMount>* mounts) {
  const json& cs = c.spec;
  for (const auto& vm : Obj(cs, "volumeMounts").is_array() ? cs["volumeMounts"] : json::array()) {
    const std::string vname = Str(vm, "name");
    auto d = p.volume_dirs.find(vname);
    if (d == p.volume_dirs.end())
      return "cannot find volume \"" + vname + "\" to mount into container \"" + c.name + "\"";
    SandboxMount m;
    m.source = d->second;
    m.target = Str(vm, "mountPath");
    m.read_only = Obj(vm, "readOnly") == json(true);
    m.file = p.volume_files.count(vname) != 0 && p.volume_files[vname];
    const std::string sub = ExpandVars(
        Str(vm, "subPath").empty() ? Str(vm, "subPathExpr") : Str(vm, "subPath"), env_map);
    if (!sub.empty()) {
      m.source += "/" + sub;
      std::error_code ec;
      if (!fs::exists(m.source, ec)) fs::create_directories(m.source, ec);
      m.file = !fs::is_directory(m.source, ec);
    }
    // ConfigMap and Secret volumes are read-only, as the kubelet mounts them.
    for (const auto& v : Obj(Obj(pod, "spec"), "volumes")) {
      if (Str(v, "name") != vname) continue;
      if (Obj(v, "configMap").is_object() || Obj(v, "secret").is_object()) m.read_only = true;
      if (Obj(Obj(v, "persistentVolumeClaim"), "readOnly") == json(true)) m.read_only = true;
    }
    mounts->push_back(m);
  }
  return "";
}

std::vector<std::string> Kubelet::ProcessEnv(
    const Pod& p, const std::string& hostname,
    const std::vector<std::pair<std::string, std::string>>& env,
    std::vector<SandboxMount>* mounts) {
  // The process environment: the host's PATH/locale (the "image"), kubesim's additions, then the
  // container's own variables; the Ray bin dir (emulator or real Ray) is always first on PATH.
  std::vector<std::pair<std::string, std::string>> full = BaseEnv();
  full.emplace_back("HOSTNAME", hostname);
  full.emplace_back("HOME", "/root");
  full.emplace_back("KUBESIM_POD_IP", p.ip);
  if (opts_.real_ray) {
    // The "image's" defaults for real Ray, so that a few Ray nodes fit on one small host: no
    // usage-stats prompt or upload, and an object store of 100 MB rather than 30% of the host's
    // memory (KubeRay passes neither). The pod's own variables still win.
    full.emplace_back("RAY_USAGE_STATS_ENABLED", "0");
    full.emplace_back("RAY_DEFAULT_OBJECT_STORE_MAX_MEMORY_BYTES", "100000000");
    if (opts_.netns) {
      // No DNS server serves the pods; gRPC's default (c-ares) resolver did not find the head
      // service in /etc/hosts (a worker's raylet never reached the GCS by name); its native
      // resolver (getaddrinfo) does.
      full.emplace_back("GRPC_DNS_RESOLVER", "native");
    }
  }
  for (const auto& kv : env)
    full.push_back(kv);
  std::map<std::string, std::string> final_env;
  std::vector<std::string> order;
  for (const auto& [k, v] : full) {
    if (final_env.count(k) == 0) order.push_back(k);
    final_env[k] = v;
  }
  if (!opts_.ray_bin_dir.empty()) {
    std::string& path = final_env["PATH"];
    if (std::find(order.begin(), order.end(), "PATH") == order.end()) order.push_back("PATH");
    if (path.empty()) path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
    if (path != opts_.ray_bin_dir && path.rfind(opts_.ray_bin_dir + ":", 0) != 0) {
      path = opts_.ray_bin_dir + ":" + path;
    }
    std::error_code ec;
    if (fs::is_directory(opts_.ray_bin_dir, ec)) {
      SandboxMount m;
      m.source = opts_.ray_bin_dir;
      m.target = opts_.ray_bin_dir;
      m.read_only = true;
      mounts->push_back(m);
    }
  }
  SandboxMount hosts;
  hosts.source = p.hosts_file;
  hosts.target = "/etc/hosts";
  hosts.file = true;
  mounts->push_back(hosts);
  if (opts_.netns) {
    // The host's nameserver is not reachable from a pod's namespace (the host does not route for
    // pods): name one on the bridge address, where nothing listens, so that a lookup /etc/hosts
    // cannot answer fails at once instead of timing out.
    SandboxMount resolv;
    resolv.source = p.dir + "/resolv.conf";
    resolv.target = "/etc/resolv.conf";
    resolv.file = true;
    resolv.read_only = true;
    mounts->push_back(resolv);
  }

  std::vector<std::string> out;
  out.reserve(order.size());
  for (const auto& k : order)
    out.push_back(k + "=" + final_env[k]);
  return out;
}

bool Kubelet::Launch(Pod& p, const json& pod, Container& c, SandboxSpec s) {
  const int instance = c.started_once ? c.restarts + 1 : 0;
  c.run_dir = p.dir + "/containers/" + c.name + "/" + std::to_string(instance);
  s.root = c.run_dir + "/rootfs";
  s.upper = c.run_dir + "/upper";
  s.work = c.run_dir + "/work";
  s.hide = {opts_.state_dir};
  if (!pod_cgroup_.empty()) s.cgroup_procs = pod_cgroup_ + "/cgroup.procs";
  s.netns = p.netns;
  c.error_file = c.run_dir + "/start-error";
  c.ns_file = c.run_dir + "/mntns";
  UnpinNamespace(c);
  s.error_file = c.error_file;
  s.ns_file = c.ns_file;
  fs::create_directories(c.run_dir);
  fs::create_directories(p.dir + "/logs/" + c.name);
  c.spec_file = c.run_dir + "/spec.json";
  if (starforge::Status written = starforge::WriteFileAtomic(c.spec_file, s.ToJson().dump(2), 0600);
      !written.ok()) {
    Event(p, pod, &c, "Warning", "Failed", "Error: " + written.message());
    return WaitToStart(p, c, "CreateContainerError", written.message(), opts_.sync);
  }
  c.log_file = p.dir + "/logs/" + c.name + "/" + std::to_string(instance) + ".log";
  { std::ofstream touch(c.log_file, std::ios::app); }
  // pods/log reads the file named by this annotation (logs.cc).
  try {
    client_->MergePatch(
        kube::resources::kPods, p.ns, p.name,
        {{"metadata", {{"annotations", {{kLogFileAnnotationPrefix + c.name, c.log_file}}}}}});
  } catch (const kube::ApiError& e) {
    std::fprintf(stderr, "kubesim: kubelet: annotating %s: %s\n", p.key.c_str(), e.what());
  }
  c.container_id = "kubesim://" + RandomHex(64);
  Event(p, pod, &c, "Normal", "Created", "Created container " + c.name);
  try {
    c.pid = SpawnContainer(opts_.launcher, c.spec_file, c.log_file);
  } catch (const std::exception& e) {
    Event(p, pod, &c, "Warning", "Failed", std::string("Error: ") + e.what());
    return WaitToStart(p, c, "RunContainerError", e.what(), opts_.sync);
  }
  Event(p, pod, &c, "Normal", "Started", "Started container " + c.name);
  if (c.started_once) {
    // A run longer than twice the cap resets the crash back-off, as the kubelet's does.
    ++c.restarts;
    ++c.crash_step;
  }
  c.started_once = true;
  c.exited = false;
  c.ready = !Obj(c.spec, "readinessProbe").is_object();
  c.probe_failures = 0;
  c.probe_successes = 0;
  milliseconds delay(1000 * Int(Obj(c.spec, "readinessProbe"), "initialDelaySeconds", 0));
  if (opts_.probe_cap.count() > 0) delay = std::min(delay, opts_.probe_cap);
  c.next_probe = Clock::now() + delay;
  c.running_since = Clock::now();
  c.state = {{"running", {{"startedAt", Now()}}}};
  return true;
}

void Kubelet::PinNamespace(Container& c) {
  if (c.ns_fd >= 0 || c.pid <= 0 || c.exited) return;
  const std::string made = Trim(ReadFile(c.ns_file));
  if (made.empty()) return;  // the launcher has not unshared yet
  // The pid is our unreaped child, so /proc/<pid> is this container's launcher or command.
  const std::string link = "/proc/" + std::to_string(c.pid) + "/ns/mnt";
  const int fd = open(link.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;  // it has exited: only its process group can be signalled
  char buf[64] = {0};
  const ssize_t n = readlink(link.c_str(), buf, sizeof buf - 1);
  if (n > 0 && std::string(buf, static_cast<size_t>(n)) == made) {
    c.ns_fd = fd;
    c.ns_id = made;
  } else {
    close(fd);
  }
}

void Kubelet::UnpinNamespace(Container& c) {
  if (c.ns_fd >= 0) close(c.ns_fd);
  c.ns_fd = -1;
  c.ns_id.clear();
}

void Kubelet::KillContainer(Container& c, int sig) {
  // The process group only while its leader is alive and unreaped (its id cannot be reused).
  if (c.pid > 0 && !c.exited) kill(-c.pid, sig);
  if (sig == SIGTERM) return;  // SIGTERM goes to the container's process group only
  PinNamespace(c);
  if (c.ns_fd < 0 || c.ns_id.empty()) return;  // an unpinned id may belong to another container
  // Everything still running in the container's mount namespace (daemonized children too).
  DIR* d = opendir("/proc");
  if (d == nullptr) return;
  while (dirent* e = readdir(d)) {
    const char* n = e->d_name;
    if (n[0] < '0' || n[0] > '9') continue;
    char buf[64] = {0};
    const std::string link = std::string("/proc/") + n + "/ns/mnt";
    const ssize_t len = readlink(link.c_str(), buf, sizeof buf - 1);
    if (len > 0 && std::string(buf, static_cast<size_t>(len)) == c.ns_id) {
      kill(static_cast<pid_t>(std::atoi(n)), sig);
    }
  }
  closedir(d);
}

void Kubelet::ReapExit(Pod& p, const json& pod, Container& c) {
  const std::string start_error = Trim(ReadFile(c.error_file));
  const std::string started_at = Str(Obj(c.state, "running"), "startedAt");
  // A container's processes end with its main process, as in a PID namespace.
  KillContainer(c, SIGKILL);
  UnpinNamespace(c);
  c.finished_at = std::chrono::system_clock::now();
  json term = {{"containerID", c.container_id}, {"finishedAt", Now()}};
  if (!start_error.empty()) {
    // containerd's wording around runc's error.
    const std::string msg = start_error.rfind("exec: ", 0) == 0
                                ? "failed to create containerd task: failed to create shim task: "
                                  "OCI runtime create failed: runc create failed: unable to start "
                                  "container process: " +
                                      start_error + ": unknown"
                                : start_error;
    term["exitCode"] = kStartErrorExit;
    term["reason"] = "StartError";
    term["message"] = msg;
    term["startedAt"] = "1970-01-01T00:00:00Z";
    Event(p, pod, &c, "Warning", "Failed", "Error: " + msg);
  } else {
    const int code = ExitCode(c.wait_status);
    term["exitCode"] = code;
    term["reason"] = code == 0 ? "Completed" : "Error";
    term["startedAt"] = started_at.empty() ? Now() : started_at;
  }
  if (Clock::now() - c.running_since > 2 * opts_.backoff_cap) c.crash_step = 0;
  c.state = {{"terminated", term}};
  c.pid = 0;
  c.exited = false;
  c.ready = false;
}

void Kubelet::Terminate(Pod& p, const json& pod) {
  const json& md = Obj(pod, "metadata");
  for (auto* list : {&p.inits, &p.mains}) {
    for (Container& c : *list) {
      if (c.pid > 0 && c.exited) ReapExit(p, pod, c);
    }
  }
  const int64_t grace = Int(md, "deletionGracePeriodSeconds",
                            Int(Obj(pod, "spec"), "terminationGracePeriodSeconds", 30));
  if (StopContainers(p, pod, grace)) return;
  if (p.confirmed) return;
  if (p.sandbox) {
    try {
      WriteStatus(p, pod, true);
    } catch (const kube::ApiError&) {
      // The pod may already be gone (grace over): nothing to report.
    }
  }
  kube::DeleteOptions opts;
  opts.grace_period_seconds = 0;
  opts.precondition_uid = p.uid;
  try {
    client_->Delete(kube::resources::kPods, p.ns, p.name, opts);
  } catch (const kube::ApiError& e) {
    if (e.reason() != kube::Reason::kNotFound && e.reason() != kube::Reason::kConflict) throw;
  }
  p.confirmed = true;
}

void Kubelet::Teardown(Pod& p) {
  for (auto* list : {&p.inits, &p.mains}) {
    for (Container& c : *list) {
      if (c.pid <= 0) continue;
      KillContainer(c, SIGKILL);
      UnpinNamespace(c);
      int status = 0;
      waitpid(c.pid, &status, 0);
      c.pid = 0;
    }
  }
  for (const auto& t : p.tmpfs)
    umount2(t.c_str(), MNT_DETACH);
  p.tmpfs.clear();
  if (!p.dir.empty()) {
    std::error_code ec;
    fs::remove_all(p.dir, ec);
  }
  if (!p.uid.empty()) {
    if (opts_.netns) {
      net_.Detach(p.uid);  // after the processes: the namespace goes with its last one
    } else {
      ips_.Release(p.uid);
    }
  }
  p.netns.clear();
  p.sandbox = false;
  p.done = true;
}

// ---------------------------------------------------------------------------------------------
// Status

namespace {

json ContainerStatus(const Kubelet::Container& c, bool has_inits) {
  json st = {{"name", c.name},
             {"image", Str(c.spec, "image")},
             {"imageID", ""},
             {"ready", c.pid > 0 && c.ready},
             {"restartCount", c.restarts},
             {"started", c.pid > 0}};
  if (c.state.is_object()) {
    st["state"] = c.state;
  } else {
    st["state"] = {{"waiting", {{"reason", has_inits ? "PodInitializing" : "ContainerCreating"}}}};
  }
  st["lastState"] = c.last_state;
  if (!c.container_id.empty() && !st["state"].contains("waiting")) {
    st["containerID"] = c.container_id;
    st["imageID"] = NormalizeImage(Str(c.spec, "image"));
  }
  return st;
}

// The phase once every init container completed (kubelet_pods.go getPhase).
std::string MainsPhase(const Kubelet::Pod& p, const std::string& policy, bool terminal) {
  int running = 0, waiting = 0, stopped = 0, succeeded = 0;
  for (const Kubelet::Container& c : p.mains) {
    if (c.pid > 0) {
      ++running;
    } else if (c.has_exit()) {
      ++stopped;
      if (TerminatedCode(c.state) == 0) ++succeeded;
    } else if (c.last_state.is_object() && c.last_state.contains("terminated")) {
      ++stopped;
      if (TerminatedCode(c.last_state) == 0) ++succeeded;
    } else {
      ++waiting;
    }
  }
  const int n = static_cast<int>(p.mains.size());
  if (terminal) return stopped == n && succeeded == n ? "Succeeded" : "Failed";
  if (waiting > 0) return "Pending";
  if (running > 0) return "Running";
  if (stopped != n) return "Pending";
  if (policy == "Always") return "Running";
  if (policy == "OnFailure") return stopped == succeeded ? "Succeeded" : "Running";
  return stopped == succeeded ? "Succeeded" : "Failed";
}

std::string NameList(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names)
    out += (out.empty() ? "" : " ") + n;
  return "[" + out + "]";
}

// The four conditions the kubelet owns, as they are now.
std::vector<json> KubeletConditions(const Kubelet::Pod& p, const std::string& phase, bool terminal,
                                    const std::vector<std::string>& incomplete) {
  std::vector<std::string> unready;
  for (const Kubelet::Container& c : p.mains) {
    if (!(c.pid > 0 && c.ready)) unready.push_back(c.name);
  }
  std::vector<json> mine;
  mine.push_back({{"type", "PodReadyToStartContainers"},
                  {"status", p.sandbox && !terminal ? "True" : "False"}});
  if (incomplete.empty()) {
    json init = {{"type", "Initialized"}, {"status", "True"}};
    if (phase == "Succeeded") init["reason"] = "PodCompleted";
    mine.push_back(init);
  } else {
    mine.push_back({{"type", "Initialized"},
                    {"status", "False"},
                    {"reason", "ContainersNotInitialized"},
                    {"message", "containers with incomplete status: " + NameList(incomplete)}});
  }
  json ready;
  if (phase == "Succeeded" || phase == "Failed") {
    ready = {{"status", "False"}, {"reason", phase == "Succeeded" ? "PodCompleted" : "PodFailed"}};
  } else if (unready.empty()) {
    ready = {{"status", "True"}};
  } else {
    ready = {{"status", "False"},
             {"reason", "ContainersNotReady"},
             {"message", "containers with unready status: " + NameList(unready)}};
  }
  json r1 = ready;
  r1["type"] = "Ready";
  json r2 = ready;
  r2["type"] = "ContainersReady";
  mine.push_back(r1);
  mine.push_back(r2);
  return mine;
}

// `mine` after the pod's current conditions: an unchanged condition keeps its transition time,
// and conditions others own (PodScheduled, …) stay.
json MergeConditions(const std::vector<json>& mine, const json& existing) {
  json conditions = json::array();
  for (json c : mine) {
    c["lastProbeTime"] = nullptr;
    c["lastTransitionTime"] = Now();
    if (existing.is_array()) {
      for (const auto& e : existing) {
        if (Str(e, "type") == Str(c, "type") && Str(e, "status") == Str(c, "status") &&
            e.contains("lastTransitionTime")) {
          c["lastTransitionTime"] = e["lastTransitionTime"];
        }
      }
    }
    conditions.push_back(c);
  }
  if (existing.is_array()) {
    for (const auto& e : existing) {
      const std::string t = Str(e, "type");
      if (t != "PodReadyToStartContainers" && t != "Initialized" && t != "Ready" &&
          t != "ContainersReady") {
        conditions.push_back(e);
      }
    }
  }
  return conditions;
}

}  // namespace

json Kubelet::ComputeStatus(Pod& p, const json& pod, bool terminal) {
  const json& spec = Obj(pod, "spec");
  const std::string policy =
      Str(spec, "restartPolicy").empty() ? "Always" : Str(spec, "restartPolicy");
  json init_statuses = json::array();
  for (const Container& c : p.inits)
    init_statuses.push_back(ContainerStatus(c, !p.inits.empty()));
  json statuses = json::array();
  for (const Container& c : p.mains)
    statuses.push_back(ContainerStatus(c, !p.inits.empty()));

  // Phase (kubelet_pods.go getPhase): init containers first.
  std::vector<std::string> incomplete;
  bool init_failed = false;
  for (const Container& c : p.inits) {
    if (c.has_exit() && TerminatedCode(c.state) == 0) continue;
    incomplete.push_back(c.name);
    if (c.has_exit() && policy == "Never") init_failed = true;
  }
  const std::string phase = !incomplete.empty() ? (init_failed || terminal ? "Failed" : "Pending")
                                                : MainsPhase(p, policy, terminal);

  const json conditions = MergeConditions(KubeletConditions(p, phase, terminal, incomplete),
                                          Obj(Obj(pod, "status"), "conditions"));
  json status = {{"phase", phase},
                 {"conditions", conditions},
                 {"hostIP", p.host_ip},
                 {"hostIPs", json::array({{{"ip", p.host_ip}}})},
                 {"podIP", p.ip},
                 {"podIPs", json::array({{{"ip", p.ip}}})},
                 {"startTime", p.start_time},
                 {"containerStatuses", statuses}};
  if (!p.inits.empty()) status["initContainerStatuses"] = init_statuses;
  return status;
}

void Kubelet::WriteStatus(Pod& p, const json& pod, bool terminal) {
  json status = ComputeStatus(p, pod, terminal);
  const bool done = IsTerminalPhase(Str(status, "phase"));
  // Compare without transition times (a recomputation must not cause a write).
  auto strip = [](json s) {
    for (auto& c : s["conditions"])
      c.erase("lastTransitionTime");
    return s;
  };
  if (p.last_status.is_null() || strip(p.last_status) != strip(status)) {
    client_->MergePatchStatus(kube::resources::kPods, p.ns, p.name, {{"status", status}});
    p.last_status = status;
  }
  if (done) p.done = true;
}

// ---------------------------------------------------------------------------------------------
// Registration

KUBESIM_REGISTER_CONTROLLER({"kubelet",
                             [] { return std::make_unique<Kubelet>(); },
                             {{"images", "image policy file: the images that exist (default: all)"},
                              {"pv-root", "host dir holding PVC volumes (<dir>/<ns>/<claim>)"},
                              {"ray", "emulator (default) or real: the Ray on the pods' PATH"},
                              {"ray-bin-dir", "dir put first on every container's PATH"},
                              {"kubelet-dir", "kubelet state dir (default: a temp dir)"},
                              {"kubelet-sync-ms", "resync of waiting pods (default 10000)"},
                              {"kubelet-backoff-ms", "first image-pull/crash back-off (10000)"},
                              {"kubelet-probe-max-ms", "cap on probe delays/periods (0 = none)"},
                              {"pod-network",
                               "loopback (default: a 127.x address per pod) or netns (a network "
                               "namespace per pod on a host bridge)"},
                              {"pod-cidr", "--pod-network netns: the pods' range (10.244.0.0/16)"},
                              {"cluster-hosts-file",
                               "write a hosts file naming every service (for host programs)"},
                              {"pods",
                               "process (default: real programs) or fake (no process: statuses "
                               "only, a fake Ray head and submitter; node/fake_pods.h)"},
                              {"fake-job-ms", "--pods fake: how long each Ray job runs (2000)"},
                              {"kubelet-pod-cpu-shares",
                               "cpu.shares of the one cgroup holding all containers, so pods "
                               "cannot starve kubesim (default 1024, 0 = no cgroup)"}},
                             200});

}  // namespace kubesim::node
