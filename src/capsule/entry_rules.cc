#include "entry_rules.h"

#include <algorithm>

#include "internal.h"
#include "starforge/capsule/capsule.h"
#include "starforge/capsule/manifest.h"
#include "starforge/capsule/runner.h"

namespace starforge::capsule::internal {

std::map<std::string, size_t> ScreenEntryNames(const std::vector<std::string>& names,
                                               InspectResult* r) {
  std::map<std::string, size_t> entries;
  std::set<std::string> top_level;
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string& name = names[i];
    if (!name.empty() && name.back() == '/') {
      r->problems.push_back(Printable(name) + ": unexpected directory entry");
      continue;
    }
    if (std::string why = CheckArchivePath(name); !why.empty()) {
      r->problems.push_back(Printable(name) + ": unsafe entry name: it " + why);
      continue;
    }
    if (!entries.emplace(name, i).second) {
      r->problems.push_back(Printable(name) + ": appears twice in the archive");
      continue;
    }
    top_level.insert(name.substr(0, name.find('/')));
  }
  if (top_level.size() < 2) {
    r->problems.emplace_back(
        "fewer than two top-level entries: Ray would strip the top-level directory when it "
        "unpacks the capsule");
  }
  return entries;
}

bool CheckManifestText(const std::string& text, uint64_t size, const InspectOptions& options,
                       InspectResult* r) {
  if (size > kMaxManifestBytes) {
    r->problems.push_back(std::string(kManifestPath) + ": larger than " +
                          FormatBytes(kMaxManifestBytes));
    return false;
  }
  StatusOr<Manifest> parsed = ParseManifest(text);
  if (!parsed.ok()) {
    r->manifest.reset();
    r->problems.push_back(std::string(kManifestPath) + ": " + parsed.status().message());
    return false;
  }
  r->manifest = std::move(parsed).value();
  uint64_t total = 0;
  for (const auto& m : r->manifest->files)
    total += std::min<uint64_t>(m.size, UINT64_MAX / 2);
  if (total > options.max_total_bytes) {
    r->problems.push_back("the manifest's files add up to " + FormatBytes(total) + ", over the " +
                          FormatBytes(options.max_total_bytes) + " limit");
    return false;
  }
  return true;
}

void CheckEveryEntryListed(const std::map<std::string, size_t>& entries,
                           const std::set<std::string>& listed, InspectResult* r) {
  for (const auto& [name, position] : entries) {
    if (name != kManifestPath && !listed.count(name))
      r->problems.push_back(Printable(name) + ": in the archive but not in the manifest");
  }
  for (const char* required : {kJobSpecPath, kRunnerPath}) {
    if (!listed.count(required))
      r->problems.push_back(std::string(required) + ": not in the manifest");
  }
}

}  // namespace starforge::capsule::internal
