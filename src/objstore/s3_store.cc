#include "starforge/objstore/s3_store.h"

#include <unistd.h>

#include <fmt/format.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "starforge/common/sha256.h"
#include "starforge/net/http.h"
#include "starforge/objstore/s3_wire.h"

namespace starforge::objstore {

namespace {

namespace fs = std::filesystem;
using sigv4::Params;

struct FileCloser {
  void operator()(FILE* f) const {
    if (f) std::fclose(f);
  }
};
using File = std::unique_ptr<FILE, FileCloser>;

// A request body: bytes in memory or a byte range of a file (re-read on every attempt).
struct Body {
  bool present = false;
  std::string_view memory;
  std::string file;  // when non-empty, the body is [offset, offset + length) of this file
  int64_t offset = 0;
  int64_t length = 0;

  Body Slice(int64_t from, int64_t len) const {
    Body b = *this;
    b.length = len;
    if (file.empty()) {
      b.memory = memory.substr(static_cast<size_t>(from), static_cast<size_t>(len));
    } else {
      b.offset = offset + from;
    }
    return b;
  }
};

struct Call {
  Call(std::string m, std::string k) : method(std::move(m)), key(std::move(k)) {}
  std::string method;
  std::string key;
  Params query;
  Params extra_headers;  // signed and sent
  Body body;
  FILE* sink = nullptr;  // a GET's 2xx body goes here instead of into Response::body
  // CompleteMultipartUpload may answer 200 and still fail, with an <Error> document.
  bool error_in_200 = false;
  int max_attempts = 0;  // 0: the store's setting
  std::function<void(int64_t up, int64_t down, int64_t down_total)> progress;
};

struct Response {
  long status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  int attempts = 1;
};

struct Attempt {
  net::Fault fault = net::Fault::kNone;
  std::string error;  // the transport's words for the fault
  Response response;
};

// `e` with another message (the same code, reason and retryability).
Status Reworded(const Status& e, std::string message) {
  return Status(e.code(), std::move(message)).WithReason(e.reason()).WithRetryable(e.retryable());
}

// Error bodies are small XML documents; a proxy's HTML page is cut rather than kept whole.
constexpr size_t kMaxErrorBody = size_t{1} << 20;

bool Is2xx(long status) {
  return status >= 200 && status < 300;
}

struct Endpoint {
  std::string scheme;
  std::string authority;
  std::string base_path;  // "" or "/prefix"
};

StatusOr<Endpoint> ParseEndpoint(std::string url) {
  while (!url.empty() && url.back() == '/') {
    url.pop_back();
  }
  Endpoint e;
  const size_t sep = url.find("://");
  if (sep != std::string::npos) e.scheme = url.substr(0, sep);
  if (e.scheme != "http" && e.scheme != "https") {
    return Failure(ErrorKind::kInvalid, "FORGE_S3_ENDPOINT must be an http:// or https:// URL");
  }
  const std::string rest = url.substr(sep + 3);
  // The value is never echoed: it might hold credentials or a signed query.
  if (rest.find_first_of("?#") != std::string::npos) {
    return Failure(ErrorKind::kInvalid,
                   "FORGE_S3_ENDPOINT must not have a query or fragment (the value is not shown)");
  }
  const size_t slash = rest.find('/');
  e.authority = rest.substr(0, slash);
  if (slash != std::string::npos) e.base_path = rest.substr(slash);
  if (e.authority.find('@') != std::string::npos) {
    return Failure(
        ErrorKind::kInvalid,
        "FORGE_S3_ENDPOINT must not contain credentials (the value is not shown); put the keys "
        "in FORGE_S3_ACCESS_KEY and FORGE_S3_SECRET_KEY");
  }
  if (e.authority.empty() || e.authority.front() == ':') {
    return Failure(ErrorKind::kInvalid, "FORGE_S3_ENDPOINT has no host name");
  }
  return e;
}

class S3Store : public ObjectStore {
 public:
  S3Store(S3Options options, Endpoint endpoint)
      : options_(std::move(options)), endpoint_(std::move(endpoint)), rng_(std::random_device{}()) {
    if (!options_.clock) options_.clock = [] { return std::time(nullptr); };
  }
  S3Store(const S3Store&) = delete;
  S3Store& operator=(const S3Store&) = delete;

