// The REST verbs on objects: get, list, create, update (PUT), patch, delete, deletecollection,
// and the status subresource. Every write goes through Admit(): decoding checks, unknown-field
// handling (fieldValidation), defaulting, ObjectMeta and schema validation.
#include <algorithm>
#include <ctime>
#include <random>
#include <set>

#include "defaults.h"
#include "event_fields.h"
#include "kueue.h"
#include "parse_yaml.h"
#include "patch.h"
#include "protobuf.h"
#include "selectors.h"
#include "server.h"
#include "validation.h"

namespace kubesim {

using nlohmann::json;

namespace {

void Rename(json& obj, const std::string& from, const std::string& to) {
  if (obj.contains(from)) {
    obj[to] = obj[from];
    obj.erase(from);
  }
}

std::string GenerateName(const std::string& base) {
  static const char kAlphabet[] = "bcdfghjklmnpqrstvwxz2456789";
  static std::mt19937 rng{std::random_device{}()};
  std::string out = base.substr(0, std::min<size_t>(base.size(), 58));
  std::uniform_int_distribution<size_t> pick(0, sizeof(kAlphabet) - 2);
  for (int i = 0; i < 5; ++i)
    out += kAlphabet[pick(rng)];
  return out;
}

// The object without metadata and status: what a generation bump compares.
json SpecPart(json obj) {
  obj.erase("metadata");
  obj.erase("status");
  obj.erase("apiVersion");
  obj.erase("kind");
  return obj;
}

std::string Param(const httplib::Request& req, const char* name) {
  return req.has_param(name) ? req.get_param_value(name) : "";
}

// A create/update body: JSON or YAML, or protobuf (what kubectl sends for built-in kinds).
json ParseBody(const httplib::Request& req, const ResourceInfo& r) {
  if (req.body.empty()) throw BadRequest("the body of the request was empty");
  const std::string type = req.get_header_value("Content-Type");
  json body;
  if (IsProtobufContentType(type)) {
    body = DecodeProtobufBody(req.body, r.ApiVersion(), r.kind);
  } else {
    // JSON as JSON (kube-apiserver decodes application/json with a JSON decoder), YAML — or a
    // body that is not JSON — through the YAML parser: yaml-cpp on every JSON body was 5 % of
    // kubesim's CPU under a burst of RayJobs (bench/README.md, kuberay_fleet_scale).
    if (type.find("yaml") == std::string::npos)
      body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
    if (body.is_discarded() || body.is_null()) body = kubesim::ParseYamlOrThrow(req.body);
  }
  if (!body.is_object()) throw BadRequest("the body of the request must be a JSON object");
  return body;
}

// Hex "<rv>:<key>" as an opaque continue token.
std::string EncodeContinue(uint64_t rv, const std::string& key) {
  static const char* hex = "0123456789abcdef";
  std::string raw = std::to_string(rv) + ":" + key;
  std::string out;
  for (unsigned char c : raw) {
    out += hex[c >> 4];
    out += hex[c & 15];
  }
  return out;
}

bool DecodeContinue(const std::string& token, uint64_t* rv, std::string* key) {
  if (token.size() % 2 != 0) return false;
  std::string raw;
  for (size_t i = 0; i < token.size(); i += 2) {
    auto nib = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      return -1;
    };
    int hi = nib(token[i]);
    int lo = nib(token[i + 1]);
    if (hi < 0 || lo < 0) return false;
    raw += static_cast<char>(hi * 16 + lo);
  }
  auto colon = raw.find(':');
  if (colon == std::string::npos) return false;
  try {
    *rv = std::stoull(raw.substr(0, colon));
  } catch (const std::exception&) {
    return false;
  }
  *key = raw.substr(colon + 1);
  return true;
}

Propagation ParsePolicy(const std::string& p) {
  if (p == "Foreground") return Propagation::kForeground;
  if (p == "Orphan") return Propagation::kOrphan;
  if (p.empty() || p == "Background") return Propagation::kBackground;
  throw ApiError(
      422, "Invalid",
      "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Unsupported value: \"" + p +
          "\": supported values: \"Foreground\", \"Background\", \"Orphan\"");
}

}  // namespace

