#include "starforge/playground/manager.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include <spdlog/spdlog.h>

#include "starforge/common/format.h"
#include "starforge/common/reasons.h"

namespace starforge::playground {

namespace fs = std::filesystem;
using nlohmann::json;
using store::Playground;
using store::PlaygroundState;

namespace {

constexpr const char* kTtlExpired = "TTLExpired";
constexpr const char* kStoppedByUser = "StoppedByUser";

Status NotFound(const std::string& id) {
  return Status::NotFound("playground " + id + " not found");
}

}  // namespace

json ToJson(const Playground& p) {
  json spec = json::parse(p.spec_json, nullptr, false);
  json j = {{"id", p.id},
            {"owner", p.owner},
            {"fleet", p.fleet},
            {"state", std::string(store::ToString(p.state))},
            {"reason", p.reason},
            {"message", p.message},
            {"spec", spec.is_discarded() ? json::object() : spec},
            {"expiresAt", p.expires_at},
            {"createdAt", p.created_at},
            {"readyAt", p.ready_at},
            {"finishedAt", p.finished_at},
            {"released", p.released},
            // Where clients (the openai library: base_url) send their requests.
            {"openaiBaseUrl", "/api/v1/playgrounds/" + p.id + "/openai/v1"}};
  return j;
}

Manager::Manager(store::Store& store, std::map<std::string, Backend*> backends,
                 ManagerOptions options)
    : store_(store), backends_(std::move(backends)), options_(std::move(options)) {}

Manager::~Manager() {
  Stop();
}

int64_t Manager::Now() const {
  return NowMs();
}

Backend* Manager::BackendFor(const std::string& kind) {
  auto it = backends_.find(kind);
  return it == backends_.end() ? nullptr : it->second;
}

void Manager::Start() {
  std::lock_guard lock(mu_);
  if (thread_.joinable()) return;
  stopping_ = false;
  thread_ = std::thread([this] { Loop(); });
}

void Manager::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Manager::Kick() {
  {
    std::lock_guard lock(mu_);
    kicked_ = true;
  }
  cv_.notify_all();
}

void Manager::Loop() {
  for (;;) {
    {
      std::unique_lock lock(mu_);
      if (stopping_) return;
    }
    std::vector<Playground> rows;
    try {
      rows = store_.ListPlaygrounds("", /*only_unfinished=*/true);
    } catch (const std::exception& e) {
      spdlog::error("playgrounds: cannot list: {}", e.what());
    }
    for (const Playground& p : rows) {
      {
        std::lock_guard lock(mu_);
        if (stopping_) return;
      }
      // A Ready playground's pod rarely changes: look at it less often, unless its TTL is near.
      if (p.state == PlaygroundState::kReady && !p.stop_requested &&
          p.expires_at - Now() > options_.resync.count() * options_.ready_resync_factor) {
        int64_t& skips = ready_skips_[p.id];
        if (++skips < options_.ready_resync_factor) continue;
        skips = 0;
      }
      try {
        Reconcile(p.id);
      } catch (const std::exception& e) {
        spdlog::error("playground {}: reconcile failed: {}", p.id, e.what());
      }
    }
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, options_.resync, [this] { return stopping_ || kicked_; });
    kicked_ = false;
  }
}

