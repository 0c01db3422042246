#include "server.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "discovery.h"
#include "parse_yaml.h"
#include "tls.h"

namespace kubesim {

using nlohmann::json;

void WriteJson(httplib::Response& res, int code, const json& body) {
  res.status = code;
  res.set_content(body.dump(), "application/json");
}

void WriteError(httplib::Response& res, const ApiError& e) {
  res.status = e.code;
  if (e.retry_after > 0) res.set_header("Retry-After", std::to_string(e.retry_after));
  if (e.plain_text) {
    res.set_content(e.message + "\n", "text/plain; charset=utf-8");
    return;
  }
  res.set_content(StatusJson(e).dump(), "application/json");
}

namespace {

std::vector<std::string> SplitPath(const std::string& path) {
  std::vector<std::string> out;
  std::stringstream ss(path);
  std::string seg;
  while (std::getline(ss, seg, '/')) {
    if (!seg.empty()) out.push_back(seg);
  }
  return out;
}

bool IsTrue(const std::string& v) {
  return v == "true" || v == "1";
}

}  // namespace

bool BoolParam(const httplib::Request& req, const char* name) {
  if (!req.has_param(name)) return false;
  std::string v = req.get_param_value(name);
  std::transform(v.begin(), v.end(), v.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  return v != "0" && v != "false";
}

Server::Server(Options opts, Registry reg)
    : opts_(std::move(opts)), reg_(std::move(reg)), store_(opts_.history) {
  if (!opts_.rbac_file.empty()) rbac_ = Rbac::Load(opts_.rbac_file);
  Bootstrap();
  if (!opts_.nodes_file.empty()) LoadNodes(opts_.nodes_file);
}

Server::~Server() {
  Stop();
  if (ticker_.joinable()) ticker_.join();
}

void Server::Bootstrap() {
  std::lock_guard<std::mutex> lock(store_.mu);
  for (const char* ns : {"default", "kube-system", "kube-public", "kube-node-lease"}) {
    json obj = {{"apiVersion", "v1"},
                {"kind", "Namespace"},
                {"metadata",
                 {{"name", ns},
                  {"uid", NewUid()},
                  {"creationTimestamp", NowRfc3339()},
                  {"labels", {{"kubernetes.io/metadata.name", ns}}}}},
                {"spec", {{"finalizers", {"kubernetes"}}}},
                {"status", {{"phase", "Active"}}}};
    store_.Create("namespaces", obj);
    PopulateNamespaceLocked(ns);
  }
}

void Server::RepopulateNamespaceLocked(const std::string& ns) {
  const json* obj = store_.Get("namespaces", "", ns);
  if (obj == nullptr || (*obj)["metadata"].contains("deletionTimestamp")) return;
  PopulateNamespaceLocked(ns);
}

json Server::RootCaConfigMap(const std::string& ns) const {
  return {{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata",
           {{"name", "kube-root-ca.crt"},
            {"namespace", ns},
            {"annotations",
             {{"kubernetes.io/description",
               "Contains a CA bundle that can be used to verify the kube-apiserver when using "
               "internal endpoints such as the internal service IP or kubernetes.default.svc. No "
               "other usage is guaranteed across distributions of Kubernetes clusters."}}}}},
          {"data", {{"ca.crt", root_ca_pem_}}}};
}

void Server::PopulateNamespaceLocked(const std::string& ns) {
  auto system_fields = [](json obj) {
    obj["metadata"]["uid"] = NewUid();
    obj["metadata"]["creationTimestamp"] = NowRfc3339();
    return obj;
  };
  if (store_.Get("serviceaccounts", ns, "default") == nullptr) {
    store_.Create("serviceaccounts",
                  system_fields({{"apiVersion", "v1"},
                                 {"kind", "ServiceAccount"},
                                 {"metadata", {{"name", "default"}, {"namespace", ns}}}}));
  }
  if (store_.Get("configmaps", ns, "kube-root-ca.crt") == nullptr) {
    store_.Create("configmaps", system_fields(RootCaConfigMap(ns)));
  }
}

void Server::LoadNodes(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read nodes file " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  // Either a list of Node objects, a v1 List, or YAML documents separated by ---.
  std::vector<json> nodes;
  std::string text = ss.str();
  size_t start = 0;
  while (start <= text.size()) {
    size_t sep = text.find("\n---", start);
    std::string doc =
        text.substr(start, sep == std::string::npos ? std::string::npos : sep - start);
    json v = kubesim::ParseYamlOrThrow(doc);
    if (v.is_array()) {
      for (auto& n : v)
        nodes.push_back(n);
    } else if (v.is_object() && v.contains("items")) {
      for (auto& n : v["items"])
        nodes.push_back(n);
    } else if (v.is_object()) {
      nodes.push_back(v);
    }
    if (sep == std::string::npos) break;
    start = sep + 4;
  }
  std::lock_guard<std::mutex> lock(store_.mu);
  for (json& n : nodes) {
    n["apiVersion"] = "v1";
    n["kind"] = "Node";
    json& md = n["metadata"];
    if (!md.contains("uid")) md["uid"] = NewUid();
    if (!md.contains("creationTimestamp")) md["creationTimestamp"] = NowRfc3339();
    if (!n.contains("status")) n["status"] = json::object();
    if (!n["status"].contains("conditions")) {
      n["status"]["conditions"] = json::array({{{"type", "Ready"},
                                                {"status", "True"},
                                                {"reason", "KubeletReady"},
                                                {"message", "kubelet is posting ready status"},
                                                {"lastHeartbeatTime", NowRfc3339()},
                                                {"lastTransitionTime", NowRfc3339()}}});
    }
    store_.Create("nodes", n);
  }
}

void Server::Stop() {
  {
    std::lock_guard<std::mutex> lock(store_.mu);
    store_.stopping = true;
    store_.cv.notify_all();
  }
  logs_cv_.notify_all();
  if (http_) http_->stop();
}

int Server::Run() {
  if (opts_.tls) {
    if (opts_.cert_file.empty()) opts_.cert_file = opts_.port_file + ".crt";
    if (opts_.key_file.empty()) opts_.key_file = opts_.cert_file + ".key";
    WriteSelfSignedCert(opts_.cert_file, opts_.key_file);
    // kube-root-ca.crt now carries the certificate clients must trust.
    std::ifstream cert(opts_.cert_file);
    std::stringstream pem;
    pem << cert.rdbuf();
    std::lock_guard<std::mutex> lock(store_.mu);
    root_ca_pem_ = pem.str();
    std::vector<std::string> namespaces;
    for (const json* ns : store_.List("namespaces", ""))
      namespaces.push_back((*ns)["metadata"].value("name", ""));
    for (const std::string& ns : namespaces) {
      const json* cm = store_.Get("configmaps", ns, "kube-root-ca.crt");
      if (cm == nullptr) continue;
      json updated = *cm;
      updated["data"] = RootCaConfigMap(ns)["data"];
      store_.Update("configmaps", updated);
    }
    auto ssl =
        std::make_unique<httplib::SSLServer>(opts_.cert_file.c_str(), opts_.key_file.c_str());
    if (!ssl->is_valid()) {
      std::fprintf(stderr, "kubesim: cannot set up TLS\n");
      return 1;
    }
    http_ = std::move(ssl);
  } else {
    http_ = std::make_unique<httplib::Server>();
  }
  const size_t threads = static_cast<size_t>(std::max(8, opts_.threads));
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http_->set_payload_max_length(16u << 20);
  http_->set_keep_alive_max_count(1000);
  // Go's net package sets TCP_NODELAY on every TCP connection, so kube-apiserver answers at once.
  // httplib leaves Nagle on: on a kept-alive connection a response written in two parts then
  // waited for the client's delayed ACK, about 40 ms per request (docs/kubesim.md).
  http_->set_tcp_nodelay(true);
  http_->set_read_timeout(300, 0);
  http_->set_write_timeout(30, 0);
  // kubectl asks for gzip; httplib would buffer compressed watch streams, so never compress.
  http_->set_pre_routing_handler([](const httplib::Request& req, httplib::Response&) {
    // The Request object is not const in httplib (it lives in process_request); only the
    // handler's view is.
    auto& mutable_req = const_cast<httplib::Request&>(req);
    mutable_req.headers.erase("Accept-Encoding");
    return httplib::Server::HandlerResponse::Unhandled;
  });
  auto handler = [this](const httplib::Request& req, httplib::Response& res) {
    Dispatch(req, res);
  };
  http_->Get(".*", handler);
  http_->Post(".*", handler);
  http_->Put(".*", handler);
  http_->Patch(".*", handler);
  http_->Delete(".*", handler);
  http_->Options(".*", handler);

  int port = opts_.port;
  if (port == 0) {
    port = http_->bind_to_any_port(opts_.host);
  } else if (!http_->bind_to_port(opts_.host, port)) {
    port = -1;
  }
  if (port <= 0) {
    std::fprintf(stderr, "kubesim: cannot listen on %s:%d\n", opts_.host.c_str(), opts_.port);
    return 1;
  }
  if (!opts_.port_file.empty()) {
    const std::string tmp = opts_.port_file + ".tmp";
    {
      std::ofstream out(tmp);
      out << port << "\n";
    }
    std::rename(tmp.c_str(), opts_.port_file.c_str());
  }
  std::fprintf(stderr, "kubesim: serving %s://%s:%d\n", opts_.tls ? "https" : "http",
               opts_.host.c_str(), port);
  if (opts_.on_listening) opts_.on_listening(port, opts_);
  ticker_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(store_.mu);
    while (!store_.stopping) {
      store_.cv.wait_for(lock, std::chrono::milliseconds(200));
      store_.Tick();
    }
  });
  bool stopped_early = false;
  {
    std::lock_guard<std::mutex> lock(store_.mu);
    stopped_early = store_.stopping;  // a signal arrived before http_ existed
  }
  const bool ok = stopped_early || http_->listen_after_bind();
  {
    std::lock_guard<std::mutex> lock(store_.mu);
    store_.stopping = true;
    store_.cv.notify_all();
  }
  if (ticker_.joinable()) ticker_.join();
  return ok ? 0 : 1;
}

