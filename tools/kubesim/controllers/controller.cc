#include "controllers/controller.h"

#include <algorithm>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <thread>

namespace kubesim::controllers {

namespace {

std::mutex& RegistryMu() {
  static std::mutex mu;
  return mu;
}

std::vector<ControllerInfo>& Registry() {
  static std::vector<ControllerInfo> reg;
  return reg;
}

}  // namespace

bool ControllerFlags::OperatorAtLeast(int major, int minor) const {
  int ma = 0;
  int mi = 0;
  if (std::sscanf(operator_version.c_str(), "v%d.%d", &ma, &mi) != 2) return true;
  return ma > major || (ma == major && mi >= minor);
}

bool RegisterController(ControllerInfo info) {
  std::lock_guard<std::mutex> lock(RegistryMu());
  Registry().push_back(std::move(info));
  return true;
}

std::vector<ControllerInfo> RegisteredControllers() {
  std::lock_guard<std::mutex> lock(RegistryMu());
  std::vector<ControllerInfo> out = Registry();
  std::sort(out.begin(), out.end(), [](const ControllerInfo& a, const ControllerInfo& b) {
    return a.order != b.order ? a.order < b.order : a.name < b.name;
  });
  return out;
}

std::string CheckPositiveInt(const std::string& value) {
  size_t used = 0;
  long long n = 0;
  try {
    n = std::stoll(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != value.size() || n < 1 || n > 1000000)
    return "wants a whole number >= 1, not \"" + value + "\"";
  return "";
}

int PositiveIntFlag(const ControllerFlags& flags, const std::string& name, int fallback) {
  const std::string v = flags.Value(name);
  if (v.empty()) return fallback;
  const std::string err = CheckPositiveInt(v);
  if (!err.empty()) throw std::invalid_argument("--" + name + " " + err);
  return static_cast<int>(std::stoll(v));
}

const ControllerFlag* FindControllerFlag(const std::string& name) {
  std::lock_guard<std::mutex> lock(RegistryMu());
  for (const ControllerInfo& c : Registry()) {
    for (const ControllerFlag& f : c.flags) {
      if (f.name == name) return &f;
    }
  }
  return nullptr;
}

bool IsControllerFlag(const std::string& name) {
  std::lock_guard<std::mutex> lock(RegistryMu());
  for (const ControllerInfo& c : Registry()) {
    for (const ControllerFlag& f : c.flags) {
      if (f.name == name) return true;
    }
  }
  return false;
}

std::set<std::string> ParseControllerSelection(const std::string& text) {
  std::set<std::string> known;
  for (const ControllerInfo& c : RegisteredControllers())
    known.insert(c.name);
  if (text == "all") return known;
  std::set<std::string> out;
  if (text == "none" || text.empty()) return out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string name =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!name.empty()) {
      if (known.count(name) == 0) {
        std::string list;
        for (const std::string& k : known)
          list += (list.empty() ? "" : ", ") + k;
        throw std::invalid_argument("unknown controller \"" + name + "\" (known: " + list + ")");
      }
      out.insert(name);
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

namespace {
std::mutex reconcile_counts_mu;
std::map<std::string, uint64_t> reconcile_counts;
}  // namespace

void CountReconcile(const std::string& name) {
  std::lock_guard<std::mutex> lock(reconcile_counts_mu);
  ++reconcile_counts[name];
}

std::map<std::string, uint64_t> ReconcileCounts(bool reset) {
  std::lock_guard<std::mutex> lock(reconcile_counts_mu);
  std::map<std::string, uint64_t> out = reconcile_counts;
  if (reset) reconcile_counts.clear();
  return out;
}

const std::string& ControllerKey() {
  static const std::string key = [] {
    std::random_device rd;
    std::string k;
    static const char* hex = "0123456789abcdef";
    for (int i = 0; i < 32; ++i)
      k += hex[rd() % 16];
    return k;
  }();
  return key;
}

ControllerSet::~ControllerSet() {
  StopAll();
}

void ControllerSet::StartAll(const ControllerContext& ctx) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const ControllerInfo& info : RegisteredControllers()) {
    if (ctx.flags.enabled.count(info.name) == 0) continue;
    std::unique_ptr<Controller> c = info.make();
    c->Start(ctx);
    running_.push_back(std::move(c));
  }
}

void ControllerSet::StopAll() {
  std::lock_guard<std::mutex> lock(mu_);
  // Side by side: each controller's streams take up to a second to notice.
  std::vector<std::thread> stoppers;
  for (auto& c : running_)
    stoppers.emplace_back([&c] { c->Stop(); });
  for (auto& t : stoppers)
    t.join();
  running_.clear();
}

std::unique_ptr<starforge::kube::Client> MakeControllerClient(const std::string& server_url,
                                                              const std::string& ca_file,
                                                              const std::string& name) {
  starforge::kube::ClientConfig cfg;
  cfg.server = server_url;
  cfg.ca_file = ca_file;
  cfg.source = "kubesim controller " + name;
  starforge::kube::ClientOptions opts;
  opts.user_agent = "kubesim-controller/" + name;
  opts.extra_headers[kControllerHeader] = name;
  opts.extra_headers[kControllerKeyHeader] = ControllerKey();
  // Loopback to ourselves: fail and retry fast rather than wait like a remote client.
  opts.connect_timeout = std::chrono::milliseconds(2000);
  opts.request_timeout = std::chrono::milliseconds(30000);
  opts.max_attempts = 5;
  opts.backoff_base = std::chrono::milliseconds(50);
  opts.backoff_cap = std::chrono::milliseconds(1000);
  return std::make_unique<starforge::kube::Client>(std::move(cfg), std::move(opts));
}

}  // namespace kubesim::controllers
