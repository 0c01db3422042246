#include "starforge/objstore/progress.h"

#include <fmt/format.h>

#include <cmath>
#include <ostream>

namespace starforge::objstore {

std::string FormatBytes(int64_t bytes) {
  if (bytes < 1024) return fmt::format("{} B", bytes);
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes) / 1024;
  size_t unit = 0;
  while (v >= 1024 && unit + 1 < std::size(kUnits)) {
    v /= 1024;
    ++unit;
  }
  if (v < 10) return fmt::format("{:.2f} {}", v, kUnits[unit]);
  return fmt::format("{:.1f} {}", v, kUnits[unit]);
}

std::string FormatDuration(double seconds) {
  const int64_t s = seconds <= 0 ? 0 : static_cast<int64_t>(std::llround(seconds));
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
}

std::string ProgressLine(std::string_view label, int64_t done, int64_t total,
                         double elapsed_seconds) {
  // A download's size is unknown (total <= 0) until the server says.
  std::string line = total > 0 ? fmt::format("{}  {} / {}  {}%", label, FormatBytes(done),
                                             FormatBytes(total), done * 100 / total)
                               : fmt::format("{}  {}", label, FormatBytes(done));
  if (elapsed_seconds > 0 && done > 0) {
    const double rate = static_cast<double>(done) / elapsed_seconds;
    line += fmt::format("  {}/s", FormatBytes(static_cast<int64_t>(rate)));
    if (total > done) {
      line += "  ETA " + FormatDuration(static_cast<double>(total - done) / rate);
    }
  }
  return line;
}

ProgressMeter::ProgressMeter(std::ostream& out, std::string label, Clock::duration delay,
                             Clock::duration interval)
    : out_(out),
      label_(std::move(label)),
      delay_(delay),
      interval_(interval),
      start_(Clock::now()) {}

void ProgressMeter::Update(int64_t done, int64_t total) {
  done_ = done;
  total_ = total;
  const Clock::time_point now = Clock::now();
  if (now - start_ < delay_) return;
  if (drawn_ && now - last_draw_ < interval_) return;
  Draw(now);
}

void ProgressMeter::Finish() {
  if (!drawn_) return;
  Draw(Clock::now());
  out_ << "\n" << std::flush;
}

void ProgressMeter::Draw(Clock::time_point now) {
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  std::string line = ProgressLine(label_, done_, total_, elapsed);
  const size_t width = line.size();
  // Pad over the previous, longer line so no stale characters remain after '\r'.
  if (width < last_width_) line.append(last_width_ - width, ' ');
  last_width_ = width;
  out_ << "\r" << line << std::flush;
  last_draw_ = now;
  drawn_ = true;
}

}  // namespace starforge::objstore
