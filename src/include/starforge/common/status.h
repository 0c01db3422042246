// The outcome of an operation that can fail, and the one error type of src/ (docs in
// status_or.h for a value or a Status): ok, or a code (what kind of failure, for a program), a
// CamelCase reason (StarForge's own word for it, optional), a message for people, whether trying
// again may succeed, and for input errors the field(s) at fault. Callers decide retry vs give-up
// from retryable() alone. Libraries that report otherwise (Kubernetes, S3, SQLite, HTTP clients)
// are mapped into a Status at their edge; only src/api maps a Status to an HTTP status.
#pragma once

#include <string>
#include <string_view>
#include <utility>

#include "starforge/common/field_error.h"

namespace starforge {

// What kind of failure, in the style of absl::StatusCode.
enum class Code {
  kOk,
  kInvalidArgument,     // the input is wrong: fixing it, not retrying, helps
  kNotFound,            // the thing named does not exist (or is not the caller's to see)
  kAlreadyExists,       // the thing to create exists
  kFailedPrecondition,  // the state does not allow it (a finished playground, a missing bucket)
  kAborted,             // a concurrent change came first: re-read and try again
  kPermissionDenied,    // known caller, not allowed
  kUnauthenticated,     // the caller's credentials are missing or wrong
  kResourceExhausted,   // a quota or a limit
  kDeadlineExceeded,    // it took too long
  kUnavailable,         // the other side cannot be reached or is busy: try again later
  kInternal,            // a broken invariant or a failure of our own storage
  kUnknown,             // not classified
};
// "Ok", "InvalidArgument", ...
std::string_view ToString(Code code);

class Status {
 public:
  Status() = default;  // ok
  // A failure of `code` (kOk gives an ok Status); retryable when the code says it may pass
  // (kAborted, kDeadlineExceeded, kUnavailable).
  Status(Code code, std::string message);

  static Status Ok() { return Status(); }
  // A fault that may go away by itself (network, server busy, a conflict): try again later.
  static Status Retryable(std::string reason, std::string message) {
    return Status(Code::kUnavailable, std::move(message)).WithReason(std::move(reason));
  }
  // A fault that trying again will not fix.
  static Status Permanent(std::string reason, std::string message) {
    return Status(Code::kUnknown, std::move(message)).WithReason(std::move(reason));
  }
  // Not done yet, and nothing wrong: the operation goes on by itself (a deletion waiting for
  // finalizers). Retryable, for a caller that does not tell it apart; one that does waits to be
  // told of the change instead of retrying.
  static Status InProgress(std::string reason, std::string message) {
    Status s = Retryable(std::move(reason), std::move(message));
    s.in_progress_ = true;
    return s;
  }
  // Input that is wrong: about `field` (a path such as "model"; optional), with one FieldError
  // per problem when there are several.
  static Status Invalid(std::string message, std::string field = {}, FieldErrors errors = {});
  static Status NotFound(std::string message) { return {Code::kNotFound, std::move(message)}; }
  static Status FailedPrecondition(std::string message) {
    return {Code::kFailedPrecondition, std::move(message)};
  }
  static Status Unavailable(std::string message) {
    return {Code::kUnavailable, std::move(message)};
  }
  static Status Internal(std::string message) { return {Code::kInternal, std::move(message)}; }

  // The same failure with the reason, retryability, field or field errors replaced (no-ops on
  // an ok Status).
  Status WithReason(std::string reason) &&;
  Status WithRetryable(bool retryable) &&;
  Status WithField(std::string field) &&;
  Status WithErrors(FieldErrors errors) &&;

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  bool retryable() const { return !ok() && retryable_; }
  bool in_progress() const { return in_progress_; }
  const std::string& reason() const { return reason_; }    // CamelCase; "" when ok or unset
  const std::string& message() const { return message_; }  // for people; "" when ok
  const std::string& field() const { return field_; }      // the input field at fault, or ""
  const FieldErrors& errors() const { return errors_; }    // each input problem, or none
  // "<message>" ("ok" when ok), for logs.
  std::string ToString() const { return ok() ? "ok" : message_; }

 private:
  Code code_ = Code::kOk;
  bool retryable_ = false;
  bool in_progress_ = false;
  std::string reason_;
  std::string message_;
  std::string field_;
  FieldErrors errors_;
};

}  // namespace starforge
