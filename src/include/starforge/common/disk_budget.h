// Disk space of the state directory's file system, held before it is written: a submit's upload
// (the API) and a packaging's unpacked code and capsule (the controller) reserve their bytes
// against the free space first, so that concurrent uploads and packagings cannot each pass a
// free-space check and then together fill the disk. A reservation that does not fit is refused
// (the API answers 503 + Retry-After while others hold space, 507 when the disk is too full even
// alone; the controller retries the packaging later). Thread-safe.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <mutex>

namespace starforge {

class DiskBudget {
 public:
  // `free_bytes` says how much the file system has free now; `keep_free` is never handed out.
  DiskBudget(std::function<int64_t()> free_bytes, int64_t keep_free);
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
    friend class DiskBudget;
    DiskBudget* budget_ = nullptr;
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

}  // namespace starforge
