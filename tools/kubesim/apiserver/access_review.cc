// POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews: evaluates
// spec.resourceAttributes (or spec.nonResourceAttributes) for the caller against the RBAC table
// (auth.h) and answers 201 with the review and its status. Without --rbac everything is allowed
// (kube-apiserver's AlwaysAllow). The RBAC authorizer never denies explicitly, so a refusal is
// {"allowed": false} without `denied` or a reason.
#include <map>
#include <string_view>

#include "server.h"
#include "starforge/common/yaml_json.h"

namespace kubesim {

using nlohmann::json;

namespace {

// The length-delimited fields of one protobuf message, by field number (the last one wins);
// varints and fixed-width fields are skipped. Throws ApiError 400 on malformed input.
std::map<uint64_t, std::string> ProtoStrings(std::string_view msg) {
  std::map<uint64_t, std::string> out;
  size_t i = 0;
  auto varint = [&]() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (i >= msg.size()) throw BadRequest("error decoding body: truncated protobuf");
      const auto b = static_cast<uint8_t>(msg[i++]);
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) return v;
    }
    throw BadRequest("error decoding body: bad protobuf varint");
  };
  while (i < msg.size()) {
    const uint64_t key = varint();
    const uint64_t wire = key & 7;
    if (wire == 0) {
      varint();
    } else if (wire == 1 || wire == 5) {
      i += wire == 1 ? 8 : 4;
    } else if (wire == 2) {
      const uint64_t len = varint();
      if (len > msg.size() - i) throw BadRequest("error decoding body: truncated protobuf");
      out[key >> 3] = std::string(msg.substr(i, len));
      i += len;
    } else {
      throw BadRequest("error decoding body: unsupported protobuf wire type");
    }
  }
  if (i > msg.size()) throw BadRequest("error decoding body: truncated protobuf");
  return out;
}

// A SelfSubjectAccessReview in kube's protobuf envelope ("k8s\0" + runtime.Unknown{typeMeta,
// raw}) as JSON, with the fields of k8s.io/api/authorization/v1/generated.proto.
json ReviewFromProtobuf(const std::string& body) {
  if (body.compare(0, 4, std::string("k8s\0", 4)) != 0) {
    throw BadRequest("error decoding body: missing the protobuf envelope");
  }
  const auto unknown = ProtoStrings(std::string_view(body).substr(4));
  const auto raw = unknown.count(2) != 0 ? ProtoStrings(unknown.at(2)) : decltype(unknown){};
  const auto spec = raw.count(2) != 0 ? ProtoStrings(raw.at(2)) : decltype(unknown){};
  json out = {{"apiVersion", "authorization.k8s.io/v1"},
              {"kind", "SelfSubjectAccessReview"},
              {"spec", json::object()}};
  auto fields = [](const std::string& msg, const std::vector<const char*>& names) {
    json o = json::object();
    const auto f = ProtoStrings(msg);
    for (size_t n = 0; n < names.size(); ++n) {
      auto it = f.find(n + 1);
      if (it != f.end() && !it->second.empty()) o[names[n]] = it->second;
    }
    return o;
  };
  if (spec.count(1) != 0) {
    out["spec"]["resourceAttributes"] = fields(
        spec.at(1), {"namespace", "verb", "group", "version", "resource", "subresource", "name"});
  }
  if (spec.count(2) != 0)
    out["spec"]["nonResourceAttributes"] = fields(spec.at(2), {"path", "verb"});
  return out;
}

}  // namespace

void Server::AccessReview(const httplib::Request& req, httplib::Response& res, const Target& t) {
  if (t.verb != "create" || !t.name.empty() || !t.sub.empty()) {
    throw ApiError(405, "MethodNotAllowed",
                   "the server does not allow this method on the requested resource");
  }
  // kubectl (auth can-i) sends built-in kinds as protobuf and accepts a JSON answer.
  std::string ct = req.get_header_value("Content-Type");
  if (auto semi = ct.find(';'); semi != std::string::npos) ct = ct.substr(0, semi);
  json body;
  if (ct == "application/vnd.kubernetes.protobuf") {
    body = ReviewFromProtobuf(req.body);
  } else if (ct.empty() || ct == "application/json" || ct == "application/yaml") {
    body = starforge::ParseYaml(req.body.empty() ? "{}" : req.body);
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
