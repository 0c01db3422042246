#pragma once
// Inspect's rules over an archive's table of entries and its manifest, shared by `Inspect` (which
// reads a capsule through libzip) and `StreamCheck` (which reads it as it is uploaded), so that
// both give the same verdict in the same words and order.

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "starforge/capsule/inspect.h"

namespace starforge::capsule::internal {

// Screens entry names in archive order: no directory entries, safe names, no name twice, at least
// two top-level names (Ray strips a lone top-level directory). Each problem is added to `r`;
// returns every accepted name with its position in `names`.
std::map<std::string, size_t> ScreenEntryNames(const std::vector<std::string>& names,
                                               InspectResult* r);

// Checks the manifest's text (`size` bytes in the archive): within kMaxManifestBytes, parsed,
// its files within `options.max_total_bytes`. Sets r->manifest; false, with the problem added,
// when the entries cannot be checked against it.
bool CheckManifestText(const std::string& text, uint64_t size, const InspectOptions& options,
                       InspectResult* r);

// The rules over the whole table once each listed entry is checked: every entry but the manifest
// is listed, and the JobSpec and the runner are.
void CheckEveryEntryListed(const std::map<std::string, size_t>& entries,
                           const std::set<std::string>& listed, InspectResult* r);

}  // namespace starforge::capsule::internal
