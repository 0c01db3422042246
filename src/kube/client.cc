// The REST client: one curl easy handle per request, connections shared through a curl share
// handle; the retry rules of errors.h; streaming bodies for watch, logs and proxy.
#include "starforge/kube/client.h"

#include <curl/curl.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <exception>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "starforge/kube/watch_decoder.h"

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

struct Client::Response {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  bool stopped = false;  // the caller (callback or stop flag) ended the transfer
};

struct Client::Shared {
  CURLSH* share = nullptr;
  std::array<std::mutex, CURL_LOCK_DATA_LAST> locks;
  std::atomic<int64_t> requests{0};
  std::atomic<int64_t> retries{0};
  std::mutex rng_mu;
  std::mt19937_64 rng{std::random_device{}()};
};

namespace {

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

void LockShare(CURL*, curl_lock_data data, curl_lock_access, void* user) {
  static_cast<Client::Shared*>(user)->locks[static_cast<size_t>(data)].lock();
}
void UnlockShare(CURL*, curl_lock_data data, void* user) {
  static_cast<Client::Shared*>(user)->locks[static_cast<size_t>(data)].unlock();
}

struct Transfer {
  CURL* curl = nullptr;
  Client::Response* response = nullptr;
  const std::function<bool(std::string_view)>* on_data = nullptr;
  const std::atomic<bool>* stop = nullptr;
  bool callback_stopped = false;
  std::exception_ptr error;  // thrown by a callback; rethrown after curl returns
};

size_t OnHeader(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  std::string_view line(data, size * n);
  if (line.starts_with("HTTP/")) {
    t->response->headers.clear();  // a new response (e.g. after 100 Continue)
    return size * n;
  }
  size_t colon = line.find(':');
  if (colon != std::string_view::npos) {
    std::string name(line.substr(0, colon));
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t'))
      value.remove_prefix(1);
    while (!value.empty() &&
           (value.back() == '\r' || value.back() == '\n' || value.back() == ' ')) {
      value.remove_suffix(1);
    }
    t->response->headers[name] = std::string(value);
  }
  return size * n;
}

size_t OnBody(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  size_t bytes = size * n;
  long status = 0;
  curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &status);
  // Error bodies are always collected whole (they are small Status objects) for classification.
  if (t->on_data != nullptr && status >= 200 && status < 300) {
    try {
      if (!(*t->on_data)(std::string_view(data, bytes))) {
        t->callback_stopped = true;
        return 0;  // aborts the transfer with CURLE_WRITE_ERROR
      }
    } catch (...) {
      t->error = std::current_exception();
      return 0;
    }
    return bytes;
  }
  t->response->body.append(data, bytes);
  return bytes;
}

