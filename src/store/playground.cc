#include "starforge/store/playground.h"

#include <array>

namespace starforge::store {

namespace {

struct StateName {
  PlaygroundState state;
  std::string_view name;
};

constexpr std::array<StateName, 6> kStates{{
    {PlaygroundState::kStarting, "Starting"},
    {PlaygroundState::kPending, "Pending"},
    {PlaygroundState::kReady, "Ready"},
    {PlaygroundState::kStopped, "Stopped"},
    {PlaygroundState::kExpired, "Expired"},
    {PlaygroundState::kFailed, "Failed"},
}};

}  // namespace

std::string_view ToString(PlaygroundState state) {
  for (const auto& s : kStates) {
    if (s.state == state) return s.name;
  }
  return "Unknown";
}

std::optional<PlaygroundState> ParsePlaygroundState(std::string_view text) {
  for (const auto& s : kStates) {
    if (s.name == text) return s.state;
  }
  return std::nullopt;
}

bool IsTerminal(PlaygroundState state) {
  return state == PlaygroundState::kStopped || state == PlaygroundState::kExpired ||
         state == PlaygroundState::kFailed;
}

}  // namespace starforge::store
