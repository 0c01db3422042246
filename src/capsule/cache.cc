#include "starforge/capsule/cache.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <fstream>
#include <sstream>

#include "internal.h"
#include "starforge/capsule/reuse.h"
#include "starforge/jobspec/parse.h"
#include "starforge/runner/embedded.h"

namespace starforge::capsule {

namespace {

// File times come from a coarse kernel clock: a change made within the same tick as an earlier
// one leaves them equal. Entries are not written while any file is that fresh.
constexpr int64_t kRacyNanos = 2'000'000'000;

int64_t Nanos(const timespec& ts) {
  return ts.tv_sec * 1'000'000'000LL + ts.tv_nsec;
}

bool IsHex64(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace

Fingerprint DigestCache::Compute(const std::vector<InputFile>& files, const jobspec::JobSpec& spec,
                                 std::optional<std::string_view> runner) const {
  return Make(files, spec, runner, /*from_walk=*/false);
}

Fingerprint DigestCache::FromWalk(const std::vector<InputFile>& files, const jobspec::JobSpec& spec,
                                  std::optional<std::string_view> runner) const {
  return Make(files, spec, runner, /*from_walk=*/true);
}

Fingerprint DigestCache::Make(const std::vector<InputFile>& files, const jobspec::JobSpec& spec,
                              std::optional<std::string_view> runner, bool from_walk) const {
  Fingerprint fp;
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  internal::Sha256 h;
  auto add = [&h](std::string_view s) {
    h.Update(s.data(), s.size());
    h.Update("\0", 1);
  };
  add(FormatVersion());  // bumped whenever Build's output for the same inputs changes
  add(jobspec::ToCanonicalText(spec));
  add(internal::Sha256Hex(runner ? *runner : runner::Zipapp()));
  for (const auto& f : files) {
    // Fixed-width binary fields: no formatting per file (5 000 files cost a few milliseconds).
    struct {
      uint64_t dev, ino, size;
      int64_t mtime_ns, ctime_ns;
      uint64_t executable;
    } id{};
    if (from_walk && f.has_stat) {
      id = {f.dev, f.ino, f.size, f.mtime_ns, f.ctime_ns, f.executable ? 1u : 0u};
    } else {
      struct stat st {};
      if (::stat(f.source.c_str(), &st) != 0) return Fingerprint{};
      id = {static_cast<uint64_t>(st.st_dev),
            static_cast<uint64_t>(st.st_ino),
            static_cast<uint64_t>(st.st_size),
            Nanos(st.st_mtim),
            Nanos(st.st_ctim),
            (st.st_mode & S_IXUSR) ? 1u : 0u};
    }
    add(f.path);
    add(f.source.native());
    h.Update(&id, sizeof id);
    if (Nanos(now) - std::max(id.mtime_ns, id.ctime_ns) < kRacyNanos) fp.racy = true;
  }
  fp.key = h.HexDigest();
  return fp;
}

std::optional<std::string> DigestCache::Lookup(const Fingerprint& fp) const {
  if (fp.key.empty()) return std::nullopt;
  std::ifstream in(dir_ / fp.key);
  std::string digest;
  if (!(in >> digest) || !IsHex64(digest)) return std::nullopt;
  return digest;
}

void DigestCache::Remember(const Fingerprint& fp, const std::string& sha256) const {
  if (fp.key.empty() || fp.racy || !IsHex64(sha256)) return;
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  // Readers never see half an entry (a file renamed into place; Lookup refuses anything but 64
  // hex digits); one that cannot be written is simply not remembered. No fsync: a cache entry
  // lost in a crash costs one build, and an fsync costs more than the rest of a resubmit.
  internal::WriteCacheFile(dir_ / fp.key, sha256 + "\n");
}

}  // namespace starforge::capsule
