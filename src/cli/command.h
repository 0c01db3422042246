// How `forge` subcommands plug in: each cli/*_cmd.cc file registers its subcommands on the CLI11
// app with a function that runs when that subcommand was parsed. Private to src/cli.
#pragma once

#include <CLI/CLI.hpp>

#include <chrono>
#include <functional>
#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "starforge/cli/api_client.h"
#include "starforge/common/field_error.h"
#include "starforge/config/config.h"
#include "starforge/jobspec/jobspec.h"

namespace starforge::cli {

// What a command may touch: its environment and standard streams.
struct Context {
  const std::map<std::string, std::string>& env;
  std::istream& in;
  std::ostream& out;
  std::ostream& err;
};

using Action = std::function<int(Context&)>;

// Collects subcommands and their actions.
class Registry {
 public:
  explicit Registry(CLI::App& app) : app_(app) {}
  // Adds `name` to the app; `action` runs when it is the parsed subcommand.
  CLI::App* Add(const std::string& name, const std::string& description, Action action);
  // Adds a nested subcommand (`forge capsule build`) under `parent` (from app().add_subcommand,
  // with require_subcommand(1) so a bare `forge capsule` prints its usage).
  CLI::App* Add(CLI::App* parent, const std::string& name, const std::string& description,
                Action action);
  CLI::App& app() { return app_; }
  // The action of the parsed subcommand (searching nested subcommands), if any.
  const Action* Parsed() const;

 private:
  CLI::App& app_;
  std::vector<std::pair<CLI::App*, Action>> commands_;
};

// Every file's registration function (one per *_cmd.cc).
void RegisterJobCommands(Registry& registry);
void RegisterStorageCommands(Registry& registry);
void RegisterCapsuleCommands(Registry& registry);
// `forge serve`, `forge token create` (serve_cmd.cc): the control plane, on this machine.
void RegisterServeCommands(Registry& registry);
// login, submit, get, describe, logs, cancel, capacity (client_cmd.cc): REST API clients.
void RegisterClientCommands(Registry& registry);

// `forge playground …` (playground_cmd.cc): playgrounds, through the REST API.
void RegisterPlaygroundCommands(Registry& registry);
// `forge metrics` (metrics_cmd.cc): a job's training series, through the REST API.
void RegisterMetricsCommands(Registry& registry);

// Shared helpers of the REST API clients (client_cmd.cc).
// --server on `app`.
void AddServer(CLI::App* app, std::string* server);
// The API client for this command, or nullopt (reason printed, *exit set).
std::optional<ApiClient> ConnectClient(Context& c, const std::string& server_flag, int* exit);
// Prints `e` and returns its exit code.
int ReportApiError(Context& c, const ApiError& e);

// Shared helpers for commands.
// Loads FORGE_* settings; prints warnings (only those about unknown names when `client`: the
// rest concern the server), and errors (returning false) when unusable.
bool LoadConfig(Context& ctx, config::Config* cfg, bool client = false);
// Reads FILE, or standard input for "-"; prints why not and returns false when it cannot.
bool ReadInput(Context& ctx, const std::string& path, std::string* text);
// Parses a JobSpec file with the configuration's defaults; prints every error when invalid.
std::optional<jobspec::JobSpec> LoadJob(Context& ctx, const std::string& path,
                                        const config::Config& cfg);
// "<source>: <path>: <message>" per error, on standard error.
void PrintErrors(Context& ctx, const std::string& source, const FieldErrors& errors);
// JSON pretty-printed, or YAML.
std::string Format(const nlohmann::json& value, const std::string& output);
// Whether standard error is the process's own and a terminal: a person watching, not a log.
bool StderrIsTerminal(const Context& ctx);

// Progress on one rewritten line of standard error, only when StderrIsTerminal (never in logs or
// captured output): nothing during the first `quiet_for`, then at most one update per `every`.
// Clear() (and the destructor) erases it.
class ProgressLine {
 public:
  ProgressLine(const Context& ctx, std::chrono::milliseconds quiet_for,
               std::chrono::milliseconds every);
  ~ProgressLine() { Clear(); }
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;
  void Show(const std::string& text);
  void Clear();

 private:
  std::ostream& err_;
  bool enabled_;
  bool shown_ = false;
  std::chrono::steady_clock::time_point quiet_until_;
  std::chrono::milliseconds every_;
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace starforge::cli
