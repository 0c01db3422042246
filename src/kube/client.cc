// The REST client: requests over net/http.h's transport (connections shared between calls); the
// retry rules of errors.h; streaming bodies for watch, logs and proxy.
#include "starforge/kube/client.h"

#include <algorithm>
#include <mutex>
#include <ranges>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "starforge/kube/watch_decoder.h"
#include "starforge/net/http.h"

namespace starforge::kube {

using nlohmann::json;
using Params = std::vector<std::pair<std::string, std::string>>;

struct Client::Request {
  std::string method = "GET";
  std::string path;  // absolute path, already encoded
  Params query;
  std::string body;
  std::string content_type;
  std::string accept = "application/json";
  std::map<std::string, std::string> headers;
  bool idempotent = false;           // safe to resend after a 5xx or a failure mid-request
  bool retry = true;                 // false for streams: their caller resumes
  bool pass_through_status = false;  // return non-2xx responses instead of throwing (proxy)
  // Streaming: a 2xx body goes here instead of into Response::body; false stops the transfer.
  std::function<bool(std::string_view)> on_data;
  const std::atomic<bool>* stop = nullptr;
  std::chrono::milliseconds timeout{0};  // 0 = options_.request_timeout; negative = none
};

// A reply as the transport gives it.
struct Client::Response : net::Response {};

struct Client::Shared {
  net::Transport transport;
  std::atomic<int64_t> requests{0};
  std::atomic<int64_t> retries{0};
  std::mutex rng_mu;
  std::mt19937_64 rng{std::random_device{}()};
};

namespace {

std::string Context(const std::string& method, const std::string& path) {
  return fmt::format("{} {}", method, path);
}

bool IsHttps(const std::string& server) {
  return server.rfind("https://", 0) == 0;
}

std::string QueryString(const Params& q) {
  std::string out;
  for (const auto& [k, v] : q) {
    if (!out.empty()) out.push_back('&');
    out += UrlEncode(k) + "=" + UrlEncode(v);
  }
  return out;
}

void AddWrite(Params* q, const WriteOptions& o) {
  if (!o.field_manager.empty()) q->emplace_back("fieldManager", o.field_manager);
  if (o.dry_run) q->emplace_back("dryRun", "All");
  if (!o.field_validation.empty()) q->emplace_back("fieldValidation", o.field_validation);
}

std::string NameOf(const json& object) {
  auto m = object.find("metadata");
  if (m == object.end() || !m->is_object()) return {};
  auto n = m->find("name");
  return n != m->end() && n->is_string() ? n->get<std::string>() : std::string();
}

// The proxy path after /proxy/: each segment percent-encoded, slashes kept.
std::string EncodeProxyPath(std::string_view path) {
  std::string out;
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    std::string_view seg = path.substr(
        start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    out += EncodePathSegment(seg);
    if (slash == std::string_view::npos) break;
    out.push_back('/');
    start = slash + 1;
  }
  return out;
}

}  // namespace

std::string_view ToString(WatchEventType type) {
  switch (type) {
    case WatchEventType::kAdded:
      return "ADDED";
    case WatchEventType::kModified:
      return "MODIFIED";
    case WatchEventType::kDeleted:
      return "DELETED";
    case WatchEventType::kBookmark:
      return "BOOKMARK";
  }
  return "UNKNOWN";
}

Client::Client(ClientConfig config, ClientOptions options)
    : config_(std::move(config)),
      options_(std::move(options)),
      tokens_(config_, options_.token_recheck),
      shared_(std::make_unique<Shared>()) {
  if (Status usable = CheckClientConfig(config_); !usable.ok())
    throw std::invalid_argument(usable.message());
  while (!config_.server.empty() && config_.server.back() == '/')
    config_.server.pop_back();
}

Client::~Client() = default;

ClientStats Client::stats() const {
  return ClientStats{shared_->requests.load(), shared_->retries.load()};
}

std::chrono::milliseconds Client::Backoff(int attempt) {
  double uniform01 = 0;
  {
    std::lock_guard lock(shared_->rng_mu);
    uniform01 = std::uniform_real_distribution<double>(0.0, 1.0)(shared_->rng);
  }
  return net::Backoff(attempt, options_.backoff_base, options_.backoff_cap, uniform01);
}

std::vector<std::string> Client::Headers(const Request& req) {
  std::vector<std::string> headers = {"Accept: " + req.accept};
  if (!req.content_type.empty()) headers.push_back("Content-Type: " + req.content_type);
  for (const auto& [name, value] : options_.extra_headers) {
    if (req.headers.count(name) == 0) headers.push_back(name + ": " + value);
  }
  for (const auto& [name, value] : req.headers)
    headers.push_back(name + ": " + value);
  // client-go attaches credentials only over TLS (tools/clientcmd, transport): a token must
  // not travel in clear text.
  if (IsHttps(config_.server) && !tokens_.empty()) {
    StatusOr<Secret> token = tokens_.Get();
    if (!token.ok()) {
      // A projected token is swapped by symlink; a brief absence is worth another try.
      throw ApiError(Reason::kTransport, 0, token.status().message(), Context(req.method, req.path))
          .set_nothing_sent(true);
    }
    if (!token->empty()) headers.push_back("Authorization: Bearer " + token->Reveal());
  }
  headers.push_back("Expect:");  // no 100-continue round trip
  return headers;
}

Client::Response Client::SendOnce(const Request& req, bool* nothing_sent) {
  *nothing_sent = false;
  net::Request n;
  n.method = req.method;
  n.url = config_.server + req.path;
  if (!req.query.empty()) n.url += "?" + QueryString(req.query);
  n.headers = Headers(req);
  if (!req.body.empty() || req.method == "POST" || req.method == "PUT" || req.method == "PATCH")
    n.body = req.body;
  n.on_data = req.on_data;
  n.stop = req.stop;
  n.user_agent = options_.user_agent;
  n.connect_timeout = options_.connect_timeout;
  n.timeout = req.timeout.count() == 0 ? options_.request_timeout : req.timeout;
  n.tls.ca_file = config_.ca_file;
  n.tls.ca_pem = config_.ca_data;
  n.tls.insecure_skip_verify = config_.insecure_skip_tls_verify;
  n.tls.client_cert_file = config_.client_cert_file;
  n.tls.client_cert_pem = config_.client_cert_data;
  n.tls.client_key_file = config_.client_key_file;
  n.tls.client_key_pem = config_.client_key_data.Reveal();

  shared_->requests.fetch_add(1);
  Response response;
  shared_->transport.Perform(n, &response);
  if (response.fault == net::Fault::kNone) return response;
  *nothing_sent = response.nothing_sent;
  std::string message =
      fmt::format("cannot reach the API server {}: {}", config_.server, response.error);
  if (response.fault == net::Fault::kTimeout) {
    message =
        fmt::format("request to the API server {} timed out: {}", config_.server, response.error);
  }
  ApiError error(Reason::kTransport, 0, Scrub(std::move(message), TokenForScrub()),
                 Context(req.method, req.path));
  error.set_nothing_sent(*nothing_sent);
  throw error;
}

Client::Response Client::Send(const Request& req) {
  bool refreshed_token = false;
  for (int attempt = 1;; ++attempt) {
    if (attempt > 1) shared_->retries.fetch_add(1);
    std::optional<ApiError> failure;
    Response response;
    bool nothing_sent = false;
    try {
      response = SendOnce(req, &nothing_sent);
    } catch (const ApiError& e) {
      failure = e;
    }
    if (!failure) {
      if (response.stopped && !req.on_data) {
        throw ApiError(Reason::kTransport, 0, "request cancelled", Context(req.method, req.path));
      }
      if (response.stopped || (response.status >= 200 && response.status < 300)) return response;
      // A 401 may mean the token file rotated under us: re-read it once and try again.
      if (response.status == 401 && !refreshed_token) {
        const StatusOr<bool> changed = tokens_.Refresh();
        if (!changed.ok()) {
          throw ApiError(Reason::kTransport, 0, changed.status().message(),
                         Context(req.method, req.path));
        }
        if (*changed) {
          refreshed_token = true;
          --attempt;
          continue;
        }
      }
      if (req.pass_through_status) return response;
      auto ra = response.headers.find("retry-after");
      failure = ErrorFromResponse(response.status, Scrub(response.body, TokenForScrub()),
                                  ra == response.headers.end() ? "" : ra->second,
                                  Context(req.method, req.path));
    }
    RetryDecision d = ShouldRetry(*failure, req.idempotent);
    if (!req.retry || !d.retry || attempt >= options_.max_attempts) throw *failure;
    std::chrono::milliseconds wait =
        d.server_delay ? std::min(*d.server_delay, options_.max_retry_after) : Backoff(attempt);
    // Sleep in slices so a stop request is honoured promptly.
    auto until = std::chrono::steady_clock::now() + wait;
    while (std::chrono::steady_clock::now() < until) {
      if (req.stop != nullptr && req.stop->load()) throw *failure;
      std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
          until - std::chrono::steady_clock::now(), std::chrono::milliseconds(50)));
    }
  }
}

