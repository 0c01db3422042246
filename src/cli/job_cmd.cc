// `forge validate`, `forge render`, `forge config`.
#include "command.h"
#include "starforge/cli/forge.h"
#include "starforge/jobspec/parse.h"
#include "starforge/kuberay/render.h"

namespace starforge::cli {

void RegisterJobCommands(Registry& registry) {
  struct Options {
    std::string job_file;
    bool canonical = false;
    std::string job_id;
    kuberay::CapsuleRef capsule;
    std::string output = "yaml";
  };
  auto opts = std::make_shared<Options>();

  CLI::App* validate =
      registry.Add("validate", "Check a JobSpec; print `ok` or every error", [opts](Context& c) {
        config::Config cfg;
        if (!LoadConfig(c, &cfg)) return kExitUsage;
        std::optional<jobspec::JobSpec> spec = LoadJob(c, opts->job_file, cfg);
        if (!spec) return kExitInvalid;
        c.out << (opts->canonical ? jobspec::ToCanonicalText(*spec) : "ok\n");
        return kExitOk;
      });
  validate->add_option("JOB", opts->job_file, "JobSpec file (YAML or JSON; - for stdin)")
      ->required();
  validate->add_flag("--canonical", opts->canonical,
                     "Print the canonical JSON form instead of `ok`");

  CLI::App* render =
      registry.Add("render", "Print the RayJob that runs a JobSpec", [opts](Context& c) {
        config::Config cfg;
        if (!LoadConfig(c, &cfg)) return kExitUsage;
        std::optional<jobspec::JobSpec> spec = LoadJob(c, opts->job_file, cfg);
        if (!spec) return kExitInvalid;
        kuberay::RenderResult r = kuberay::Render(*spec, opts->job_id, opts->capsule, cfg);
        if (!r.ok()) {
          PrintErrors(c, opts->job_file == "-" ? "<stdin>" : opts->job_file, r.errors);
          return kExitInvalid;
        }
        c.out << Format(r.rayjob, opts->output);
        return kExitOk;
      });
  render->add_option("JOB", opts->job_file, "JobSpec file (YAML or JSON; - for stdin)")->required();
  render->add_option("--job-id", opts->job_id, "StarForge job id (names the RayJob)")->required();
  render->add_option("--capsule-url", opts->capsule.url, "Capsule URL (https:// or http://)")
      ->required();
  render->add_option("--capsule-sha256", opts->capsule.sha256, "Capsule SHA-256 (64 hex digits)")
      ->required();
  render->add_option("-o,--output", opts->output, "Output format")
      ->check(CLI::IsMember({"yaml", "json"}));

  CLI::App* config_cmd = registry.Add(
      "config", "Print the effective FORGE_* settings (secrets as ***)", [opts](Context& c) {
        config::Config cfg;
        if (!LoadConfig(c, &cfg)) return kExitUsage;
        c.out << Format(config::Dump(cfg), opts->output);
        return kExitOk;
      });
  config_cmd->add_option("-o,--output", opts->output, "Output format")
      ->check(CLI::IsMember({"yaml", "json"}));
}

}  // namespace starforge::cli
