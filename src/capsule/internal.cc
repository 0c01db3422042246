#include "internal.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zip.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <unordered_set>

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

namespace {

uint64_t ReadLe(const std::string& b, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i)
    v = (v << 8) | static_cast<unsigned char>(b[at + static_cast<size_t>(i)]);
  return v;
}

}  // namespace

std::optional<std::string> DuplicateZipEntry(const std::filesystem::path& archive) {
  std::ifstream in(archive, std::ios::binary | std::ios::ate);
  if (!in) return std::nullopt;
  const uint64_t file_size = static_cast<uint64_t>(in.tellg());
  auto read_at = [&](uint64_t at, uint64_t size) -> std::optional<std::string> {
    if (at > file_size || file_size - at < size) return std::nullopt;
    std::string out(size, '\0');
    in.seekg(static_cast<std::streamoff>(at));
    if (!in.read(out.data(), static_cast<std::streamsize>(size))) return std::nullopt;
    return out;
  };
  // The end of central directory record: the last "PK\5\6" within a comment's length of the end.
  constexpr uint64_t kEocdSize = 22;
  constexpr uint64_t kMaxComment = 0xFFFF;
  if (file_size < kEocdSize) return std::nullopt;
  const uint64_t tail_at =
      file_size > kEocdSize + kMaxComment ? file_size - kEocdSize - kMaxComment : 0;
  const std::optional<std::string> tail = read_at(tail_at, file_size - tail_at);
  if (!tail) return std::nullopt;
  size_t eocd = std::string::npos;
  // A comment may hold the signature too: the record is the one whose comment ends the file.
  for (size_t at = tail->size() - kEocdSize + 1; at-- > 0;) {
    if (ReadLe(*tail, at, 4) == 0x06054b50 &&
        at + kEocdSize + ReadLe(*tail, at + 20, 2) == tail->size()) {
      eocd = at;
      break;
    }
  }
  if (eocd == std::string::npos) return std::nullopt;
  uint64_t entries = ReadLe(*tail, eocd + 10, 2);
  uint64_t cd_size = ReadLe(*tail, eocd + 12, 4);
  uint64_t cd_at = ReadLe(*tail, eocd + 16, 4);
  // Zip64: a locator just before the record points at the zip64 end of central directory.
  if ((entries == 0xFFFF || cd_size == 0xFFFFFFFF || cd_at == 0xFFFFFFFF) && eocd >= 20 &&
      ReadLe(*tail, eocd - 20, 4) == 0x07064b50) {
    const std::optional<std::string> z64 = read_at(ReadLe(*tail, eocd - 20 + 8, 8), 56);
    if (!z64 || ReadLe(*z64, 0, 4) != 0x06064b50) return std::nullopt;
    entries = ReadLe(*z64, 32, 8);
    cd_size = ReadLe(*z64, 40, 8);
    cd_at = ReadLe(*z64, 48, 8);
  }
  // A central directory entry is at least 46 bytes and names at most 64 KiB: a bound on what a
  // lying record can make this read.
  constexpr uint64_t kHeader = 46;
  if (cd_size > entries * (kHeader + 3 * uint64_t{0xFFFF})) return std::nullopt;
  const std::optional<std::string> cd = read_at(cd_at, cd_size);
  if (!cd) return std::nullopt;
  std::unordered_set<std::string> seen;
  size_t at = 0;
  for (uint64_t i = 0; i < entries; ++i) {
    if (cd->size() - at < kHeader || ReadLe(*cd, at, 4) != 0x02014b50) return std::nullopt;
    const size_t name_len = ReadLe(*cd, at + 28, 2);
    const size_t extra_len = ReadLe(*cd, at + 30, 2);
    const size_t comment_len = ReadLe(*cd, at + 32, 2);
    if (cd->size() - at - kHeader < name_len) return std::nullopt;
    std::string name = cd->substr(at + kHeader, name_len);
    if (!seen.insert(name).second) return name;
    at += kHeader + name_len + extra_len + comment_len;
    if (at > cd->size()) return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace starforge::capsule::internal