  StatusOr<PutOutcome> PutFile(const std::string& key, const std::string& path,
                               const Progress& progress) override {
    if (Status bad = CheckKey(key); !bad.ok()) return bad;
    std::error_code ec;
    const auto status = fs::status(path, ec);
    if (ec || !fs::is_regular_file(status)) {
      return Failure(ErrorKind::kInvalid,
                     fmt::format("cannot read {}: {}", path,
                                 ec ? ec.message() : std::string("not a regular file")));
    }
    const auto size = static_cast<int64_t>(fs::file_size(path, ec));
    if (ec)
      return Failure(ErrorKind::kInvalid, fmt::format("cannot read {}: {}", path, ec.message()));
    Body body;
    body.present = true;
    body.file = path;
    body.length = size;
    return Put(key, body, progress);
  }

  StatusOr<PutOutcome> PutBytes(const std::string& key, std::string_view bytes,
                                const Progress& progress) override {
    if (Status bad = CheckKey(key); !bad.ok()) return bad;
    Body body;
    body.present = true;
    body.memory = bytes;
    body.length = static_cast<int64_t>(bytes.size());
    return Put(key, body, progress);
  }

  StatusOr<std::optional<ObjectInfo>> Head(const std::string& key) override {
    if (Status bad = CheckKey(key); !bad.ok()) return bad;
    Call head("HEAD", key);
    StatusOr<Response> r = Execute(head);
    if (!r) return r.status();
    if (Is2xx(r->status)) return std::optional<ObjectInfo>(Info(*r));
    if (r->status >= 500) return Fail(key, *r);
    // A HEAD reply has no body, hence no S3 error code: a one-byte GET tells a missing key from
    // a missing bucket, and says why access was denied.
    Call probe("GET", key);
    probe.extra_headers = {{"range", "bytes=0-0"}};
    r = Execute(probe);
    if (!r) return r.status();
    if (Is2xx(r->status)) return std::optional<ObjectInfo>(Info(*r));
    const std::string code = s3wire::ExtractXmlTag(r->body, "Code").value_or("");
    if (r->status == 416) return std::optional<ObjectInfo>(ObjectInfo{0, Etag(*r)});
    if (r->status == 404 && code != s3wire::kNoSuchBucket) return std::optional<ObjectInfo>();
    return Fail(key, *r);
  }

  StatusOr<int64_t> GetFile(const std::string& key, const std::string& path,
                            const Progress& progress) override {
    if (Status bad = CheckKey(key); !bad.ok()) return bad;
    static std::atomic<uint64_t> counter{0};
    const fs::path dest = fs::absolute(path);
    const fs::path tmp = dest.parent_path() / fmt::format(".{}.tmp-{}-{}", dest.filename().string(),
                                                          ::getpid(), counter++);
    File sink(std::fopen(tmp.c_str(), "w+b"));
    if (!sink) {
      return Failure(ErrorKind::kInvalid,
                     fmt::format("cannot create {}: {}", tmp.string(), std::strerror(errno)));
    }
    Call get("GET", key);
    get.sink = sink.get();
    if (progress) {
      get.progress = [&](int64_t, int64_t down, int64_t total) { progress(down, total); };
    }
    StatusOr<Response> r = Run(get);
    auto fail = [&](Status e) {
      sink.reset();
      ::unlink(tmp.c_str());
      return e;
    };
    if (!r) return fail(r.status());
    if (std::fflush(sink.get()) != 0 || ::fsync(::fileno(sink.get())) != 0) {
      return fail(Failure(ErrorKind::kInvalid,
                          fmt::format("cannot write {}: {}", tmp.string(), std::strerror(errno))));
    }
    const int64_t size = ::ftello(sink.get());
    sink.reset();
    if (::rename(tmp.c_str(), dest.c_str()) != 0) {
      return fail(Failure(ErrorKind::kInvalid, fmt::format("cannot rename into {}: {}",
                                                           dest.string(), std::strerror(errno))));
    }
    return size;
  }

  StatusOr<std::string> GetBytes(const std::string& key) override {
    if (Status bad = CheckKey(key); !bad.ok()) return bad;
    StatusOr<Response> r = Run(Call("GET", key));
    if (!r) return r.status();
    return std::move(r.value().body);
  }

