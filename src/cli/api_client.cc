#include "starforge/cli/api_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>

#ifndef STARFORGE_VERSION
#define STARFORGE_VERSION "dev"
#endif

namespace starforge::cli {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr size_t kMaxErrorBody = 1 << 20;  // error bodies are small JSON; never hold a huge page
constexpr long kConnectTimeoutS = 10;
constexpr std::chrono::seconds kRequestIdle{60};

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

std::string LowerFirst(std::string text) {
  if (!text.empty() && text[0] >= 'A' && text[0] <= 'Z') text[0] = static_cast<char>(text[0] + 32);
  return text;
}

// The first line of a body, printable and short: enough to recognise a proxy's error page.
std::string Excerpt(std::string_view body) {
  std::string out;
  for (char ch : body) {
    if (ch == '\n' || ch == '\r') {
      if (out.empty()) continue;
      break;
    }
    out.push_back(static_cast<unsigned char>(ch) < 0x20 ? ' ' : ch);
    if (out.size() >= 200) {
      out += "…";
      break;
    }
  }
  return out;
}

std::string TransportReason(CURLcode rc, long os_errno, const char* errbuf) {
  switch (rc) {
    case CURLE_COULDNT_CONNECT:
      return os_errno != 0 ? LowerFirst(std::strerror(static_cast<int>(os_errno)))
                           : "cannot connect";
    case CURLE_COULDNT_RESOLVE_HOST:
      return "unknown host";
    case CURLE_OPERATION_TIMEDOUT:
      return "timed out";
    case CURLE_ABORTED_BY_CALLBACK:
      return "no data for too long";
    case CURLE_UNSUPPORTED_PROTOCOL:
      return "unsupported protocol (use http:// or https://)";
    default:
      break;
  }
  std::string text = errbuf[0] != '\0' ? errbuf : curl_easy_strerror(rc);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
    text.pop_back();
  return LowerFirst(text);
}

}  // namespace

int ApiError::ExitCode() const {
  switch (kind) {
    case Kind::kNone:
      return 0;
    case Kind::kUnreachable:
    case Kind::kUnauthorized:
      return kExitUnreachable;
    case Kind::kNotFound:
      return kExitNotFound;
    case Kind::kApi:
    case Kind::kProtocol:
      return 1;
  }
  return 1;
}

std::string ApiError::ToString() const {
  std::string out = "forge: " + message + "\n";
  for (const auto& [field, text] : details)
    out += "  " + (field.empty() ? std::string("(spec)") : field) + ": " + text + "\n";
  return out;
}

ApiError ErrorFromResponse(int status, std::string_view body, const std::string& server,
                           bool had_token) {
  ApiError e;
  e.status = status;
  e.kind = status == 401   ? ApiError::Kind::kUnauthorized
           : status == 404 ? ApiError::Kind::kNotFound
                           : ApiError::Kind::kApi;
  if (e.kind == ApiError::Kind::kUnauthorized) {
    // The server's own words are about a header; the user needs to know what to run.
    e.error = "Unauthorized";
    e.message = had_token
                    ? "token rejected by " + server + ": run `forge login`"
                    : "not logged in to " + server + ": run `forge login` (or set FORGE_TOKEN)";
    return e;
  }
  const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.contains("message") && j["message"].is_string()) {
    if (j.contains("error") && j["error"].is_string()) e.error = j["error"].get<std::string>();
    e.message = j["message"].get<std::string>();
    const auto errors = j.find("errors");
    if (errors != j.end() && errors->is_array() && !errors->empty()) {
      for (const json& fe : *errors) {
        if (!fe.is_object()) continue;
        e.details.emplace_back(fe.value("field", std::string()),
                               fe.value("message", std::string()));
      }
    } else if (j.contains("field") && j["field"].is_string() &&
               !j["field"].get<std::string>().empty()) {
      e.message = j["field"].get<std::string>() + ": " + e.message;
    }
    if (e.message.empty()) e.message = "the server answered HTTP " + std::to_string(status);
    return e;
  }
  e.message = "the server at " + server + " answered HTTP " + std::to_string(status);
  const std::string excerpt = Excerpt(body);
  if (!excerpt.empty()) e.message += ": " + excerpt;
  return e;
}