std::string Client::TokenForScrub() {
  if (tokens_.empty()) return {};
  const StatusOr<Secret> token = tokens_.Get();
  return token.ok() ? token->Reveal() : std::string();
}

json Client::JsonCall(const Request& req) {
  Response r = Send(req);
  json parsed = json::parse(r.body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) {
    throw ApiError(Reason::kUnknown, r.status, "the server's response is not valid JSON",
                   Context(req.method, req.path));
  }
  return parsed;
}

json Client::Get(const ResourceRef& ref, std::string_view ns, std::string_view name) {
  Request r;
  r.path = ref.ObjectPath(ns, name);
  r.idempotent = true;
  return JsonCall(r);
}

json Client::List(const ResourceRef& ref, std::string_view ns, const ListOptions& o) {
  Request r;
  r.path = ref.CollectionPath(ns);
  r.idempotent = true;
  if (!o.label_selector.empty()) r.query.emplace_back("labelSelector", o.label_selector);
  if (!o.field_selector.empty()) r.query.emplace_back("fieldSelector", o.field_selector);
  if (o.limit > 0) r.query.emplace_back("limit", std::to_string(o.limit));
  if (!o.continue_token.empty()) r.query.emplace_back("continue", o.continue_token);
  if (!o.resource_version.empty()) r.query.emplace_back("resourceVersion", o.resource_version);
  r.stop = o.stop;
  return JsonCall(r);
}