json ToStorage(const ResourceInfo& r, json obj) {
  if (r.group != "events.k8s.io") return obj;
  for (const auto& [from, to] : kEventV1ToCore)
    Rename(obj, from, to);
  obj["apiVersion"] = "v1";
  obj["kind"] = "Event";
  return obj;
}

json Present(const ResourceInfo& r, json obj) {
  if (r.group == "events.k8s.io") {
    for (const auto& [to, from] : kEventV1ToCore)
      Rename(obj, from, to);
  }
  obj["apiVersion"] = r.ApiVersion();
  obj["kind"] = r.kind;
  return obj;
}

std::optional<table::Options> TableRequested(const httplib::Request& req, const Target& t) {
  if (!t.sub.empty()) return std::nullopt;
  auto gv = table::NegotiateTable(req.get_header_value("Accept"));
  if (!gv) return std::nullopt;
  table::Options o;
  o.group_version = *gv;
  o.include = table::ParseIncludeObject(Param(req, "includeObject"));
  return o;
}

table::Printer PrinterFor(const ResourceInfo& r) {
  table::Printer p;
  p.group = r.group;
  p.plural = r.plural;
  if (r.crd != nullptr) {
    p.custom = true;
    p.crd_columns = json::array();
    for (const json& v : r.crd->crd["spec"].value("versions", json::array())) {
      if (v.value("name", "") == r.version && v.contains("additionalPrinterColumns")) {
        p.crd_columns = v["additionalPrinterColumns"];
      }
    }
  }
  return p;
}

void WriteTable(httplib::Response& res, const json& table) {
  const std::string gv = table.value("apiVersion", "meta.k8s.io/v1");
  res.status = 200;
  res.set_content(table.dump(),
                  "application/json;as=Table;v=" + gv.substr(gv.find('/') + 1) + ";g=meta.k8s.io");
}

std::string Server::AllocateClusterIpLocked() {
  std::set<std::string> used;
  for (const json* svc : store_.List("services", "")) {
    const auto spec = svc->find("spec");
    if (spec == svc->end() || !spec->is_object()) continue;
    const auto ips = spec->find("clusterIPs");
    if (ips == spec->end() || !ips->is_array()) continue;
    for (const json& ip : *ips)
      if (ip.is_string()) used.insert(ip.get<std::string>());
  }
  // 10.96.0.1 is the kubernetes Service's by convention; the upper part of the range is the
  // dynamic band kube-apiserver allocates from first.
  static std::mt19937 rng{std::random_device{}()};
  std::uniform_int_distribution<int> pick(16, 0xfffe);
  for (int attempt = 0; attempt < 0x10000; ++attempt) {
    const int n = pick(rng);
    const std::string ip = "10.96." + std::to_string(n >> 8) + "." + std::to_string(n & 0xff);
    if (!used.count(ip)) return ip;
  }
  throw ApiError(500, "InternalError",
                 "Internal error occurred: failed to allocate a serviceIP: range is full");
}

