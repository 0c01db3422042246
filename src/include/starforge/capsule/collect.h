// Which files of a code directory go into a capsule: a walk that applies .forgeignore and the
// default rules and refuses trees that would make a broken or surprising capsule.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace starforge::capsule {

// A walk that visits more files than this is refused (in-tree symlinks to directories can
// multiply a tree; a capsule this big would be refused anyway).
inline constexpr size_t kMaxFiles = 1'000'000;

// A file to put in the capsule.
struct InputFile {
  std::string path;              // its path in the capsule ('/'-separated)
  std::filesystem::path source;  // where to read it (symlinks already resolved)
  uint64_t size = 0;             // at walk time; the build re-checks
  bool executable = false;       // the owner's x bit at walk time
  // The source's stat identity at walk time (Collect sets it; explicit lists need not): lets
  // the digest cache and the reuse index vouch for an unchanged file without a second stat.
  bool has_stat = false;
  uint64_t dev = 0, ino = 0;
  int64_t mtime_ns = 0, ctime_ns = 0;
  // What the file is, not when it was looked at: the identity fields are not compared.
  friend bool operator==(const InputFile& a, const InputFile& b) {
    return a.path == b.path && a.source == b.source && a.size == b.size &&
           a.executable == b.executable;
  }
};

struct CollectResult {
  std::vector<InputFile> files;       // sorted by path (byte order)
  std::vector<std::string> warnings;  // skipped special files, dangling symlinks, …
  std::vector<std::string> errors;    // each names the offending path; non-empty → do not build
  bool ok() const { return errors.empty(); }
  uint64_t TotalBytes() const;
};

// Walks `code_dir` (following in-tree symlinks, storing them as what they point to) with
// IgnoreRules::Defaults() plus `code_dir/.forgeignore`. Refuses symlinks that leave the tree,
// symlink cycles, names that are not valid UTF-8 (or contain control characters or '\'),
// unreadable files and directories, and more than kMaxFiles files. Skips FIFOs, sockets,
// devices and dangling symlinks with a warning, and the reserved top-level `.starforge`.
CollectResult Collect(const std::filesystem::path& code_dir);

}  // namespace starforge::capsule