void Server::Dispatch(const httplib::Request& req, httplib::Response& res) {
  std::string controller;  // kubesim's own controller sending this request, if any
  std::string counted;     // its "<verb> <resource>" counter
  DispatchCounted(req, res, &controller, &counted);
  if (!counted.empty() && res.status == 409) {
    std::lock_guard<std::mutex> lock(controller_counts_mu_);
    ++controller_conflicts_[controller][counted];
  }
}

void Server::DispatchCounted(const httplib::Request& req, httplib::Response& res,
                             std::string* controller_out, std::string* counted) {
  try {
    const std::string& path = req.path;
    if (path.rfind("/kubesim/", 0) == 0) {
      HandleAdmin(req, res);
      return;
    }
    if (path == "/healthz" || path == "/livez" || path == "/readyz") {
      res.set_content("ok", "text/plain; charset=utf-8");
      return;
    }
    // Authentication: --token alone admits that token only; with --rbac the table's tokens
    // (and --token, as an administrator) authenticate, and no token at all is system:anonymous.
    Identity who;
    who.admin = true;
    who.name = "kubesim-admin";
    const std::string auth = req.get_header_value("Authorization");
    const std::string token = auth.rfind("Bearer ", 0) == 0 ? auth.substr(7) : "";
    // kubesim's own controllers (controllers/controller.h): the name header counts only with
    // this process's key, so a pod sending the header is an ordinary client.
    std::string& controller = *controller_out;
    if (!opts_.controller_key.empty() && req.has_header("X-Kubesim-Controller") &&
        req.get_header_value("X-Kubesim-Controller-Key") == opts_.controller_key) {
      controller = req.get_header_value("X-Kubesim-Controller");
      who.name = "system:kubesim:" + controller;
    }
    if (!controller.empty()) {
      // an administrator: no token, no RBAC
    } else if (rbac_) {
      const RbacUser* u = token.empty() ? nullptr : rbac_->FindToken(token);
      who.admin = !opts_.token.empty() && token == opts_.token;
      if (who.admin) {
        who.user = nullptr;
      } else if (u != nullptr) {
        who.user = u;
        who.name = u->name;
      } else if (auth.empty()) {
        who.anonymous = true;
        who.name = "system:anonymous";
      } else if (path != "/version") {
        WriteError(res, ApiError(401, "Unauthorized", "Unauthorized"));
        return;
      }
      const RequestAttrs attrs = ParseRequestAttrs(req.method, path, BoolParam(req, "watch"),
                                                   req.get_param_value("fieldSelector"));
      if (!rbac_->Authorize(who, attrs).allowed) {
        if (attrs.resource_request) {
          faults_.Count(attrs.verb, attrs.subresource.empty()
                                        ? attrs.resource
                                        : attrs.resource + "/" + attrs.subresource);
        }
        throw ForbiddenError(who.name, attrs);
      }
    } else if (!opts_.token.empty() && path != "/version") {
      if (auth != "Bearer " + opts_.token) {
        WriteError(res, ApiError(401, "Unauthorized", "Unauthorized"));
        return;
      }
    }
    if (HandleDiscovery(req, res)) return;

    // /api/v1/... or /apis/<g>/<v>/...
    std::vector<std::string> segs = SplitPath(path);
    std::string group;
    std::string version;
    size_t i = 0;
    if (segs.size() >= 2 && segs[0] == "api") {
      version = segs[1];
      i = 2;
    } else if (segs.size() >= 3 && segs[0] == "apis") {
      group = segs[1];
      version = segs[2];
      i = 3;
    } else {
      throw PathNotFound();
    }
    std::vector<std::string> rest(segs.begin() + static_cast<std::ptrdiff_t>(i), segs.end());
    Target t;
    t.who = who;
    if (rest.size() >= 3 && rest[0] == "namespaces") {
      const ResourceInfo* r = reg_.Find(group, version, rest[2]);
      if (r != nullptr && r->namespaced) {
        t.r = r;
        t.ns = rest[1];
        if (rest.size() > 3) t.name = rest[3];
        if (rest.size() > 4) t.sub = rest[4];
        if (rest.size() > 5 && t.sub != "proxy") throw PathNotFound();
      }
    }
    if (t.r == nullptr && !rest.empty()) {
      t.r = reg_.Find(group, version, rest[0]);
      if (t.r == nullptr) throw PathNotFound();
      if (rest.size() > 1) t.name = rest[1];
      if (rest.size() > 2) t.sub = rest[2];
      if (rest.size() > 3 && t.sub != "proxy") throw PathNotFound();
      if (t.r->namespaced && !t.name.empty()) throw PathNotFound();
    }
    if (t.r == nullptr) throw PathNotFound();
    if (!t.sub.empty() && !t.r->HasSub(t.sub)) throw PathNotFound();

    const std::string& m = req.method;
    if (m == "GET" || m == "HEAD") {
      if (t.name.empty()) {
        t.verb = BoolParam(req, "watch") ? "watch" : "list";
      } else {
        t.verb = "get";
      }
    } else if (m == "POST") {
      t.verb = "create";
    } else if (m == "PUT") {
      t.verb = "update";
    } else if (m == "PATCH") {
      t.verb = "patch";
    } else if (m == "DELETE") {
      t.verb = t.name.empty() ? "deletecollection" : "delete";
    } else {
      throw ApiError(405, "MethodNotAllowed", m + " is not supported");
    }
    if (!t.r->verbs.empty() &&
        std::find(t.r->verbs.begin(), t.r->verbs.end(), t.verb) == t.r->verbs.end()) {
      throw ApiError(405, "MethodNotAllowed",
                     "the server does not allow this method on the requested resource");
    }
    if (!controller.empty()) {
      CountController(controller, t.verb, t.CounterResource());
      *counted = t.verb + " " + t.CounterResource();
      if (t.verb == "watch") {
        Watch(req, res, t, -1);
        return;
      }
      HandleResource(req, res, t);
      return;
    }
    faults_.Count(t.verb, t.CounterResource());
    Faults::Decision d = faults_.Check(t.verb, t.CounterResource());
    if (d.latency_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(d.latency_ms));
    if (d.error) throw *d.error;
    if (t.verb == "watch") {
      Watch(req, res, t, d.close_watch_after_ms);
      return;
    }
    HandleResource(req, res, t);
  } catch (const ApiError& e) {
    WriteError(res, e);
  } catch (const kubesim::YamlError& e) {
    WriteError(res, BadRequest(std::string("error decoding body: ") + e.what()));
  } catch (const json::exception& e) {
    WriteError(res, BadRequest(std::string("error decoding body: ") + e.what()));
  } catch (const std::exception& e) {
    WriteError(res,
               ApiError(500, "InternalError", std::string("Internal error occurred: ") + e.what()));
  }
}

