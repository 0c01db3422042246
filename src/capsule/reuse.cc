#include "starforge/capsule/reuse.h"

#include <fcntl.h>
#include <libdeflate.h>
#include <sys/stat.h>

#include <charconv>
#include <sstream>

#include "internal.h"

namespace starforge::capsule {

namespace {

// The first line of an index: the format it was written by, then the capsule it describes.
constexpr std::string_view kMagic = "starforge-capsule-index 2";
constexpr std::string_view kCheckpoints = "checkpoints\t";
constexpr std::string_view kEnd = "end\t";

bool ReadWhole(const std::filesystem::path& file, std::string* out) {
  internal::Fd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
  struct stat st {};
  if (fd.get() < 0 || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  out->resize(static_cast<size_t>(st.st_size));
  const long n = internal::ReadFull(fd.get(), out->data(), out->size());
  if (n < 0) return false;
  out->resize(static_cast<size_t>(n));
  return true;
}

// Successive '\n'-terminated lines of `text`.
class Lines {
 public:
  explicit Lines(std::string_view text) : rest_(text) {}
  bool Next(std::string_view* line) {
    const size_t nl = rest_.find('\n');
    if (nl == std::string_view::npos) return false;
    *line = rest_.substr(0, nl);
    rest_.remove_prefix(nl + 1);
    return true;
  }

 private:
  std::string_view rest_;
};

template <typename T>
void AppendNumber(std::string* out, T v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out->append(buf, r.ptr);
}

int64_t Nanos(const timespec& ts) {
  return ts.tv_sec * 1'000'000'000LL + ts.tv_nsec;
}

// The capsule's own identity, so that an index never points into a file that was replaced.
std::string CapsuleIdentity(const std::filesystem::path& capsule) {
  struct stat st {};
  if (::stat(capsule.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return "";
  std::ostringstream id;
  id << st.st_dev << ' ' << st.st_ino << ' ' << st.st_size << ' ' << Nanos(st.st_mtim) << ' '
     << Nanos(st.st_ctim);
  return id.str();
}

template <typename T>
bool Parse(std::string_view s, T* v) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return ec == std::errc() && p == s.data() + s.size();
}

std::vector<std::string_view> Split(std::string_view line, size_t max_fields) {
  std::vector<std::string_view> out;
  while (out.size() + 1 < max_fields) {
    const size_t tab = line.find('\t');
    if (tab == std::string_view::npos) break;
    out.push_back(line.substr(0, tab));
    line.remove_prefix(tab + 1);
  }
  out.push_back(line);
  return out;
}

bool IsHex64(std::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

}  // namespace

std::string FormatVersion() {
  return "starforge-capsule-v3 libdeflate-" LIBDEFLATE_VERSION_STRING " level-1";
}

ReuseIndex ReuseIndex::Load(const std::filesystem::path& file) {
  ReuseIndex index;
  std::string text;
  if (!ReadWhole(file, &text) || text.empty() || text.back() != '\n') return index;
  // The last line is "end\t" and the SHA-256 of everything before it: an index cut short, or
  // damaged in any byte, is refused (a full build is always correct).
  const size_t last = text.rfind('\n', text.size() - 2);
  if (last == std::string::npos) return index;
  const std::string_view trailer(text.data() + last + 1, text.size() - last - 2);
  const std::string_view body(text.data(), last + 1);
  if (!trailer.starts_with(kEnd) || trailer.substr(kEnd.size()) != Sha256Hex(body)) return index;
  Lines lines(body);
  std::string_view line;
  if (!lines.Next(&line) || line != std::string(kMagic) + "\t" + FormatVersion()) return index;
  std::string_view capsule, identity, count_line;
  if (!lines.Next(&capsule) || !lines.Next(&identity) || capsule.empty() ||
      identity != CapsuleIdentity(std::filesystem::path(capsule)) || !lines.Next(&count_line) ||
      !count_line.starts_with(kCheckpoints))
    return index;
  size_t count = 0;
  if (!Parse(count_line.substr(kCheckpoints.size()), &count)) return index;
  std::vector<HashCheckpoint> checkpoints;
  for (size_t i = 0; i < count; ++i) {
    // offset state(64 hex: eight big-endian words)
    HashCheckpoint c;
    const auto f = Split(lines.Next(&line) ? line : std::string_view(), 2);
    if (f.size() != 2 || !Parse(f[0], &c.offset) || c.offset % 64 != 0 || !IsHex64(f[1]) ||
        (!checkpoints.empty() && c.offset <= checkpoints.back().offset))
      return index;
    for (size_t w = 0; w < 8; ++w) {
      if (std::from_chars(f[1].data() + 8 * w, f[1].data() + 8 * w + 8, c.state[w], 16).ec !=
          std::errc())
        return index;
    }
    checkpoints.push_back(c);
  }
  std::vector<EntryRecord> records;
  while (lines.Next(&line)) {
    // sha256 size method crc comp_size offset has_stat dev ino mtime ctime path
    const auto f = Split(line, 12);
    EntryRecord r;
    int has_stat = 0;
    if (f.size() != 12 || !IsHex64(f[0]) || !Parse(f[1], &r.size) || !Parse(f[2], &r.method) ||
        !Parse(f[3], &r.crc32) || !Parse(f[4], &r.comp_size) || !Parse(f[5], &r.data_offset) ||
        !Parse(f[6], &has_stat) || !Parse(f[7], &r.dev) || !Parse(f[8], &r.ino) ||
        !Parse(f[9], &r.mtime_ns) || !Parse(f[10], &r.ctime_ns) || f[11].empty() ||
        (r.method != 0 && r.method != 8) || (r.method == 0 && r.comp_size != r.size))
      return index;  // damaged: a full build is always correct
    r.sha256 = f[0];
    r.has_stat = has_stat != 0;
    r.path = f[11];
    records.push_back(std::move(r));
  }
  index.capsule_ = capsule;
  index.records_ = std::move(records);
  index.checkpoints_ = std::move(checkpoints);
  index.by_path_.reserve(index.records_.size());
  index.by_digest_.reserve(index.records_.size());
  for (size_t i = 0; i < index.records_.size(); ++i) {
    index.by_path_.emplace(index.records_[i].path, i);
    index.by_digest_.emplace(index.records_[i].sha256, i);
  }
  return index;
}

void ReuseIndex::Save(const std::filesystem::path& file, const std::filesystem::path& capsule,
                      const std::vector<EntryRecord>& records,
                      const std::vector<HashCheckpoint>& checkpoints) {
  std::error_code ec;
  const std::filesystem::path absolute = std::filesystem::absolute(capsule, ec);
  const std::string identity = CapsuleIdentity(absolute);
  if (ec || identity.empty()) return;
  std::string text;
  text.reserve(256 + 80 * checkpoints.size() + (records.size() * 160));
  text.append(kMagic).append("\t").append(FormatVersion()).append("\n");
  text.append(absolute.string()).append("\n").append(identity).append("\n");
  text.append(kCheckpoints);
  AppendNumber(&text, checkpoints.size());
  text += '\n';
  for (const auto& c : checkpoints) {
    AppendNumber(&text, c.offset);
    text += '\t';
    for (uint32_t w : c.state) {
      char hex[8];
      for (int i = 7; i >= 0; --i, w >>= 4)
        hex[i] = "0123456789abcdef"[w & 15];
      text.append(hex, sizeof hex);
    }
    text += '\n';
  }
  for (const auto& r : records) {
    // Paths hold no control characters (Build refuses them), so tabs and newlines separate.
    text.append(r.sha256);
    for (uint64_t v : {r.size, uint64_t{r.method}, uint64_t{r.crc32}, r.comp_size, r.data_offset,
                       uint64_t{r.has_stat ? 1u : 0u}, r.dev, r.ino}) {
      text += '\t';
      AppendNumber(&text, v);
    }
    for (int64_t v : {r.mtime_ns, r.ctime_ns}) {
      text += '\t';
      AppendNumber(&text, v);
    }
    text.append("\t").append(r.path).append("\n");
  }
  const std::string digest = Sha256Hex(text);
  text.append(kEnd).append(digest).append("\n");
  std::filesystem::create_directories(file.parent_path(), ec);
  // Load checks the trailer, the magic line and the capsule's identity: a cache, written
  // without fsync (internal.h).
  internal::WriteCacheFile(file, text);
}

const EntryRecord* ReuseIndex::ByStat(std::string_view path, uint64_t dev, uint64_t ino,
                                      uint64_t size, int64_t mtime_ns, int64_t ctime_ns) const {
  auto it = by_path_.find(path);
  if (it == by_path_.end()) return nullptr;
  const EntryRecord& r = records_[it->second];
  if (!r.has_stat || r.dev != dev || r.ino != ino || r.size != size || r.mtime_ns != mtime_ns ||
      r.ctime_ns != ctime_ns)
    return nullptr;
  return &r;
}

const EntryRecord* ReuseIndex::ByDigest(std::string_view sha256) const {
  auto it = by_digest_.find(sha256);
  return it == by_digest_.end() ? nullptr : &records_[it->second];
}

}  // namespace starforge::capsule