json Server::Admit(const httplib::Request& req, httplib::Response& res, const Target& t, json obj,
                   const json* old) {
  const ResourceInfo& r = *t.r;
  // Unknown fields: pruned (Ignore), reported as warnings (Warn) or rejected (Strict).
  std::vector<std::string> unknown;
  if (r.crd != nullptr) {
    unknown = PruneUnknown(r.crd->openapi, obj);
  } else {
    // Built-in kinds: only ObjectMeta is checked for unknown fields.
    json copy = obj;
    for (const auto& u : PruneUnknown(json::object(), copy)) {
      if (u.rfind("metadata.", 0) != 0) continue;
      unknown.push_back(u);
      obj["metadata"].erase(u.substr(9));
    }
  }
  const std::string fv = Param(req, "fieldValidation");
  if (!unknown.empty()) {
    if (fv == "Strict") {
      std::string msg;
      for (size_t i = 0; i < unknown.size(); ++i) {
        msg += (i ? ", " : "") + std::string("unknown field \"") + unknown[i] + "\"";
      }
      throw BadRequest(r.kind + " in version \"" + r.version + "\" cannot be handled as a " +
                       r.kind + ": strict decoding error: " + msg);
    }
    if (fv == "Warn") {
      std::string warn;
      for (size_t i = 0; i < unknown.size(); ++i) {
        warn += (i ? ", " : "") + std::string("299 - \"unknown field \\\"") + unknown[i] + "\\\"\"";
      }
      res.set_header("Warning", warn);
    }
  }
  if (r.crd != nullptr) ApplyDefaults(r.crd->openapi, obj);
  const bool kueue_job =
      opts_.kueue_suspend && r.plural == "rayjobs" && t.sub.empty() && r.crd != nullptr;
  // Kueue's mutating webhook: queued until admitted (server.h); it runs after the schema's
  // defaults, as admission webhooks do in kube-apiserver.
  if (kueue_job && old == nullptr) kueue::DefaultRayJob(obj);
  FieldErrs errs = ValidateMeta(r, obj, old);
  if (r.crd != nullptr) {
    const json* old_obj = old;
    FieldErrs schema_errs = ValidateCustom(r, obj, old_obj);
    errs.insert(errs.end(), schema_errs.begin(), schema_errs.end());
  }
  if (!errs.empty()) {
    std::string name = obj["metadata"].value("name", "");
    throw InvalidError(r, name, errs);
  }
  // Kueue's validating webhook runs after the API server's own validation, and denies with 403.
  if (kueue_job) {
    const std::string denied = kueue::ValidateRayJob(obj, old);
    if (!denied.empty()) throw ApiError(403, "Forbidden", denied);
  }
  return obj;
}

void Server::Get(const httplib::Request& req, httplib::Response& res, const Target& t) {
  const auto as_table = TableRequested(req, t);
  std::lock_guard<std::mutex> lock(store_.mu);
  const json* obj = store_.Get(t.r->storage, t.ns, t.name);
  if (obj == nullptr) throw NotFoundError(*t.r, t.name);
  if (as_table) {
    WriteTable(res, table::ToTable(PrinterFor(*t.r), {Present(*t.r, *obj)}, nullptr, *as_table,
                                   std::time(nullptr)));
    return;
  }
  WriteJson(res, 200, Present(*t.r, *obj));
}

