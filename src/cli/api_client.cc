#include "starforge/cli/api_client.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "starforge/common/api_errors.h"

#ifndef STARFORGE_VERSION
#define STARFORGE_VERSION "dev"
#endif

namespace starforge::cli {

namespace {

using nlohmann::json;

constexpr size_t kMaxErrorBody = 1 << 20;  // error bodies are small JSON; never hold a huge page
constexpr std::chrono::seconds kConnectTimeout{10};
constexpr std::chrono::seconds kRequestIdle{60};
constexpr size_t kUploadBuffer = 1 << 20;  // libcurl's upload buffer for a file or streamed body

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

// Why the exchange failed, in words for the user.
std::string TransportReason(const net::Response& r) {
  if (r.fault == net::Fault::kConnect) {
    return r.os_errno != 0 ? LowerFirst(std::strerror(static_cast<int>(r.os_errno)))
                           : "cannot connect";
  }
  static const std::map<net::Fault, std::string_view> kWords = {
      {net::Fault::kResolveHost, "unknown host"},
      {net::Fault::kTimeout, "timed out"},
      {net::Fault::kIdle, "no data for too long"},
      {net::Fault::kUnsupportedProtocol, "unsupported protocol (use http:// or https://)"}};
  if (auto it = kWords.find(r.fault); it != kWords.end()) return std::string(it->second);
  std::string text = r.error;
  while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
    text.pop_back();
  return LowerFirst(text);
}

std::string ContentType(const net::Response& r) {
  auto it = r.headers.find("content-type");
  return it == r.headers.end() ? std::string() : it->second;
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
    e.error = api_errors::kUnauthorized;
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
  std::filesystem::path body_file;  // PUT body: a file, or
  net::BodyReader reader;           // PUT body: streamed, sent chunked
  const std::vector<FormPart>* form = nullptr;
  const UploadProgress* progress = nullptr;
  std::function<bool(std::string_view)> on_data;  // 2xx bodies; false = stop (not an error)
  std::chrono::seconds idle{kRequestIdle};

  net::Response response;  // filled as it arrives: on_data may read its headers
};

ApiClient::ApiClient(std::string server, std::string token)
    : server_(std::move(server)),
      token_(std::move(token)),
      transport_(std::make_shared<net::Transport>()) {
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
  net::Request n;
  n.method = r.method;
  n.url = server_ + r.path;
  n.connect_timeout = kConnectTimeout;
  n.idle_timeout = r.idle;
  n.user_agent = "forge/" STARFORGE_VERSION;
  n.max_error_body = kMaxErrorBody;
  if (!token_.empty()) n.headers.push_back("Authorization: Bearer " + token_);
  n.headers.insert(n.headers.end(), r.headers.begin(), r.headers.end());
  n.headers.push_back("Expect:");  // send bodies at once; the server answers errors after reading
  n.form = r.form;
  if (!r.body_file.empty() || r.reader) {
    n.body_file = r.body_file;
    n.reader = r.reader;
    n.reader_size = -1;
    // A capsule of hundreds of MiB: read and sent a MiB at a time rather than libcurl's 64 KiB.
    n.upload_buffer_bytes = kUploadBuffer;
  } else if (r.form == nullptr && r.method == "POST") {
    if (!r.body) r.body.emplace();
    n.body = *r.body;
  }
  n.on_data = r.on_data;
  if (r.progress != nullptr && *r.progress) {
    n.on_progress = [&r](const net::Progress& p) {
      if (p.send_total > 0) {
        (*r.progress)(static_cast<uint64_t>(p.sent), static_cast<uint64_t>(p.send_total));
      }
    };
  }
  transport_->Perform(n, &r.response);
  const net::Response& resp = r.response;
  if (resp.stopped) return {};

  if (resp.fault != net::Fault::kNone) {
    ApiError e;
    e.kind = ApiError::Kind::kUnreachable;
    const std::string reason = TransportReason(resp);
    if (resp.fault == net::Fault::kReadBody) {  // ours, not the server's or the network's
      e.message = "could not send the request to " + server_ + ": " + reason;
    } else if (resp.status == 0) {
      e.message = "cannot reach the StarForge server at " + server_ + ": " + reason +
                  " — is `forge serve` running? set FORGE_SERVER or run `forge login`";
    } else {
      e.status = resp.status;
      e.message = "the connection to " + server_ + " broke: " + reason;
    }
    e.message = Scrub(e.message);
    return e;
  }
  if (resp.status < 200 || resp.status >= 300) {
    ApiError e = ErrorFromResponse(resp.status, resp.body, server_, !token_.empty());
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
  return ParseJson(r.response.body, "GET " + path, out);
}

ApiError ApiClient::GetText(const std::string& path, std::string* out) {
  Request r;
  r.path = path;
  ApiError e = Perform(r);
  if (e.ok()) *out = std::move(r.response.body);
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
  if (status != nullptr) *status = r.response.status;
  return ParseJson(r.response.body, "POST " + path, out);
}

ApiError ApiClient::DeleteJson(const std::string& path, json* out) {
  Request r;
  r.method = "DELETE";
  r.path = path;
  r.headers.push_back("Accept: application/json");
  ApiError e = Perform(r);
  if (!e.ok()) return e;
  return ParseJson(r.response.body, "DELETE " + path, out);
}

ApiError ApiClient::PostStream(const std::string& path, const json& body,
                               const std::function<bool(const SseEvent&)>& on_event) {
  Request r;
  r.method = "POST";
  r.path = path;
  r.body = body.dump();
  r.headers.push_back("Content-Type: application/json");
  r.headers.push_back("Accept: text/event-stream");
  SseParser parser;
  bool stop = false;
  r.on_data = [&](std::string_view bytes) {
    parser.Feed(bytes, [&](const SseEvent& ev) {
      if (!stop && !on_event(ev)) stop = true;
    });
    return !stop;
  };
  ApiError e = Perform(r);
  if (stop) return {};
  return e;
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
  if (status != nullptr) *status = r.response.status;
  return ParseJson(r.response.body, "POST " + path, out);
}

ApiError ApiClient::PostText(const std::string& path, const std::string& content_type,
                             const std::string& text, json* out) {
  Request r;
  r.method = "POST";
  r.path = path;
  r.body = text;
  r.headers.push_back("Content-Type: " + content_type);
  r.headers.push_back("Accept: application/json");
  ApiError e = Perform(r);
  if (!e.ok()) return e;
  return ParseJson(r.response.body, "POST " + path, out);
}

ApiError ApiClient::PutBody(const std::string& path, const std::string& content_type,
                            const std::filesystem::path& file, net::BodyReader reader,
                            const UploadProgress& progress, json* out) {
  Request r;
  r.method = "PUT";
  r.path = path;
  r.body_file = file;
  if (file.empty()) r.reader = std::move(reader);
  r.progress = &progress;
  r.headers.push_back("Content-Type: " + content_type);
  r.headers.push_back("Accept: application/json");
  ApiError e = Perform(r);
  if (!e.ok()) return e;
  return ParseJson(r.response.body, "PUT " + path, out);
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
    uint64_t received = 0;  // bytes of the stream
    parser.Reset();
    r.on_data = [&](std::string_view bytes) {
      received += bytes.size();
      if (ContentType(r.response).rfind("text/event-stream", 0) != 0) {
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
                  (ContentType(r.response).empty() ? std::string("no content type")
                                                   : ContentType(r.response)) +
                  ", not an event stream (is FORGE_SERVER a StarForge server?)";
      return p;
    }
    if (stop) return {};
    // An answer other than the stream (401, 404, …) is final; a broken or ended stream is not,
    // once the stream has been open: the server may be restarting.
    if (e.kind != ApiError::Kind::kNone && e.kind != ApiError::Kind::kUnreachable) return e;
    if (received > 0) {
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
