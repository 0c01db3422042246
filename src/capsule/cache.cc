#include "starforge/capsule/cache.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <fstream>
#include <sstream>

#include "internal.h"
#include "starforge/capsule/reuse.h"
#include "starforge/common/atomic_file.h"
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
    struct stat st {};
    if (::stat(f.source.c_str(), &st) != 0) return Fingerprint{};
    add(f.path);
    add(f.source.native());
    std::ostringstream id;
    id << st.st_dev << ' ' << st.st_ino << ' ' << st.st_size << ' ' << Nanos(st.st_mtim) << ' '
       << Nanos(st.st_ctim) << ' ' << ((st.st_mode & S_IXUSR) ? 1 : 0);
    add(id.str());
    const int64_t newest = std::max(Nanos(st.st_mtim), Nanos(st.st_ctim));
    if (Nanos(now) - newest < kRacyNanos) fp.racy = true;
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
  // Readers never see half an entry; one that cannot be written is simply not remembered.
  WriteFileAtomic(dir_ / fp.key, sha256 + "\n");
}

}  // namespace starforge::capsule
