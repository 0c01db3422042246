#include "starforge/store/job.h"

#include <array>

namespace starforge::store {

namespace {

struct PhaseName {
  Phase phase;
  std::string_view name;
};

constexpr std::array<PhaseName, 8> kPhases{{
    {Phase::kQueued, "Queued"},
    {Phase::kPackaging, "Packaging"},
    {Phase::kSubmitting, "Submitting"},
    {Phase::kPending, "Pending"},
    {Phase::kRunning, "Running"},
    {Phase::kSucceeded, "Succeeded"},
    {Phase::kFailed, "Failed"},
    {Phase::kCancelled, "Cancelled"},
}};

}  // namespace

std::string_view ToString(Phase phase) {
  for (const auto& p : kPhases) {
    if (p.phase == phase) return p.name;
  }
  return "Unknown";
}

std::optional<Phase> ParsePhase(std::string_view text) {
  for (const auto& p : kPhases) {
    if (p.name == text) return p.phase;
  }
  return std::nullopt;
}

bool IsTerminal(Phase phase) {
  return phase == Phase::kSucceeded || phase == Phase::kFailed || phase == Phase::kCancelled;
}

}  // namespace starforge::store