void Server::List(const httplib::Request& req, httplib::Response& res, const Target& t) {
  LabelSelector ls = LabelSelector::Parse(Param(req, "labelSelector"));
  FieldSelector fs = FieldSelector::Parse(Param(req, "fieldSelector"), *t.r);
  const std::string rv = Param(req, "resourceVersion");
  const std::string rvm = Param(req, "resourceVersionMatch");
  const std::string cont = Param(req, "continue");
  if (!rvm.empty()) {
    if (rv.empty()) {
      throw ApiError(422, "Invalid",
                     "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: "
                     "resourceVersionMatch is forbidden unless resourceVersion is provided");
    }
    if (!cont.empty()) {
      throw ApiError(422, "Invalid",
                     "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: "
                     "resourceVersionMatch is forbidden when continue is provided");
    }
    if (rvm != "NotOlderThan" && rvm != "Exact") {
      throw ApiError(422, "Invalid",
                     "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Unsupported "
                     "value: \"" +
                         rvm + "\": supported values: \"Exact\", \"NotOlderThan\"");
    }
    if (rvm == "Exact" && rv == "0") {
      throw ApiError(422, "Invalid",
                     "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: "
                     "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"");
    }
  }
  int64_t limit = 0;
  if (!Param(req, "limit").empty()) {
    try {
      limit = std::stoll(Param(req, "limit"));
    } catch (const std::exception&) {
      throw BadRequest("invalid limit: " + Param(req, "limit"));
    }
  }
  const auto as_table = TableRequested(req, t);
  std::lock_guard<std::mutex> lock(store_.mu);
  uint64_t list_rv = store_.CurrentRv();
  std::string after;
  if (!cont.empty()) {
    if (!DecodeContinue(cont, &list_rv, &after)) {
      throw BadRequest(
          "continue key is not valid: incorrect encoded start resourceVersion "
          "(version meta.k8s.io/v1)");
    }
    if (list_rv < store_.OldestRv()) {
      throw ExpiredError(
          "The provided continue parameter is too old to display a consistent list result. You "
          "can start a new list without the continue parameter, or use the continue token in "
          "this response to retrieve the remainder of the results. Continuing with the provided "
          "token results in an inconsistent list - objects that were created, modified, or "
          "deleted between the time the first chunk was returned and now may show up in the "
          "list.");
    }
  }
  json items = json::array();
  std::string last_key;
  bool more = false;
  int64_t remaining = 0;
  // A `k=v` requirement narrows the scan to the label index's objects (same order, and every
  // candidate still goes through both selectors).
  std::string lkey;
  std::string lvalue;
  const std::vector<const json*> candidates =
      ls.Equality(&lkey, &lvalue) ? store_.ListByLabel(t.r->storage, t.ns, lkey, lvalue)
                                  : store_.List(t.r->storage, t.ns);
  for (const json* obj : candidates) {
    const std::string key =
        (*obj)["metadata"].value("namespace", "") + "/" + (*obj)["metadata"].value("name", "");
    if (!after.empty() && key <= after) continue;
    if (!ls.Matches(*obj) || !fs.Matches(*obj)) continue;
    if (limit > 0 && static_cast<int64_t>(items.size()) >= limit) {
      more = true;
      ++remaining;
      continue;
    }
    items.push_back(Present(*t.r, *obj));
    last_key = key;
  }
  json md = {{"resourceVersion", std::to_string(list_rv)}};
  if (more) {
    md["continue"] = EncodeContinue(list_rv, last_key);
    md["remainingItemCount"] = remaining;
  }
  if (as_table) {
    WriteTable(res, table::ToTable(PrinterFor(*t.r), items.get<std::vector<json>>(), md, *as_table,
                                   std::time(nullptr)));
    return;
  }
  WriteJson(res, 200,
            {{"kind", t.r->kind + "List"},
             {"apiVersion", t.r->ApiVersion()},
             {"metadata", md},
             {"items", items}});
}

json Server::CreateLocked(const httplib::Request& req, httplib::Response& res, const Target& t,
                          json obj, bool* created) {
  const ResourceInfo& r = *t.r;
  if (!obj.is_object()) throw BadRequest("the body of the request must be a JSON object");
  const std::string av = obj.value("apiVersion", r.ApiVersion());
  if (av != r.ApiVersion()) {
    throw BadRequest("the API version in the data (" + av +
                     ") does not match the expected API version (" + r.ApiVersion() + ")");
  }
  const std::string kind = obj.value("kind", r.kind);
  if (kind != r.kind) {
    throw BadRequest("the kind in the data (" + kind + ") does not match the expected kind (" +
                     r.kind + ")");
  }
  obj = ToStorage(r, obj);
  if (!obj.contains("metadata") || !obj["metadata"].is_object()) obj["metadata"] = json::object();
  json& md = obj["metadata"];
  if (r.namespaced) {
    const std::string body_ns = md.value("namespace", "");
    if (!body_ns.empty() && body_ns != t.ns) {
      throw BadRequest(
          "the namespace of the provided object does not match the namespace sent "
          "on the request");
    }
    md["namespace"] = t.ns;
  }
  bool generated = false;
  if (md.value("name", "").empty() && !md.value("generateName", "").empty()) {
    md["name"] = GenerateName(md["generateName"].get<std::string>());
    generated = true;
  }
  if (!t.name.empty() && md.value("name", "") != t.name) {
    throw BadRequest("the name of the object (" + md.value("name", "") +
                     ") does not match the name on the URL (" + t.name + ")");
  }
  // The uid comes first: the Job's generated selector names it.
  const std::string uid = NewUid();
  md["uid"] = uid;
  // Status: dropped on create for CRs; set by the "kubelet"/controllers for the rest. Built-in
  // kinds are defaulted as kube-apiserver defaults them (defaults.h).
  if (r.crd != nullptr) {
    obj.erase("status");
  } else if (r.plural == "pods") {
    obj = DefaultPod(std::move(obj));
  } else if (r.plural == "namespaces") {
    obj = DefaultNamespace(std::move(obj));
  } else if (r.plural == "secrets") {
    obj = DefaultSecret(std::move(obj));
  } else if (r.plural == "jobs") {
    obj = DefaultJob(std::move(obj));
  } else if (r.plural == "services") {
    obj = DefaultService(std::move(obj), json(),
                         ServiceNeedsClusterIp(obj) ? AllocateClusterIpLocked() : "");
  }
  obj = Admit(req, res, t, obj, nullptr);
  json& m = obj["metadata"];
  for (const char* f :
       {"resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"}) {
    m.erase(f);
  }
  m["uid"] = uid;
  m["creationTimestamp"] = NowRfc3339();
  if (r.has_generation) m["generation"] = 1;
  if (m.contains("generation") && !r.has_generation) m.erase("generation");
  const std::string manager = Param(req, "fieldManager");
  const bool apply = req.get_header_value("Content-Type").find("apply-patch") != std::string::npos;
  m["managedFields"] = json::array({{{"manager", manager.empty() ? "unknown" : manager},
                                     {"operation", apply ? "Apply" : "Update"},
                                     {"apiVersion", r.ApiVersion()},
                                     {"time", NowRfc3339()},
                                     {"fieldsType", "FieldsV1"},
                                     {"fieldsV1", json::object()}}});
  const std::string name = m.value("name", "");
  if (r.namespaced && !store_.NamespaceExists(t.ns)) {
    ApiError e(404, "NotFound", "namespaces \"" + t.ns + "\" not found");
    e.details = {{"name", t.ns}, {"kind", "namespaces"}};
    throw e;
  }
  // The ServiceAccount admission plugin: a pod's account must exist.
  if (r.plural == "pods") {
    const std::string sa = obj["spec"].value("serviceAccountName", "");
    const json* account = sa.empty() ? nullptr : store_.Get("serviceaccounts", t.ns, sa);
    if (!sa.empty() && account == nullptr) {
      ApiError e(403, "Forbidden",
                 "pods \"" + name + "\" is forbidden: error looking up service account " + t.ns +
                     "/" + sa + ": serviceaccount \"" + sa + "\" not found");
      e.details = {{"name", name}, {"kind", "pods"}};
      throw e;
    }
    obj = MountServiceAccountToken(std::move(obj), account != nullptr ? *account : json(),
                                   GenerateName("kube-api-access-"));
  }
  if (store_.Get(r.storage, t.ns, name) != nullptr) {
    ApiError e = AlreadyExistsError(r, name);
    if (generated) {
      e.message += ", the server was not able to generate a unique name for the object";
      e.retry_after = 1;
    }
    throw e;
  }
  if (Param(req, "dryRun") == "All") {
    *created = true;
    return obj;
  }
  *created = true;
  json stored = store_.Create(r.storage, obj);
  if (r.plural == "namespaces") PopulateNamespaceLocked(name);
  return stored;
}

void Server::Create(const httplib::Request& req, httplib::Response& res, const Target& t) {
  json body = ParseBody(req, *t.r);
  std::lock_guard<std::mutex> lock(store_.mu);
  bool created = false;
  json obj = CreateLocked(req, res, t, body, &created);
  WriteJson(res, 201, Present(*t.r, obj));
}

json Server::UpdateLocked(const httplib::Request& req, httplib::Response& res, const Target& t,
                          json obj, const json& old) {
  const ResourceInfo& r = *t.r;
  if (!obj.is_object()) throw BadRequest("the body of the request must be a JSON object");
  obj = ToStorage(r, obj);
  obj["apiVersion"] = old.value("apiVersion", r.ApiVersion());
  obj["kind"] = old.value("kind", r.kind);
  if (!obj.contains("metadata") || !obj["metadata"].is_object()) obj["metadata"] = json::object();
  json& md = obj["metadata"];
  const json& om = old["metadata"];
  if (md.contains("name") && md["name"] != om["name"]) {
    throw BadRequest("the name of the object (" + md.value("name", "") +
                     ") does not match the name on the URL (" + t.name + ")");
  }
  if (r.namespaced && md.contains("namespace") && md["namespace"] != om["namespace"]) {
    throw BadRequest(
        "the namespace of the provided object does not match the namespace sent on "
        "the request");
  }
  const std::string rv = md.contains("resourceVersion") && md["resourceVersion"].is_string()
                             ? md["resourceVersion"].get<std::string>()
                             : "";
  if (rv.empty()) {
    if (!r.allow_unconditional_update) {
      throw InvalidError(
          r, t.name, {Invalid("metadata.resourceVersion", 0, "must be specified for an update")});
    }
  } else if (rv != om.value("resourceVersion", "")) {
    throw ConflictError(r, t.name);
  }
  md["name"] = om["name"];
  if (r.namespaced) md["namespace"] = om["namespace"];
  if (t.sub == "status") {
    // Only status changes through /status; metadata labels/annotations may change too.
    json next = old;
    if (obj.contains("status")) {
      next["status"] = obj["status"];
    } else {
      next.erase("status");
    }
    // A pod's qosClass is set at create and kept when a status write leaves it out.
    if (r.plural == "pods" && old.contains("status") && old["status"].contains("qosClass") &&
        next["status"].is_object() && !next["status"].contains("qosClass")) {
      next["status"]["qosClass"] = old["status"]["qosClass"];
    }
    obj = next;
  } else if (r.HasSub("status") && r.plural != "nodes") {
    if (old.contains("status")) {
      obj["status"] = old["status"];
    } else {
      obj.erase("status");
    }
    // The allocated cluster IPs and IP families stay when an update leaves them out.
    if (r.plural == "services") obj = DefaultService(std::move(obj), old, "");
  }
  obj = Admit(req, res, t, obj, &old);
  json& m = obj["metadata"];
  for (const char* f : {"uid", "creationTimestamp", "deletionTimestamp",
                        "deletionGracePeriodSeconds", "generation"}) {
    if (om.contains(f)) {
      m[f] = om[f];
    } else {
      m.erase(f);
    }
  }
  if (!m.contains("managedFields") && om.contains("managedFields"))
    m["managedFields"] = om["managedFields"];
  m["resourceVersion"] = om.value("resourceVersion", "");
  if (r.has_generation && t.sub.empty() && SpecPart(obj) != SpecPart(old)) {
    m["generation"] = om.value("generation", int64_t{1}) + 1;
  }
  // A no-op update changes nothing, not even the resourceVersion.
  json a = obj;
  json b = old;
  a["metadata"].erase("managedFields");
  b["metadata"].erase("managedFields");
  if (a == b) return old;
  if (Param(req, "dryRun") == "All") return obj;
  return store_.Update(r.storage, obj);
}

void Server::Update(const httplib::Request& req, httplib::Response& res, const Target& t) {
  json body = ParseBody(req, *t.r);
  std::lock_guard<std::mutex> lock(store_.mu);
  const json* old = store_.Get(t.r->storage, t.ns, t.name);
  if (old == nullptr) throw NotFoundError(*t.r, t.name);
  const json before = *old;
  json obj = UpdateLocked(req, res, t, body, before);
  WriteJson(res, 200, Present(*t.r, obj));
}

void Server::Patch(const httplib::Request& req, httplib::Response& res, const Target& t) {
  std::string ct = req.get_header_value("Content-Type");
  if (auto semi = ct.find(';'); semi != std::string::npos) ct = ct.substr(0, semi);
  const ResourceInfo& r = *t.r;
  const bool apply = ct == "application/apply-patch+yaml";
  if (ct != "application/merge-patch+json" && ct != "application/json-patch+json" &&
      !(ct == "application/strategic-merge-patch+json" && r.crd == nullptr) && !apply) {
    ApiError e(415, "UnsupportedMediaType",
               "the body of the request was in an unknown format - accepted media types include: "
               "application/json-patch+json, application/merge-patch+json, "
               "application/apply-patch+yaml" +
                   std::string(r.crd == nullptr ? ", application/strategic-merge-patch+json" : ""));
    throw e;
  }
  if (req.body.empty()) throw BadRequest("the body of the request was empty");
  json patch = kubesim::ParseYamlOrThrow(req.body);
  if (apply) {
    if (Param(req, "fieldManager").empty()) {
      throw ApiError(422, "Invalid",
                     "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is "
                     "required for apply patch");
    }
    if (!patch.is_object()) throw BadRequest("the body of an apply patch must be an object");
  }
  std::lock_guard<std::mutex> lock(store_.mu);
  const json* cur = store_.Get(r.storage, t.ns, t.name);
  if (cur == nullptr) {
    if (!apply || !t.sub.empty()) throw NotFoundError(r, t.name);
    bool created = false;
    json obj = CreateLocked(req, res, t, patch, &created);
    WriteJson(res, 201, Present(r, obj));
    return;
  }
  const json old = *cur;
  const json view = Present(r, old);
  json next;
  if (ct == "application/merge-patch+json") {
    next = MergePatch(view, patch);
  } else if (ct == "application/json-patch+json") {
    next = JsonPatch(view, patch);
  } else if (ct == "application/strategic-merge-patch+json") {
    next = StrategicMergePatch(view, patch);
  } else {
    // Server-side apply, simplified: the applied configuration is merged over the live object
    // (last writer wins; fields another manager set are kept, none are removed).
    json applied = patch;
    if (applied.contains("metadata")) {
      applied["metadata"].erase("resourceVersion");
      applied["metadata"].erase("managedFields");
    }
    next = MergePatch(view, applied);
    const std::string manager = Param(req, "fieldManager");
    json mf = json::array();
    for (const auto& e : old["metadata"].value("managedFields", json::array())) {
      if (e.value("manager", "") != manager) mf.push_back(e);
    }
    mf.push_back({{"manager", manager},
                  {"operation", "Apply"},
                  {"apiVersion", r.ApiVersion()},
                  {"time", NowRfc3339()},
                  {"fieldsType", "FieldsV1"},
                  {"fieldsV1", json::object()}});
    next["metadata"]["managedFields"] = mf;
  }
  if (!next.is_object()) throw BadRequest("the patch did not produce an object");
  // A resourceVersion in the patch is a precondition.
  const json& nmd = next.contains("metadata") ? next["metadata"] : json::object();
  const std::string want = nmd.contains("resourceVersion") && nmd["resourceVersion"].is_string()
                               ? nmd["resourceVersion"].get<std::string>()
                               : "";
  if (!want.empty() && want != old["metadata"].value("resourceVersion", "")) {
    throw ConflictError(r, t.name);
  }
  next["metadata"]["resourceVersion"] = old["metadata"].value("resourceVersion", "");
  json obj = UpdateLocked(req, res, t, next, old);
  WriteJson(res, 200, Present(r, obj));
}

void Server::Delete(const httplib::Request& req, httplib::Response& res, const Target& t) {
  const ResourceInfo& r = *t.r;
  json opts = json::object();
  if (!req.body.empty()) {
    opts = kubesim::ParseYamlOrThrow(req.body);
    if (!opts.is_object()) throw BadRequest("DeleteOptions must be an object");
  }
  std::string policy = opts.value("propagationPolicy", Param(req, "propagationPolicy"));
  if (policy.empty() && opts.contains("orphanDependents") &&
      opts["orphanDependents"].is_boolean()) {
    policy = opts["orphanDependents"].get<bool>() ? "Orphan" : "Background";
  }
  const Propagation prop = ParsePolicy(policy);
  int64_t grace = -1;
  if (opts.contains("gracePeriodSeconds") && opts["gracePeriodSeconds"].is_number_integer()) {
    grace = opts["gracePeriodSeconds"].get<int64_t>();
  } else if (!Param(req, "gracePeriodSeconds").empty()) {
    grace = std::stoll(Param(req, "gracePeriodSeconds"));
  }
  if (opts_.max_pod_grace_seconds >= 0 && (grace < 0 || grace > opts_.max_pod_grace_seconds)) {
    grace = opts_.max_pod_grace_seconds;
  }
  const bool dry = opts.contains("dryRun") || Param(req, "dryRun") == "All";
  std::lock_guard<std::mutex> lock(store_.mu);
  const json* cur = store_.Get(r.storage, t.ns, t.name);
  if (cur == nullptr) throw NotFoundError(r, t.name);
  if (opts.contains("preconditions") && opts["preconditions"].is_object()) {
    const json& pre = opts["preconditions"];
    const json& md = (*cur)["metadata"];
    if (pre.contains("uid") && pre["uid"].is_string() && pre["uid"] != md["uid"]) {
      ApiError e = ConflictError(r, t.name);
      e.message = "Operation cannot be fulfilled on " + r.GroupResource() + " \"" + t.name +
                  "\": Precondition failed: UID in precondition: " + pre["uid"].get<std::string>() +
                  ", UID in object meta: " + md.value("uid", "");
      throw e;
    }
    if (pre.contains("resourceVersion") && pre["resourceVersion"].is_string() &&
        pre["resourceVersion"] != md["resourceVersion"]) {
      ApiError e = ConflictError(r, t.name);
      e.message = "Operation cannot be fulfilled on " + r.GroupResource() + " \"" + t.name +
                  "\": Precondition failed: ResourceVersion in precondition: " +
                  pre["resourceVersion"].get<std::string>() +
                  ", ResourceVersion in object meta: " + md.value("resourceVersion", "");
      throw e;
    }
  }
  if (dry) {
    WriteJson(res, 200, Present(r, *cur));
    return;
  }
  const std::string uid = (*cur)["metadata"].value("uid", "");
  Store::DeleteResult d = store_.Delete(r.storage, t.ns, t.name, prop, grace);
  if (r.plural == "serviceaccounts" || r.plural == "configmaps") RepopulateNamespaceLocked(t.ns);
  if (d.gone && !r.returns_deleted_object) {
    json details = {{"name", t.name}, {"kind", r.plural}, {"uid", uid}};
    if (!r.group.empty()) details["group"] = r.group;
    WriteJson(res, 200, SuccessStatus(details));
    return;
  }
  WriteJson(res, 200, Present(r, d.object));
}

void Server::DeleteCollection(const httplib::Request& req, httplib::Response& res,
                              const Target& t) {
  LabelSelector ls = LabelSelector::Parse(Param(req, "labelSelector"));
  FieldSelector fs = FieldSelector::Parse(Param(req, "fieldSelector"), *t.r);
  const Propagation prop = ParsePolicy(Param(req, "propagationPolicy"));
  std::lock_guard<std::mutex> lock(store_.mu);
  std::vector<std::pair<std::string, std::string>> victims;
  for (const json* obj : store_.List(t.r->storage, t.ns)) {
    if (ls.Matches(*obj) && fs.Matches(*obj)) {
      victims.emplace_back((*obj)["metadata"].value("namespace", ""),
                           (*obj)["metadata"].value("name", ""));
    }
  }
  json items = json::array();
  for (const auto& [ns, name] : victims) {
    Store::DeleteResult d = store_.Delete(t.r->storage, ns, name, prop, -1);
    if (!d.object.is_null()) items.push_back(Present(*t.r, d.object));
  }
  if (t.r->plural == "serviceaccounts" || t.r->plural == "configmaps") {
    for (const auto& [ns, name] : victims)
      RepopulateNamespaceLocked(ns);
  }
  WriteJson(res, 200,
            {{"kind", t.r->kind + "List"},
             {"apiVersion", t.r->ApiVersion()},
             {"metadata", {{"resourceVersion", std::to_string(store_.CurrentRv())}}},
             {"items", items}});
}

}  // namespace kubesim
