#include "starforge/capsule/reuse.h"

#include <libdeflate.h>
#include <sys/stat.h>

#include <charconv>
#include <fstream>
#include <sstream>

#include "internal.h"

namespace starforge::capsule {

namespace {

// The first line of an index: the format it was written by, then the capsule it describes.
constexpr std::string_view kMagic = "starforge-capsule-index 1";

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
  return "starforge-capsule-v2 libdeflate-" LIBDEFLATE_VERSION_STRING " level-1";
}

ReuseIndex ReuseIndex::Load(const std::filesystem::path& file) {
  ReuseIndex index;
  std::ifstream raw(file, std::ios::binary);
  std::stringstream whole;
  whole << raw.rdbuf();
  const std::string text = whole.str();
  if (text.empty() || text.back() != '\n') return index;  // cut short: the last record too
  std::istringstream in(text);
  std::string line;
  if (!std::getline(in, line) || line != std::string(kMagic) + "\t" + FormatVersion()) return index;
  std::string capsule, identity;
  if (!std::getline(in, capsule) || !std::getline(in, identity) || capsule.empty() ||
      identity != CapsuleIdentity(capsule))
    return index;
  std::vector<EntryRecord> records;
  while (std::getline(in, line)) {
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
  for (size_t i = 0; i < index.records_.size(); ++i) {
    index.by_path_.emplace(index.records_[i].path, i);
    index.by_digest_.emplace(index.records_[i].sha256, i);
  }
  return index;
}

void ReuseIndex::Save(const std::filesystem::path& file, const std::filesystem::path& capsule,
                      const std::vector<EntryRecord>& records) {
  std::error_code ec;
  const std::filesystem::path absolute = std::filesystem::absolute(capsule, ec);
  const std::string identity = CapsuleIdentity(absolute);
  if (ec || identity.empty()) return;
  std::string text = std::string(kMagic) + "\t" + FormatVersion() + "\n" + absolute.string() +
                     "\n" + identity + "\n";
  for (const auto& r : records) {
    // Paths hold no control characters (Build refuses them), so tabs and newlines separate.
    text += r.sha256 + "\t" + std::to_string(r.size) + "\t" + std::to_string(r.method) + "\t" +
            std::to_string(r.crc32) + "\t" + std::to_string(r.comp_size) + "\t" +
            std::to_string(r.data_offset) + "\t" + (r.has_stat ? "1" : "0") + "\t" +
            std::to_string(r.dev) + "\t" + std::to_string(r.ino) + "\t" +
            std::to_string(r.mtime_ns) + "\t" + std::to_string(r.ctime_ns) + "\t" + r.path + "\n";
  }
  std::filesystem::create_directories(file.parent_path(), ec);
  // Load checks the magic line, the capsule's identity and every record, and a torn file ends
  // without its newline: a cache, written without fsync (internal.h).
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