  StatusOr<std::string> PresignGet(const std::string& key, int64_t expires_seconds,
                                   std::time_t now) override {
    if (Status bad = CheckKey(key); !bad.ok()) return bad;
    if (Status bad = CheckPresignExpiry(expires_seconds); !bad.ok()) return bad;
    sigv4::Request req;
    req.method = "GET";
    req.path = ObjectPath(key);
    req.headers = {{"host", Host()}};
    req.payload_hash = std::string(sigv4::kUnsignedPayload);
    const sigv4::Signed s = sigv4::Presign(req, options_.credentials, Scope(now), expires_seconds);
    return endpoint_.scheme + "://" + Host() + sigv4::UriEncode(req.path, true) + "?" + s.query;
  }

  std::string Describe() const override {
    return fmt::format("s3 bucket \"{}\" at {} (region {}, {}-style addressing)", options_.bucket,
                       options_.endpoint, options_.region,
                       options_.addressing == config::S3Addressing::kPath ? "path" : "virtual");
  }

 private:
  std::string Host() const {
    return options_.addressing == config::S3Addressing::kVirtual
               ? options_.bucket + "." + endpoint_.authority
               : endpoint_.authority;
  }

  std::string ObjectPath(const std::string& key) const {
    return options_.addressing == config::S3Addressing::kVirtual
               ? endpoint_.base_path + "/" + key
               : endpoint_.base_path + "/" + options_.bucket + "/" + key;
  }

  sigv4::Scope Scope(std::time_t now) const {
    return {.amz_date = sigv4::FormatAmzDate(now), .region = options_.region, .service = "s3"};
  }

  s3wire::Target Target(const std::string& key) const {
    return {.endpoint = options_.endpoint, .bucket = options_.bucket, .key = key};
  }

  // Last line of defence: whatever a server or libcurl echoed, no credential leaves the store.
  Status Redacted(const Status& e) const {
    return Reworded(e, s3wire::Redact(e.message(), {options_.credentials.secret_access_key.Reveal(),
                                                    options_.credentials.access_key_id.Reveal()}));
  }

  Status Fail(const std::string& key, const Response& r) const {
    const Status e = s3wire::ClassifyHttpError(Target(key), r.status, r.body);
    if (r.attempts <= 1) return Redacted(e);
    return Redacted(Reworded(e, e.message() + fmt::format(" after {} attempts", r.attempts)));
  }

  static std::string Etag(const Response& r) {
    auto it = r.headers.find("etag");
    if (it == r.headers.end()) return "";
    std::string etag = it->second;
    if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"') {
      etag = etag.substr(1, etag.size() - 2);
    }
    return etag;
  }

  // Size from a HEAD (Content-Length) or a ranged GET (Content-Range: bytes 0-0/SIZE).
  static ObjectInfo Info(const Response& r) {
    ObjectInfo info{0, Etag(r)};
    auto range = r.headers.find("content-range");
    if (range != r.headers.end()) {
      const size_t slash = range->second.rfind('/');
      if (slash != std::string::npos) {
        info.size = std::strtoll(range->second.c_str() + slash + 1, nullptr, 10);
      }
      return info;
    }
    auto len = r.headers.find("content-length");
    if (len != r.headers.end()) info.size = std::strtoll(len->second.c_str(), nullptr, 10);
    return info;
  }

  StatusOr<PutOutcome> Put(const std::string& key, const Body& body, const Progress& progress) {
    StatusOr<std::optional<ObjectInfo>> existing = Head(key);
    if (!existing) return existing.status();
    const int64_t size = body.length;
    if (existing.value()) {
      if (existing.value()->size != size) {
        return Failure(ErrorKind::kInvalid,
                       fmt::format("object \"{}\" already exists in {} with {} bytes, but the new "
                                   "content has {}: keys are content-addressed, so this is a "
                                   "different object under the same key",
                                   key, Describe(), existing.value()->size, size));
      }
      return PutOutcome{size, 0, true};
    }
    if (size > options_.multipart_threshold) return PutMultipart(key, body, progress);
    Call put("PUT", key);
    put.body = body;
    if (progress) put.progress = [&](int64_t up, int64_t, int64_t) { progress(up, size); };
    StatusOr<Response> r = Run(put);
    if (!r) return r.status();
    return PutOutcome{size, size, false};
  }