void Server::CountController(const std::string& name, const std::string& verb,
                             const std::string& resource) {
  std::lock_guard<std::mutex> lock(controller_counts_mu_);
  ++controller_counts_[name][verb + " " + resource];
}

void Server::HandleResource(const httplib::Request& req, httplib::Response& res, const Target& t) {
  if (t.sub == "log") {
    if (t.verb != "get")
      throw ApiError(405, "MethodNotAllowed", "only GET is supported on pods/log");
    Log(req, res, t);
    return;
  }
  if (t.r->group == "authorization.k8s.io") return AccessReview(req, res, t);
  if (t.sub == "binding") return Bind(req, res, t);
  if (t.sub == "proxy" && t.r->plural == "services") return ServiceProxy(req, res, t);
  if (t.sub == "proxy") {
    ApiError e(503, "ServiceUnavailable",
               "no endpoints available for " + t.r->singular + " \"" + t.name + "\"");
    throw e;
  }
  if (t.verb == "get") return Get(req, res, t);
  if (t.verb == "list") return List(req, res, t);
  if (t.verb == "create") {
    if (!t.name.empty()) {
      throw ApiError(405, "MethodNotAllowed",
                     "the server does not allow this method on the requested resource");
    }
    return Create(req, res, t);
  }
  if (t.name.empty() && t.verb != "deletecollection") {
    throw ApiError(405, "MethodNotAllowed",
                   "the server does not allow this method on the requested resource");
  }
  if (t.verb == "update") return Update(req, res, t);
  if (t.verb == "patch") return Patch(req, res, t);
  if (t.verb == "delete") return Delete(req, res, t);
  if (t.verb == "deletecollection") return DeleteCollection(req, res, t);
}

