#include "starforge/objstore/fs_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "starforge/common/atomic_file.h"

namespace starforge::objstore {

namespace {

namespace fs = std::filesystem;

Status IoError(const std::string& what, const std::string& path, int err) {
  return Failure(ErrorKind::kInvalid,
                 fmt::format("cannot {} {}: {}", what, path, std::strerror(err)));
}

// Closes a descriptor on every path out of a function.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// Streams `src` (a descriptor, or `bytes` when it is -1) into `dest` through WriteFileAtomic, so a
// crash cannot leave a renamed but empty object behind and a listing of the store never shows a
// half-written object as a key.
StatusOr<int64_t> AtomicWrite(const fs::path& dest, int src_fd, std::string_view bytes,
                              int64_t total, const Progress& progress) {
  std::error_code ec;
  fs::create_directories(dest.parent_path(), ec);
  if (ec) {
    return Failure(ErrorKind::kInvalid,
                   fmt::format("cannot create {}: {}", dest.parent_path().string(), ec.message()));
  }
  int64_t done = 0;
  auto fill = [&](int out) -> Status {
    auto failed = [&](const std::string& what, const std::string& path) {
      return Status::Internal(fmt::format("cannot {} {}: {}", what, path, std::strerror(errno)));
    };
    if (src_fd < 0) {
      constexpr size_t kChunk = size_t{1} << 20;
      while (done < total) {
        const size_t n = std::min(kChunk, static_cast<size_t>(total - done));
        if (!WriteAll(out, bytes.data() + done, n)) return failed("write", dest.string());
        done += static_cast<int64_t>(n);
        if (progress) progress(done, total);
      }
      return Status::Ok();
    }
    std::vector<char> buf(size_t{1} << 20);
    for (;;) {
      const ssize_t n = ::read(src_fd, buf.data(), buf.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        return failed("read", "the source");
      }
      if (n == 0) return Status::Ok();
      if (!WriteAll(out, buf.data(), static_cast<size_t>(n))) return failed("write", dest.string());
      done += n;
      if (progress) progress(done, total);
    }
  };
  if (Status written = WriteFileAtomic(dest, fill); !written.ok()) {
    return Failure(ErrorKind::kInvalid, written.message());
  }
  return done;
}

class FilesystemStore : public ObjectStore {
 public:
  explicit FilesystemStore(fs::path root) : root_(std::move(root)) {}

