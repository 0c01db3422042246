// Where the `forge` client finds its server and token: --server, FORGE_SERVER / FORGE_TOKEN, and
// the file `forge login` writes ($XDG_CONFIG_HOME or ~/.config, starforge/config.json, 0600).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "starforge/common/status_or.h"

namespace starforge::cli {

inline constexpr const char* kDefaultServer = "http://127.0.0.1:8080";

// What `forge login` saves: {"server": "...", "token": "..."}.
struct ClientSettings {
  std::string server;
  std::string token;
};

// $XDG_CONFIG_HOME/starforge/config.json when XDG_CONFIG_HOME is set (and absolute), else
// $HOME/.config/starforge/config.json; "" when neither is usable.
std::filesystem::path ClientConfigPath(const std::string& xdg_config_home, const std::string& home);

struct LoadedSettings {
  ClientSettings settings;  // empty when the file does not exist
  std::string error;        // the file exists but cannot be read or parsed
  std::string warning;      // e.g. readable by others
};

// Reads the file; a missing file is not an error.
LoadedSettings LoadClientSettings(const std::filesystem::path& path);

// Writes the file atomically (temporary file + rename) with mode 0600, creating its directory
// with mode 0700. Keeps keys of the existing file that it does not know.
Status SaveClientSettings(const std::filesystem::path& path, const ClientSettings& settings);

// "host:port" → "http://host:port"; strips trailing '/'. kInvalidArgument when the URL has
// another scheme, no host, or a query/fragment.
StatusOr<std::string> NormalizeServer(const std::string& url);

// The server and token a command uses.
struct Endpoint {
  std::string server;       // normalised
  std::string token;        // "" = none
  std::string server_from;  // "--server", "FORGE_SERVER", "config file", "default"
  std::string token_from;   // "FORGE_TOKEN", "config file", ""
};

// Server: `flag` > `env_server` > the file > kDefaultServer. Token: `env_token` > the file's,
// but the file's token only for the file's server: a token saved by `forge login` is never
// sent to another server named by --server or FORGE_SERVER. kInvalidArgument when a server URL
// is malformed.
StatusOr<Endpoint> ResolveEndpoint(const std::string& flag, const std::string& env_server,
                                   const std::string& env_token, const ClientSettings& file);

// The code directory of a submission: `flag` (relative to the working directory) > the
// JobSpec's `code:` (relative to the JobSpec file's directory; the working directory for
// stdin, "-") > kInvalidArgument saying how to give one. The directory must exist.
StatusOr<std::filesystem::path> ResolveCodeDir(const std::string& flag,
                                               const std::optional<std::string>& spec_code,
                                               const std::string& job_file);

}  // namespace starforge::cli