void SseParser::Feed(std::string_view bytes, const std::function<void(const SseEvent&)>& on_event) {
  size_t start = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    const char ch = bytes[i];
    if (after_cr_) {
      after_cr_ = false;
      if (ch == '\n') {  // the \n of a \r\n split across chunks (or not): already ended
        start = i + 1;
        continue;
      }
    }
    if (ch != '\r' && ch != '\n') continue;
    line_.append(bytes.substr(start, i - start));
    Line(line_, on_event);
    line_.clear();
    if (ch == '\r') {
      if (i + 1 < bytes.size()) {
        if (bytes[i + 1] == '\n') ++i;
      } else {
        after_cr_ = true;
      }
    }
    start = i + 1;
  }
  line_.append(bytes.substr(std::min(start, bytes.size())));
}

void SseParser::Line(std::string_view line, const std::function<void(const SseEvent&)>& on_event) {
  if (line.empty()) {
    last_id_ = id_;
    if (has_data_) {
      SseEvent ev;
      ev.id = last_id_;
      if (!event_.empty()) ev.event = event_;
      ev.data = data_.substr(0, data_.size() - 1);  // the last line's '\n'
      data_.clear();
      has_data_ = false;
      event_.clear();
      on_event(ev);
    }
    data_.clear();
    has_data_ = false;
    event_.clear();
    return;
  }
  if (line.front() == ':') return;  // a comment: the server's keep-alive
  const size_t colon = line.find(':');
  const std::string_view field = line.substr(0, colon);
  std::string_view value;
  if (colon != std::string_view::npos) {
    value = line.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  }
  if (field == "data") {
    data_.append(value);
    data_.push_back('\n');
    has_data_ = true;
  } else if (field == "event") {
    event_ = value;
  } else if (field == "id") {
    if (value.find('\0') == std::string_view::npos) id_ = value;
  }
  // "retry" and unknown fields are ignored (the client has its own reconnect delay).
}

void SseParser::Reset() {
  line_.clear();
  after_cr_ = false;
  data_.clear();
  has_data_ = false;
  event_.clear();
  id_ = last_id_;
}

std::string UrlEncode(std::string_view text) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char ch : text) {
    if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
        ch == '-' || ch == '.' || ch == '_' || ch == '~') {
      out.push_back(static_cast<char>(ch));
    } else {
      out.push_back('%');
      out.push_back(kHex[ch >> 4]);
      out.push_back(kHex[ch & 15]);
    }
  }
  return out;
}

struct ApiClient::Request {
  std::string method = "GET";
  std::string path;
  std::vector<std::string> headers;
  std::optional<std::string> body;  // POST body
  const std::vector<FormPart>* form = nullptr;
  const UploadProgress* progress = nullptr;
  std::function<bool(std::string_view)> on_data;  // 2xx bodies; false = stop (not an error)
  std::chrono::seconds idle{kRequestIdle};

  // Results.
  int status = 0;
  std::string content_type;
  std::string response_body;
  uint64_t received = 0;  // body bytes of a 2xx answer
  curl_off_t uploaded = 0;
  bool stopped = false;
  Clock::time_point last_data = Clock::now();
};

namespace {

size_t OnHeader(char* data, size_t size, size_t n, void* user) {
  auto* r = static_cast<ApiClient::Request*>(user);
  std::string_view line(data, size * n);
  constexpr std::string_view kName = "content-type:";
  if (line.size() > kName.size()) {
    std::string lower(line.substr(0, kName.size()));
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (lower == kName) {
      std::string_view value = line.substr(kName.size());
      while (!value.empty() && value.front() == ' ')
        value.remove_prefix(1);
      while (!value.empty() &&
             (value.back() == '\r' || value.back() == '\n' || value.back() == ' '))
        value.remove_suffix(1);
      r->content_type = value;
    }
  }
  r->last_data = Clock::now();
  return size * n;
}

struct WriteState {
  ApiClient::Request* request;
  CURL* curl;
};

size_t OnBody(char* data, size_t size, size_t n, void* user) {
  auto* w = static_cast<WriteState*>(user);
  ApiClient::Request* r = w->request;
  const size_t bytes = size * n;
  r->last_data = Clock::now();
  long status = 0;
  curl_easy_getinfo(w->curl, CURLINFO_RESPONSE_CODE, &status);
  const bool success = status >= 200 && status < 300;
  if (success) r->received += bytes;
  if (success && r->on_data) {
    if (!r->on_data(std::string_view(data, bytes))) {
      r->stopped = true;
      return 0;  // ends the transfer (CURLE_WRITE_ERROR), which Perform treats as success
    }
    return bytes;
  }
  if (!success && r->response_body.size() >= kMaxErrorBody) return bytes;
  r->response_body.append(data, bytes);
  return bytes;
}

int OnProgress(void* user, curl_off_t, curl_off_t, curl_off_t ultotal, curl_off_t ulnow) {
  auto* r = static_cast<ApiClient::Request*>(user);
  if (r->progress != nullptr && *r->progress && ultotal > 0) {
    (*r->progress)(static_cast<uint64_t>(ulnow), static_cast<uint64_t>(ultotal));
  }
  // Uploading counts as activity: a slow link may take long to send a big archive.
  if (ulnow != r->uploaded) {
    r->uploaded = ulnow;
    r->last_data = Clock::now();
  }
  return Clock::now() - r->last_data > r->idle ? 1 : 0;
}

struct CurlDeleter {
  void operator()(CURL* c) const { curl_easy_cleanup(c); }
};
struct SlistDeleter {
  void operator()(curl_slist* s) const { curl_slist_free_all(s); }
};
struct MimeDeleter {
  void operator()(curl_mime* m) const { curl_mime_free(m); }
};

}  // namespace

