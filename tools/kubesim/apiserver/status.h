// Errors as kube-apiserver reports them: a metav1.Status body with reason, code, message and
// details (see docs/kubesim.md and the API reference §2). Handlers throw ApiError; the server
// turns it into the HTTP response.
#pragma once

#include <exception>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kubesim {

struct ResourceInfo;

// One field error in apimachinery's shape (k8s.io/apimachinery/pkg/util/validation/field).
struct FieldErr {
  std::string type;  // FieldValueInvalid, FieldValueRequired, FieldValueForbidden, ...
  std::string field;
  std::string detail;
  nlohmann::json value;  // shown for Invalid/NotSupported/Duplicate
  bool has_value = false;

  // The body after "field: ", e.g. `Invalid value: "Bad": a lowercase RFC 1123 ...`.
  std::string Body() const;
  std::string ToString() const { return field + ": " + Body(); }
};
using FieldErrs = std::vector<FieldErr>;

FieldErr Invalid(std::string field, nlohmann::json value, std::string detail);
FieldErr Required(std::string field, std::string detail);
FieldErr Forbidden(std::string field, std::string detail);
FieldErr TooLong(std::string field, size_t max);

struct ApiError : std::exception {
  int code = 500;
  std::string reason;
  std::string message;
  nlohmann::json details = nlohmann::json::object();
  int retry_after = 0;      // seconds; sets the Retry-After header when > 0
  bool plain_text = false;  // 429 from priority-and-fairness is plain text, not a Status

  ApiError() = default;
  ApiError(int c, std::string r, std::string m)
      : code(c), reason(std::move(r)), message(std::move(m)) {}
  const char* what() const noexcept override { return message.c_str(); }
};

nlohmann::json StatusJson(const ApiError& e);
nlohmann::json SuccessStatus(const nlohmann::json& details);

ApiError BadRequest(std::string message);
ApiError NotFoundError(const ResourceInfo& r, const std::string& name);
ApiError AlreadyExistsError(const ResourceInfo& r, const std::string& name);
ApiError ConflictError(const ResourceInfo& r, const std::string& name);
// The errors joined as apimachinery's aggregate prints them: one alone, else "[a, b]".
std::string AggregateMessage(const FieldErrs& errs);
ApiError InvalidError(const ResourceInfo& r, const std::string& name, const FieldErrs& errs);
ApiError ExpiredError(std::string message);
ApiError PathNotFound();

}  // namespace kubesim
