#include "status.h"

#include "resources.h"

namespace kubesim {

using nlohmann::json;

namespace {

std::string ShowValue(const json& v) {
  if (v.is_string()) return json(v.get<std::string>()).dump();
  return v.dump();
}

}  // namespace

std::string FieldErr::Body() const {
  if (type == "FieldValueInvalid") {
    if (!has_value) return detail;
    std::string s = "Invalid value: " + (has_value ? ShowValue(value) : std::string("null"));
    return detail.empty() ? s : s + ": " + detail;
  }
  if (type == "FieldValueRequired")
    return detail.empty() ? "Required value" : "Required value: " + detail;
  if (type == "FieldValueForbidden") return detail.empty() ? "Forbidden" : "Forbidden: " + detail;
  if (type == "FieldValueTooLong") return "Too long: " + detail;
  if (type == "FieldValueNotSupported") {
    return "Unsupported value: " + ShowValue(value) + (detail.empty() ? "" : ": " + detail);
  }
  if (type == "FieldValueDuplicate") return "Duplicate value: " + ShowValue(value);
  return detail;
}

FieldErr Invalid(std::string field, json value, std::string detail) {
  return FieldErr{"FieldValueInvalid", std::move(field), std::move(detail), std::move(value), true};
}
FieldErr Required(std::string field, std::string detail) {
  return FieldErr{"FieldValueRequired", std::move(field), std::move(detail), json(), false};
}
FieldErr Forbidden(std::string field, std::string detail) {
  return FieldErr{"FieldValueForbidden", std::move(field), std::move(detail), json(), false};
}
FieldErr TooLong(std::string field, size_t max) {
  return FieldErr{"FieldValueTooLong", std::move(field),
                  "may not be more than " + std::to_string(max) + " bytes", json(), false};
}

json StatusJson(const ApiError& e) {
  json s = {{"kind", "Status"},     {"apiVersion", "v1"},   {"metadata", json::object()},
            {"status", "Failure"},  {"message", e.message}, {"reason", e.reason},
            {"details", e.details}, {"code", e.code}};
  if (e.details.empty()) s["details"] = json::object();
  if (e.retry_after > 0) s["details"]["retryAfterSeconds"] = e.retry_after;
  if (s["details"].empty()) s.erase("details");
  if (e.reason.empty()) s.erase("reason");
  return s;
}

json SuccessStatus(const json& details) {
  return {{"kind", "Status"},
          {"apiVersion", "v1"},
          {"metadata", json::object()},
          {"status", "Success"},
          {"details", details}};
}

ApiError BadRequest(std::string message) {
  return ApiError(400, "BadRequest", std::move(message));
}

ApiError NotFoundError(const ResourceInfo& r, const std::string& name) {
  ApiError e(404, "NotFound", r.GroupResource() + " \"" + name + "\" not found");
  e.details = {{"name", name}, {"kind", r.plural}};
  if (!r.group.empty()) e.details["group"] = r.group;
  return e;
}

ApiError AlreadyExistsError(const ResourceInfo& r, const std::string& name) {
  ApiError e(409, "AlreadyExists", r.GroupResource() + " \"" + name + "\" already exists");
  e.details = {{"name", name}, {"kind", r.plural}};
  if (!r.group.empty()) e.details["group"] = r.group;
  return e;
}

ApiError ConflictError(const ResourceInfo& r, const std::string& name) {
  ApiError e(409, "Conflict",
             "Operation cannot be fulfilled on " + r.GroupResource() + " \"" + name +
                 "\": the object has been modified; please apply your changes to the latest "
                 "version and try again");
  e.details = {{"name", name}, {"kind", r.plural}};
  if (!r.group.empty()) e.details["group"] = r.group;
  return e;
}

std::string AggregateMessage(const FieldErrs& errs) {
  if (errs.size() == 1) return errs[0].ToString();
  std::string agg = "[";
  for (size_t i = 0; i < errs.size(); ++i)
    agg += (i ? ", " : "") + errs[i].ToString();
  return agg + "]";
}

ApiError InvalidError(const ResourceInfo& r, const std::string& name, const FieldErrs& errs) {
  const std::string agg = AggregateMessage(errs);
  ApiError e(422, "Invalid", r.QualifiedKind() + " \"" + name + "\" is invalid: " + agg);
  json causes = json::array();
  for (const auto& fe : errs) {
    causes.push_back({{"reason", fe.type}, {"message", fe.Body()}, {"field", fe.field}});
  }
  e.details = {{"name", name}, {"kind", r.kind}, {"causes", causes}};
  if (!r.group.empty()) e.details["group"] = r.group;
  return e;
}

ApiError ExpiredError(std::string message) {
  return ApiError(410, "Expired", std::move(message));
}

ApiError PathNotFound() {
  return ApiError(404, "NotFound", "the server could not find the requested resource");
}

}  // namespace kubesim
