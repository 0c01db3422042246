#include "starforge/capsule/inspect.h"

#include <sys/stat.h>
#include <zip.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "internal.h"
#include "starforge/capsule/capsule.h"

namespace starforge::capsule {

namespace {

using internal::Printable;

using internal::ZipCloser;
using internal::ZipFileCloser;

// The manifest is small; anything bigger than this is not one of ours.
constexpr uint64_t kMaxManifestBytes = 64 << 20;
constexpr zip_uint64_t kMissing = ~zip_uint64_t{0};

// Reads entry `index` through libzip (which checks its CRC), at most `limit` bytes; hashes it.
// Returns false with *error set if it cannot be read; *size is the number of bytes read.
bool ReadEntry(zip_t* za, zip_uint64_t index, uint64_t limit, std::string* keep, std::string* hex,
               uint64_t* size, std::string* error) {
  std::unique_ptr<zip_file_t, ZipFileCloser> f(zip_fopen_index(za, index, 0));
  if (!f) {
    *error = zip_error_strerror(zip_get_error(za));
    return false;
  }
  internal::Sha256 sha;
  std::vector<char> buf(1 << 20);
  *size = 0;
  while (true) {
    const zip_int64_t n = zip_fread(f.get(), buf.data(), buf.size());
    if (n < 0) {
      *error = zip_error_strerror(zip_file_get_error(f.get()));
      return false;
    }
    if (n == 0) break;
    const auto un = static_cast<uint64_t>(n);
    *size += un;
    if (*size > limit) return true;  // the caller reports the size mismatch
    sha.Update(buf.data(), un);
    if (keep) keep->append(buf.data(), un);
  }
  *hex = sha.HexDigest();
  return true;
}

// Everything but the archive's own digest, which Inspect computes beside it.
InspectResult InspectEntries(const std::filesystem::path& capsule, const InspectOptions& options) {
  InspectResult r;
  std::string error;
  int zerr = 0;
  std::unique_ptr<zip_t, ZipCloser> za(
      zip_open(capsule.c_str(), ZIP_RDONLY | ZIP_CHECKCONS, &zerr));
  if (!za) {
    zip_error_t e;
    zip_error_init_with_code(&e, zerr);
    // libzip refuses duplicate names (ZIP_ER_EXISTS) when it reads the central directory.
    r.problems.push_back(capsule.string() + ": not a readable zip archive: " +
                         (zerr == ZIP_ER_EXISTS ? std::string("two entries with the same name")
                                                : zip_error_strerror(&e)));
    zip_error_fini(&e);
    return r;
  }

  // Every entry by name; names are checked before anything trusts them.
  std::map<std::string, zip_uint64_t> entries;
  std::set<std::string> top_level;
  const zip_int64_t count = zip_get_num_entries(za.get(), 0);
  if (count < 0 || static_cast<uint64_t>(count) > options.max_entries) {
    r.problems.push_back("more than " + std::to_string(options.max_entries) + " entries");
    return r;
  }
  for (zip_int64_t i = 0; i < count; ++i) {
    const auto ui = static_cast<zip_uint64_t>(i);
    const char* raw = zip_get_name(za.get(), ui, ZIP_FL_ENC_RAW);
    const std::string name = raw ? raw : "";
    if (!name.empty() && name.back() == '/') {
      r.problems.push_back(Printable(name) + ": unexpected directory entry");
      continue;
    }
    if (std::string why = CheckArchivePath(name); !why.empty()) {
      r.problems.push_back(Printable(name) + ": unsafe entry name: it " + why);
      continue;
    }
    if (!entries.emplace(name, ui).second) {
      r.problems.push_back(Printable(name) + ": appears twice in the archive");
      continue;
    }
    top_level.insert(name.substr(0, name.find('/')));
  }
  if (top_level.size() < 2) {
    r.problems.push_back(
        "fewer than two top-level entries: Ray would strip the top-level directory when it "
        "unpacks the capsule");
  }

  const auto manifest_it = entries.find(kManifestPath);
  if (manifest_it == entries.end()) {
    r.problems.push_back(std::string(kManifestPath) + ": missing");
    return r;
  }
  std::string text, hex;
  uint64_t size = 0;
  if (!ReadEntry(za.get(), manifest_it->second, kMaxManifestBytes, &text, &hex, &size, &error)) {
    r.problems.push_back(std::string(kManifestPath) + ": " + error);
    return r;
  }
  if (size > kMaxManifestBytes) {
    r.problems.push_back(std::string(kManifestPath) + ": larger than " +
                         FormatBytes(kMaxManifestBytes));
    return r;
  }
  r.manifest = ParseManifest(text, &error);
  if (!r.manifest) {
    r.problems.push_back(std::string(kManifestPath) + ": " + error);
    return r;
  }

  uint64_t total = 0;
  for (const auto& m : r.manifest->files)
    total += std::min<uint64_t>(m.size, UINT64_MAX / 2);
  if (total > options.max_total_bytes) {
    r.problems.push_back("the manifest's files add up to " + FormatBytes(total) + ", over the " +
                         FormatBytes(options.max_total_bytes) + " limit");
    return r;
  }

  // Each entry is inflated and hashed on one of `threads` threads, each with its own handle on
  // the archive (a zip_t is not shared between threads); problems are reported in manifest
  // order whatever the thread count.
  std::set<std::string> listed;
  std::vector<std::pair<const ManifestEntry*, zip_uint64_t>> work;
  for (const auto& m : r.manifest->files) {
    listed.insert(m.path);
    const auto it = entries.find(m.path);
    work.emplace_back(&m, it == entries.end() ? kMissing : it->second);
  }
  std::vector<std::string> verdicts(work.size());
  std::atomic<size_t> next{0};
  auto verify = [&](zip_t* handle) {
    std::string digest, why;
    uint64_t got = 0;
    for (size_t w = next.fetch_add(1); w < work.size(); w = next.fetch_add(1)) {
      const ManifestEntry& m = *work[w].first;
      const std::string shown = Printable(m.path);
      std::string& verdict = verdicts[w];
      if (work[w].second == kMissing) {
        verdict = shown + ": in the manifest but missing from the archive";
      } else if (!ReadEntry(handle, work[w].second, m.size, nullptr, &digest, &got, &why)) {
        verdict = shown + ": cannot be read: " + why;
      } else if (got != m.size) {
        verdict = shown + ": size " + (got > m.size ? "over " : "") + std::to_string(got) +
                  " bytes, the manifest says " + std::to_string(m.size);
      } else if (digest != m.sha256) {
        verdict = shown + ": SHA-256 " + digest + ", the manifest says " + m.sha256;
      } else {
        zip_uint8_t opsys = 0;
        zip_uint32_t attributes = 0;
        if (zip_file_get_external_attributes(handle, work[w].second, 0, &opsys, &attributes) == 0 &&
            opsys == ZIP_OPSYS_UNIX && (((attributes >> 16) & S_IXUSR) != 0) != m.executable)
          verdict = shown + ": executable bit in the archive differs from the manifest";
      }
    }
  };
  size_t threads = options.threads > 0 ? static_cast<size_t>(options.threads)
                                       : std::max(1u, std::thread::hardware_concurrency());
  threads = std::max<size_t>(1, std::min(threads, work.size()));
  std::vector<std::thread> pool;
  std::vector<std::unique_ptr<zip_t, ZipCloser>> handles;
  for (size_t t = 1; t < threads; ++t) {
    handles.emplace_back(zip_open(capsule.c_str(), ZIP_RDONLY, &zerr));
    if (!handles.back()) break;
    pool.emplace_back(verify, handles.back().get());
  }
  verify(za.get());
  for (auto& t : pool)
    t.join();
  for (const auto& v : verdicts) {
    if (v.empty())
      ++r.verified;
    else
      r.problems.push_back(v);
  }
  for (const auto& [name, index] : entries) {
    if (name != kManifestPath && !listed.count(name))
      r.problems.push_back(Printable(name) + ": in the archive but not in the manifest");
  }
  for (const char* required : {kJobSpecPath, kRunnerPath}) {
    if (!listed.count(required))
      r.problems.push_back(std::string(required) + ": not in the manifest");
  }
  return r;
}

}  // namespace

InspectResult Inspect(const std::filesystem::path& capsule, const InspectOptions& options) {
  // The archive's SHA-256 on its own thread: one more pass over bytes already in the page cache.
  std::string sha256, hash_error;
  uint64_t size = 0;
  bool hashed = false;
  std::thread hasher(
      [&] { hashed = internal::HashPath(capsule.string(), &sha256, &size, &hash_error); });
  InspectResult r = InspectEntries(capsule, options);
  hasher.join();
  if (!hashed) {
    InspectResult failed;
    failed.problems.push_back(hash_error);
    return failed;
  }
  r.sha256 = sha256;
  r.size = size;
  return r;
}

}  // namespace starforge::capsule