json Client::ListAll(const ResourceRef& ref, std::string_view ns, ListOptions o,
                     int64_t page_size) {
  o.limit = page_size;
  o.continue_token.clear();
  json all;
  json items = json::array();
  for (;;) {
    json page;
    try {
      page = List(ref, ns, o);
    } catch (const ApiError& e) {
      // An expired continue token: like client-go's pager, fall back to one unpaged list.
      if (!IsExpired(e) || o.continue_token.empty()) throw;
      o.limit = 0;
      o.continue_token.clear();
      items = json::array();
      all = json();
      continue;
    }
    if (all.is_null()) all = page;
    if (auto it = page.find("items"); it != page.end() && it->is_array()) {
      for (auto& item : *it)
        items.push_back(std::move(item));
    }
    std::string next;
    if (auto m = page.find("metadata"); m != page.end() && m->is_object()) {
      next = m->value("continue", "");
    }
    if (next.empty() || o.limit == 0) break;
    o.continue_token = next;
  }
  all["items"] = std::move(items);
  if (all.contains("metadata") && all["metadata"].is_object()) all["metadata"].erase("continue");
  return all;
}

json Client::Create(const ResourceRef& ref, std::string_view ns, const json& object,
                    const WriteOptions& o) {
  Request r;
  r.method = "POST";
  r.path = ref.CollectionPath(ref.namespaced ? ns : "");
  r.body = object.dump();
  r.content_type = "application/json";
  AddWrite(&r.query, o);
  return JsonCall(r);
}

