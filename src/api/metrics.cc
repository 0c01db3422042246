#include "starforge/api/metrics.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <map>
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

}  // namespace

nlohmann::json ReadMetrics(const std::filesystem::path& file, int64_t offset, bool final,
                           const MetricsLimits& limits) {
  nlohmann::json out = {{"series", nlohmann::json::array()},
                        {"offset", offset},
                        {"size", 0},
                        {"lines", 0},
                        {"skipped", 0},
                        {"complete", false}};
  const int fd = OpenMetrics(file);
  if (fd < 0) {
    out["complete"] = final;
    return out;
  }
  struct stat st {};
  const int64_t size = ::fstat(fd, &st) == 0 ? static_cast<int64_t>(st.st_size) : 0;
  out["size"] = size;
  offset = std::clamp<int64_t>(offset, 0, size);
  const int64_t limit = std::min(size, limits.max_file);
  const int64_t want = std::clamp<int64_t>(limit - offset, 0, limits.max_chunk);
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

  std::map<std::string, size_t> index;  // name → position in `series`
  std::vector<std::pair<std::string, nlohmann::json>> series;
  int64_t lines = 0;
  int64_t skipped = 0;
  bool dropped_series = false;
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
      auto found = index.find(key);
      if (found == index.end()) {
        if (series.size() >= limits.max_series) {
          dropped_series = true;
          continue;
        }
        found = index.emplace(key, series.size()).first;
        series.emplace_back(key, nlohmann::json::array());
      }
      series[found->second].second.push_back(nlohmann::json::array({step, v}));
      any = true;
    }
    if (!any) ++skipped;
  }
  offset += static_cast<int64_t>(pos);
  for (auto& [name, points] : series)
    out["series"].push_back({{"name", name}, {"points", std::move(points)}});
  out["offset"] = offset;
  out["lines"] = lines;
  out["skipped"] = skipped;
  out["complete"] = final && offset >= limit;
  std::string warning;
  if (size > limits.max_file && offset >= limits.max_file)
    warning = "metrics.jsonl is larger than " + std::to_string(limits.max_file >> 20) +
              " MiB: only its first " + std::to_string(limits.max_file >> 20) +
              " MiB are read; write fewer points (every Nth step)";
  if (dropped_series) {
    if (!warning.empty()) warning += "; ";
    warning += "more than " + std::to_string(limits.max_series) + " scalar names: only the first " +
               std::to_string(limits.max_series) + " are shown";
  }
  if (!warning.empty()) out["warning"] = warning;
  return out;
}

}  // namespace starforge::api