ApiClient::ApiClient(std::string server, std::string token)
    : server_(std::move(server)), token_(std::move(token)) {
  while (!server_.empty() && server_.back() == '/')
    server_.pop_back();
}

std::string ApiClient::Scrub(std::string text) const {
  // Defence in depth: nothing above formats the token, but a server could echo it back.
  if (token_.size() < 4) return text;
  for (size_t at = text.find(token_); at != std::string::npos; at = text.find(token_, at))
    text.replace(at, token_.size(), "***");
  return text;
}

ApiError ApiClient::Perform(Request& r) {
  GlobalInit();
  std::unique_ptr<CURL, CurlDeleter> curl(curl_easy_init());
  if (!curl) {
    ApiError e;
    e.kind = ApiError::Kind::kUnreachable;
    e.message = "cannot start an HTTP request (libcurl failed to initialise)";
    return e;
  }
  CURL* c = curl.get();
  const std::string url = server_ + r.path;
  char errbuf[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, kConnectTimeoutS);
  curl_easy_setopt(c, CURLOPT_USERAGENT, "forge/" STARFORGE_VERSION);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");

  std::unique_ptr<curl_slist, SlistDeleter> headers;
  auto add_header = [&headers](const std::string& h) {
    headers.reset(curl_slist_append(headers.release(), h.c_str()));
  };
  if (!token_.empty()) add_header("Authorization: Bearer " + token_);
  for (const auto& h : r.headers)
    add_header(h);
  add_header("Expect:");  // send bodies at once; the server answers errors after reading them

  std::unique_ptr<curl_mime, MimeDeleter> mime;
  if (r.form != nullptr) {
    mime.reset(curl_mime_init(c));
    for (const FormPart& p : *r.form) {
      curl_mimepart* part = curl_mime_addpart(mime.get());
      curl_mime_name(part, p.name.c_str());
      if (!p.file.empty()) {
        curl_mime_filedata(part, p.file.c_str());
      } else {
        curl_mime_data(part, p.data.data(), p.data.size());
      }
      // After filedata, which sets the file's own name.
      curl_mime_filename(part, p.filename.empty() ? nullptr : p.filename.c_str());
      if (!p.content_type.empty()) curl_mime_type(part, p.content_type.c_str());
    }
    curl_easy_setopt(c, CURLOPT_MIMEPOST, mime.get());
  } else if (r.method == "POST") {
    if (!r.body) r.body.emplace();
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(r.body->size()));
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, r.body->data());
  }
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());

  WriteState ws{&r, c};
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &r);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, OnBody);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &ws);
  curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, OnProgress);
  curl_easy_setopt(c, CURLOPT_XFERINFODATA, &r);

  r.last_data = Clock::now();
  const CURLcode rc = curl_easy_perform(c);
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  r.status = static_cast<int>(status);
  if (r.stopped) return {};

  if (rc != CURLE_OK) {
    long os_errno = 0;
    curl_easy_getinfo(c, CURLINFO_OS_ERRNO, &os_errno);
    ApiError e;
    e.kind = ApiError::Kind::kUnreachable;
    const std::string reason = TransportReason(rc, os_errno, errbuf);
    if (status == 0) {
      e.message = "cannot reach the StarForge server at " + server_ + ": " + reason +
                  " — is `forge serve` running? set FORGE_SERVER or run `forge login`";
    } else {
      e.status = r.status;
      e.message = "the connection to " + server_ + " broke: " + reason;
    }
    e.message = Scrub(e.message);
    return e;
  }
  if (status < 200 || status >= 300) {
    ApiError e = ErrorFromResponse(r.status, r.response_body, server_, !token_.empty());
    e.message = Scrub(e.message);
    for (auto& d : e.details)
      d.second = Scrub(d.second);
    return e;
  }
  return {};
}

