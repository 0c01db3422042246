#include "starforge/common/disk_budget.h"

#include <sys/statvfs.h>

#include <utility>

namespace starforge {

DiskBudget::DiskBudget(std::function<int64_t()> free_bytes, int64_t keep_free)
    : free_bytes_(std::move(free_bytes)), keep_free_(keep_free) {}

std::function<int64_t()> DiskBudget::FreeSpaceOf(std::filesystem::path dir) {
  return [dir = std::move(dir)]() -> int64_t {
    struct statvfs st {};
    if (::statvfs(dir.c_str(), &st) != 0) return INT64_MAX;  // unknown: writes will tell
    return static_cast<int64_t>(st.f_bavail) * static_cast<int64_t>(st.f_frsize);
  };
}

DiskBudget::Refusal DiskBudget::Reserve(Reservation& r, int64_t bytes) {
  if (bytes <= 0) return Refusal::kNone;
  // Space already written by uploads in progress is gone from the free space too: counting it
  // again as reserved errs on the safe side, and lasts only while those requests run.
  const int64_t free = free_bytes_() - keep_free_;
  std::lock_guard lock(mu_);
  if (bytes > free - reserved_) return bytes > free ? Refusal::kFull : Refusal::kBusy;
  reserved_ += bytes;
  r.budget_ = this;
  r.bytes_ += bytes;
  return Refusal::kNone;
}

int64_t DiskBudget::reserved() const {
  std::lock_guard lock(mu_);
  return reserved_;
}

void DiskBudget::Release(int64_t bytes) {
  std::lock_guard lock(mu_);
  reserved_ -= bytes;
}

DiskBudget::Reservation::Reservation(Reservation&& o) noexcept
    : budget_(std::exchange(o.budget_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}

DiskBudget::Reservation& DiskBudget::Reservation::operator=(Reservation&& o) noexcept {
  if (this != &o) {
    if (budget_) budget_->Release(bytes_);
    budget_ = std::exchange(o.budget_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

DiskBudget::Reservation::~Reservation() {
  if (budget_) budget_->Release(bytes_);
}

}  // namespace starforge