namespace {

// A PUT of `object` (or one of its subresources) to the path its own metadata.name gives.
Client::Request PutRequest(const ResourceRef& ref, std::string_view ns, const json& object,
                           std::string_view subresource, const WriteOptions& o) {
  std::string name = NameOf(object);
  if (name.empty()) {
    throw ApiError(Reason::kBadRequest, 0, "the object to update has no metadata.name",
                   Context("PUT", ref.CollectionPath(ns)));
  }
  Client::Request r;
  r.method = "PUT";
  r.path = ref.ObjectPath(ns, name, subresource);
  r.body = object.dump();
  r.content_type = "application/json";
  AddWrite(&r.query, o);
  return r;
}

}  // namespace

json Client::Update(const ResourceRef& ref, std::string_view ns, const json& object,
                    const WriteOptions& o) {
  return JsonCall(PutRequest(ref, ns, object, {}, o));
}

json Client::UpdateStatus(const ResourceRef& ref, std::string_view ns, const json& object,
                          const WriteOptions& o) {
  return JsonCall(PutRequest(ref, ns, object, "status", o));
}

json Client::MergePatch(const ResourceRef& ref, std::string_view ns, std::string_view name,
                        const json& patch, const WriteOptions& o) {
  Request r;
  r.method = "PATCH";
  r.path = ref.ObjectPath(ns, name);
  r.body = patch.dump();
  r.content_type = "application/merge-patch+json";
  AddWrite(&r.query, o);
  return JsonCall(r);
}

json Client::MergePatchStatus(const ResourceRef& ref, std::string_view ns, std::string_view name,
                              const json& patch, const WriteOptions& o) {
  Request r;
  r.method = "PATCH";
  r.path = ref.ObjectPath(ns, name, "status");
  r.body = patch.dump();
  r.content_type = "application/merge-patch+json";
  AddWrite(&r.query, o);
  return JsonCall(r);
}

json Client::Delete(const ResourceRef& ref, std::string_view ns, std::string_view name,
                    const DeleteOptions& o) {
  json body = {{"kind", "DeleteOptions"}, {"apiVersion", "v1"}};
  if (!o.propagation_policy.empty()) body["propagationPolicy"] = o.propagation_policy;
  if (o.grace_period_seconds) body["gracePeriodSeconds"] = *o.grace_period_seconds;
  if (!o.precondition_uid.empty()) body["preconditions"]["uid"] = o.precondition_uid;
  if (!o.precondition_resource_version.empty()) {
    body["preconditions"]["resourceVersion"] = o.precondition_resource_version;
  }
  if (o.dry_run) body["dryRun"] = json::array({"All"});
  Request r;
  r.method = "DELETE";
  r.path = ref.ObjectPath(ns, name);
  r.body = body.dump();
  r.content_type = "application/json";
  // A repeated DELETE is harmless (at worst NotFound), so a 5xx may be retried.
  r.idempotent = true;
  return JsonCall(r);
}

