// POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews: evaluates
// spec.resourceAttributes (or spec.nonResourceAttributes) for the caller against the RBAC table
// (auth.h) and answers 201 with the review and its status. Without --rbac everything is allowed
// (kube-apiserver's AlwaysAllow). The RBAC authorizer never denies explicitly, so a refusal is
// {"allowed": false} without `denied` or a reason.
#include "parse_yaml.h"
#include "protobuf.h"
#include "server.h"

namespace kubesim {

using nlohmann::json;

void Server::AccessReview(const httplib::Request& req, httplib::Response& res, const Target& t) {
  if (t.verb != "create" || !t.name.empty() || !t.sub.empty()) {
    throw ApiError(405, "MethodNotAllowed",
                   "the server does not allow this method on the requested resource");
  }
  // kubectl (auth can-i) sends built-in kinds as protobuf and accepts a JSON answer.
  std::string ct = req.get_header_value("Content-Type");
  if (auto semi = ct.find(';'); semi != std::string::npos) ct = ct.substr(0, semi);
  json body;
  if (IsProtobufContentType(ct)) {
    body = DecodeProtobufBody(req.body, "authorization.k8s.io/v1", "SelfSubjectAccessReview");
  } else if (ct.empty() || ct == "application/json" || ct == "application/yaml") {
    body = kubesim::ParseYamlOrThrow(req.body.empty() ? "{}" : req.body);
  } else {
    throw ApiError(415, "UnsupportedMediaType",
                   "the body of the request was in an unknown format - accepted media types "
                   "include: application/json, application/yaml, "
                   "application/vnd.kubernetes.protobuf");
  }
  if (!body.is_object()) throw BadRequest("error decoding body: expected an object");
  json spec = body.contains("spec") && body["spec"].is_object() ? body["spec"] : json::object();
  const bool has_res =
      spec.contains("resourceAttributes") && spec["resourceAttributes"].is_object();
  const bool has_non =
      spec.contains("nonResourceAttributes") && spec["nonResourceAttributes"].is_object();
  FieldErrs errs;
  if (has_res && has_non) {
    errs.push_back(Invalid("spec.nonResourceAttributes", spec["nonResourceAttributes"],
                           "cannot be specified in combination with resourceAttributes"));
  }
  if (!has_res && !has_non) {
    errs.push_back(Required("spec.resourceAttributes",
                            "exactly one of nonResourceAttributes or resourceAttributes must be "
                            "specified"));
  }
  if (!errs.empty()) throw InvalidError(*t.r, "", errs);

  RequestAttrs a;
  if (has_res) {
    const json& ra = spec["resourceAttributes"];
    a.resource_request = true;
    a.ns = ra.value("namespace", "");
    a.verb = ra.value("verb", "");
    a.group = ra.value("group", "");
    a.version = ra.value("version", "");
    a.resource = ra.value("resource", "");
    a.subresource = ra.value("subresource", "");
    a.name = ra.value("name", "");
  } else {
    const json& nra = spec["nonResourceAttributes"];
    a.path = nra.value("path", "");
    a.verb = nra.value("verb", "");
  }
  AuthDecision d = rbac_ ? rbac_->Authorize(t.who, a) : AuthDecision{true, ""};
  json status = {{"allowed", d.allowed}};
  if (!d.reason.empty()) status["reason"] = d.reason;
  WriteJson(res, 201,
            {{"kind", "SelfSubjectAccessReview"},
             {"apiVersion", "authorization.k8s.io/v1"},
             {"metadata", {{"creationTimestamp", nullptr}}},
             {"spec", spec},
             {"status", status}});
}

}  // namespace kubesim
