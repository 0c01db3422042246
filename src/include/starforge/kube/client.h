// A Kubernetes REST client over libcurl: CRUD, paging, watch, status subresource, pod logs,
// service proxy and SelfSubjectAccessReview. Objects are plain JSON (nlohmann::json); every
// failure throws ApiError (errors.h). Thread-safe: each call is its own exchange over
// net/http.h's transport, and connections are shared between calls. Credentials are sent only over
// https, as client-go does.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "starforge/kube/client_config.h"
#include "starforge/kube/errors.h"
#include "starforge/kube/resource.h"

namespace starforge::kube {

struct ClientOptions {
  std::chrono::milliseconds connect_timeout{10000};
  // Whole-request deadline for non-streaming calls (kube-apiserver's own is 60 s).
  std::chrono::milliseconds request_timeout{60000};
  // Attempts in all (first try included) for retryable failures; client-go allows 10.
  int max_attempts = 10;
  // Jittered exponential backoff when the server gave no Retry-After.
  std::chrono::milliseconds backoff_base{200};
  std::chrono::milliseconds backoff_cap{10000};
  // Ceiling on a server-requested Retry-After wait, so a confused server cannot stall us for hours.
  std::chrono::milliseconds max_retry_after{60000};
  // How often a token file is checked for rotation.
  std::chrono::seconds token_recheck{10};
  std::string user_agent = "starforge";
  // Headers added to every request (e.g. kubesim's controllers identify themselves with one).
  std::map<std::string, std::string> extra_headers{};
};

struct ListOptions {
  std::string label_selector{};
  std::string field_selector{};
  int64_t limit = 0;  // 0 = no paging
  std::string continue_token{};
  std::string resource_version{};  // "" = most recent (consistent read)
  // When set, becoming true aborts the request and its retries (ApiError kTransport).
  const std::atomic<bool>* stop = nullptr;
};

struct WriteOptions {
  std::string field_manager{};     // "" = not sent
  bool dry_run = false;            // dryRun=All
  std::string field_validation{};  // "" | "Ignore" | "Warn" | "Strict"
};

struct DeleteOptions {
  std::string propagation_policy{};  // "" | "Background" | "Foreground" | "Orphan"
  std::optional<int64_t> grace_period_seconds{};
  std::string precondition_uid{};
  std::string precondition_resource_version{};
  bool dry_run = false;
};

struct WatchOptions {
  std::string label_selector{};
  std::string field_selector{};
  std::string resource_version{};  // "" or "0": synthetic ADDED for current state first
  bool allow_bookmarks = true;
  int64_t timeout_seconds = 300;  // server closes the stream after this; 0 = server default
};

enum class WatchEventType { kAdded, kModified, kDeleted, kBookmark };
std::string_view ToString(WatchEventType type);

struct WatchEvent {
  WatchEventType type;
  nlohmann::json object{};
};

// How a watch ended when it did not throw.
enum class WatchEnd {
  kServerClosed,  // the body ended (timeoutSeconds, server restart): resume from the last rv
  kStopped,       // the callback returned false or `stop` was set
};

struct LogOptions {
  std::string container{};  // "" = the pod's only container
  bool follow = false;
  bool previous = false;
  bool timestamps = false;
  std::optional<int64_t> tail_lines{};
  std::optional<int64_t> since_seconds{};
  std::optional<int64_t> limit_bytes{};
};

struct ProxyRequest {
  std::string method = "GET";  // GET | POST (and any other the backend accepts)
  std::string ns{};
  std::string service{};
  std::string port{};    // number or port name; "" = the service's default
  std::string scheme{};  // "" | "http" | "https"
  std::string path{};    // after /proxy/, without the leading '/'
  std::vector<std::pair<std::string, std::string>> query{};
  std::string body{};
  std::string content_type{};  // for a body
  std::map<std::string, std::string> headers{};
};

struct ProxyResponse {
  int status = 0;
  std::map<std::string, std::string> headers{};  // lower-case names
  std::string body{};                            // empty when streamed
};

struct AccessReview {
  std::string verb{};  // get, list, watch, create, update, patch, delete
  std::string group{};
  std::string resource{};
  std::string subresource{};
  std::string ns{};
  std::string name{};
};

struct AccessReviewResult {
  bool allowed = false;
  bool denied = false;
  std::string reason{};
};

// Counts per client, for tests (KubeRayFleet::ApiStats).
struct ClientStats {
  int64_t requests = 0;  // HTTP requests sent, retries included
  int64_t retries = 0;
};

class Client {
 public:
  // Makes no request. `config` must pass CheckClientConfig (as LoadClientConfig's do); one that
  // does not is a caller's bug: std::invalid_argument.
  explicit Client(ClientConfig config, ClientOptions options = {});
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  const ClientConfig& config() const { return config_; }
  ClientStats stats() const;

