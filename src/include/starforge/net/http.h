// One HTTP exchange over libcurl, for every client StarForge has: the Kubernetes API
// (kube/client.h), S3 (objstore/s3_store.h) and the StarForge API (cli/api_client.h). Headers,
// bodies in memory, streamed or as a form, streamed downloads, TLS, timeouts, a stop flag, and
// what went wrong in terms a caller can classify. Retry policies stay with the callers (Kubernetes'
// and S3's rules differ); the backoff they wait between attempts is here.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace starforge::net {

// How the server is verified and how the client proves who it is. Empty = libcurl's defaults
// (the system's CA bundle, no client certificate).
struct TlsOptions {
  std::string ca_file;
  std::string_view ca_pem;  // a PEM bundle in memory (must outlive the exchange)
  bool insecure_skip_verify = false;
  std::string client_cert_file;
  std::string_view client_cert_pem;
  std::string client_key_file;
  std::string_view client_key_pem;
};

// Fills `buf` with up to `room` next bytes of a streamed body: how many (0 at its end), or
// nullopt when the data cannot be read (the exchange ends with Fault::kReadBody).
using BodyReader = std::function<std::optional<size_t>(char* buf, size_t room)>;

// One part of a multipart/form-data body.
struct FormPart {
  std::string name;
  std::string data;
  // When non-empty, sent instead of `data`: opened as the exchange starts, so sent whole even if
  // removed meanwhile; one that cannot be opened is Fault::kReadBody naming it, nothing sent.
  std::filesystem::path file;
  std::string filename;      // Content-Disposition filename ("" = none)
  std::string content_type;  // "" = libcurl's default
  // When set, the part's bytes come from here, of a length not known in advance: the body is
  // sent with chunked transfer encoding (HTTP/1.1) as the reader produces it.
  BodyReader reader;
};

struct Progress {
  int64_t sent = 0;        // body bytes uploaded so far
  int64_t send_total = 0;  // 0 = not known (yet)
  int64_t received = 0;
  int64_t receive_total = 0;  // 0 = not known yet
};

struct Request {
  std::string method = "GET";
  std::string url;
  std::vector<std::string> headers;  // "Name: value"; "Name:" drops a header libcurl would add
  // The body, at most one of:
  std::optional<std::string_view> body;  // bytes in memory (must outlive the exchange)
  BodyReader reader;                     // streamed: PUT uploads it, POST posts it
  int64_t reader_size = 0;  // the streamed body's length; -1 with PUT: unknown, sent chunked
  // A file sent whole as the body (PUT uploads it, POST posts it), opened as the exchange starts
  // like a FormPart's file; one that cannot be opened is Fault::kReadBody naming it.
  std::filesystem::path body_file;
  const std::vector<FormPart>* form = nullptr;  // multipart/form-data
  // libcurl's upload buffer (CURLOPT_UPLOAD_BUFFERSIZE, at most 2 MiB); 0 = its default (64 KiB).
  // Bigger means fewer reads of the body and fewer, larger sends of a big upload.
  size_t upload_buffer_bytes = 0;
  // A 2xx body goes here instead of into Response::body; false ends the exchange, stopped.
  std::function<bool(std::string_view)> on_data;
  std::function<void(const Progress&)> on_progress;
  const std::atomic<bool>* stop = nullptr;       // becoming true ends the exchange, stopped
  std::chrono::milliseconds connect_timeout{0};  // 0 = libcurl's (300 s)
  std::chrono::milliseconds timeout{0};          // the whole exchange; 0 = none
  // No byte either way (headers, body, upload) for this long ends the exchange (kIdle); 0 = none.
  std::chrono::milliseconds idle_timeout{0};
  // Slower than low_speed_bytes per second for low_speed_time ends it (kTimeout); 0 = never.
  int64_t low_speed_bytes = 0;
  std::chrono::seconds low_speed_time{0};
  // A non-2xx body is kept up to about this many bytes (error pages can be huge).
  size_t max_error_body = std::numeric_limits<size_t>::max();
  std::string user_agent;
  TlsOptions tls;
};

// Why no complete HTTP exchange happened.
enum class Fault {
  kNone,
  kConnect,              // the connection was refused or could not be made (os_errno says why)
  kResolveHost,          // unknown host name
  kResolveProxy,         // unknown proxy name
  kTls,                  // the TLS handshake or the server's certificate failed
  kConnectionLost,       // sending or receiving failed, or the server closed without a reply
  kInterrupted,          // the reply was cut short (fewer bytes than announced, HTTP/2 stream)
  kTimeout,              // connect_timeout, timeout or the low-speed limit ran out
  kIdle,                 // idle_timeout ran out
  kReadBody,             // the body to send could not be read
  kWriteBody,            // the body received could not be written
  kUnsupportedProtocol,  // the URL is not http:// or https://
  kOther,
};

struct Response {
  int status = 0;                              // 0 when no reply arrived
  std::map<std::string, std::string> headers;  // the final reply's, lower-case names
  std::string body;      // non-2xx bodies (cut at max_error_body); 2xx ones unless on_data is set
  bool stopped = false;  // on_data returned false or `stop` became true: not a fault
  Fault fault = Fault::kNone;
  std::string error;  // libcurl's words for the fault
  long os_errno = 0;  // with kConnect: the system's reason (ECONNREFUSED, …)
  // With a fault: the server never received a byte of the request, so even a request that is not
  // idempotent may be sent again.
  bool nothing_sent = false;
};

// Kept-alive connections, DNS answers and TLS sessions, reused by the exchanges sent through it.
// Thread-safe: an exchange has a libcurl handle to itself, taken from a pool of idle handles
// that each keep their own connections (libcurl's shared connection cache is not thread-safe).
class Transport {
 public:
  Transport();
  ~Transport();  // not copyable: it owns the shared connections

  // Sends `request` and fills `*response` as the reply arrives (on_data may read its status and
  // headers). Network faults are in response->fault, never thrown; what a callback throws is
  // rethrown once libcurl has returned.
  void Perform(const Request& request, Response* response);

 private:
  struct Shared;
  std::unique_ptr<Shared> shared_;
};

// Whether sending again may cure `fault` (refused, unknown host, lost or cut connection, timeout).
bool Transient(Fault fault);

// The wait before retry number `retry` (1 = the first): base·2^(retry-1), capped at `cap`, then
// uniformly in [half, all] of it with `uniform01` in [0, 1], so that many clients retrying at
// once spread out yet none retries at once.
std::chrono::milliseconds Backoff(int retry, std::chrono::milliseconds base,
                                  std::chrono::milliseconds cap, double uniform01);

}  // namespace starforge::net