bool Manager::Reconcile(const std::string& id) {
  std::optional<Playground> row = store_.GetPlayground(id);
  if (!row) return false;
  Backend* backend = BackendFor(row->fleet);
  const Spec spec = FromJson(json::parse(row->spec_json, nullptr, false));
  const int64_t now = Now();

  if (!store::IsTerminal(row->state)) {
    struct End {
      PlaygroundState state;
      const char* reason;
      const char* message;
    };
    std::optional<End> end;
    if (row->stop_requested) {
      end = End{PlaygroundState::kStopped, kStoppedByUser, "stopped by its user"};
    } else if (now >= row->expires_at) {
      end = End{PlaygroundState::kExpired, kTtlExpired,
                "its TTL ended; StarForge deleted it (forge playground extend adds time before "
                "the end)"};
    }
    if (end) {
      // Recorded first: once Expired/Stopped, nothing serves it any more, whatever happens next.
      row = store_.UpdatePlayground(id, [&](Playground& p) {
        p.state = end->state;
        p.reason = end->reason;
        p.message = end->message;
      });
      if (!row) return true;
      spdlog::info("playground {}: {} ({})", id, store::ToString(row->state), row->reason);
    }
  }

  if (store::IsTerminal(row->state)) {
    if (row->released) return false;
    if (backend == nullptr) return true;
    const Status s = backend->Delete(*row);
    if (!s.ok()) {
      spdlog::warn("playground {}: delete: {}", id, s.message());
      return true;
    }
    store_.UpdatePlayground(id, [](Playground& p) { p.released = true; });
    spdlog::info("playground {}: released", id);
    return false;
  }

  if (backend == nullptr) {
    store_.UpdatePlayground(id, [&](Playground& p) {
      p.state = PlaygroundState::kFailed;
      p.reason = reasons::kRejected;
      p.message = "this server has no " + p.fleet + " fleet for playgrounds";
    });
    return true;
  }

  if (row->state == PlaygroundState::kStarting) {
    const Status s = backend->Create(*row, spec);
    if (s.ok()) {
      store_.UpdatePlayground(id, [&](Playground& p) {
        p.state = PlaygroundState::kPending;
        p.reason = reasons::kStarting;
        p.message = "created; waiting for the model server";
      });
    } else if (!s.retryable()) {
      store_.UpdatePlayground(id, [&](Playground& p) {
        p.state = PlaygroundState::kFailed;
        p.reason = s.reason();
        p.message = s.message();
      });
    } else if (s.reason() != row->reason || s.message() != row->message) {
      // Still Starting, tried again at the next pass; the row says why meanwhile (e.g. the
      // local fleet's CPUs or GPUs are in use), once per change.
      spdlog::warn("playground {}: create: {}", id, s.message());
      store_.UpdatePlayground(id, [&](Playground& p) {
        p.reason = s.reason();
        p.message = s.message();
      });
    }
    return true;
  }

  const Observation o = backend->Observe(*row, spec);
  if (o.retryable_error) {
    spdlog::warn("playground {}: observe: {}", id, o.message);
    return true;
  }
  if (o.state != row->state || o.reason != row->reason || o.message != row->message) {
    store_.UpdatePlayground(id, [&](Playground& p) {
      if (o.state >= p.state) p.state = o.state;
      p.reason = o.reason;
      p.message = o.message;
    });
    if (o.state != row->state) {
      spdlog::info("playground {}: {}{}", id, store::ToString(o.state),
                   o.reason.empty() ? "" : " (" + o.reason + ")");
    }
  }
  return true;
}

StatusOr<Playground> Manager::Create(const store::User& user, const json& body) {
  ParseResult parsed = Parse(body, options_.config);
  if (!parsed.ok()) {
    return Status::Invalid(JoinErrors(parsed.errors), parsed.errors.front().path, parsed.errors);
  }
  Spec& spec = parsed.spec;
  // The model: a directory a job of this user wrote, which must exist now.
  const StatusOr<ModelLocation> located = Locate(spec.model, options_.config.storage_root);
  if (!located.ok()) return Status::Invalid("model: " + located.status().message(), "model");
  const ModelLocation& loc = *located;
  if (loc.on_storage) {
    std::optional<store::Job> job = store_.GetJob(loc.job_id);
    if (!job || (job->owner != user.name && !user.admin)) {
      return Status::Invalid("model: no job " + loc.job_id +
                                 " of yours wrote it (a playground serves "
                                 "directories of your own jobs: jobs/<job id>/…)",
                             "model");
    }
    std::error_code ec;
    const fs::path dir = options_.storage_root / loc.relative;
    if (!fs::is_directory(dir, ec)) {
      return Status::Invalid(
          "model: " + loc.relative +
              " does not exist (or is not a directory) under the "
              "storage root; list the job's outputs with forge logs / the job's directory",
          "model");
    }
  }
  Backend* backend = BackendFor(spec.fleet);
  if (backend == nullptr) {
    return Status::Invalid("fleet: this server runs no " + spec.fleet + " playgrounds", "fleet");
  }
  Playground row;
  row.id = store::NewPlaygroundId();
  row.owner = user.name;
  row.fleet = spec.fleet;
  row.spec_json = ToJson(spec).dump();
  row.handle = row.id;
  const fleet::Admission a = backend->Admit(row, spec);
  if (!a.possible) return Status::Invalid(a.message, a.field).WithReason(reasons::kRejected);
  row.expires_at = Now() + spec.ttl_seconds * 1000;
  row = store_.CreatePlayground(row);
  spdlog::info("playground {}: started by {} ({} on {}, TTL {} s)", row.id, user.name, spec.model,
               spec.fleet, spec.ttl_seconds);
  Kick();
  return row;
}

