#include "starforge/cli/client_config.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "starforge/common/atomic_file.h"

namespace starforge::cli {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string Errno() {
  return std::strerror(errno);
}

// The file as JSON (an empty object when absent); "" or why it cannot be used.
std::string ReadFile(const fs::path& path, json* doc, bool* exists) {
  *doc = json::object();
  *exists = false;
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    if (errno == ENOENT) return "";
    return "cannot read " + path.string() + ": " + Errno();
  }
  *exists = true;
  std::stringstream text;
  text << f.rdbuf();
  *doc = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (doc->is_discarded() || !doc->is_object()) {
    *doc = json::object();
    return path.string() + " is not a JSON object: fix it or delete it and run `forge login`";
  }
  return "";
}

}  // namespace

fs::path ClientConfigPath(const std::string& xdg_config_home, const std::string& home) {
  // The XDG spec says a relative XDG_CONFIG_HOME is invalid and must be ignored.
  if (!xdg_config_home.empty() && xdg_config_home.front() == '/')
    return fs::path(xdg_config_home) / "starforge" / "config.json";
  if (!home.empty()) return fs::path(home) / ".config" / "starforge" / "config.json";
  return {};
}

LoadedSettings LoadClientSettings(const fs::path& path) {
  LoadedSettings out;
  if (path.empty()) return out;
  json doc;
  bool exists = false;
  out.error = ReadFile(path, &doc, &exists);
  if (!out.error.empty() || !exists) return out;
  for (const char* key : {"server", "token"}) {
    const auto it = doc.find(key);
    if (it == doc.end()) continue;
    if (!it->is_string()) {
      out.error = path.string() + ": \"" + key + "\" must be a string";
      return out;
    }
  }
  out.settings.server = doc.value("server", "");
  out.settings.token = doc.value("token", "");
  struct stat st {};
  if (!out.settings.token.empty() && ::stat(path.c_str(), &st) == 0 && (st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", st.st_mode & 07777);
    out.warning = path.string() + " holds a token and is readable by others (mode " + mode +
                  "): run chmod 600 " + path.string();
  }
  return out;
}

Status SaveClientSettings(const fs::path& path, const ClientSettings& settings) {
  if (path.empty())
    return Status::FailedPrecondition(
        "no place for the configuration: set HOME (or XDG_CONFIG_HOME)");
  const fs::path dir = path.parent_path();
  std::error_code ec;
  const bool existed = fs::exists(dir, ec);
  fs::create_directories(dir, ec);
  if (ec) return Status::Internal("cannot create " + dir.string() + ": " + ec.message());
  // Our own directory: only its owner may list it. (A pre-existing one is left as the user set
  // it; the file itself is 0600 regardless.)
  if (!existed && ::chmod(dir.c_str(), 0700) != 0)
    return Status::Internal("cannot set the mode of " + dir.string() + ": " + Errno());

  json doc;
  bool exists = false;
  if (!ReadFile(path, &doc, &exists).empty()) doc = json::object();  // replaced: it was unusable
  doc["server"] = settings.server;
  doc["token"] = settings.token;
  const std::string text = doc.dump(2) + "\n";

  // The temporary file is 0600 from the start: the token is never readable by others.
  return WriteFileAtomic(path, text, 0600);
}

StatusOr<std::string> NormalizeServer(const std::string& url) {
  std::string u = url;
  while (!u.empty() && (u.back() == ' ' || u.back() == '\n' || u.back() == '\r'))
    u.pop_back();
  while (!u.empty() && u.front() == ' ')
    u.erase(0, 1);
  const size_t scheme_end = u.find("://");
  if (scheme_end == std::string::npos) {
    u = "http://" + u;
  } else {
    std::string scheme = u.substr(0, scheme_end);
    for (char& ch : scheme)
      ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (scheme != "http" && scheme != "https") {
      return Status::Invalid("server URL " + url + ": use http:// or https://");
    }
    u = scheme + u.substr(scheme_end);
  }
  while (u.back() == '/')
    u.pop_back();
  const size_t host_start = u.find("://") + 3;
  if (host_start >= u.size() || u[host_start] == '/' || u[host_start] == ':') {
    return Status::Invalid("server URL \"" + url + "\" has no host (e.g. http://127.0.0.1:8080)");
  }
  if (u.find_first_of("?# ") != std::string::npos) {
    return Status::Invalid("server URL \"" + url +
                           "\" must be scheme://host[:port][/path] (no query or spaces)");
  }
  if (u.find('@', host_start) != std::string::npos) {
    // A user:password@ part would be sent as Basic auth and printed in messages.
    return Status::Invalid(
        "server URL must not contain credentials (user@): use `forge login` for the token");
  }
  return u;
}

StatusOr<Endpoint> ResolveEndpoint(const std::string& flag, const std::string& env_server,
                                   const std::string& env_token, const ClientSettings& file) {
  Endpoint ep;
  std::string raw;
  if (!flag.empty()) {
    raw = flag;
    ep.server_from = "--server";
  } else if (!env_server.empty()) {
    raw = env_server;
    ep.server_from = "FORGE_SERVER";
  } else if (!file.server.empty()) {
    raw = file.server;
    ep.server_from = "config file";
  } else {
    raw = kDefaultServer;
    ep.server_from = "default";
  }
  StatusOr<std::string> server = NormalizeServer(raw);
  if (!server) return Status::Invalid(ep.server_from + ": " + server.status().message());
  ep.server = *server;
  if (!env_token.empty()) {
    ep.token = env_token;
    ep.token_from = "FORGE_TOKEN";
  } else if (!file.token.empty()) {
    const StatusOr<std::string> saved =
        NormalizeServer(file.server.empty() ? std::string(kDefaultServer) : file.server);
    if (saved && *saved == ep.server) {
      ep.token = file.token;
      ep.token_from = "config file";
    }
  }
  return ep;
}

StatusOr<fs::path> ResolveCodeDir(const std::string& flag,
                                  const std::optional<std::string>& spec_code,
                                  const std::string& job_file) {
  fs::path dir;
  std::string from;
  if (!flag.empty()) {
    dir = flag;
    from = "--code";
  } else if (spec_code && !spec_code->empty()) {
    const fs::path base = job_file == "-" ? fs::path(".") : fs::path(job_file).parent_path();
    dir = fs::path(*spec_code).is_absolute() ? fs::path(*spec_code) : base / *spec_code;
    from = "code: in " + (job_file == "-" ? std::string("the JobSpec") : job_file);
  } else {
    return Status::Invalid("no code directory: pass --code DIR or set code: in the JobSpec");
  }
  if (dir.empty()) dir = ".";
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return Status::Invalid("code directory " + dir.string() + " (from " + from + ") " +
                           (fs::exists(dir, ec) ? "is not a directory" : "does not exist"));
  }
  return dir.lexically_normal();
}

}  // namespace starforge::cli
