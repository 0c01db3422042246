#include "internal.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zip.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "starforge/capsule/manifest.h"

namespace starforge::capsule::internal {

void ZipCloser::operator()(zip* za) const {
  zip_discard(za);
}

void ZipFileCloser::operator()(zip_file* f) const {
  zip_fclose(f);
}

void Fd::Reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

bool WriteCacheFile(const std::filesystem::path& path, std::string_view content) {
  const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : ".";
  std::string tmp = (dir / ("." + path.filename().string() + ".tmp-XXXXXX")).string();
  Fd fd(::mkostemp(tmp.data(), O_CLOEXEC));
  if (fd.get() < 0) return false;
  size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd.get(), content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  const bool ok = done == content.size() && ::fchmod(fd.get(), 0644) == 0;
  fd.Reset();
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return false;
  }
  return true;
}

long ReadFull(int fd, char* buf, size_t size) {
  size_t got = 0;
  while (got < size) {
    const ssize_t n = ::read(fd, buf + got, size - got);
    if (n < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  return static_cast<long>(got);
}

std::string ErrnoText(int errnum) {
  char buf[256];
  // GNU strerror_r may return a static string instead of filling buf.
  return strerror_r(errnum, buf, sizeof buf);
}

std::string Printable(std::string_view path) {
  const bool utf8 = IsValidUtf8(path);
  std::string out;
  for (unsigned char c : path) {
    if (c < 0x20 || c == 0x7f || (c >= 0x80 && !utf8) || c == '\\') {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

}  // namespace starforge::capsule::internal
