// A value, or the Status saying why there is none (absl::StatusOr's shape; std::expected is
// C++23). Implicit from both on purpose: `return value;` and `return Status::NotFound(...);`.
#pragma once

#include <optional>
#include <utility>

#include "starforge/common/status.h"

namespace starforge {

template <typename T>
class StatusOr {
 public:
  // Holds `value`; status() is ok.
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  // Holds no value; an ok `status` (a bug: a failure must say why) becomes kInternal.
  StatusOr(Status status)  // NOLINT(google-explicit-constructor)
      : status_(status.ok() ? Status::Internal("StatusOr built from an ok Status")
                            : std::move(status)) {}

  // Whether there is a value.
  bool ok() const { return value_.has_value(); }
  explicit operator bool() const { return ok(); }
  // Ok when there is a value, else why there is none.
  const Status& status() const& { return status_; }
  Status status() && { return std::move(status_); }
  // The value; only when ok() (else std::bad_optional_access).
  const T& value() const& { return value_.value(); }
  T& value() & { return value_.value(); }
  T&& value() && { return std::move(value_).value(); }
  // The value, unchecked; only when ok().
  const T& operator*() const& { return *value_; }
  T& operator*() & { return *value_; }
  const T* operator->() const { return &*value_; }
  T* operator->() { return &*value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace starforge