int OnProgress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* t = static_cast<Transfer*>(user);
  return t->stop != nullptr && t->stop->load() ? 1 : 0;
}

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
  if (config_.server.empty()) throw ConfigError("no Kubernetes API server configured");
  if (config_.server.rfind("http://", 0) != 0 && !IsHttps(config_.server)) {
    throw ConfigError(fmt::format("the API server address {} must start with http:// or https://",
                                  config_.server));
  }
  while (!config_.server.empty() && config_.server.back() == '/')
    config_.server.pop_back();
  GlobalInit();
  shared_->share = curl_share_init();
  curl_share_setopt(shared_->share, CURLSHOPT_LOCKFUNC, &LockShare);
  curl_share_setopt(shared_->share, CURLSHOPT_UNLOCKFUNC, &UnlockShare);
  curl_share_setopt(shared_->share, CURLSHOPT_USERDATA, shared_.get());
  curl_share_setopt(shared_->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT);
  curl_share_setopt(shared_->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
  curl_share_setopt(shared_->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
}

Client::~Client() {
  if (shared_ && shared_->share) curl_share_cleanup(shared_->share);
}

ClientStats Client::stats() const {
  return ClientStats{shared_->requests.load(), shared_->retries.load()};
}

std::chrono::milliseconds Client::Backoff(int attempt) {
  // Full jitter in [d/2, d] with d = base * 2^(attempt-1), capped: retries of many clients
  // spread out instead of arriving in lockstep.
  int64_t d = options_.backoff_base.count();
  for (int i = 1; i < attempt && d < options_.backoff_cap.count(); ++i)
    d *= 2;
  d = std::min<int64_t>(d, options_.backoff_cap.count());
  std::lock_guard lock(shared_->rng_mu);
  std::uniform_int_distribution<int64_t> dist(d / 2, std::max<int64_t>(d / 2, d));
  return std::chrono::milliseconds(dist(shared_->rng));
}

Client::Response Client::SendOnce(const Request& req, bool* nothing_sent) {
  *nothing_sent = false;
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl(curl_easy_init(), &curl_easy_cleanup);
  if (!curl) throw ApiError(Reason::kTransport, 0, "cannot create a curl handle");
  CURL* c = curl.get();
  Response response;
  Transfer t;
  t.curl = c;
  t.response = &response;
  t.on_data = req.on_data ? &req.on_data : nullptr;
  t.stop = req.stop;

  std::string url = config_.server + req.path;
  if (!req.query.empty()) url += "?" + QueryString(req.query);

  curl_slist* headers = nullptr;
  headers = curl_slist_append(headers, ("Accept: " + req.accept).c_str());
  if (!req.content_type.empty()) {
    headers = curl_slist_append(headers, ("Content-Type: " + req.content_type).c_str());
  }
  for (const auto& [name, value] : options_.extra_headers) {
    if (req.headers.count(name) == 0) {
      headers = curl_slist_append(headers, (name + ": " + value).c_str());
    }
  }
  for (const auto& [name, value] : req.headers) {
    headers = curl_slist_append(headers, (name + ": " + value).c_str());
  }
  // client-go attaches credentials only over TLS (reference §7.1): a token must not travel in
  // clear text.
  if (IsHttps(config_.server) && !tokens_.empty()) {
    Secret token;
    try {
      token = tokens_.Get();
    } catch (const ConfigError& e) {
      // A projected token is swapped by symlink; a brief absence is worth another try.
      throw ApiError(Reason::kTransport, 0, e.what(), Context(req.method, req.path))
          .set_nothing_sent(true);
    }
    if (!token.empty()) {
      headers = curl_slist_append(headers, ("Authorization: Bearer " + token.Reveal()).c_str());
    }
  }
  headers = curl_slist_append(headers, "Expect:");  // no 100-continue round trip
  std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> header_list(headers,
                                                                          &curl_slist_free_all);
  std::array<char, CURL_ERROR_SIZE> errbuf{};

  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_SHARE, shared_->share);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf.data());
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_USERAGENT, options_.user_agent.c_str());
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(options_.connect_timeout.count()));
  std::chrono::milliseconds timeout =
      req.timeout.count() == 0 ? options_.request_timeout : req.timeout;
  if (timeout.count() > 0)
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout.count()));
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, &OnHeader);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, &OnBody);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, &OnProgress);
  curl_easy_setopt(c, CURLOPT_XFERINFODATA, &t);
  curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);

  // TLS.
  if (!config_.ca_file.empty()) curl_easy_setopt(c, CURLOPT_CAINFO, config_.ca_file.c_str());
  curl_blob ca_blob{};
  if (!config_.ca_data.empty()) {
    ca_blob = {const_cast<char*>(config_.ca_data.data()), config_.ca_data.size(), CURL_BLOB_NOCOPY};
    curl_easy_setopt(c, CURLOPT_CAINFO_BLOB, &ca_blob);
  }
  if (config_.insecure_skip_tls_verify) {
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  curl_blob cert_blob{};
  curl_blob key_blob{};
  if (!config_.client_cert_file.empty()) {
    curl_easy_setopt(c, CURLOPT_SSLCERT, config_.client_cert_file.c_str());
  } else if (!config_.client_cert_data.empty()) {
    cert_blob = {const_cast<char*>(config_.client_cert_data.data()),
                 config_.client_cert_data.size(), CURL_BLOB_NOCOPY};
    curl_easy_setopt(c, CURLOPT_SSLCERT_BLOB, &cert_blob);
    curl_easy_setopt(c, CURLOPT_SSLCERTTYPE, "PEM");
  }
  if (!config_.client_key_file.empty()) {
    curl_easy_setopt(c, CURLOPT_SSLKEY, config_.client_key_file.c_str());
  } else if (!config_.client_key_data.empty()) {
    const std::string& key = config_.client_key_data.Reveal();
    key_blob = {const_cast<char*>(key.data()), key.size(), CURL_BLOB_NOCOPY};
    curl_easy_setopt(c, CURLOPT_SSLKEY_BLOB, &key_blob);
    curl_easy_setopt(c, CURLOPT_SSLKEYTYPE, "PEM");
  }

  // Method and body.
  if (req.method == "GET") {
    curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
  } else {
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, req.method.c_str());
    if (!req.body.empty() || req.method == "POST" || req.method == "PUT" || req.method == "PATCH") {
      curl_easy_setopt(c, CURLOPT_POSTFIELDS, req.body.data());
      curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(req.body.size()));
    }
  }

  shared_->requests.fetch_add(1);
  CURLcode code = curl_easy_perform(c);
  if (t.error) std::rethrow_exception(t.error);
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  response.status = static_cast<int>(status);
  if (code == CURLE_OK) return response;
  if (t.callback_stopped || code == CURLE_ABORTED_BY_CALLBACK) {
    response.stopped = true;
    return response;
  }
  // CURLINFO_REQUEST_SIZE counts the request bytes issued; zero means the server never saw us,
  // so even a non-idempotent request may be resent.
  long sent = 0;
  curl_easy_getinfo(c, CURLINFO_REQUEST_SIZE, &sent);
  *nothing_sent = sent == 0;
  std::string what = errbuf[0] != '\0' ? errbuf.data() : curl_easy_strerror(code);
  std::string message = fmt::format("cannot reach the API server {}: {}", config_.server, what);
  if (code == CURLE_OPERATION_TIMEDOUT) {
    message = fmt::format("request to the API server {} timed out: {}", config_.server, what);
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
      if (response.status == 401 && !refreshed_token && tokens_.Refresh()) {
        refreshed_token = true;
        --attempt;
        continue;
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
  try {
    return tokens_.Get().Reveal();
  } catch (const ConfigError&) {
    return {};
  }
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
                       const std::function<bool(const WatchEvent&)>& on_event,
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
    if (!on_event(WatchEvent{t, std::move(object)})) {
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
Params LogQuery(const LogOptions& o) {
  Params q;
  if (!o.container.empty()) q.emplace_back("container", o.container);
  if (o.follow) q.emplace_back("follow", "true");
  if (o.previous) q.emplace_back("previous", "true");
  if (o.timestamps) q.emplace_back("timestamps", "true");
  if (o.tail_lines) q.emplace_back("tailLines", std::to_string(*o.tail_lines));
  if (o.since_seconds) q.emplace_back("sinceSeconds", std::to_string(*o.since_seconds));
  if (o.limit_bytes) q.emplace_back("limitBytes", std::to_string(*o.limit_bytes));
  return q;
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