  // GET one object. `ns` is ignored for cluster-scoped resources.
  nlohmann::json Get(const ResourceRef& ref, std::string_view ns, std::string_view name);
  // One page of the collection ("" ns = all namespaces). The List's metadata.continue is set
  // when more pages remain.
  nlohmann::json List(const ResourceRef& ref, std::string_view ns, const ListOptions& options = {});
  // Every page concatenated into one List (items in server order, metadata.resourceVersion of the
  // first page: a paged list is a snapshot at that rv). `page_size` 0 = one request.
  nlohmann::json ListAll(const ResourceRef& ref, std::string_view ns, ListOptions options = {},
                         int64_t page_size = 500);
  // POST; the namespace comes from `ns` (the object's own is left as is).
  nlohmann::json Create(const ResourceRef& ref, std::string_view ns, const nlohmann::json& object,
                        const WriteOptions& options = {});
  // PUT the whole object (metadata.name from the object; its metadata.resourceVersion, when set,
  // is the optimistic-concurrency precondition: a stale one gives Conflict).
  nlohmann::json Update(const ResourceRef& ref, std::string_view ns, const nlohmann::json& object,
                        const WriteOptions& options = {});
  // PUT of the status subresource.
  nlohmann::json UpdateStatus(const ResourceRef& ref, std::string_view ns,
                              const nlohmann::json& object, const WriteOptions& options = {});
  // PATCH with application/merge-patch+json (RFC 7386).
  nlohmann::json MergePatch(const ResourceRef& ref, std::string_view ns, std::string_view name,
                            const nlohmann::json& patch, const WriteOptions& options = {});
  // Merge-patch of the status subresource.
  nlohmann::json MergePatchStatus(const ResourceRef& ref, std::string_view ns,
                                  std::string_view name, const nlohmann::json& patch,
                                  const WriteOptions& options = {});
  // DELETE with a DeleteOptions body. Returns what the server returns: the object (possibly with
  // deletionTimestamp, when finalizers or grace periods keep it) or a Status.
  nlohmann::json Delete(const ResourceRef& ref, std::string_view ns, std::string_view name,
                        const DeleteOptions& options = {});

  // Streams events to `on_event` until the server ends the body, `on_event` returns false, or
  // `stop` becomes true (checked at least once a second). An ERROR event is thrown as the
  // ApiError it carries (so a 410 arrives as IsExpired() whether sent as HTTP 410 or as an ERROR
  // event). A watch is never retried here: the caller decides (see Informer). `on_event` may
  // move the event's object out (it is not used after the call).
  WatchEnd Watch(const ResourceRef& ref, std::string_view ns, const WatchOptions& options,
                 const std::function<bool(WatchEvent&)>& on_event,
                 const std::atomic<bool>* stop = nullptr);

  // The container's log as text.
  std::string PodLogs(std::string_view ns, std::string_view pod, const LogOptions& options = {});
  // Streams the log (use follow=true to keep reading until the container ends); `on_data`
  // returns false to stop. Returns when the stream ends or is stopped.
  void StreamPodLogs(std::string_view ns, std::string_view pod, const LogOptions& options,
                     const std::function<bool(std::string_view)>& on_data,
                     const std::atomic<bool>* stop = nullptr);

  // A request through /api/v1/namespaces/{ns}/services/[scheme:]{name}[:port]/proxy/{path}. The
  // backend's status and body come back as they are (a 4xx/5xx from the backend is not thrown);
  // an error produced by the API server itself (a metav1.Status, e.g. 503 "no endpoints
  // available") is thrown as ApiError.
  ProxyResponse ServiceProxy(const ProxyRequest& request);
  // The same, streaming the body to `on_data` (returns false to stop); the returned body is empty.
  ProxyResponse StreamServiceProxy(const ProxyRequest& request,
                                   const std::function<bool(std::string_view)>& on_data,
                                   const std::atomic<bool>* stop = nullptr);

  // POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews: may the caller do this?
  AccessReviewResult SelfSubjectAccessReview(const AccessReview& review);

  // A raw request for anything not covered above; throws ApiError on a non-2xx status. `query`
  // is encoded here. Returns the body.
  std::string Raw(const std::string& method, const std::string& path,
                  const std::vector<std::pair<std::string, std::string>>& query = {},
                  const std::string& body = {}, const std::string& content_type = {});

  // Implementation detail shared with the transport (defined in client.cc).
  struct Request;
  struct Response;
  struct Shared;

 private:
  Response Send(const Request& request);
  Response SendOnce(const Request& request, bool* nothing_sent);
  // The request's headers: Accept, Content-Type, the extra ones and, over https, the token.
  std::vector<std::string> Headers(const Request& request);
  nlohmann::json JsonCall(const Request& request);
  std::chrono::milliseconds Backoff(int attempt);
  // The current token, to mask it in error text; "" when none or unreadable.
  std::string TokenForScrub();

  ClientConfig config_;
  ClientOptions options_;
  TokenSource tokens_;
  std::unique_ptr<Shared> shared_;
};

}  // namespace starforge::kube
