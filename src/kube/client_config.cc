// Configuration discovery: explicit settings, in-cluster, kubeconfig (docs/kube-client.md).
#include "starforge/kube/client_config.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "starforge/common/yaml_json.h"

namespace starforge::kube {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::optional<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return ss.str();
}

std::string TrimSpace(std::string s) {
  const char* ws = " \t\r\n";
  size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return {};
  size_t e = s.find_last_not_of(ws);
  return s.substr(b, e - b + 1);
}

std::string Lookup(const std::map<std::string, std::string>& env, const std::string& name) {
  auto it = env.find(name);
  return it == env.end() ? std::string() : it->second;
}

// RFC 4648 base64 with optional padding; whitespace is ignored (kubeconfigs wrap long data).
std::optional<std::string> DecodeBase64(std::string_view in) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+' || c == '-') return 62;
    if (c == '/' || c == '_') return 63;
    return -1;
  };
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
    if (c == '=') break;
    int v = value(c);
    if (v < 0) return std::nullopt;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  return out;
}

// Named entries of a kubeconfig list (`clusters`, `users`, `contexts`), each remembering the
// directory of the file that defined it (relative paths resolve against it).
struct Entry {
  json body;
  std::string dir;
  std::string file;
};

struct Merged {
  std::map<std::string, Entry> clusters, users, contexts;
  std::string current_context;
  std::string current_context_file;
  std::vector<std::string> files_read;
};

// An unusable configuration: fixing it, not retrying, helps.
Status Unusable(std::string message) {
  return {Code::kInvalidArgument, std::move(message)};
}

Status MergeList(const json& doc, const char* list, const char* inner, const std::string& file,
                 std::map<std::string, Entry>* into) {
  auto it = doc.find(list);
  if (it == doc.end() || it->is_null()) return Status::Ok();
  if (!it->is_array())
    return Unusable(fmt::format("kubeconfig {}: `{}` must be a list", file, list));
  for (const auto& item : *it) {
    if (!item.is_object() || !item.contains("name") || !item["name"].is_string()) {
      return Unusable(fmt::format("kubeconfig {}: every entry of `{}` needs a name", file, list));
    }
    std::string name = item["name"].get<std::string>();
    if (into->count(name)) continue;  // kubectl: the first file to define a name wins
    json body = item.value(inner, json::object());
    if (body.is_null()) body = json::object();
    if (!body.is_object()) {
      return Unusable(
          fmt::format("kubeconfig {}: {} \"{}\": `{}` must be a mapping", file, list, name, inner));
    }
    into->emplace(name, Entry{body, fs::path(file).parent_path().string(), file});
  }
  return Status::Ok();
}

std::string Str(const json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return {};
  if (it->is_string()) return it->get<std::string>();
  if (it->is_boolean()) return it->get<bool>() ? "true" : "false";
  return it->dump();
}

bool Bool(const json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end()) return false;
  if (it->is_boolean()) return it->get<bool>();
  if (it->is_string()) return it->get<std::string>() == "true";
  return false;
}

std::string Resolve(const std::string& path, const std::string& dir) {
  if (path.empty() || fs::path(path).is_absolute() || dir.empty()) return path;
  return (fs::path(dir) / path).lexically_normal().string();
}

StatusOr<std::string> DecodeData(const json& obj, const char* key, const std::string& what) {
  std::string encoded = Str(obj, key);
  if (encoded.empty()) return std::string();
  auto decoded = DecodeBase64(encoded);
  if (!decoded) return Unusable(fmt::format("{}: `{}` is not valid base64", what, key));
  return std::move(*decoded);
}

std::string StripTrailingSlash(std::string s) {
  while (!s.empty() && s.back() == '/')
    s.pop_back();
  return s;
}

}  // namespace

Status CheckClientConfig(const ClientConfig& config) {
  if (config.server.empty()) return Unusable("no Kubernetes API server configured");
  if (config.server.rfind("http://", 0) != 0 && config.server.rfind("https://", 0) != 0) {
    return Unusable(fmt::format("the API server address {} must start with http:// or https://",
                                config.server));
  }
  return Status::Ok();
}