  StatusOr<PutOutcome> PutMultipart(const std::string& key, const Body& body,
                                    const Progress& progress) {
    const int64_t size = body.length;
    Call start("POST", key);
    start.query = {{"uploads", ""}};
    StatusOr<Response> r = Run(start);
    if (!r) return r.status();
    const std::optional<std::string> upload_id = s3wire::ExtractXmlTag(r->body, "UploadId");
    if (!upload_id || upload_id->empty()) {
      return Redacted(
          Failure(ErrorKind::kServer,
                  fmt::format("S3 server at {} started a multipart upload of \"{}\" without "
                              "an UploadId in its reply",
                              options_.endpoint, key)));
    }
    // Parts of an unfinished upload are stored (and billed) until aborted.
    auto abort = [&](Status e) {
      Call cancel("DELETE", key);
      cancel.query = {{"uploadId", *upload_id}};
      cancel.max_attempts = 1;
      Execute(cancel);
      return e;
    };
    const int64_t part_size = s3wire::ChoosePartSize(size, options_.part_size);
    std::vector<std::string> etags;
    for (int64_t offset = 0; offset < size; offset += part_size) {
      const int64_t len = std::min(part_size, size - offset);
      Call part("PUT", key);
      part.query = {{"partNumber", std::to_string(etags.size() + 1)}, {"uploadId", *upload_id}};
      part.body = body.Slice(offset, len);
      if (progress)
        part.progress = [&](int64_t up, int64_t, int64_t) { progress(offset + up, size); };
      r = Run(part);
      if (!r) return abort(r.status());
      auto etag = r->headers.find("etag");
      if (etag == r->headers.end() || etag->second.empty()) {
        return abort(Redacted(Failure(
            ErrorKind::kServer, fmt::format("S3 server at {} accepted part {} of \"{}\" without "
                                            "an ETag",
                                            options_.endpoint, etags.size() + 1, key))));
      }
      etags.push_back(etag->second);
    }
    const std::string xml = s3wire::CompleteMultipartXml(etags);
    Call complete("POST", key);
    complete.query = {{"uploadId", *upload_id}};
    complete.extra_headers = {{"content-type", "application/xml"}};
    complete.error_in_200 = true;
    complete.body.present = true;
    complete.body.memory = xml;
    complete.body.length = static_cast<int64_t>(xml.size());
    r = Run(complete);
    if (!r) return abort(r.status());
    return PutOutcome{size, size, false};
  }

  // Execute, with every non-2xx reply turned into a failed Status.
  StatusOr<Response> Run(const Call& call) {
    StatusOr<Response> r = Execute(call);
    if (!r) return r;
    if (!Is2xx(r->status)) return Fail(call.key, *r);
    return r;
  }

  // Sends `call`, retrying transport failures, timeouts, 5xx and throttling with backoff. An
  // HTTP reply (any status) is a Response; only a failure to get one is a failed Status.
  StatusOr<Response> Execute(const Call& call) {
    StatusOr<std::string> payload_hash = HashBody(call.body);
    if (!payload_hash) return payload_hash.status();
    std::lock_guard<std::mutex> lock(mu_);
    const int max_attempts =
        std::max(1, call.max_attempts > 0 ? call.max_attempts : options_.max_attempts);
    for (int attempt = 1;; ++attempt) {
      if (call.sink) {
        std::fflush(call.sink);
        if (::ftruncate(::fileno(call.sink), 0) != 0) {
          return Failure(ErrorKind::kInvalid, fmt::format("cannot truncate the download file: {}",
                                                          std::strerror(errno)));
        }
        std::rewind(call.sink);
      }
      Attempt a = PerformOnce(call, payload_hash.value());
      if (a.fault == net::Fault::kNone) {
        Response& resp = a.response;
        resp.attempts = attempt;
        if (call.error_in_200 && Is2xx(resp.status) &&
            resp.body.find("<Error>") != std::string::npos) {
          resp.status = 500;  // so it is retried and reported like the server error it is
        }
        const std::string code = s3wire::ExtractXmlTag(resp.body, "Code").value_or("");
        if (Is2xx(resp.status) || !s3wire::IsRetryableHttp(resp.status, code) ||
            attempt >= max_attempts) {
          return std::move(resp);
        }
      } else if (!net::Transient(a.fault) || attempt >= max_attempts) {
        return TransportFailure(call, a, attempt);
      }
      std::uniform_real_distribution<double> uniform(0.0, 1.0);
      std::this_thread::sleep_for(
          net::Backoff(attempt, options_.backoff_base, options_.backoff_cap, uniform(rng_)));
    }
  }

