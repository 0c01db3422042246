// The outcome of an operation that can fail: ok, or a CamelCase reason, a message for people and
// whether trying again may succeed. Callers decide retry vs give-up from retryable() alone.
#pragma once

#include <string>
#include <utility>

namespace starforge {

class Status {
 public:
  Status() = default;  // ok

  static Status Ok() { return Status(); }
  // A fault that may go away by itself (network, server busy, a conflict): try again later.
  static Status Retryable(std::string reason, std::string message) {
    return Status(std::move(reason), std::move(message), true);
  }
  // A fault that trying again will not fix.
  static Status Permanent(std::string reason, std::string message) {
    return Status(std::move(reason), std::move(message), false);
  }
  // Not done yet, and nothing wrong: the operation goes on by itself (a deletion waiting for
  // finalizers). Retryable, for a caller that does not tell it apart; one that does waits to be
  // told of the change instead of retrying.
  static Status InProgress(std::string reason, std::string message) {
    Status s(std::move(reason), std::move(message), true);
    s.in_progress_ = true;
    return s;
  }

  bool ok() const { return !failed_; }
  bool retryable() const { return failed_ && retryable_; }
  bool in_progress() const { return in_progress_; }
  const std::string& reason() const { return reason_; }    // CamelCase; "" when ok
  const std::string& message() const { return message_; }  // for people; "" when ok

 private:
  Status(std::string reason, std::string message, bool retryable)
      : failed_(true),
        retryable_(retryable),
        reason_(std::move(reason)),
        message_(std::move(message)) {}

  bool failed_ = false;
  bool retryable_ = false;
  bool in_progress_ = false;
  std::string reason_;
  std::string message_;
};

}  // namespace starforge
