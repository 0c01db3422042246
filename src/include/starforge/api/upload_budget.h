// Disk space for uploads in progress. A submit's upload (and the scratch copy its check
// unpacks) is reserved against the free space of the state directory's file system before it
// is written, so that concurrent uploads cannot together fill the disk: a reservation that does
// not fit is refused (the caller answers 503 + Retry-After while others hold space, 507 when the
// disk is too full even alone). Thread-safe.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <mutex>

namespace starforge::api {

class UploadBudget {
 public:
  // `free_bytes` says how much the file system has free now; `keep_free` is never handed out.
  UploadBudget(std::function<int64_t()> free_bytes, int64_t keep_free);
  // The free space of `dir`'s file system (statvfs: what an unprivileged writer may use).
  static std::function<int64_t()> FreeSpaceOf(std::filesystem::path dir);

  enum class Refusal { kNone, kBusy, kFull };

  // Holds its bytes until destroyed. Move-only.
  class Reservation {
   public:
    Reservation() = default;
    Reservation(Reservation&& o) noexcept;
    Reservation& operator=(Reservation&& o) noexcept;
    ~Reservation();
    int64_t bytes() const { return bytes_; }

   private:
    friend class UploadBudget;
    UploadBudget* budget_ = nullptr;
    int64_t bytes_ = 0;
  };

  // Reserves `bytes` into `r` (added to what it holds); kNone when it fits, else why not.
  Refusal Reserve(Reservation& r, int64_t bytes);
  int64_t reserved() const;

 private:
  void Release(int64_t bytes);

  std::function<int64_t()> free_bytes_;
  const int64_t keep_free_;
  mutable std::mutex mu_;
  int64_t reserved_ = 0;
};

}  // namespace starforge::api