StatusOr<Playground> Manager::Get(const store::User& user, const std::string& id) {
  std::optional<Playground> row = store_.GetPlayground(id);
  if (!row || (row->owner != user.name && !user.admin)) return NotFound(id);
  return *row;
}

std::vector<Playground> Manager::List(const store::User& user) {
  return store_.ListPlaygrounds(user.admin ? "" : user.name, false);
}

StatusOr<Playground> Manager::Extend(const store::User& user, const std::string& id,
                                     int64_t seconds) {
  StatusOr<Playground> got = Get(user, id);
  if (!got) return got;
  const Playground& row = *got;
  if (seconds <= 0) return Status::Invalid("seconds: must be positive", "seconds");
  if (store::IsTerminal(row.state)) {
    return Status::FailedPrecondition("playground " + id + " is " +
                                      std::string(store::ToString(row.state)) +
                                      "; start a new one");
  }
  const int64_t limit = row.created_at + options_.config.playground_max_ttl_s * 1000;
  const int64_t next = std::max(row.expires_at, Now()) + seconds * 1000;
  if (next > limit) {
    return Status::Invalid(
        "a playground lives at most " + std::to_string(options_.config.playground_max_ttl_s) +
            " s (FORGE_PLAYGROUND_MAX_TTL_S); this one can be extended by at most " +
            std::to_string(std::max<int64_t>(0, (limit - row.expires_at) / 1000)) + " s",
        "seconds");
  }
  std::optional<Playground> updated =
      store_.UpdatePlayground(id, [&](Playground& p) { p.expires_at = next; });
  if (!updated) return NotFound(id);
  Kick();
  return *updated;
}

StatusOr<Playground> Manager::Stop(const store::User& user, const std::string& id) {
  if (StatusOr<Playground> got = Get(user, id); !got) return got;
  std::optional<Playground> updated =
      store_.UpdatePlayground(id, [](Playground& p) { p.stop_requested = true; });
  if (!updated) return NotFound(id);
  Reconcile(id);  // stop at once, as the user asked; the loop retries what fails
  Kick();
  return store_.GetPlayground(id).value_or(*updated);
}

StatusOr<std::string> Manager::Logs(const store::User& user, const std::string& id,
                                    int64_t tail_lines) {
  StatusOr<Playground> got = Get(user, id);
  if (!got) return got.status();
  const Playground& row = *got;
  Backend* backend = BackendFor(row.fleet);
  if (backend == nullptr) return Status::NotFound("no " + row.fleet + " fleet");
  std::string out;
  const Status s = backend->Logs(row, tail_lines, &out);
  // The backend's own reason stays in its log: the caller learns whether to try again.
  if (!s.ok())
    return s.retryable() ? Status::Unavailable(s.message()) : Status::NotFound(s.message());
  return out;
}

StatusOr<json> Manager::Events(const store::User& user, const std::string& id) {
  StatusOr<Playground> got = Get(user, id);
  if (!got) return got.status();
  const Playground& row = *got;
  Backend* backend = BackendFor(row.fleet);
  if (backend == nullptr || store::IsTerminal(row.state) || row.state == PlaygroundState::kStarting)
    return json::array();
  const Observation o = backend->Observe(row, FromJson(json::parse(row.spec_json, nullptr, false)));
  return o.events;
}

StatusOr<ProxyReply> Manager::Proxy(const store::User& user, const std::string& id,
                                    const ProxyCall& call,
                                    const std::function<bool(std::string_view)>& on_data,
                                    const std::atomic<bool>* stop) {
  StatusOr<Playground> got = Get(user, id);
  if (!got) return got.status();
  const Playground& row = *got;
  if (row.state != PlaygroundState::kReady) {
    return Status::FailedPrecondition(
        "playground " + id + " is " + std::string(store::ToString(row.state)) +
        (row.message.empty() ? "" : " (" + row.message + ")") +
        "; it answers once Ready (forge playground describe " + id + ")");
  }
  Backend* backend = BackendFor(row.fleet);
  if (backend == nullptr) return NotFound(id);
  return backend->Proxy(row, call, on_data, stop);
}

int64_t Manager::ApiRequests() const {
  int64_t n = 0;
  for (const auto& [kind, b] : backends_)
    n += b->ApiRequests();
  return n;
}

std::vector<std::pair<std::string, std::string>> Manager::Fleets() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [kind, b] : backends_)
    out.emplace_back(kind, b->Unavailable());
  return out;
}

}  // namespace starforge::playground