WatchEnd Client::Watch(const ResourceRef& ref, std::string_view ns, const WatchOptions& o,
                       const std::function<bool(WatchEvent&)>& on_event,
                       const std::atomic<bool>* stop) {
  Request r;
  r.path = ref.CollectionPath(ns);
  r.idempotent = true;
  r.retry = false;
  r.stop = stop;
  r.query.emplace_back("watch", "true");
  if (!o.resource_version.empty()) r.query.emplace_back("resourceVersion", o.resource_version);
  if (o.allow_bookmarks) r.query.emplace_back("allowWatchBookmarks", "true");
  if (!o.label_selector.empty()) r.query.emplace_back("labelSelector", o.label_selector);
  if (!o.field_selector.empty()) r.query.emplace_back("fieldSelector", o.field_selector);
  if (o.timeout_seconds > 0) {
    r.query.emplace_back("timeoutSeconds", std::to_string(o.timeout_seconds));
    // The server ends the stream itself; this only guards against a server that hangs.
    r.timeout = std::chrono::seconds(o.timeout_seconds + 30);
  } else {
    r.timeout = std::chrono::milliseconds(-1);
  }
  WatchDecoder decoder;
  std::optional<ApiError> error_event;
  bool user_stopped = false;
  std::string context = Context("GET", r.path + " (watch)");
  auto on_object = [&](json obj) -> bool {
    std::string type = obj.value("type", "");
    json& object = obj["object"];
    if (type == "ERROR") {
      error_event = ErrorFromStatus(object, context);
      return false;
    }
    WatchEventType t;
    if (type == "ADDED") {
      t = WatchEventType::kAdded;
    } else if (type == "MODIFIED") {
      t = WatchEventType::kModified;
    } else if (type == "DELETED") {
      t = WatchEventType::kDeleted;
    } else if (type == "BOOKMARK") {
      t = WatchEventType::kBookmark;
    } else {
      throw ApiError(Reason::kUnknown, 200, fmt::format("unknown watch event type \"{}\"", type),
                     context);
    }
    WatchEvent event{t, std::move(object)};
    if (!on_event(event)) {
      user_stopped = true;
      return false;
    }
    return true;
  };
  r.on_data = [&](std::string_view bytes) {
    try {
      return decoder.Feed(bytes, on_object);
    } catch (const ApiError&) {
      throw;
    } catch (const std::exception& e) {
      throw ApiError(Reason::kUnknown, 200, e.what(), context);
    }
  };
  Response resp = Send(r);
  if (error_event) throw *error_event;
  if (user_stopped || (stop != nullptr && stop->load())) return WatchEnd::kStopped;
  return WatchEnd::kServerClosed;
}

namespace {
// Built in one piece from the parameters that are set: GCC 12 at -O3 reported a false "potential
// null pointer dereference" inside vector's reallocation when it was grown one emplace_back at
// a time.
Params LogQuery(const LogOptions& o) {
  auto number = [](const auto& v) { return v ? std::to_string(*v) : std::string(); };
  const std::pair<bool, std::pair<std::string, std::string>> all[] = {
      {!o.container.empty(), {"container", o.container}},
      {o.follow, {"follow", "true"}},
      {o.previous, {"previous", "true"}},
      {o.timestamps, {"timestamps", "true"}},
      {o.tail_lines.has_value(), {"tailLines", number(o.tail_lines)}},
      {o.since_seconds.has_value(), {"sinceSeconds", number(o.since_seconds)}},
      {o.limit_bytes.has_value(), {"limitBytes", number(o.limit_bytes)}},
  };
  auto set = all | std::views::filter([](const auto& p) { return p.first; }) |
             std::views::transform([](const auto& p) { return p.second; });
  return Params(set.begin(), set.end());
}
}  // namespace

std::string Client::PodLogs(std::string_view ns, std::string_view pod, const LogOptions& o) {
  Request r;
  r.path = resources::kPods.ObjectPath(ns, pod, "log");
  r.query = LogQuery(o);
  r.accept = "application/json, */*";
  r.idempotent = !o.follow;
  if (o.follow) r.timeout = std::chrono::milliseconds(-1);
  return Send(r).body;
}

