// Helpers shared by the capsule sources. Private to src/capsule.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "starforge/common/sha256.h"

struct zip;
struct zip_file;

namespace starforge::capsule::internal {

// libzip handles closed on destruction (zip_discard: a reader never writes).
struct ZipCloser {
  void operator()(zip* za) const;
};
struct ZipFileCloser {
  void operator()(zip_file* f) const;
};

using starforge::Sha256;  // common/sha256.h
using starforge::Sha256Hex;

// A file descriptor closed on destruction.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() { Reset(); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  void Reset(int fd = -1);

 private:
  int fd_;
};

// Reads until `size` bytes or end of file, retrying EINTR; -1 on error (errno set).
long ReadFull(int fd, char* buf, size_t size);

// Writes a cache file (the reuse index, a digest cache entry) whole: a temporary file in the
// same directory renamed over `path`, so a reader sees the old or the new contents, never half.
// No fsync: a cache lost in a crash costs a rebuild, and an fsync costs a disk flush. False
// when it could not be written (nothing is left behind).
bool WriteCacheFile(const std::filesystem::path& path, std::string_view content);

// strerror(errnum) as a std::string (thread-safe).
std::string ErrnoText(int errnum);

// A path for messages: printable ASCII and valid UTF-8 as is, other bytes as \xNN, so that a
// hostile name cannot mangle the terminal or hide in the output.
std::string Printable(std::string_view path);

// The first entry name that the archive's central directory lists twice, or nullopt when none
// is found (or the directory cannot be read). libzip refuses such an archive (ZIP_ER_EXISTS)
// without saying which name, and a refusal should name the entry.
std::optional<std::string> DuplicateZipEntry(const std::filesystem::path& archive);

}  // namespace starforge::capsule::internal
