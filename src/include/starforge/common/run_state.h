// What a fleet sees of one job's run now: the fleets report it (fleet::Observation), the RayJob
// read-back (kuberay/status.h) computes it, the controller records it as the job's phase.
#pragma once

#include <string_view>

namespace starforge {

enum class RunState {
  kPending,    // accepted, not running yet (waiting for resources, scheduling, image pull …)
  kRunning,    // the entrypoint runs
  kSucceeded,  // exit code 0
  kFailed,     // ended otherwise
  kCancelled,  // ended because Cancel was called
  kUnknown,    // the fleet has no record of it (never submitted, or lost)
};

std::string_view ToString(RunState state);  // "Pending", …, "Unknown"

}  // namespace starforge
