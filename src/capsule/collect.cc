#include "starforge/capsule/collect.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <utility>

#include "internal.h"
#include "starforge/capsule/ignore.h"
#include "starforge/capsule/manifest.h"

namespace starforge::capsule {

uint64_t CollectResult::TotalBytes() const {
  uint64_t total = 0;
  for (const auto& f : files)
    total += f.size;
  return total;
}

namespace {

using internal::ErrnoText;
using internal::Printable;

std::string Join(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "/" + name;
}

std::string Display(const std::string& logical) {
  return logical.empty() ? "." : logical;
}

// realpath(3) as a std::string; empty with errno set on failure.
std::string RealPath(const std::string& path) {
  std::unique_ptr<char, decltype(&std::free)> p(::realpath(path.c_str(), nullptr), &std::free);
  return p ? std::string(p.get()) : std::string();
}

std::string ReadLink(const std::string& path) {
  std::string buf(PATH_MAX, '\0');
  const ssize_t n = ::readlink(path.c_str(), buf.data(), buf.size());
  if (n < 0) return "?";
  buf.resize(static_cast<size_t>(n));
  return buf;
}

const char* SpecialKind(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file";
}

class Walker {
 public:
  Walker(std::string root, IgnoreRules rules, CollectResult* out)
      : root_(std::move(root)), rules_(std::move(rules)), out_(out) {}

  void Run() {
    struct stat st {};
    if (::stat(root_.c_str(), &st) != 0) {
      out_->errors.push_back(root_ + ": " + ErrnoText(errno));
      return;
    }
    Walk(root_, "", {st.st_dev, st.st_ino});
  }

 private:
  using DirId = std::pair<dev_t, ino_t>;

  bool Within(const std::string& resolved) const {
    if (root_ == "/") return true;
    return resolved == root_ ||
           (resolved.size() > root_.size() && resolved.compare(0, root_.size(), root_) == 0 &&
            resolved[root_.size()] == '/');
  }

  bool TooMany() {
    if (++visited_ <= 2 * kMaxFiles && out_->files.size() <= kMaxFiles) return false;
    if (!too_many_reported_) {
      too_many_reported_ = true;
      out_->errors.push_back("more than " + std::to_string(kMaxFiles) +
                             " files (symlinks to directories can multiply a tree); add what "
                             "the job does not need to " +
                             std::string(kIgnoreFileName));
    }
    return true;
  }

  void Walk(const std::string& real_dir, const std::string& prefix, DirId id) {
    if (too_many_reported_) return;
    struct CloseDir {
      void operator()(DIR* d) const { ::closedir(d); }
    };
    std::unique_ptr<DIR, CloseDir> dir(::opendir(real_dir.c_str()));
    if (!dir) {
      out_->errors.push_back(Printable(Display(prefix)) +
                             ": cannot read directory: " + ErrnoText(errno));
      return;
    }
    std::vector<std::string> names;
    errno = 0;
    while (const dirent* e = ::readdir(dir.get())) {
      const std::string name = e->d_name;
      if (name != "." && name != "..") names.push_back(name);
    }
    if (errno != 0) {
      out_->errors.push_back(Printable(Display(prefix)) +
                             ": cannot read directory: " + ErrnoText(errno));
      return;
    }
    dir.reset();
    // Sorted so that warnings and errors come out in the same order on every machine.
    std::sort(names.begin(), names.end());
    ancestors_.push_back(id);
    for (const auto& name : names) {
      if (TooMany()) break;
      Visit(real_dir + (real_dir == "/" ? "" : "/") + name, prefix, name);
    }
    ancestors_.pop_back();
  }