void Client::StreamPodLogs(std::string_view ns, std::string_view pod, const LogOptions& o,
                           const std::function<bool(std::string_view)>& on_data,
                           const std::atomic<bool>* stop) {
  Request r;
  r.path = resources::kPods.ObjectPath(ns, pod, "log");
  r.query = LogQuery(o);
  r.accept = "application/json, */*";
  r.idempotent = true;
  r.retry = false;
  r.stop = stop;
  r.on_data = on_data;
  r.timeout = std::chrono::milliseconds(-1);
  Send(r);
}

namespace {
std::string ProxyPath(const ProxyRequest& p) {
  std::string segment = p.service;
  if (!p.scheme.empty()) segment = p.scheme + ":" + segment;
  if (!p.port.empty()) segment += ":" + p.port;
  std::string path = p.path;
  while (!path.empty() && path.front() == '/')
    path.erase(0, 1);
  return fmt::format("{}/{}/proxy/{}", resources::kServices.CollectionPath(p.ns),
                     EncodePathSegment(segment), EncodeProxyPath(path));
}

bool IsApiServerStatus(const std::string& body) {
  json j = json::parse(body, nullptr, false);
  return j.is_object() && j.value("kind", "") == "Status" && j.value("apiVersion", "") == "v1";
}
}  // namespace

ProxyResponse Client::ServiceProxy(const ProxyRequest& p) {
  return StreamServiceProxy(p, nullptr, nullptr);
}

ProxyResponse Client::StreamServiceProxy(const ProxyRequest& p,
                                         const std::function<bool(std::string_view)>& on_data,
                                         const std::atomic<bool>* stop) {
  Request r;
  r.method = p.method;
  r.path = ProxyPath(p);
  r.query = p.query;
  r.body = p.body;
  r.content_type = p.content_type;
  r.headers = p.headers;
  r.accept = "*/*";
  if (auto it = p.headers.find("Accept"); it != p.headers.end()) {
    r.accept = it->second;
    r.headers.erase("Accept");
  }
  r.idempotent = p.method == "GET" && !on_data;
  r.pass_through_status = true;
  r.stop = stop;
  if (on_data) {
    r.on_data = on_data;
    r.retry = false;
    r.timeout = std::chrono::milliseconds(-1);
  }
  Response resp = Send(r);
  if (resp.status >= 300 && IsApiServerStatus(resp.body)) {
    auto ra = resp.headers.find("retry-after");
    throw ErrorFromResponse(resp.status, Scrub(resp.body, TokenForScrub()),
                            ra == resp.headers.end() ? "" : ra->second, Context(r.method, r.path));
  }
  return ProxyResponse{resp.status, std::move(resp.headers), std::move(resp.body)};
}

AccessReviewResult Client::SelfSubjectAccessReview(const AccessReview& a) {
  json attrs = {{"verb", a.verb}, {"resource", a.resource}, {"group", a.group}};
  if (!a.subresource.empty()) attrs["subresource"] = a.subresource;
  if (!a.ns.empty()) attrs["namespace"] = a.ns;
  if (!a.name.empty()) attrs["name"] = a.name;
  json body = {{"apiVersion", "authorization.k8s.io/v1"},
               {"kind", "SelfSubjectAccessReview"},
               {"spec", {{"resourceAttributes", attrs}}}};
  Request r;
  r.method = "POST";
  r.path = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
  r.body = body.dump();
  r.content_type = "application/json";
  // A review creates nothing: resending it is safe.
  r.idempotent = true;
  json out = JsonCall(r);
  AccessReviewResult result;
  if (auto s = out.find("status"); s != out.end() && s->is_object()) {
    result.allowed = s->value("allowed", false);
    result.denied = s->value("denied", false);
    result.reason = s->value("reason", "");
  }
  return result;
}

std::string Client::Raw(const std::string& method, const std::string& path, const Params& query,
                        const std::string& body, const std::string& content_type) {
  Request r;
  r.method = method;
  r.path = path;
  r.query = query;
  r.body = body;
  r.content_type = content_type;
  r.idempotent = method == "GET";
  return Send(r).body;
}

}  // namespace starforge::kube
