#include "starforge/common/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace starforge {

namespace {

std::string ErrnoText(int errnum) {
  char buf[256];
  // GNU strerror_r returns the message (maybe not in buf).
  return ::strerror_r(errnum, buf, sizeof buf);
}

}  // namespace

bool WriteAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

Status WriteFileAtomic(const std::filesystem::path& path, const std::function<Status(int fd)>& fill,
                       mode_t mode) {
  const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : ".";
  // Same directory, so that rename() is atomic; hidden, so that a listing never shows it.
  std::string tmp = (dir / ("." + path.filename().string() + ".tmp-XXXXXX")).string();
  const int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0)
    return Status::Internal("cannot create a file in " + dir.string() + ": " + ErrnoText(errno));
  Status written = fill(fd);
  auto failed = [&] {
    written = Status::Internal("cannot write " + path.string() + ": " + ErrnoText(errno));
  };
  if (written.ok() && (::fchmod(fd, mode) != 0 || ::fsync(fd) != 0)) failed();
  if (::close(fd) != 0 && written.ok()) failed();
  if (written.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) failed();
  if (!written.ok()) {
    ::unlink(tmp.c_str());
    return written;
  }
  // The rename is durable only once the directory is on disk too.
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return Status::Ok();
}

Status WriteFileAtomic(const std::filesystem::path& path, std::string_view content, mode_t mode) {
  return WriteFileAtomic(
      path,
      [&](int fd) {
        return WriteAll(fd, content.data(), content.size())
                   ? Status::Ok()
                   : Status::Internal("cannot write " + path.string() + ": " + ErrnoText(errno));
      },
      mode);
}

}  // namespace starforge