  Status TransportFailure(const Call& call, const Attempt& a, int attempts) const {
    const std::string after = attempts > 1 ? fmt::format(" (after {} attempts)", attempts) : "";
    Status e;
    switch (a.fault) {
      case net::Fault::kConnect:
      case net::Fault::kResolveHost:
      case net::Fault::kResolveProxy:
      case net::Fault::kTls:
      case net::Fault::kConnectionLost:
        e = Failure(ErrorKind::kUnreachable,
                    fmt::format("cannot reach {}: {}{}", options_.endpoint, a.error, after));
        break;
      case net::Fault::kTimeout:
        e = Failure(ErrorKind::kTimeout, fmt::format("timed out talking to {}: {}{}",
                                                     options_.endpoint, a.error, after));
        break;
      case net::Fault::kReadBody:
        e = Failure(ErrorKind::kInvalid,
                    fmt::format("cannot read the data to upload to \"{}\": {}", call.key, a.error));
        break;
      case net::Fault::kWriteBody:
        e = Failure(ErrorKind::kInvalid,
                    fmt::format("cannot write the download of \"{}\": {}", call.key, a.error));
        break;
      default:
        e = Failure(ErrorKind::kUnreachable,
                    fmt::format("request to {} failed: {}{}", options_.endpoint, a.error, after));
    }
    return Redacted(e);
  }

  static StatusOr<std::string> HashBody(const Body& body) {
    if (!body.present) return std::string(sigv4::kEmptyPayloadHash);
    if (body.file.empty()) return sigv4::Sha256Hex(body.memory);
    File f(std::fopen(body.file.c_str(), "rb"));
    if (!f || ::fseeko(f.get(), body.offset, SEEK_SET) != 0) {
      return Failure(ErrorKind::kInvalid,
                     fmt::format("cannot read {}: {}", body.file, std::strerror(errno)));
    }
    Sha256 sha;
    std::vector<char> buf(size_t{1} << 20);
    for (int64_t left = body.length; left > 0;) {
      const size_t want = std::min(buf.size(), static_cast<size_t>(left));
      const size_t got = std::fread(buf.data(), 1, want, f.get());
      if (got != want) {
        return Failure(
            ErrorKind::kInvalid,
            fmt::format("cannot read {}: it ended early or changed while uploading", body.file));
      }
      sha.Update(buf.data(), got);
      left -= static_cast<int64_t>(got);
    }
    return sha.HexDigest();
  }

