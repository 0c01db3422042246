// A playground as the control plane records it: one vLLM server for one user, with a deadline
// (its TTL). State names are API surface (JSON, CLI): spelled once, here (docs/playground.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace starforge::store {

// Starting → Pending → Ready → Stopped | Expired | Failed. Starting: the row exists, the fleet's
// objects may not. Pending: created, not answering yet. Ready: vLLM answers /health. A playground
// may skip forward (Starting → Stopped) but never goes back.
enum class PlaygroundState { kStarting, kPending, kReady, kStopped, kExpired, kFailed };

std::string_view ToString(PlaygroundState state);
std::optional<PlaygroundState> ParsePlaygroundState(std::string_view text);
bool IsTerminal(PlaygroundState state);

// Times are Unix milliseconds (UTC); 0 = not yet.
struct Playground {
  int64_t seq = 0;
  std::string id;         // "p-" + 10 of [a-z0-9]
  std::string owner;      // user name
  std::string fleet;      // "kuberay" | "local"
  std::string spec_json;  // the accepted request (playground::Spec as JSON)
  PlaygroundState state = PlaygroundState::kStarting;
  std::string reason;           // CamelCase, "" when none
  std::string message;          // for people
  std::string handle;           // the fleet's name for it (the Pod's and Service's name)
  int64_t expires_at = 0;       // the TTL's end: StarForge deletes it then
  bool stop_requested = false;  // by the user (forge playground stop)
  bool released = false;        // the fleet's objects are gone
  int64_t created_at = 0;
  int64_t updated_at = 0;
  int64_t ready_at = 0;     // entered Ready
  int64_t finished_at = 0;  // entered a terminal state
  int64_t version = 0;
};

}  // namespace starforge::store
