#include "starforge/api/metrics.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "starforge/common/regular_file.h"

namespace starforge::api {

namespace {

// <job dir>/metrics.jsonl, opened without following a symlink at either step and without
// blocking on a FIFO the job planted there; -1 when it is missing or not a regular file.
int OpenMetrics(const std::filesystem::path& file) {
  const int dir =
      ::open(file.parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir < 0) return -1;
  const int fd =
      ::openat(dir, file.filename().c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  ::close(dir);
  return KeepIfRegular(fd);
}

bool NotASeries(const std::string& key) {
  return key == "step" || key == "time" || key == "timestamp" || key == "wall_time";
}

// The series of one answer, in the order they were first written, at most max_series of them.
class SeriesSet {
 public:
  explicit SeriesSet(size_t max_series) : max_series_(max_series) {}
  bool Add(const std::string& name, const nlohmann::json& step, double value) {
    auto found = index_.find(name);
    if (found == index_.end()) {
      if (series_.size() >= max_series_) {
        dropped_ = true;
        return false;
      }
      found = index_.emplace(name, series_.size()).first;
      series_.emplace_back(name, nlohmann::json::array());
    }
    series_[found->second].second.push_back(nlohmann::json::array({step, value}));
    return true;
  }
  bool dropped() const { return dropped_; }
  nlohmann::json Take() {
    nlohmann::json out = nlohmann::json::array();
    for (auto& [name, points] : series_)
      out.push_back({{"name", name}, {"points", std::move(points)}});
    series_.clear();
    index_.clear();
    return out;
  }

 private:
  size_t max_series_;
  bool dropped_ = false;
  std::map<std::string, size_t> index_;  // name → position in series_
  std::vector<std::pair<std::string, nlohmann::json>> series_;
};

// metrics.jsonl from `offset` into `series`; fills offset, size, lines, skipped and complete
// of `out`, and *warning. `budget`: bytes read at most.
void ReadJsonl(const std::filesystem::path& file, int64_t offset, bool final,
               const MetricsLimits& limits, int64_t budget, SeriesSet& series, nlohmann::json& out,
               std::string* warning, bool* more) {
  out["offset"] = offset;
  out["size"] = 0;
  out["lines"] = 0;
  out["skipped"] = 0;
  out["complete"] = final;
  *more = false;
  const int fd = OpenMetrics(file);
  if (fd < 0) return;
  struct stat st {};
  const int64_t size = ::fstat(fd, &st) == 0 ? static_cast<int64_t>(st.st_size) : 0;
  out["size"] = size;
  offset = std::clamp<int64_t>(offset, 0, size);
  const int64_t limit = std::min(size, limits.max_file);
  const int64_t want = std::clamp<int64_t>(limit - offset, 0, budget);
  *more = limit - offset > want;
  std::string buf(static_cast<size_t>(want), '\0');
  size_t got = 0;
  while (got < buf.size()) {
    const ssize_t r =
        ::pread(fd, buf.data() + got, buf.size() - got, static_cast<off_t>(offset) + got);
    if (r <= 0) break;
    got += static_cast<size_t>(r);
  }
  ::close(fd);
  buf.resize(got);

  int64_t lines = 0;
  int64_t skipped = 0;
  size_t pos = 0;
  const bool at_limit = offset + static_cast<int64_t>(got) >= limit;
  while (pos < buf.size()) {
    size_t nl = buf.find('\n', pos);
    size_t end = nl;
    if (nl == std::string::npos) {
      // The rest is a line still being written, unless the job has ended, or it is the
      // piece of an over-long line that fills the whole read.
      if (final && at_limit) {
        end = buf.size();
      } else if (pos == 0 && static_cast<int64_t>(buf.size()) >= limits.max_chunk) {
        ++skipped;  // no line ends within a whole read: skip past it
        pos = buf.size();
        break;
      } else {
        break;
      }
    }
    const std::string_view line(buf.data() + pos, end - pos);
    pos = nl == std::string::npos ? buf.size() : nl + 1;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    ++lines;
    if (static_cast<int64_t>(line.size()) > limits.max_line) {
      ++skipped;
      continue;
    }
    // Ordered: the series come in the order the job first wrote them (loss before accuracy).
    const nlohmann::ordered_json doc =
        nlohmann::ordered_json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!doc.is_object()) {
      ++skipped;
      continue;
    }
    nlohmann::json step = nullptr;
    if (auto it = doc.find("step");
        it != doc.end() && it->is_number() && std::isfinite(it->get<double>()))
      step = *it;
    bool any = false;
    for (const auto& [key, value] : doc.items()) {
      if (NotASeries(key) || !value.is_number() || key.empty() || key.size() > 200) continue;
      const double v = value.get<double>();
      if (!std::isfinite(v)) continue;
      any = series.Add(key, step, v) || any;
    }
    if (!any) ++skipped;
  }
  offset += static_cast<int64_t>(pos);
  out["offset"] = offset;
  out["lines"] = lines;
  out["skipped"] = skipped;
  out["complete"] = final && offset >= limit;
  if (size > limits.max_file && offset >= limits.max_file)
    *warning = "metrics.jsonl is larger than " + std::to_string(limits.max_file >> 20) +
               " MiB: only its first " + std::to_string(limits.max_file >> 20) +
               " MiB are read; write fewer points (every Nth step)";
}

std::string SeriesWarning(const MetricsLimits& limits) {
  return "more than " + std::to_string(limits.max_series) + " scalar names: only the first " +
         std::to_string(limits.max_series) + " are shown";
}

void AddWarning(std::string& all, const std::string& one) {
  if (one.empty()) return;
  if (!all.empty()) all += "; ";
  all += one;
}

// A cursor's path: every byte but [A-Za-z0-9._/-] as %XX, so ',' and ':' separate.
std::string EscapePath(std::string_view path) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const char ch : path) {
    const auto u = static_cast<unsigned char>(ch);
    if (std::isalnum(u) != 0 || ch == '.' || ch == '_' || ch == '/' || ch == '-') {
      out += ch;
    } else {
      out += '%';
      out += kHex[u >> 4];
      out += kHex[u & 15];
    }
  }
  return out;
}

