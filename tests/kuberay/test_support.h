// Shared helpers for the kuberay tests.
#pragma once

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "starforge/config/config.h"
#include "starforge/jobspec/parse.h"

namespace starforge::testing {

inline std::string ReadFile(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

inline void WriteFile(const std::filesystem::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << text;
}

// KEY=VALUE lines (blank lines and # comments ignored).
inline std::map<std::string, std::string> ReadEnvFile(const std::filesystem::path& p) {
  std::map<std::string, std::string> env;
  std::istringstream in(ReadFile(p));
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const auto eq = line.find('=');
    env[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return env;
}

inline config::Config ConfigFrom(const std::map<std::string, std::string>& env) {
  config::LoadResult r = config::Load(env);
  if (!r.ok()) throw std::runtime_error("bad test config: " + JoinErrors(r.errors));
  return r.config;
}

inline jobspec::JobSpec JobFrom(const std::string& yaml, const config::Config& cfg = {}) {
  jobspec::Defaults d;
  d.fleet = config::ToString(cfg.default_fleet_kind);
  d.nemo_rl_image = cfg.image_nemo_rl;
  d.pre_running_seconds = cfg.kuberay_prerunning_deadline_s;
  jobspec::ParseResult r = jobspec::Parse(yaml, d);
  if (!r.ok()) throw std::runtime_error("bad test job: " + JoinErrors(r.errors));
  return *r.spec;
}

// A temporary directory removed at scope exit.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "starforge-test-XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace starforge::testing
