#include "starforge/cli/forge.h"

#include <CLI/CLI.hpp>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include "starforge/common/yaml_json.h"
#include "starforge/config/config.h"
#include "starforge/jobspec/parse.h"
#include "starforge/kuberay/render.h"

#ifndef STARFORGE_VERSION
#define STARFORGE_VERSION "dev"
#endif

namespace starforge::cli {
namespace {

struct Io {
  std::istream& in;
  std::ostream& out;
  std::ostream& err;
};

// Reads FILE, or standard input for "-". Returns false (with a message) when it cannot.
bool ReadInput(const std::string& path, Io& io, std::string* text) {
  if (path == "-") {
    std::ostringstream buf;
    buf << io.in.rdbuf();
    *text = buf.str();
    return true;
  }
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    io.err << "forge: cannot read " << path << ": " << std::strerror(errno) << "\n";
    return false;
  }
  std::ostringstream buf;
  buf << f.rdbuf();
  *text = buf.str();
  return true;
}

void PrintErrors(const std::string& source, const FieldErrors& errors, std::ostream& err) {
  for (const auto& e : errors)
    err << source << ": " << e.ToString() << "\n";
}

// Loads the FORGE_* configuration; prints warnings, and errors when it is unusable.
bool LoadConfig(const std::map<std::string, std::string>& env, Io& io, config::Config* cfg) {
  config::LoadResult loaded = config::Load(env);
  for (const auto& w : loaded.warnings)
    io.err << "forge: warning: " << w << "\n";
  if (!loaded.ok()) {
    PrintErrors("configuration", loaded.errors, io.err);
    return false;
  }
  *cfg = loaded.config;
  return true;
}

jobspec::Defaults DefaultsFrom(const config::Config& cfg) {
  jobspec::Defaults d;
  d.fleet = config::ToString(cfg.default_fleet_kind);
  d.nemo_rl_image = cfg.image_nemo_rl;
  d.pre_running_seconds = cfg.kuberay_prerunning_deadline_s;
  return d;
}

// Parses the JobSpec at `path`; prints every error and returns nullopt when it is invalid.
std::optional<jobspec::JobSpec> LoadJob(const std::string& path, const config::Config& cfg,
                                        Io& io) {
  std::string text;
  if (!ReadInput(path, io, &text)) return std::nullopt;
  jobspec::ParseResult parsed = jobspec::Parse(text, DefaultsFrom(cfg));
  if (!parsed.ok()) {
    PrintErrors(path == "-" ? "<stdin>" : path, parsed.errors, io.err);
    return std::nullopt;
  }
  return parsed.spec;
}

std::string Format(const nlohmann::json& value, const std::string& output) {
  return output == "json" ? value.dump(2) + "\n" : EmitYaml(value);
}

}  // namespace

int Run(const std::vector<std::string>& args, const std::map<std::string, std::string>& env,
        std::istream& in, std::ostream& out, std::ostream& err) {
  Io io{in, out, err};
  CLI::App app{"StarForge: run LLM / RL training jobs on shared GPU machines", "forge"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("forge ") + STARFORGE_VERSION);

  std::string job_file;
  bool canonical = false;
  auto* validate = app.add_subcommand("validate", "Check a JobSpec; print `ok` or every error");
  validate->add_option("JOB", job_file, "JobSpec file (YAML or JSON; - for stdin)")->required();
  validate->add_flag("--canonical", canonical, "Print the canonical JSON form instead of `ok`");

  std::string job_id;
  kuberay::CapsuleRef capsule;
  std::string output = "yaml";
  auto* render = app.add_subcommand("render", "Print the RayJob that runs a JobSpec");
  render->add_option("JOB", job_file, "JobSpec file (YAML or JSON; - for stdin)")->required();
  render->add_option("--job-id", job_id, "StarForge job id (names the RayJob)")->required();
  render->add_option("--capsule-url", capsule.url, "Capsule URL (https:// or http://)")->required();
  render->add_option("--capsule-sha256", capsule.sha256, "Capsule SHA-256 (64 hex digits)")
      ->required();
  render->add_option("-o,--output", output, "Output format")
      ->check(CLI::IsMember({"yaml", "json"}));

  auto* config_cmd = app.add_subcommand("config", "Print the effective FORGE_* settings");
  config_cmd->add_option("-o,--output", output, "Output format")
      ->check(CLI::IsMember({"yaml", "json"}));

  auto* version = app.add_subcommand("version", "Print the version");

  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    out << app.help();
    return kExitOk;
  } catch (const CLI::CallForVersion&) {
    out << "forge " << STARFORGE_VERSION << "\n";
    return kExitOk;
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) {
      out << app.help();
      return kExitOk;
    }
    err << "forge: " << e.what() << "\n";
    for (auto* sub : app.get_subcommands())
      err << "usage: " << sub->help() << "\n";
    if (app.get_subcommands().empty()) err << "run `forge --help` for the commands\n";
    return kExitUsage;
  }

  if (version->parsed()) {
    out << "forge " << STARFORGE_VERSION << "\n";
    return kExitOk;
  }
  config::Config cfg;
  if (!LoadConfig(env, io, &cfg)) return kExitUsage;

  if (config_cmd->parsed()) {
    out << Format(config::Dump(cfg), output);
    return kExitOk;
  }
  std::optional<jobspec::JobSpec> spec = LoadJob(job_file, cfg, io);
  if (!spec) return kExitInvalid;

  if (validate->parsed()) {
    out << (canonical ? jobspec::ToCanonicalText(*spec) : "ok\n");
    return kExitOk;
  }
  kuberay::RenderResult rendered = kuberay::Render(*spec, job_id, capsule, cfg);
  if (!rendered.ok()) {
    PrintErrors(job_file == "-" ? "<stdin>" : job_file, rendered.errors, err);
    return kExitInvalid;
  }
  out << Format(rendered.rayjob, output);
  return kExitOk;
}

}  // namespace starforge::cli
