// The REST API of `forge serve` (cpp-httplib): jobs, logs (SSE), events, capacity, health,
// metrics and the OpenAPI document (api/openapi.json, compiled in). Authenticates bearer tokens
// against the store; a user sees only their own jobs (others' are 404), the admin sees all.
// Every error is JSON {"error", "message", "field"?}; nothing a client sends can crash it.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "starforge/common/disk_budget.h"
#include "starforge/config/config.h"
#include "starforge/controller/controller.h"
#include "starforge/fleet/fleet.h"
#include "starforge/objstore/object_store.h"
#include "starforge/playground/manager.h"
#include "starforge/store/store.h"

namespace starforge::api {

struct ServerOptions {
  std::string listen = "127.0.0.1:8080";   // FORGE_LISTEN; port 0 = any free port
  std::filesystem::path storage_root;      // logs under jobs/<id>/logs
  std::filesystem::path state_dir;         // FORGE_STATE_DIR: uploads/ (never under storage_root)
  int64_t max_upload_bytes = 512LL << 20;  // FORGE_CAPSULE_MAX_BYTES
  // Disk space for uploads in progress (disk_budget.h), shared with the controller's packagings;
  // null: the server's own, of `upload_space_bytes` (0 = the state directory's free space), of
  // which `upload_keep_free_bytes` is never handed out.
  DiskBudget* disk_budget = nullptr;
  int64_t upload_space_bytes = 0;
  int64_t upload_keep_free_bytes = 64LL << 20;
  config::Config config;  // for JobSpec defaults (fleet, images, deadlines)
  // Non-empty: the local fleet cannot sandbox jobs (why), so only admins may submit local jobs.
  std::string local_unsandboxed;
  // The HTTP front (front.h): connections open in all and per client address (beyond them 503
  // or 429 + Retry-After), requests handled at once (the rest wait without a thread), and the
  // time a request's head may take to arrive.
  int max_connections = 2048;
  int max_connections_per_client = 256;
  int max_workers = 64;
  int head_timeout_s = 10;
  int max_follows_per_user = 16;  // log-follow streams per user; beyond it 429 + Retry-After
  int max_watches_per_user = 16;  // ?watch=1 streams per user; beyond it 429 + Retry-After
  int read_timeout_s = 5;         // silence while reading a request's body before it is dropped
  std::chrono::milliseconds sse_poll{200};  // how often a log follow or a watch looks for news
  std::chrono::milliseconds sse_keepalive{15'000};  // ": keep-alive" after this much silence
  // Where capsules are stored (GET /api/v1/jobs/{id}/capsule reads their manifests there);
  // unset: that route answers 404.
  objstore::ObjectStore* objects = nullptr;
  // GET /api/v1/doctor (admins): runs the cluster checks (doctor::Run) and returns their JSON.
  // Unset: that route answers 404.
  std::function<nlohmann::json()> doctor;
  // The playgrounds (docs/playground.md); unset: their routes answer 404.
  playground::Manager* playgrounds = nullptr;
};

class Server {
 public:
  Server(ServerOptions options, store::Store& store, controller::Controller& controller,
         std::map<std::string, fleet::Fleet*> fleets);
  ~Server();  // Stop()

  // Binds and serves on a background thread; returns "" or why it could not bind.
  std::string Start();
  int port() const;  // the bound port (after Start)
  // Stops accepting, ends SSE streams, joins.
  void Stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace starforge::api
