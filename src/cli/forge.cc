#include "starforge/cli/forge.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include "command.h"
#include "starforge/common/yaml_json.h"
#include "starforge/jobspec/parse.h"

#ifndef STARFORGE_VERSION
#define STARFORGE_VERSION "dev"
#endif

namespace starforge::cli {

CLI::App* Registry::Add(const std::string& name, const std::string& description, Action action) {
  return Add(&app_, name, description, std::move(action));
}

CLI::App* Registry::Add(CLI::App* parent, const std::string& name, const std::string& description,
                        Action action) {
  CLI::App* sub = parent->add_subcommand(name, description);
  commands_.emplace_back(sub, std::move(action));
  return sub;
}

const Action* Registry::Parsed() const {
  // Nested subcommands (e.g. `capsule build`) register after their parent: the deepest parsed
  // one wins.
  const Action* found = nullptr;
  for (const auto& [sub, action] : commands_) {
    if (sub->parsed()) found = &action;
  }
  return found;
}

bool LoadConfig(Context& ctx, config::Config* cfg, bool client) {
  config::LoadResult loaded = config::Load(ctx.env);
  for (const auto& w : client ? loaded.name_warnings : loaded.warnings)
    ctx.err << "forge: warning: " << w << "\n";
  if (!loaded.ok()) {
    PrintErrors(ctx, "configuration", loaded.errors);
    return false;
  }
  *cfg = loaded.config;
  return true;
}

bool ReadInput(Context& ctx, const std::string& path, std::string* text) {
  std::ostringstream buf;
  if (path == "-") {
    buf << ctx.in.rdbuf();
  } else {
    std::ifstream f(path, std::ios::binary);
    if (!f) {
      ctx.err << "forge: cannot read " << path << ": " << std::strerror(errno) << "\n";
      return false;
    }
    buf << f.rdbuf();
  }
  *text = buf.str();
  return true;
}

std::optional<jobspec::JobSpec> LoadJob(Context& ctx, const std::string& path,
                                        const config::Config& cfg) {
  std::string text;
  if (!ReadInput(ctx, path, &text)) return std::nullopt;
  jobspec::ParseResult parsed = jobspec::Parse(text, config::JobDefaults(cfg));
  if (!parsed.ok()) {
    PrintErrors(ctx, path == "-" ? "<stdin>" : path, parsed.errors);
    return std::nullopt;
  }
  return parsed.spec;
}

void PrintErrors(Context& ctx, const std::string& source, const FieldErrors& errors) {
  for (const auto& e : errors)
    ctx.err << source << ": " << e.ToString() << "\n";
}

std::string Format(const nlohmann::json& value, const std::string& output) {
  return output == "json" ? value.dump(2) + "\n" : EmitYaml(value);
}

bool StderrIsTerminal(const Context& ctx) {
  return &ctx.err == &std::cerr && ::isatty(STDERR_FILENO);
}

ProgressLine::ProgressLine(const Context& ctx, std::chrono::milliseconds quiet_for,
                           std::chrono::milliseconds every)
    : err_(ctx.err),
      enabled_(StderrIsTerminal(ctx)),
      quiet_until_(std::chrono::steady_clock::now() + quiet_for),
      every_(every) {}

void ProgressLine::Show(const std::string& text) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (now < quiet_until_ || now - last_ < every_) return;
  last_ = now;
  err_ << "\r\033[K" << text << std::flush;
  shown_ = true;
}

void ProgressLine::Clear() {
  if (shown_) err_ << "\r\033[K" << std::flush;
  shown_ = false;
}

int Run(const std::vector<std::string>& args, const std::map<std::string, std::string>& env,
        std::istream& in, std::ostream& out, std::ostream& err) {
  Context ctx{env, in, out, err};
  CLI::App app{"StarForge: run LLM / RL training jobs on shared GPU machines", "forge"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("forge ") + STARFORGE_VERSION);

  Registry registry(app);
  registry.Add("version", "Print the version", [](Context& c) {
    c.out << "forge " << STARFORGE_VERSION << "\n";
    return kExitOk;
  });
  RegisterJobCommands(registry);
  RegisterStorageCommands(registry);
  RegisterCapsuleCommands(registry);
  RegisterServeCommands(registry);
  RegisterClientCommands(registry);
  RegisterPlaygroundCommands(registry);
  RegisterMetricsCommands(registry);

  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 consumes from the back
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    out << app.help();
    return kExitOk;
  } catch (const CLI::CallForVersion&) {
    out << "forge " << STARFORGE_VERSION << "\n";
    return kExitOk;
  } catch (const CLI::ParseError& e) {
    err << "forge: " << e.what() << "\n";
    if (app.get_subcommands().empty()) {
      err << "run `forge --help` for the commands\n";
    } else {
      for (auto* sub : app.get_subcommands())
        err << "usage: " << sub->help();
    }
    return kExitUsage;
  }
  const Action* action = registry.Parsed();
  return action ? (*action)(ctx) : kExitUsage;
}

}  // namespace starforge::cli
