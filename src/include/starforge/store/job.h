// A job as the control plane records it: its phase, why it is there, and its cleanup state.
// Phase names are API surface (JSON, CLI, metrics): they are spelled once, here; reasons are in
// common/reasons.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "starforge/common/reasons.h"

namespace starforge::store {

// Queued → Packaging → Submitting → Pending → Running → Succeeded | Failed | Cancelled.
// A job may skip forward (e.g. Queued → Cancelled, Pending → Failed) but never goes back.
enum class Phase {
  kQueued,
  kPackaging,
  kSubmitting,
  kPending,
  kRunning,
  kSucceeded,
  kFailed,
  kCancelled
};

std::string_view ToString(Phase phase);  // "Queued", …, "Cancelled"
std::optional<Phase> ParsePhase(std::string_view text);
bool IsTerminal(Phase phase);  // Succeeded, Failed, Cancelled

// Machine-readable reasons (the `reason` of a job): common/reasons.h, shared with the fleets.
namespace reasons = ::starforge::reasons;

// Times are Unix milliseconds (UTC); 0 = not yet.
struct Job {
  int64_t seq = 0;        // insertion order (newest first = seq descending); cursor for paging
  std::string id;         // "j-" + 10 of [a-z0-9]; unique, immutable
  std::string owner;      // user name
  std::string name;       // JobSpec name (denormalised for filters)
  std::string fleet;      // "local" | "kuberay"
  std::string spec_json;  // canonical JobSpec JSON (jobspec::ToCanonicalText)
  Phase phase = Phase::kQueued;
  std::string reason;            // CamelCase, "" when none
  std::string message;           // for people, "" when none
  std::string upload_path;       // the uploaded code archive ("" once consumed or when none)
  std::string capsule_sha256;    // set when Packaging finished
  std::string fleet_handle;      // the fleet's name for the running job ("" before Submitting ends)
  std::optional<int> exit_code;  // the entrypoint's, when known
  bool cancel_requested = false;
  int64_t cancel_requested_at = 0;
  bool logs_archived = false;  // cleanup, after a terminal phase
  bool released = false;       // the fleet gave the machines back
  int64_t created_at = 0;
  int64_t updated_at = 0;
  int64_t started_at = 0;   // entered Running
  int64_t finished_at = 0;  // entered a terminal phase
  int64_t version = 0;      // bumped by every update (optimistic concurrency)
};

// One phase change, append-only.
struct Transition {
  int64_t seq = 0;
  std::string job_id;
  std::optional<Phase> from;  // nullopt for the creation (→ Queued)
  Phase to = Phase::kQueued;
  std::string reason;
  std::string message;
  std::string cause;  // who: "api", "controller", "fleet:local", "user:<name>", "restart"
  int64_t at = 0;
};

// Something that happened to a job that a person may want to see (kubectl-describe style).
// Recording the same (type, reason, message) again bumps `count` and `last_at`.
struct Event {
  int64_t seq = 0;
  std::string job_id;
  std::string type;    // "Normal" | "Warning"
  std::string reason;  // CamelCase
  std::string message;
  std::string source;  // "controller", "fleet:local", "kuberay:<object>", …
  int count = 1;
  int64_t first_at = 0;
  int64_t last_at = 0;
};

struct User {
  std::string name;  // [a-z0-9][a-z0-9-]{0,62}
  bool admin = false;
  int64_t created_at = 0;
};

}  // namespace starforge::store