bool Server::HandleDiscovery(const httplib::Request& req, httplib::Response& res) {
  const std::string& p = req.path;
  if (req.method != "GET") return false;
  const std::string accept = req.get_header_value("Accept");
  if (p == "/version" || p == "/version/") {
    WriteJson(res, 200, VersionDoc());
    return true;
  }
  if (p == "/api" || p == "/api/" || p == "/apis" || p == "/apis/") {
    const bool core = p == "/api" || p == "/api/";
    if (WantsAggregated(accept)) {
      res.status = 200;
      res.set_content(Aggregated(reg_, core).dump(), kAggregatedContentType);
    } else {
      WriteJson(res, 200, core ? LegacyApi() : LegacyApis(reg_));
    }
    return true;
  }
  std::vector<std::string> segs = SplitPath(p);
  if (segs.size() == 2 && segs[0] == "api") {
    json doc = ResourceList(reg_, "", segs[1]);
    if (doc.is_null()) throw PathNotFound();
    WriteJson(res, 200, doc);
    return true;
  }
  if (segs.size() == 2 && segs[0] == "apis") {
    for (const auto& [g, v] : reg_.GroupVersions()) {
      if (g != segs[1]) continue;
      json gv = {{"groupVersion", g + "/" + v}, {"version", v}};
      WriteJson(res, 200,
                {{"kind", "APIGroup"},
                 {"apiVersion", "v1"},
                 {"name", g},
                 {"versions", json::array({gv})},
                 {"preferredVersion", gv}});
      return true;
    }
    throw PathNotFound();
  }
  if (segs.size() == 3 && segs[0] == "apis") {
    json doc = ResourceList(reg_, segs[1], segs[2]);
    if (doc.is_null()) throw PathNotFound();
    WriteJson(res, 200, doc);
    return true;
  }
  if (p == "/openapi/v3" || p == "/openapi/v3/") {
    WriteJson(res, 200, OpenApiIndex(reg_));
    return true;
  }
  if (p.rfind("/openapi/v3/", 0) == 0) {
    json doc = OpenApiDoc(reg_, p.substr(12));
    if (doc.is_null()) throw PathNotFound();
    WriteJson(res, 200, doc);
    return true;
  }
  if (p.rfind("/openapi/", 0) == 0) throw PathNotFound();  // /openapi/v2: never JSON
  return false;
}