ConfigSources ProcessConfigSources() {
  ConfigSources s;
  for (const char* name :
       {"KUBECONFIG", "HOME", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"}) {
    if (const char* v = std::getenv(name)) s.env[name] = v;
  }
  return s;
}

StatusOr<ClientConfig> LoadKubeconfig(const std::vector<std::string>& files,
                                      const std::string& context) {
  Merged m;
  for (const auto& file : files) {
    if (file.empty()) continue;
    auto text = ReadFile(file);
    if (!text) continue;  // kubectl skips missing files in KUBECONFIG
    StatusOr<json> parsed = ParseYaml(*text);
    if (!parsed.ok())
      return Unusable(fmt::format("kubeconfig {}: {}", file, parsed.status().message()));
    const json doc = std::move(parsed).value();
    m.files_read.push_back(file);
    if (doc.is_null()) continue;
    if (!doc.is_object()) return Unusable(fmt::format("kubeconfig {}: not a mapping", file));
    for (Status merged : {MergeList(doc, "clusters", "cluster", file, &m.clusters),
                          MergeList(doc, "users", "user", file, &m.users),
                          MergeList(doc, "contexts", "context", file, &m.contexts)}) {
      if (!merged.ok()) return merged;
    }
    std::string cc = Str(doc, "current-context");
    if (m.current_context.empty() && !cc.empty()) {
      m.current_context = cc;
      m.current_context_file = file;
    }
  }
  std::string where = files.size() == 1 ? files[0] : fmt::format("{}", fmt::join(files, ":"));
  if (m.files_read.empty()) {
    return Unusable(fmt::format("no kubeconfig found at {}", where));
  }
  std::string ctx_name = context.empty() ? m.current_context : context;
  if (ctx_name.empty()) {
    return Unusable(
        fmt::format("kubeconfig {} has no current-context; set one (kubectl config use-context) or "
                    "FORGE_K8S_CONTEXT",
                    where));
  }
  auto ctx = m.contexts.find(ctx_name);
  if (ctx == m.contexts.end()) {
    return Unusable(fmt::format("kubeconfig {}: context \"{}\" not found", where, ctx_name));
  }
  std::string cluster_name = Str(ctx->second.body, "cluster");
  std::string user_name = Str(ctx->second.body, "user");
  auto cluster = m.clusters.find(cluster_name);
  if (cluster == m.clusters.end()) {
    return Unusable(
        fmt::format("kubeconfig {}: context \"{}\" refers to cluster \"{}\", which is "
                    "not defined",
                    where, ctx_name, cluster_name));
  }
  ClientConfig c;
  c.source = fmt::format("kubeconfig {} (context {})", where, ctx_name);
  c.namespace_ = Str(ctx->second.body, "namespace");
  const json& cl = cluster->second.body;
  const std::string& cdir = cluster->second.dir;
  c.server = StripTrailingSlash(Str(cl, "server"));
  if (c.server.empty()) {
    return Unusable(
        fmt::format("kubeconfig {}: cluster \"{}\" has no server", where, cluster_name));
  }
  std::string cluster_what = fmt::format("kubeconfig {}: cluster \"{}\"", where, cluster_name);
  c.ca_file = Resolve(Str(cl, "certificate-authority"), cdir);
  StatusOr<std::string> ca_data = DecodeData(cl, "certificate-authority-data", cluster_what);
  if (!ca_data.ok()) return std::move(ca_data).status();
  c.ca_data = std::move(ca_data).value();
  c.insecure_skip_tls_verify = Bool(cl, "insecure-skip-tls-verify");
  c.tls_server_name = Str(cl, "tls-server-name");

  if (!user_name.empty()) {
    auto user = m.users.find(user_name);
    if (user == m.users.end()) {
      return Unusable(
          fmt::format("kubeconfig {}: context \"{}\" refers to user \"{}\", which is not defined",
                      where, ctx_name, user_name));
    }
    const json& u = user->second.body;
    const std::string& udir = user->second.dir;
    std::string user_what = fmt::format("kubeconfig {}: user \"{}\"", where, user_name);
    if (u.contains("exec") && !u["exec"].is_null()) {
      std::string cmd = u["exec"].is_object() ? Str(u["exec"], "command") : std::string();
      return Unusable(fmt::format(
          "{} uses an exec credential plugin ({}), which StarForge does not support yet; use a "
          "token, tokenFile or client certificate in the kubeconfig, or set FORGE_K8S_API_SERVER "
          "and FORGE_K8S_TOKEN",
          user_what, cmd.empty() ? "no command" : cmd));
    }
    if (u.contains("auth-provider") && !u["auth-provider"].is_null()) {
      return Unusable(fmt::format(
          "{} uses an auth-provider plugin, which StarForge does not support yet; use a token, "
          "tokenFile or client certificate",
          user_what));
    }
    c.token = Secret(Str(u, "token"));
    c.token_file = Resolve(Str(u, "tokenFile"), udir);
    c.client_cert_file = Resolve(Str(u, "client-certificate"), udir);
    StatusOr<std::string> cert_data = DecodeData(u, "client-certificate-data", user_what);
    if (!cert_data.ok()) return std::move(cert_data).status();
    c.client_cert_data = std::move(cert_data).value();
    c.client_key_file = Resolve(Str(u, "client-key"), udir);
    StatusOr<std::string> key_data = DecodeData(u, "client-key-data", user_what);
    if (!key_data.ok()) return std::move(key_data).status();
    c.client_key_data = Secret(std::move(key_data).value());
    bool has_cert = !c.client_cert_file.empty() || !c.client_cert_data.empty();
    bool has_key = !c.client_key_file.empty() || !c.client_key_data.empty();
    if (has_cert != has_key) {
      return Unusable(
          fmt::format("{}: a client certificate needs both a certificate and a key", user_what));
    }
  }
  if (Status usable = CheckClientConfig(c); !usable.ok())
    return Unusable(
        fmt::format("kubeconfig {}: cluster \"{}\": {}", where, cluster_name, usable.message()));
  return c;
}

StatusOr<ClientConfig> LoadClientConfig(const ApiServerSettings& settings,
                                        const ConfigSources& sources) {
  // 1. Explicit settings.
  if (!settings.server.empty()) {
    ClientConfig c;
    c.source = "FORGE_K8S_API_SERVER";
    c.server = StripTrailingSlash(settings.server);
    c.token = settings.token;
    c.ca_file = settings.ca_file;
    c.insecure_skip_tls_verify = settings.insecure_skip_tls_verify;
    if (Status usable = CheckClientConfig(c); !usable.ok())
      return Unusable("FORGE_K8S_API_SERVER: " + usable.message());
    return c;
  }
  // 2. In-cluster (client-go rest.InClusterConfig): both variables and the token must exist.
  std::string host = Lookup(sources.env, "KUBERNETES_SERVICE_HOST");
  std::string port = Lookup(sources.env, "KUBERNETES_SERVICE_PORT");
  if (!host.empty() && !port.empty()) {
    fs::path dir(sources.service_account_dir);
    std::string token_file = (dir / "token").string();
    if (fs::exists(token_file)) {
      ClientConfig c;
      c.source = "in-cluster service account";
      // An IPv6 literal needs brackets in a URL.
      bool v6 = host.find(':') != std::string::npos && host.front() != '[';
      c.server = fmt::format("https://{}:{}", v6 ? "[" + host + "]" : host, port);
      c.token_file = token_file;
      std::string ca = (dir / "ca.crt").string();
      if (fs::exists(ca)) c.ca_file = ca;
      if (auto ns = ReadFile((dir / "namespace").string())) c.namespace_ = TrimSpace(*ns);
      return c;
    }
  }
  // 3. kubeconfig.
  std::vector<std::string> files;
  std::string list = Lookup(sources.env, "KUBECONFIG");
  if (!list.empty()) {
    std::stringstream ss(list);
    std::string item;
    while (std::getline(ss, item, ':')) {
      if (!item.empty()) files.push_back(item);
    }
  } else {
    std::string home = Lookup(sources.env, "HOME");
    if (!home.empty()) files.push_back((fs::path(home) / ".kube" / "config").string());
  }
  if (files.empty() || std::none_of(files.begin(), files.end(),
                                    [](const std::string& f) { return fs::exists(f); })) {
    return Unusable(
        "no Kubernetes configuration found: set FORGE_K8S_API_SERVER (and FORGE_K8S_TOKEN), run "
        "inside a cluster, or provide a kubeconfig (KUBECONFIG or ~/.kube/config)");
  }
  return LoadKubeconfig(files, settings.context);
}

TokenSource::TokenSource(const ClientConfig& config, std::chrono::seconds recheck)
    : static_token_(config.token), file_(config.token_file), recheck_(recheck) {}

StatusOr<bool> TokenSource::ReloadLocked(bool force) {
  // A projected token is swapped by symlink: a brief absence may pass.
  const Status unreadable =
      Status::Unavailable(fmt::format("cannot read the token file {}", file_));
  struct stat st {};
  if (::stat(file_.c_str(), &st) != 0) return unreadable;
  bool same = loaded_ && st.st_mtim.tv_sec == mtime_ && st.st_mtim.tv_nsec == mtime_ns_ &&
              static_cast<long long>(st.st_size) == size_;
  if (same && !force) return false;
  auto text = ReadFile(file_);
  if (!text) return unreadable;
  std::string token = TrimSpace(*text);
  bool changed = !loaded_ || token != current_.Reveal();
  current_ = Secret(std::move(token));
  mtime_ = st.st_mtim.tv_sec;
  mtime_ns_ = st.st_mtim.tv_nsec;
  size_ = static_cast<long long>(st.st_size);
  loaded_ = true;
  return changed;
}

StatusOr<Secret> TokenSource::Get() {
  if (file_.empty()) return static_token_;
  std::lock_guard lock(mu_);
  auto now = std::chrono::steady_clock::now();
  if (!loaded_ || now - last_check_ >= recheck_) {
    last_check_ = now;
    if (StatusOr<bool> reloaded = ReloadLocked(false); !reloaded.ok())
      return std::move(reloaded).status();
  }
  return current_;
}

StatusOr<bool> TokenSource::Refresh() {
  if (file_.empty()) return false;
  std::lock_guard lock(mu_);
  last_check_ = std::chrono::steady_clock::now();
  return ReloadLocked(true);
}

}  // namespace starforge::kube
