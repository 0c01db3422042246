#include "starforge/api/tfevents.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <optional>

#include "api/tfevents.pb.h"
#include "starforge/common/regular_file.h"

namespace starforge::api {

namespace {

constexpr std::string_view kPrefix = "events.out.tfevents.";
constexpr int64_t kHeader = 12;  // uint64 length + uint32 masked CRC
constexpr int64_t kFooter = 4;   // uint32 masked CRC of the data

const std::array<uint32_t, 256>& CrcTable() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k)
        c = (c & 1) != 0 ? 0x82F63B78u ^ (c >> 1) : c >> 1;  // Castagnoli, reflected
      t[i] = c;
    }
    return t;
  }();
  return table;
}

uint64_t Le64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i)
    v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

uint32_t Le32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i)
    v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

// A directory entry below `dir` opened as a directory, never through a symlink; -1 otherwise.
int OpenDirAt(int dir, const char* name) {
  return ::openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

struct Walk {
  int max_depth = 0;
  int64_t max_entries = 0;
  int64_t entries = 0;
  bool too_many_entries = false;
  std::vector<EventFile> found;

  // Takes `dir` (closes it).
  void Dir(int dir, const std::string& rel, int depth) {
    DIR* d = ::fdopendir(dir);
    if (d == nullptr) {
      ::close(dir);
      return;
    }
    std::vector<std::string> subdirs;
    while (const dirent* e = ::readdir(d)) {
      const std::string_view name = e->d_name;
      if (name == "." || name == "..") continue;
      if (++entries > max_entries) {
        too_many_entries = true;
        break;
      }
      struct stat st {};
      if (::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      const std::string path = rel.empty() ? std::string(name) : rel + "/" + std::string(name);
      if (S_ISDIR(st.st_mode)) {
        if (depth < max_depth) subdirs.emplace_back(name);
      } else if (S_ISREG(st.st_mode) && name.starts_with(kPrefix)) {
        EventFile f;
        f.path = path;
        f.size = static_cast<int64_t>(st.st_size);
        found.push_back(std::move(f));
      }
    }
    for (const std::string& sub : subdirs) {
      if (too_many_entries) break;
      const int fd = OpenDirAt(::dirfd(d), sub.c_str());
      if (fd >= 0) Dir(fd, rel.empty() ? sub : rel + "/" + sub, depth + 1);
    }
    ::closedir(d);
  }
};

// `rel` under `job_dir`, each directory opened without following a symlink, the file as
// metrics.jsonl is; -1 when it is not there or not a regular file.
int OpenUnder(const std::filesystem::path& job_dir, const std::string& rel) {
  int dir = ::open(job_dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir < 0) return -1;
  size_t start = 0;
  while (true) {
    const size_t slash = rel.find('/', start);
    const std::string part = rel.substr(start, slash == std::string::npos ? slash : slash - start);
    if (part.empty() || part == "." || part == "..") {
      ::close(dir);
      return -1;
    }
    if (slash == std::string::npos) {
      const int fd = ::openat(dir, part.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
      ::close(dir);
      return KeepIfRegular(fd);
    }
    const int next = OpenDirAt(dir, part.c_str());
    ::close(dir);
    if (next < 0) return -1;
    dir = next;
    start = slash + 1;
  }
}

// The first of a tensor's typed values, else its raw content read as one T (TensorBoard writes
// either form).
template <typename T, typename Values>
std::optional<double> FirstValue(const Values& values, const std::string& content) {
  if (!values.empty()) return static_cast<double>(values.Get(0));
  if (content.size() != sizeof(T)) return std::nullopt;
  T v{};
  std::memcpy(&v, content.data(), sizeof(T));
  return static_cast<double>(v);
}

// The value of a scalar tensor, if it is one of a type read here.
std::optional<double> TensorScalar(const tfevents::TensorProto& t) {
  for (const auto& d : t.tensor_shape().dim())
    if (d.size() != 1) return std::nullopt;
  const std::string& c = t.tensor_content();
  switch (t.dtype()) {
    case 1:  // DT_FLOAT
      return FirstValue<float>(t.float_val(), c);
    case 2:  // DT_DOUBLE
      return FirstValue<double>(t.double_val(), c);
    case 3:  // DT_INT32
      return FirstValue<int32_t>(t.int_val(), c);
    case 9:  // DT_INT64
      return FirstValue<int64_t>(t.int64_val(), c);
    default:
      return std::nullopt;
  }
}

}  // namespace

uint32_t Crc32c(std::string_view data) {
  const auto& table = CrcTable();
  uint32_t c = 0xFFFFFFFFu;
  for (const char ch : data)
    c = table[(c ^ static_cast<unsigned char>(ch)) & 0xFFu] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

uint32_t MaskedCrc32c(std::string_view data) {
  const uint32_t c = Crc32c(data);
  return ((c >> 15) | (c << 17)) + 0xA282EAD8u;
}

std::vector<EventFile> FindEventFiles(const std::filesystem::path& job_dir, int max_depth,
                                      int64_t max_entries, size_t max_files, std::string* warning) {
  warning->clear();
  Walk walk;
  walk.max_depth = max_depth;
  walk.max_entries = max_entries;
  const int dir = ::open(job_dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir < 0) return {};
  walk.Dir(dir, "", 0);
  std::sort(walk.found.begin(), walk.found.end(),
            [](const EventFile& a, const EventFile& b) { return a.path < b.path; });
  if (walk.found.size() > max_files) {
    walk.found.resize(max_files);
    *warning = "more than " + std::to_string(max_files) +
               " TensorBoard event files: only the first " + std::to_string(max_files) +
               " (by path) are read";
  }
  if (walk.too_many_entries) {
    if (!warning->empty()) *warning += "; ";
    *warning += "the job directory has more than " + std::to_string(max_entries) +
                " entries: TensorBoard event files were looked for among the first " +
                std::to_string(max_entries) + " only";
  }
  return walk.found;
}

EventRead ReadEventFile(const std::filesystem::path& job_dir, const std::string& rel,
                        int64_t offset, const EventReadLimits& limits,
                        const std::function<void(const EventScalar&)>& emit) {
  EventRead r;
  r.offset = std::max<int64_t>(offset, 0);
  const int fd = OpenUnder(job_dir, rel);
  if (fd < 0) return r;
  struct stat st {};
  r.size = ::fstat(fd, &st) == 0 ? static_cast<int64_t>(st.st_size) : 0;
  const int64_t limit = std::min(r.size, limits.max_file);
  r.offset = std::min(r.offset, limit);
  const int64_t want = std::clamp<int64_t>(limit - r.offset, 0, limits.max_bytes);
  r.limit = limit;
  std::string buf(static_cast<size_t>(want), '\0');
  size_t got = 0;
  while (got < buf.size()) {
    const ssize_t n = ::pread(fd, buf.data() + got, buf.size() - got,
                              static_cast<off_t>(r.offset + static_cast<int64_t>(got)));
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  buf.resize(got);

  const auto at = [&](size_t pos) { return std::to_string(r.offset + static_cast<int64_t>(pos)); };
  size_t pos = 0;
  tfevents::Event event;
  while (buf.size() - pos >= static_cast<size_t>(kHeader)) {
    const char* h = buf.data() + pos;
    if (Le32(h + 8) != MaskedCrc32c(std::string_view(h, 8))) {
      r.stopped = true;
      r.problem = "bad CRC in the record header at byte " + at(pos) +
                  ": not an event file, or corrupt; read no further";
      break;
    }
    const uint64_t len = Le64(h);
    if (len > static_cast<uint64_t>(limits.max_file)) {
      r.stopped = true;
      r.problem = "a record of " + std::to_string(len) + " bytes at byte " + at(pos) +
                  ", more than the file's " + std::to_string(limits.max_file >> 20) +
                  " MiB read; read no further";
      break;
    }
    const int64_t end =
        r.offset + static_cast<int64_t>(pos) + kHeader + static_cast<int64_t>(len) + kFooter;
    if (static_cast<int64_t>(len) > limits.max_record) {
      if (end > limit) break;  // not all written yet (or beyond the read): a later call
      ++r.skipped;
      r.problem = "a record of " + std::to_string(len) + " bytes at byte " + at(pos) +
                  " (more than " + std::to_string(limits.max_record >> 10) +
                  " KiB: an image or a graph) was skipped";
      // Skipped without reading it: the next read starts after it.
      pos = static_cast<size_t>(end - r.offset);
      if (pos >= buf.size()) break;
      continue;
    }
    if (buf.size() - pos < kHeader + len + kFooter) break;  // the rest of it is not read yet
    const std::string_view data(h + kHeader, len);
    if (Le32(h + kHeader + len) != MaskedCrc32c(data)) {
      ++r.skipped;
      r.problem = "a record with a bad CRC at byte " + at(pos) + " was skipped";
    } else if (!event.ParseFromArray(data.data(), static_cast<int>(data.size()))) {
      ++r.skipped;
      r.problem = "a record at byte " + at(pos) + " is not an Event and was skipped";
    } else {
      ++r.records;
      for (const auto& v : event.summary().value()) {
        if (v.tag().empty() || v.tag().size() > 200) continue;
        std::optional<double> value;
        if (v.value_case() == tfevents::Summary::Value::kSimpleValue) {
          value = v.simple_value();
        } else if (v.value_case() == tfevents::Summary::Value::kTensor) {
          value = TensorScalar(v.tensor());
        }
        if (value && std::isfinite(*value)) emit({v.tag(), event.step(), *value});
      }
    }
    pos += kHeader + len + kFooter;
  }
  r.offset += static_cast<int64_t>(pos);  // past a skipped record, pos may pass the buffer
  r.more = !r.stopped && limit - r.offset > 0 && want == limits.max_bytes;
  return r;
}

}  // namespace starforge::api
