// The code a user submits, as the zip the API's POST /api/v1/jobs takes in its `code` part. The
// server builds the capsule from it; this is only transport (no JobSpec, no runner inside).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "starforge/capsule/collect.h"

namespace starforge::cli {

// Writes `files` (capsule::Collect's, in its order) to a new zip at `out`: UTF-8 names, fixed
// timestamps, the owner's executable bit as Unix mode 0755/0644, deflated unless the file looks
// incompressible. The same files give the same bytes. `progress(fraction)` is called while
// writing. Returns "" or why not (naming the file at fault).
std::string WriteCodeZip(const std::vector<capsule::InputFile>& files,
                         const std::filesystem::path& out,
                         const std::function<void(double fraction)>& progress = {});

}  // namespace starforge::cli
