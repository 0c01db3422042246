// pods/binding: POST /api/v1/namespaces/{ns}/pods/{name}/binding, how a scheduler assigns a pod
// to a node (k8s pkg/registry/core/pod/storage BindingREST): sets spec.nodeName and the
// PodScheduled=True condition in one write; 201 with a Success Status. A pod already assigned,
// being deleted, or whose uid differs from the Binding's gives 409 Conflict.
#include "parse_yaml.h"
#include "server.h"

namespace kubesim {

using nlohmann::json;

void Server::Bind(const httplib::Request& req, httplib::Response& res, const Target& t) {
  if (t.verb != "create") {
    throw ApiError(405, "MethodNotAllowed",
                   "the server does not allow this method on the requested resource");
  }
  if (req.body.empty()) throw BadRequest("the body of the request was empty");
  const json body = kubesim::ParseYamlOrThrow(req.body);
  if (!body.is_object()) throw BadRequest("the body of the request must be a JSON object");
  const json target = body.value("target", json::object());
  const std::string node = target.is_object() ? target.value("name", "") : "";
  if (node.empty()) {
    ApiError e(422, "Invalid",
               "Binding \"" + t.name + "\" is invalid: target.name: Required value");
    e.details = {{"name", t.name},
                 {"kind", "Binding"},
                 {"causes", json::array({{{"reason", "FieldValueRequired"},
                                          {"message", "Required value"},
                                          {"field", "target.name"}}})}};
    throw e;
  }
  const std::string kind = target.value("kind", "Node");
  if (!kind.empty() && kind != "Node") {
    throw BadRequest("a pod can only be bound to a Node, not a " + kind);
  }
  auto conflict = [&t](const std::string& why) {
    ApiError e(409, "Conflict",
               "Operation cannot be fulfilled on pods/binding \"" + t.name + "\": " + why);
    e.details = {{"name", t.name}, {"kind", "pods/binding"}};
    return e;
  };
  std::lock_guard<std::mutex> lock(store_.mu);
  const json* pod = store_.Get("pods", t.ns, t.name);
  if (pod == nullptr) throw NotFoundError(*t.r, t.name);
  json obj = *pod;
  json& md = obj["metadata"];
  const std::string want_uid = body.contains("metadata") && body["metadata"].is_object()
                                   ? body["metadata"].value("uid", "")
                                   : "";
  if (!want_uid.empty() && want_uid != md.value("uid", "")) {
    throw conflict("Precondition failed: UID in precondition: " + want_uid +
                   ", UID in object meta: " + md.value("uid", ""));
  }
  if (md.contains("deletionTimestamp")) {
    throw conflict("pod " + t.name + " is being deleted, cannot be assigned to a host");
  }
  const std::string current = obj["spec"].value("nodeName", "");
  if (!current.empty()) {
    throw conflict("pod " + t.name + " is already assigned to node \"" + current + "\"");
  }
  obj["spec"]["nodeName"] = node;
  json conditions = json::array();
  if (obj.contains("status") && obj["status"].contains("conditions")) {
    for (const auto& c : obj["status"]["conditions"]) {
      if (c.value("type", "") != "PodScheduled") conditions.push_back(c);
    }
  }
  conditions.push_back({{"type", "PodScheduled"},
                        {"status", "True"},
                        {"lastProbeTime", nullptr},
                        {"lastTransitionTime", NowRfc3339()}});
  obj["status"]["conditions"] = conditions;
  store_.Update("pods", obj);
  WriteJson(res, 201,
            {{"kind", "Status"},
             {"apiVersion", "v1"},
             {"metadata", json::object()},
             {"status", "Success"},
             {"code", 201}});
}

}  // namespace kubesim