namespace {

ApiError ParseJson(const std::string& body, const std::string& what, json* out) {
  *out = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (out->is_discarded()) {
    ApiError e;
    e.kind = ApiError::Kind::kProtocol;
    e.message = "the server's answer to " + what +
                " is not JSON (is FORGE_SERVER a StarForge server?): " + Excerpt(body);
    return e;
  }
  return {};
}

}  // namespace

ApiError ApiClient::GetJson(const std::string& path, json* out) {
  Request r;
  r.path = path;
  r.headers.push_back("Accept: application/json");
  ApiError e = Perform(r);
  if (!e.ok()) return e;
  return ParseJson(r.response_body, "GET " + path, out);
}

ApiError ApiClient::GetText(const std::string& path, std::string* out) {
  Request r;
  r.path = path;
  ApiError e = Perform(r);
  if (e.ok()) *out = std::move(r.response_body);
  return e;
}

ApiError ApiClient::PostJson(const std::string& path, const json& body, json* out, int* status) {
  Request r;
  r.method = "POST";
  r.path = path;
  r.headers.push_back("Accept: application/json");
  if (!body.is_null()) {
    r.body = body.dump();
    r.headers.push_back("Content-Type: application/json");
  }
  ApiError e = Perform(r);
  if (!e.ok()) return e;
  if (status != nullptr) *status = r.status;
  return ParseJson(r.response_body, "POST " + path, out);
}

ApiError ApiClient::PostForm(const std::string& path, const std::vector<FormPart>& parts,
                             const UploadProgress& progress, json* out, int* status) {
  Request r;
  r.method = "POST";
  r.path = path;
  r.form = &parts;
  r.progress = &progress;
  r.headers.push_back("Accept: application/json");
  ApiError e = Perform(r);
  if (!e.ok()) return e;
  if (status != nullptr) *status = r.status;
  return ParseJson(r.response_body, "POST " + path, out);
}

ApiError ApiClient::Stream(const std::string& path, std::string* last_event_id,
                           const std::function<bool(const SseEvent&)>& on_event,
                           const StreamOptions& options) {
  SseParser parser;
  int failures = 0;
  bool opened = false;  // bytes of the stream arrived at least once
  for (;;) {
    Request r;
    r.path = path;
    r.idle = options.idle_timeout;
    r.headers.push_back("Accept: text/event-stream");
    r.headers.push_back("Cache-Control: no-cache");
    if (!last_event_id->empty()) r.headers.push_back("Last-Event-ID: " + *last_event_id);
    bool stop = false;
    bool wrong_type = false;
    parser.Reset();
    r.on_data = [&](std::string_view bytes) {
      if (r.content_type.rfind("text/event-stream", 0) != 0) {
        wrong_type = true;
        return false;
      }
      parser.Feed(bytes, [&](const SseEvent& ev) {
        if (stop) return;
        if (!ev.id.empty()) *last_event_id = ev.id;
        if (!on_event(ev)) stop = true;
      });
      return !stop;
    };
    ApiError e = Perform(r);
    if (wrong_type) {
      ApiError p;
      p.kind = ApiError::Kind::kProtocol;
      p.message = "the server answered " + path + " with " +
                  (r.content_type.empty() ? std::string("no content type") : r.content_type) +
                  ", not an event stream (is FORGE_SERVER a StarForge server?)";
      return p;
    }
    if (stop) return {};
    // An answer other than the stream (401, 404, …) is final; a broken or ended stream is not,
    // once the stream has been open: the server may be restarting.
    if (e.kind != ApiError::Kind::kNone && e.kind != ApiError::Kind::kUnreachable) return e;
    if (r.received > 0) {
      opened = true;
      failures = 0;
    }
    if (!opened && !e.ok()) return e;
    if (++failures > options.max_reconnects) {
      if (e.ok()) {
        e.kind = ApiError::Kind::kUnreachable;
        e.message = "the server at " + server_ + " keeps closing the stream of " + path;
      }
      return e;
    }
    if (e.ok()) {
      e.kind = ApiError::Kind::kUnreachable;
      e.message = "the server at " + server_ + " closed the stream";
    }
    if (failures == 1 && options.on_reconnect) options.on_reconnect(e);
    auto delay = options.retry_delay * (1 << std::min(failures - 1, 10));
    std::this_thread::sleep_for(
        std::min<std::chrono::milliseconds>(delay, options.max_retry_delay));
  }
}

}  // namespace starforge::cli
