#include "starforge/capsule/inspect.h"

#include <sys/stat.h>
#include <zip.h>

#include <map>
#include <memory>
#include <set>
#include <vector>

#include "internal.h"
#include "starforge/capsule/capsule.h"

namespace starforge::capsule {

namespace {

using internal::Printable;

struct ZipCloser {
  void operator()(zip_t* za) const { zip_discard(za); }
};
struct ZipFileCloser {
  void operator()(zip_file_t* f) const { zip_fclose(f); }
};

// The manifest is small; anything bigger than this is not one of ours.
constexpr uint64_t kMaxManifestBytes = 64 << 20;

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

}  // namespace

InspectResult Inspect(const std::filesystem::path& capsule) {
  InspectResult r;
  std::string error;
  if (!internal::HashPath(capsule.string(), &r.sha256, &r.size, &error)) {
    r.problems.push_back(error);
    return r;
  }
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

  std::set<std::string> listed;
  for (const auto& m : r.manifest->files) {
    listed.insert(m.path);
    const std::string shown = Printable(m.path);
    const auto it = entries.find(m.path);
    if (it == entries.end()) {
      r.problems.push_back(shown + ": in the manifest but missing from the archive");
      continue;
    }
    if (!ReadEntry(za.get(), it->second, m.size, nullptr, &hex, &size, &error)) {
      r.problems.push_back(shown + ": cannot be read: " + error);
      continue;
    }
    if (size != m.size) {
      r.problems.push_back(shown + ": size " + (size > m.size ? "over " : "") +
                           std::to_string(size) + " bytes, the manifest says " +
                           std::to_string(m.size));
      continue;
    }
    if (hex != m.sha256) {
      r.problems.push_back(shown + ": SHA-256 " + hex + ", the manifest says " + m.sha256);
      continue;
    }
    zip_uint8_t opsys = 0;
    zip_uint32_t attributes = 0;
    if (zip_file_get_external_attributes(za.get(), it->second, 0, &opsys, &attributes) == 0 &&
        opsys == ZIP_OPSYS_UNIX && (((attributes >> 16) & S_IXUSR) != 0) != m.executable) {
      r.problems.push_back(shown + ": executable bit in the archive differs from the manifest");
      continue;
    }
    ++r.verified;
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

}  // namespace starforge::capsule