void Server::HandleAdmin(const httplib::Request& req, httplib::Response& res) {
  const std::string& p = req.path;
  const std::string& m = req.method;
  if (p == "/kubesim/faults") {
    if (m == "POST" || m == "PUT") {
      faults_.Set(json::parse(req.body.empty() ? "{}" : req.body));
    } else if (m == "DELETE") {
      faults_.Clear();
    }
    WriteJson(res, 200, faults_.ToJson());
    return;
  }
  if (p == "/kubesim/requests" && IsTrue(req.get_param_value("controllers"))) {
    std::lock_guard<std::mutex> lock(controller_counts_mu_);
    if (m == "DELETE") {
      controller_counts_.clear();
      controller_conflicts_.clear();
      if (opts_.reconcile_counts) opts_.reconcile_counts(true);
    }
    json out = json::object();
    uint64_t total = 0;
    for (const auto& [name, counts] : controller_counts_) {
      json& c = out[name];
      c = json::object();
      for (const auto& [key, n] : counts) {
        c[key] = n;
        total += n;
      }
    }
    json conflicts = json::object();
    for (const auto& [name, counts] : controller_conflicts_)
      conflicts[name] = counts;
    // (After a DELETE: none, like the requests, even if a reconcile ended since the reset.)
    json reconciles = json::object();
    if (opts_.reconcile_counts && m != "DELETE") reconciles = opts_.reconcile_counts(false);
    WriteJson(res, 200,
              {{"controllers", out},
               {"conflicts", conflicts},
               {"reconciles", reconciles},
               {"total", total}});
    return;
  }
  if (p == "/kubesim/requests") {
    if (m == "DELETE") faults_.ResetCounts();
    WriteJson(res, 200, faults_.Counts());
    return;
  }
  if (p == "/kubesim/compact" && m == "POST") {
    std::lock_guard<std::mutex> lock(store_.mu);
    store_.Compact();
    WriteJson(res, 200, {{"oldestResourceVersion", std::to_string(store_.OldestRv())}});
    return;
  }
  if (p == "/kubesim/watches/close" && m == "POST") {
    std::lock_guard<std::mutex> lock(store_.mu);
    store_.CloseWatches();
    WriteJson(res, 200, json::object());
    return;
  }
  std::vector<std::string> segs = SplitPath(p);
  if (segs.size() == 4 && segs[1] == "logs" && (m == "PUT" || m == "POST")) {
    SetLog(req, res, segs[2], segs[3], m == "POST");
    return;
  }
  WriteError(res, PathNotFound());
}

}  // namespace kubesim