  StatusOr<PutOutcome> PutFile(const std::string& key, const std::string& path,
                               const Progress& progress) override {
    if (Status bad = CheckKey(key); !bad.ok()) return bad;
    Fd in(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (in.get() < 0) return IoError("read", path, errno);
    struct stat st {};
    if (::fstat(in.get(), &st) != 0) return IoError("read", path, errno);
    if (!S_ISREG(st.st_mode)) {
      return Failure(ErrorKind::kInvalid, fmt::format("{} is not a regular file", path));
    }
    return Put(key, in.get(), {}, st.st_size, progress);
  }

  // A hard link renamed into place: no byte copied, nothing to sync but the directory (the
  // caller made the file durable). Another filesystem (EXDEV), or no links: a copy.
  StatusOr<PutOutcome> PutFinishedFile(const std::string& key, const std::string& path) override {
    if (Status bad = CheckKey(key); !bad.ok()) return bad;
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return IoError("read", path, errno);
    if (!S_ISREG(st.st_mode)) {
      return Failure(ErrorKind::kInvalid, fmt::format("{} is not a regular file", path));
    }
    StatusOr<std::optional<ObjectInfo>> existing = Head(key);
    if (!existing) return existing.status();
    if (existing.value()) {
      if (existing.value()->size != st.st_size)
        return SizeMismatch(key, existing.value()->size, st.st_size);
      return PutOutcome{st.st_size, 0, true};
    }
    const fs::path dest = PathOf(key);
    std::error_code ec;
    fs::create_directories(dest.parent_path(), ec);
    // Hidden, like WriteFileAtomic's temporary files; unique within and across processes.
    static std::atomic<uint64_t> serial{0};
    const std::string tmp =
        (dest.parent_path() /
         fmt::format(".{}.link-{}-{}", dest.filename().string(), ::getpid(), serial.fetch_add(1)))
            .string();
    // The mode every object gets (WriteFileAtomic's default), on the shared inode.
    if (!ec && ::chmod(path.c_str(), 0644) == 0 && ::link(path.c_str(), tmp.c_str()) == 0) {
      if (::rename(tmp.c_str(), dest.c_str()) == 0) {
        Fd dir(::open(dest.parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        if (dir.get() >= 0) ::fsync(dir.get());
        return PutOutcome{st.st_size, st.st_size, false};
      }
      ::unlink(tmp.c_str());
    }
    return PutFile(key, path, {});
  }

  StatusOr<PutOutcome> PutBytes(const std::string& key, std::string_view bytes,
                                const Progress& progress) override {
    if (Status bad = CheckKey(key); !bad.ok()) return bad;
    return Put(key, -1, bytes, static_cast<int64_t>(bytes.size()), progress);
  }

  StatusOr<std::optional<ObjectInfo>> Head(const std::string& key) override {
    if (Status bad = CheckKey(key); !bad.ok()) return bad;
    const std::string path = PathOf(key);
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
      if (errno == ENOENT || errno == ENOTDIR) return std::optional<ObjectInfo>();
      return IoError("stat", path, errno);
    }
    if (!S_ISREG(st.st_mode)) {
      return Failure(
          ErrorKind::kInvalid,
          fmt::format("{} is in the way of object \"{}\": not a regular file", path, key));
    }
    return std::optional<ObjectInfo>(ObjectInfo{st.st_size, ""});
  }

  StatusOr<int64_t> GetFile(const std::string& key, const std::string& path,
                            const Progress& progress) override {
    if (Status bad = CheckKey(key); !bad.ok()) return bad;
    const std::string src = PathOf(key);
    Fd in(::open(src.c_str(), O_RDONLY | O_CLOEXEC));
    if (in.get() < 0) return OpenError(key, src, errno);
    struct stat st {};
    if (::fstat(in.get(), &st) != 0) return IoError("read", src, errno);
    return AtomicWrite(fs::absolute(path), in.get(), {}, st.st_size, progress);
  }

  StatusOr<std::string> GetBytes(const std::string& key) override {
    if (Status bad = CheckKey(key); !bad.ok()) return bad;
    const std::string src = PathOf(key);
    Fd in(::open(src.c_str(), O_RDONLY | O_CLOEXEC));
    if (in.get() < 0) return OpenError(key, src, errno);
    std::string out;
    std::vector<char> buf(size_t{1} << 16);
    for (;;) {
      const ssize_t n = ::read(in.get(), buf.data(), buf.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        return IoError("read", src, errno);
      }
      if (n == 0) break;
      out.append(buf.data(), static_cast<size_t>(n));
    }
    return out;
  }

  StatusOr<std::string> PresignGet(const std::string& key, int64_t expires_seconds,
                                   std::time_t /*now*/) override {
    if (Status bad = CheckKey(key); !bad.ok()) return bad;
    if (Status bad = CheckPresignExpiry(expires_seconds); !bad.ok()) return bad;
    // Not percent-encoded: Ray strips "file://" and opens the rest as a path.
    return "file://" + PathOf(key);
  }

  std::string Describe() const override {
    return fmt::format("filesystem store at {}", root_.string());
  }

 private:
  std::string PathOf(const std::string& key) const { return (root_ / key).string(); }

  Status OpenError(const std::string& key, const std::string& path, int err) const {
    if (err == ENOENT || err == ENOTDIR) {
      return Failure(ErrorKind::kNotFound,
                     fmt::format("object \"{}\" does not exist in {}", key, Describe()));
    }
    return IoError("read", path, err);
  }

  StatusOr<PutOutcome> Put(const std::string& key, int src_fd, std::string_view bytes, int64_t size,
                           const Progress& progress) {
    StatusOr<std::optional<ObjectInfo>> existing = Head(key);
    if (!existing) return existing.status();
    if (existing.value()) {
      if (existing.value()->size != size) return SizeMismatch(key, existing.value()->size, size);
      return PutOutcome{size, 0, true};
    }
    StatusOr<int64_t> written = AtomicWrite(PathOf(key), src_fd, bytes, size, progress);
    if (!written) return written.status();
    return PutOutcome{written.value(), written.value(), false};
  }

  Status SizeMismatch(const std::string& key, int64_t stored, int64_t local) const {
    return Failure(
        ErrorKind::kInvalid,
        fmt::format("object \"{}\" already exists in {} with {} bytes, but the new content "
                    "has {}: keys are content-addressed, so this is a different object under "
                    "the same key",
                    key, Describe(), stored, local));
  }

  fs::path root_;
};

}  // namespace

std::unique_ptr<ObjectStore> OpenFilesystem(const std::string& root) {
  return std::make_unique<FilesystemStore>(fs::absolute(root).lexically_normal());
}

}  // namespace starforge::objstore
