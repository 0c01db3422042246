// Transfer progress for people at a terminal: bytes, rate and time left on one redrawn line.
#pragma once

#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>

namespace starforge::objstore {

// "0 B", "512 B", "1.5 KiB", "12.0 MiB", "3.25 GiB".
std::string FormatBytes(int64_t bytes);
// "0s", "42s", "3m07s", "2h05m".
std::string FormatDuration(double seconds);
// "LABEL  12.0 MiB / 300.0 MiB  4%  4.0 MiB/s  ETA 1m12s" after `elapsed_seconds`.
std::string ProgressLine(std::string_view label, int64_t done, int64_t total,
                         double elapsed_seconds);

// Redraws ProgressLine with '\r'. Silent for transfers that finish within `delay`, so quick
// ones print nothing; redraws at most every `interval`.
class ProgressMeter {
 public:
  using Clock = std::chrono::steady_clock;
  ProgressMeter(std::ostream& out, std::string label,
                Clock::duration delay = std::chrono::milliseconds(500),
                Clock::duration interval = std::chrono::milliseconds(200));
  void Update(int64_t done, int64_t total);
  // Draws the final state and ends the line, if anything was drawn.
  void Finish();

 private:
  void Draw(Clock::time_point now);

  std::ostream& out_;
  std::string label_;
  Clock::duration delay_;
  Clock::duration interval_;
  Clock::time_point start_;
  Clock::time_point last_draw_{};
  bool drawn_ = false;
  int64_t done_ = 0;
  int64_t total_ = 0;
  size_t last_width_ = 0;
};

}  // namespace starforge::objstore