  void Visit(const std::string& full, const std::string& prefix, const std::string& name) {
    const std::string logical = Join(prefix, name);
    const std::string shown = Printable(logical);
    struct stat lst {};
    if (::lstat(full.c_str(), &lst) != 0) {
      out_->errors.push_back(shown + ": " + ErrnoText(errno));
      return;
    }

    // What the entry is once symlinks are followed.
    std::string source = full;
    struct stat st = lst;
    std::string link_target;
    if (S_ISLNK(lst.st_mode)) {
      link_target = ReadLink(full);
      source = RealPath(full);
      if (source.empty()) {
        const int err = errno;
        if (rules_.IsIgnored(logical, false)) return;
        if (err == ENOENT) {
          out_->warnings.push_back("skipping " + shown + ": dangling symlink to " +
                                   Printable(link_target));
        } else if (err == ELOOP) {
          out_->errors.push_back(shown + ": symlink loop (" + shown + " -> " +
                                 Printable(link_target) + ")");
        } else {
          out_->errors.push_back(shown + ": cannot resolve symlink to " + Printable(link_target) +
                                 ": " + ErrnoText(err));
        }
        return;
      }
      if (::stat(source.c_str(), &st) != 0) {
        out_->errors.push_back(shown + ": " + ErrnoText(errno));
        return;
      }
    }
    const bool is_dir = S_ISDIR(st.st_mode);
    if (rules_.IsIgnored(logical, is_dir)) return;

    if (prefix.empty() && name == kStarforgeDir) {
      out_->warnings.push_back(
          "skipping ./" + std::string(kStarforgeDir) +
          ": the name is reserved for StarForge's own files (an unpacked capsule's are rebuilt); "
          "add it to " +
          std::string(kIgnoreFileName) + " to silence this warning");
      return;
    }
    if (!IsValidUtf8(logical)) {
      out_->errors.push_back(shown +
                             ": the name is not valid UTF-8 (zip archives need UTF-8 names); "
                             "rename it or add it to " +
                             std::string(kIgnoreFileName));
      return;
    }
    if (std::string why = CheckArchivePath(logical); !why.empty()) {
      out_->errors.push_back(shown + ": the name " + why + "; rename it or add it to " +
                             std::string(kIgnoreFileName));
      return;
    }

    if (!link_target.empty() && !Within(source)) {
      out_->errors.push_back(shown + " is a symlink to " + Printable(link_target) +
                             ", which is outside the code directory " + Printable(root_) +
                             " (resolves to " + Printable(source) +
                             "); copy what it points to into the tree, or add the link to " +
                             std::string(kIgnoreFileName));
      return;
    }

    if (is_dir) {
      const DirId id{st.st_dev, st.st_ino};
      if (std::find(ancestors_.begin(), ancestors_.end(), id) != ancestors_.end()) {
        out_->errors.push_back(shown + " is a symlink to " + Printable(link_target) +
                               ", a directory that contains it (a cycle); add it to " +
                               std::string(kIgnoreFileName));
        return;
      }
      Walk(source, logical, id);
      return;
    }
    if (!S_ISREG(st.st_mode)) {
      out_->warnings.push_back("skipping " + shown + ": " + SpecialKind(st.st_mode));
      return;
    }
    // A file of the caller's with the owner's read bit is readable (an ACL cannot take that
    // from the owner): no access() call for the usual tree, one syscall less per file.
    if (!(st.st_uid == euid_ && (st.st_mode & S_IRUSR)) &&
        ::faccessat(AT_FDCWD, source.c_str(), R_OK, AT_EACCESS) != 0) {
      out_->errors.push_back(shown + ": cannot read: " + ErrnoText(errno));
      return;
    }
    InputFile f{logical, source, static_cast<uint64_t>(st.st_size), (st.st_mode & S_IXUSR) != 0};
    f.has_stat = true;
    f.dev = st.st_dev;
    f.ino = st.st_ino;
    f.mtime_ns = st.st_mtim.tv_sec * 1'000'000'000LL + st.st_mtim.tv_nsec;
    f.ctime_ns = st.st_ctim.tv_sec * 1'000'000'000LL + st.st_ctim.tv_nsec;
    out_->files.push_back(std::move(f));
  }

  std::string root_;
  IgnoreRules rules_;
  CollectResult* out_;
  std::vector<DirId> ancestors_;
  const uid_t euid_ = ::geteuid();
  size_t visited_ = 0;
  bool too_many_reported_ = false;
};

}  // namespace

CollectResult Collect(const std::filesystem::path& code_dir) {
  CollectResult out;
  const std::string root = RealPath(code_dir.string());
  if (root.empty()) {
    out.errors.push_back(Printable(code_dir.string()) + ": " + ErrnoText(errno));
    return out;
  }
  struct stat st {};
  if (::stat(root.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    out.errors.push_back(Printable(code_dir.string()) + ": not a directory");
    return out;
  }

  IgnoreRules rules = IgnoreRules::Defaults();
  const std::string ignore_path = root + "/" + kIgnoreFileName;
  struct stat ist {};
  if (::stat(ignore_path.c_str(), &ist) == 0) {
    std::ifstream in(ignore_path, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    if (!in || !S_ISREG(ist.st_mode)) {
      out.errors.push_back(std::string(kIgnoreFileName) + ": cannot read");
      return out;
    }
    rules.AddText(text.str(), kIgnoreFileName);
    out.warnings = rules.warnings();
  }

  Walker(root, std::move(rules), &out).Run();
  std::sort(out.files.begin(), out.files.end(),
            [](const InputFile& a, const InputFile& b) { return a.path < b.path; });
  return out;
}

}  // namespace starforge::capsule
