// Playgrounds on the local fleet: `<FORGE_LOCAL_VLLM_COMMAND> serve <model> --host 127.0.0.1
// --port <free port> …` as a process on this machine, in the local jobs' bubblewrap sandbox (the
// model and the command's installation read-only, nothing else of the storage root or the state
// directory), detached like a job's runner so that it outlives a restart of forge serve, and
// reached by forge serve on the loopback port (docs/playground.md, "On the local fleet").
//
// Its records, under <state dir>/playgrounds/<id>/: server.lock (held by the server for its whole
// life: locked = alive), launch.json (pid = process group, port, command), server.log (its
// stdout and stderr), stop.json (when the stop signal was sent). All state is in those files, so
// every method is idempotent and a restarted forge serve adopts a running server.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "starforge/config/config.h"
#include "starforge/fleet/fleet.h"
#include "starforge/fleet/local_fleet.h"
#include "starforge/playground/backend.h"

namespace starforge::net {
class Transport;
}

namespace starforge::playground {

struct LocalBackendOptions {
  config::Config config;            // local_vllm_command, storage_root
  std::filesystem::path state_dir;  // FORGE_STATE_DIR (the records above live under it)
  // The local jobs' sandbox (fleet::ProbeSandbox). Unset: local playgrounds are refused, since
  // the server would otherwise read whatever forge serve can, on a user's arguments.
  std::optional<fleet::LocalSandbox> sandbox;
  std::string sandbox_error;  // why there is none (said in the refusal)
  // The local fleet: Admit() of a one-machine JobSpec, and the server's share of the machine
  // (Hold), so that local jobs do not take the CPUs and GPUs a model server uses.
  fleet::LocalFleet* machine = nullptr;
  std::string path;  // where the command is looked up ("" = this process's PATH)
  // SIGTERM to the server's process group, then SIGKILL after this long.
  std::chrono::milliseconds stop_grace{10'000};
};

class LocalBackend : public Backend {
 public:
  explicit LocalBackend(LocalBackendOptions options);
  ~LocalBackend() override;

  std::string Kind() const override { return "local"; }
  // Refuses when the command is not found, without a sandbox, or what the local fleet refuses.
  fleet::Admission Admit(const store::Playground& row, const Spec& spec) override;
  // Spawns the server on a free loopback port; ok when it runs (or ran) already.
  Status Create(const store::Playground& row, const Spec& spec) override;
  // The lock says whether it runs; GET /health (1 s) whether it is Ready.
  Observation Observe(const store::Playground& row, const Spec& spec) override;
  // SIGTERM to its group, SIGKILL after stop_grace; ok once the lock is free.
  Status Delete(const store::Playground& row) override;
  ProxyReply Proxy(const store::Playground& row, const ProxyCall& call,
                   const std::function<bool(std::string_view)>& on_data,
                   const std::atomic<bool>* stop) override;
  Status Logs(const store::Playground& row, int64_t tail_lines, std::string* out) override;

  // The command's absolute path, "" when it is not found (looked up again at every call: vLLM
  // may be installed while forge serve runs).
  std::string Command() const;
  std::string Unavailable() const override;
  // The refusal when Command() is "" (names FORGE_LOCAL_VLLM_COMMAND).
  std::string NotFoundMessage() const;
  // After a restart: the servers that still run hold their share of the machine again, before
  // local jobs are started into it.
  void Readopt();

 private:
  std::filesystem::path Dir(const std::string& id) const;
  LocalBackendOptions options_;
  std::unique_ptr<net::Transport> http_;
};

}  // namespace starforge::playground
