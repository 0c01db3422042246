#include "starforge/common/status.h"

namespace starforge {

std::string_view ToString(Code code) {
  switch (code) {
    case Code::kOk:
      return "Ok";
    case Code::kInvalidArgument:
      return "InvalidArgument";
    case Code::kNotFound:
      return "NotFound";
    case Code::kAlreadyExists:
      return "AlreadyExists";
    case Code::kFailedPrecondition:
      return "FailedPrecondition";
    case Code::kAborted:
      return "Aborted";
    case Code::kPermissionDenied:
      return "PermissionDenied";
    case Code::kUnauthenticated:
      return "Unauthenticated";
    case Code::kResourceExhausted:
      return "ResourceExhausted";
    case Code::kDeadlineExceeded:
      return "DeadlineExceeded";
    case Code::kUnavailable:
      return "Unavailable";
    case Code::kInternal:
      return "Internal";
    case Code::kUnknown:
      break;
  }
  return "Unknown";
}

Status::Status(Code code, std::string message) : code_(code) {
  if (ok()) return;
  retryable_ =
      code == Code::kAborted || code == Code::kDeadlineExceeded || code == Code::kUnavailable;
  message_ = std::move(message);
}

Status Status::Invalid(std::string message, std::string field, FieldErrors errors) {
  return Status(Code::kInvalidArgument, std::move(message))
      .WithField(std::move(field))
      .WithErrors(std::move(errors));
}

Status Status::WithReason(std::string reason) && {
  if (!ok()) reason_ = std::move(reason);
  return std::move(*this);
}

Status Status::WithRetryable(bool retryable) && {
  if (!ok()) retryable_ = retryable;
  return std::move(*this);
}

Status Status::WithField(std::string field) && {
  if (!ok()) field_ = std::move(field);
  return std::move(*this);
}

Status Status::WithErrors(FieldErrors errors) && {
  if (!ok()) errors_ = std::move(errors);
  return std::move(*this);
}

}  // namespace starforge
