#include "starforge/api/logs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <string_view>

#include "starforge/api/convert.h"
#include "starforge/common/regular_file.h"

namespace starforge::api {

namespace {

// An open file descriptor, closed at scope exit.
class Fd {
 public:
  explicit Fd(const std::filesystem::path& p) : fd_(OpenJobLog(p)) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int64_t Size() const {
    struct stat st {};
    return ::fstat(fd_, &st) == 0 ? static_cast<int64_t>(st.st_size) : 0;
  }
  // Reads up to `n` bytes at `offset` (fewer at the end of the file).
  std::string Read(int64_t offset, size_t n) const {
    std::string buf(n, '\0');
    size_t got = 0;
    while (got < n) {
      const ssize_t r = ::pread(fd_, buf.data() + got, n - got, static_cast<off_t>(offset) + got);
      if (r <= 0) break;
      got += static_cast<size_t>(r);
    }
    buf.resize(got);
    return buf;
  }

 private:
  int fd_;
};

}  // namespace

int OpenJobLog(const std::filesystem::path& file) {
  const std::filesystem::path logs = file.parent_path();
  const int job = ::open(logs.parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (job < 0) return -1;
  const int dir =
      ::openat(job, logs.filename().c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  ::close(job);
  if (dir < 0) return -1;
  const int fd =
      ::openat(dir, file.filename().c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  ::close(dir);
  return KeepIfRegular(fd);
}

int64_t TailOffset(const std::filesystem::path& file, int64_t n) {
  Fd fd(file);
  if (fd.get() < 0) return 0;
  const int64_t size = fd.Size();
  if (n <= 0) return size;
  int64_t end = size;
  if (end > 0 && fd.Read(end - 1, 1) == "\n") --end;  // the last line's own terminator
  constexpr int64_t kBlock = 64 << 10;
  int64_t remaining = n;
  for (int64_t pos = end; pos > 0;) {
    const int64_t len = std::min(kBlock, pos);
    const std::string block = fd.Read(pos - len, static_cast<size_t>(len));
    for (int64_t i = static_cast<int64_t>(block.size()) - 1; i >= 0; --i) {
      if (block[static_cast<size_t>(i)] == '\n' && --remaining == 0) return pos - len + i + 1;
    }
    pos -= len;
  }
  return 0;
}

std::string LogFollower::Poll(bool final) {
  Fd fd(file_);
  if (fd.get() < 0) return "";
  const int64_t size = fd.Size();
  offset_ = std::min(offset_, size);
  std::string out;
  while (offset_ < size) {
    const std::string data =
        fd.Read(offset_, static_cast<size_t>(std::min<int64_t>(size - offset_, kMaxChunk)));
    if (data.empty()) break;
    size_t take = data.size();
    const size_t nl = data.rfind('\n');
    if (nl != std::string::npos) {
      take = nl + 1;
    } else if (!final && data.size() < kMaxChunk) {
      break;  // a line still being written: wait for its end
    }
    offset_ += static_cast<int64_t>(take);
    out += SseLogEvent(std::string_view(data).substr(0, take), offset_);
  }
  return out;
}

}  // namespace starforge::api