std::optional<std::string> UnescapePath(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    if (i + 2 >= s.size()) return std::nullopt;
    const auto hex = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      return -1;
    };
    const int hi = hex(s[i + 1]);
    const int lo = hex(s[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

std::optional<int64_t> ParseOffset(std::string_view s) {
  if (s.empty() || s.size() > 18) return std::nullopt;
  int64_t v = 0;
  for (const char ch : s) {
    if (ch < '0' || ch > '9') return std::nullopt;
    v = v * 10 + (ch - '0');
  }
  return v;
}

}  // namespace

std::string MetricsCursor::Encode() const {
  std::string out = std::to_string(jsonl);
  for (const auto& [path, offset] : events)
    out += "," + EscapePath(path) + ":" + std::to_string(offset);
  return out;
}

std::optional<MetricsCursor> MetricsCursor::Decode(std::string_view s) {
  if (s.size() > 64 << 10) return std::nullopt;
  MetricsCursor c;
  size_t comma = s.find(',');
  auto jsonl = ParseOffset(s.substr(0, comma));
  if (!jsonl) return std::nullopt;
  c.jsonl = *jsonl;
  while (comma != std::string_view::npos) {
    const size_t start = comma + 1;
    comma = s.find(',', start);
    const std::string_view part =
        s.substr(start, comma == std::string_view::npos ? comma : comma - start);
    const size_t colon = part.rfind(':');
    if (colon == std::string_view::npos) return std::nullopt;
    auto path = UnescapePath(part.substr(0, colon));
    auto offset = ParseOffset(part.substr(colon + 1));
    if (!path || path->empty() || !offset) return std::nullopt;
    c.events[*path] = *offset;
  }
  return c;
}

nlohmann::json ReadMetrics(const std::filesystem::path& file, int64_t offset, bool final,
                           const MetricsLimits& limits) {
  nlohmann::json out = {{"series", nlohmann::json::array()}};
  SeriesSet series(limits.max_series);
  std::string warning;
  bool more = false;
  ReadJsonl(file, offset, final, limits, limits.max_chunk, series, out, &warning, &more);
  out["series"] = series.Take();
  if (series.dropped()) AddWarning(warning, SeriesWarning(limits));
  if (!warning.empty()) out["warning"] = warning;
  return out;
}

std::vector<EventFile> FindJobEventFiles(const std::filesystem::path& job_dir,
                                         const MetricsLimits& limits, std::string* warning) {
  return FindEventFiles(job_dir, limits.max_event_depth, limits.max_dir_entries,
                        limits.max_event_files, warning);
}

nlohmann::json ReadJobMetrics(const std::filesystem::path& job_dir, const MetricsCursor& from,
                              const std::vector<EventFile>& files, bool final,
                              const MetricsLimits& limits, const std::string& find_warning) {
  nlohmann::json out = {{"series", nlohmann::json::array()}};
  SeriesSet series(limits.max_series);
  std::string warning = find_warning;
  std::string jsonl_warning;
  bool more = false;
  ReadJsonl(job_dir / "metrics.jsonl", from.jsonl, final, limits, limits.max_chunk, series, out,
            &jsonl_warning, &more);
  AddWarning(warning, jsonl_warning);
  MetricsCursor next;
  next.jsonl = out["offset"].get<int64_t>();
  bool complete = out["complete"].get<bool>();
  int64_t budget = limits.max_chunk - (next.jsonl - from.jsonl);
  nlohmann::json event_files = nlohmann::json::array();
  for (const EventFile& f : files) {
    const auto it = from.events.find(f.path);
    const int64_t start = it == from.events.end() ? 0 : it->second;
    EventReadLimits el;
    el.max_bytes = std::max<int64_t>(budget, 0);
    el.max_file = limits.max_file;
    el.max_record = limits.max_record;
    const EventRead r = ReadEventFile(job_dir, f.path, start, el, [&](const EventScalar& p) {
      series.Add(p.tag, p.step, p.value);
    });
    budget -= r.offset - start;
    next.events[f.path] = r.offset;
    more = more || r.more;
    // Done with it once the job has ended and every whole record was read (or it is corrupt);
    // what is left then is a record its writer never finished.
    complete = complete && final && !r.more;
    if (final && !r.stopped && !r.more && r.offset < r.limit)
      AddWarning(warning, f.path + ": ends in an incomplete record at byte " +
                              std::to_string(r.offset) + " (its writer stopped mid-record)");
    if (!r.problem.empty()) AddWarning(warning, f.path + ": " + r.problem);
    if (r.size > limits.max_file && r.offset >= limits.max_file)
      AddWarning(warning, f.path + " is larger than " + std::to_string(limits.max_file >> 20) +
                              " MiB: only its first " + std::to_string(limits.max_file >> 20) +
                              " MiB are read");
    event_files.push_back({{"path", f.path}, {"offset", r.offset}, {"size", r.size}});
  }
  out["series"] = series.Take();
  if (series.dropped()) AddWarning(warning, SeriesWarning(limits));
  out["cursor"] = next.Encode();
  out["eventFiles"] = std::move(event_files);
  out["more"] = more;
  out["complete"] = complete && !more;
  if (!warning.empty()) out["warning"] = warning;
  return out;
}

}  // namespace starforge::api
