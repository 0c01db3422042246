// Shared helpers for the kuberay tests.
#pragma once

#include <filesystem>
#include <map>
#include <sstream>
#include <string>

#include "starforge/config/config.h"
#include "starforge/jobspec/parse.h"
#include "support/files.h"
#include "support/temp_dir.h"

namespace starforge::testing {

using support::ReadFile;
using support::TempDir;
using support::WriteFile;

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

}  // namespace starforge::testing