  Attempt PerformOnce(const Call& call, const std::string& payload_hash) {
    Attempt a;
    net::Request n;
    File in;
    std::string_view memory;
    int64_t in_left = 0;
    if (call.body.present) {
      if (call.body.file.empty()) {
        memory = call.body.memory;
      } else {
        in.reset(std::fopen(call.body.file.c_str(), "rb"));
        if (!in || ::fseeko(in.get(), call.body.offset, SEEK_SET) != 0) {
          a.fault = net::Fault::kReadBody;
          a.error = fmt::format("{}: {}", call.body.file, std::strerror(errno));
          return a;
        }
        in_left = call.body.length;
      }
    }
    if (call.method == "PUT" || call.method == "POST") {
      n.reader_size = call.body.present ? call.body.length : 0;
      n.reader = [&](char* buf, size_t room) -> std::optional<size_t> {
        if (in) {
          const size_t want = std::min(room, static_cast<size_t>(in_left));
          const size_t got = want ? std::fread(buf, 1, want, in.get()) : 0;
          if (got < want && std::ferror(in.get())) return std::nullopt;
          in_left -= static_cast<int64_t>(got);
          return got;
        }
        const size_t got = std::min(room, memory.size());
        std::memcpy(buf, memory.data(), got);
        memory.remove_prefix(got);
        return got;
      };
    }
    int sink_errno = 0;
    if (call.sink) {
      n.on_data = [&](std::string_view bytes) {
        if (std::fwrite(bytes.data(), 1, bytes.size(), call.sink) == bytes.size()) return true;
        sink_errno = errno;
        return false;
      };
    }
    if (call.progress) {
      n.on_progress = [&](const net::Progress& p) {
        call.progress(p.sent, p.received, p.receive_total);
      };
    }

    // One reading of the clock: the x-amz-date header and the credential scope must agree.
    const std::time_t now = options_.clock();
    const std::string amz_date = sigv4::FormatAmzDate(now);
    sigv4::Request req;
    req.method = call.method;
    req.path = ObjectPath(call.key);
    req.query = call.query;
    req.headers = {
        {"host", Host()}, {"x-amz-content-sha256", payload_hash}, {"x-amz-date", amz_date}};
    req.headers.insert(req.headers.end(), call.extra_headers.begin(), call.extra_headers.end());
    req.payload_hash = payload_hash;
    const sigv4::Signed s = sigv4::SignHeaders(req, options_.credentials, Scope(now));
    for (const auto& [name, value] : req.headers)
      n.headers.push_back(name + ": " + value);
    n.headers.push_back("authorization: " + s.authorization);
    n.method = call.method;
    n.url = endpoint_.scheme + "://" + Host() + sigv4::UriEncode(req.path, true);
    if (!req.query.empty()) n.url += "?" + sigv4::CanonicalQuery(req.query);
    n.user_agent = "starforge";
    n.connect_timeout = options_.connect_timeout;
    n.low_speed_bytes = options_.low_speed_bytes;
    n.low_speed_time = options_.low_speed_time;
    n.max_error_body = kMaxErrorBody;
    n.tls.ca_file = options_.ca_file;

    net::Response r;
    transport_.Perform(n, &r);
    if (r.stopped && call.sink) {  // only a failed write stops a download
      a.fault = net::Fault::kWriteBody;
      a.error = std::strerror(sink_errno);
      return a;
    }
    if (r.fault != net::Fault::kNone) {
      a.fault = r.fault;
      a.error = std::move(r.error);
      return a;
    }
    a.response.status = r.status;
    a.response.headers = std::move(r.headers);
    a.response.body = std::move(r.body);
    return a;
  }

  S3Options options_;
  Endpoint endpoint_;
  net::Transport transport_;
  std::mutex mu_;  // one request at a time; guards rng_
  std::mt19937_64 rng_;
};

}  // namespace

S3Options S3OptionsFromConfig(const config::Config& cfg) {
  S3Options o;
  o.endpoint = cfg.s3_endpoint;
  o.bucket = cfg.s3_bucket;
  o.credentials.access_key_id = cfg.s3_access_key;
  o.credentials.secret_access_key = cfg.s3_secret_key;
  o.region = cfg.s3_region.empty() ? "us-east-1" : cfg.s3_region;
  o.addressing = cfg.s3_addressing;
  o.ca_file = cfg.s3_ca_file;
  return o;
}

StatusOr<std::unique_ptr<ObjectStore>> OpenS3(S3Options options) {
  StatusOr<Endpoint> endpoint = ParseEndpoint(options.endpoint);
  if (!endpoint) return endpoint.status();
  while (!options.endpoint.empty() && options.endpoint.back() == '/') {
    options.endpoint.pop_back();
  }
  if (options.bucket.empty()) {
    return Failure(ErrorKind::kInvalid, "FORGE_S3_BUCKET must be set with FORGE_S3_ENDPOINT");
  }
  if (options.credentials.access_key_id.empty() || options.credentials.secret_access_key.empty()) {
    return Failure(
        ErrorKind::kInvalid,
        "FORGE_S3_ACCESS_KEY and FORGE_S3_SECRET_KEY must be set with FORGE_S3_ENDPOINT");
  }
  if (options.region.empty()) options.region = "us-east-1";
  if (options.multipart_threshold < 1 || options.part_size < 1) {
    return Failure(ErrorKind::kInvalid, "the multipart threshold and part size must be positive");
  }
  return std::unique_ptr<ObjectStore>(
      std::make_unique<S3Store>(std::move(options), std::move(*endpoint)));
}

}  // namespace starforge::objstore
