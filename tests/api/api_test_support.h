// Helpers for the API tests: zips made by Python, and the real `forge serve` binary
// (STARFORGE_FORGE_BIN) on a kernel-chosen loopback port with a temp FORGE_STORAGE_ROOT.
#pragma once

#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "support/files.h"
#include "support/forge.h"
#include "support/process.h"
#include "support/shell.h"
#include "support/temp_dir.h"

namespace starforge::api::testing {

namespace fs = std::filesystem;
using support::Quote;
using support::ReadFile;
using support::TempDir;

// A zip's bytes, made by Python's zipfile from [{"name", "data", "attr"?, "method"?,
// "repeat"?}] (tests/capsule/testdata/zipcheck.py), as hostile as needed.
inline std::string MakeZip(const TempDir& t, const nlohmann::json& entries) {
  const fs::path spec = t / "zip-entries.json";
  const fs::path zip = t / "made.zip";
  support::WriteFile(spec, entries.dump());
  fs::remove(zip);
  const std::string script =
      std::string(STARFORGE_SOURCE_DIR) + "/tests/capsule/testdata/zipcheck.py";
  support::Output o = support::Shell("python3 " + Quote(script) + " make " + Quote(zip.string()) +
                                     " " + Quote(spec.string()) + " 2>&1");
  if (o.code != 0) throw std::runtime_error("zipcheck.py make failed: " + o.out);
  return ReadFile(zip);
}

// `forge ARGS…` with exactly `env` (plus PATH); its exit code, stdout and stderr.
inline support::Captured Forge(const std::string& args,
                               const std::map<std::string, std::string>& env) {
  std::string vars;
  for (const auto& [k, v] : env)
    vars += k + "=" + Quote(v) + " ";
  return support::RunForge(args, vars);
}

// A running `forge serve`.
class ServeProcess {
 public:
  // Starts `forge serve --listen 127.0.0.1:0 --port-file F ARGS` with FORGE_STORAGE_ROOT=root
  // and `env`; waits until it listens. nullptr and *error when it does not.
  static std::unique_ptr<ServeProcess> Start(const fs::path& root,
                                             const std::map<std::string, std::string>& env,
                                             const std::vector<std::string>& args,
                                             std::string* error) {
    auto s = std::unique_ptr<ServeProcess>(new ServeProcess());
    support::ProcessOptions o;
    const fs::path port_file = s->dir_ / "port";
    o.argv = {STARFORGE_FORGE_BIN, "serve",       "--listen",
              "127.0.0.1:0",       "--port-file", port_file.string()};
    o.argv.insert(o.argv.end(), args.begin(), args.end());
    o.env = {"PATH=/usr/bin:/bin", "HOME=" + root.string(), "FORGE_STORAGE_ROOT=" + root.string()};
    for (const char* pass : {"ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"})
      if (const char* v = std::getenv(pass)) o.env->push_back(std::string(pass) + "=" + v);
    for (const auto& [k, v] : env)
      o.env->push_back(k + "=" + v);
    o.stdout_file = s->dir_ / "stdout";
    o.stderr_file = s->dir_ / "stderr";
    o.death_signal = SIGKILL;
    s->process_.emplace(o);
    s->port_ = s->process_->WaitForPortFile(port_file);
    if (s->port_ > 0) return s;
    *error = s->process_->Exited()
                 ? "forge serve exited (" + std::to_string(s->process_->exit_code()) +
                       ") before listening; stderr:\n" + s->Stderr()
                 : "forge serve did not listen within 30 s; stderr:\n" + s->Stderr();
    return nullptr;
  }

  ~ServeProcess() {
    if (process_) process_->Stop(SIGKILL);
  }
  ServeProcess(const ServeProcess&) = delete;
  ServeProcess& operator=(const ServeProcess&) = delete;

  // Sends `sig` and waits (up to `timeout`, then SIGKILL); the exit code, 128+N for signal N,
  // or -1 when it had to be killed.
  int Stop(int sig = SIGTERM, std::chrono::seconds timeout = std::chrono::seconds(20)) {
    return process_->Stop(sig, timeout);
  }

  int port() const { return port_; }
  pid_t pid() const { return process_->pid(); }
  std::string Stdout() const { return ReadFile(dir_ / "stdout"); }
  std::string Stderr() const { return ReadFile(dir_ / "stderr"); }
  std::unique_ptr<httplib::Client> Client() const {
    auto c = std::make_unique<httplib::Client>("127.0.0.1", port_);
    c->set_read_timeout(30, 0);
    c->set_connection_timeout(5, 0);
    return c;
  }

 private:
  ServeProcess() : dir_("forge-serve") {}
  TempDir dir_;
  std::optional<support::Process> process_;  // after dir_: stopped before the dir is removed
  int port_ = 0;
};

// One parsed Server-Sent Event.
struct SseEvent {
  std::string id;
  std::string event;
  std::string data;  // data lines joined with '\n'
};

// Parses complete events ("\n\n"-terminated) from `buf`, leaving the rest; comments are
// counted in *comments.
inline std::vector<SseEvent> ParseSse(std::string* buf, int* comments) {
  std::vector<SseEvent> out;
  size_t end;
  while ((end = buf->find("\n\n")) != std::string::npos) {
    std::string block = buf->substr(0, end);
    buf->erase(0, end + 2);
    SseEvent ev;
    bool any = false, data = false;
    std::istringstream in(block);
    for (std::string line; std::getline(in, line);) {
      if (line.starts_with(":")) {
        ++*comments;
        continue;
      }
      any = true;
      const size_t colon = line.find(": ");
      const std::string field = line.substr(0, colon);
      const std::string value = colon == std::string::npos ? "" : line.substr(colon + 2);
      if (field == "id") ev.id = value;
      if (field == "event") ev.event = value;
      if (field == "data") {
        ev.data += (data ? "\n" : "") + value;
        data = true;
      }
    }
    if (any) out.push_back(ev);
  }
  return out;
}

}  // namespace starforge::api::testing
