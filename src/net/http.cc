// The libcurl transport: one easy handle per exchange at a time, taken from a pool of idle ones
// that keep their connections alive; DNS answers and TLS sessions shared through a share handle.
//
// Connections are deliberately NOT put in the share handle (CURL_LOCK_DATA_CONNECT): libcurl
// documents that sharing connections between concurrent threads is not supported, and its
// KNOWN_BUGS lists "A shared connection cache is not thread-safe" (curl/curl#4915, still so in
// the libcurl 7.88 of Debian 12): two threads can end up using or freeing the same connection.
// That is how a kubesim with many controller threads on one client died in `free` at 1,000
// RayJobs (bench/kuberay_fleet_scale.sh). An easy handle reused by one thread at a time keeps its
// own connection cache across exchanges (curl_easy_reset keeps live connections), which is the
// reuse libcurl supports.
#include "starforge/net/http.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <vector>

#include "starforge/common/status.h"

namespace starforge::net {

struct Transport::Shared {
  CURLSH* share = nullptr;
  std::array<std::mutex, CURL_LOCK_DATA_LAST> locks;
  // Easy handles between exchanges (reset, each holding its kept-alive connections). At most
  // kMaxIdle are kept: a burst of concurrent exchanges leaves no more idle connections than that.
  static constexpr size_t kMaxIdle = 16;
  std::mutex idle_mu;
  std::vector<CURL*> idle;
};

namespace {

using Clock = std::chrono::steady_clock;

void LockShare(CURL*, curl_lock_data data, curl_lock_access, void* user) {
  static_cast<std::array<std::mutex, CURL_LOCK_DATA_LAST>*>(user)->at(data).lock();
}
void UnlockShare(CURL*, curl_lock_data data, void* user) {
  static_cast<std::array<std::mutex, CURL_LOCK_DATA_LAST>*>(user)->at(data).unlock();
}

template <typename T>
using CurlPtr = std::unique_ptr<T, void (*)(T*)>;

// What the callbacks of one exchange share.
struct Exchange {
  CURL* curl = nullptr;
  const Request* request = nullptr;
  Response* response = nullptr;
  bool read_failed = false;
  bool idle = false;
  int64_t sent = -1;
  Clock::time_point last_activity = Clock::now();
  std::exception_ptr error;  // thrown by a caller's callback; rethrown after libcurl returns
};

bool Is2xx(long status) {
  return status >= 200 && status < 300;
}

std::string_view Trim(std::string_view s) {
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  while (!s.empty() && space(s.front()))
    s.remove_prefix(1);
  while (!s.empty() && space(s.back()))
    s.remove_suffix(1);
  return s;
}

size_t OnHeader(char* data, size_t size, size_t n, void* user) {
  auto* x = static_cast<Exchange*>(user);
  x->last_activity = Clock::now();
  std::string_view line(data, size * n);
  if (line.starts_with("HTTP/")) {
    x->response->headers.clear();  // a new reply (e.g. after 100 Continue)
    return size * n;
  }
  const size_t colon = line.find(':');
  if (colon != std::string_view::npos) {
    std::string name(line.substr(0, colon));
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    x->response->headers[name] = std::string(Trim(line.substr(colon + 1)));
  }
  return size * n;
}

size_t OnBody(char* data, size_t size, size_t n, void* user) {
  auto* x = static_cast<Exchange*>(user);
  x->last_activity = Clock::now();
  const size_t bytes = size * n;
  long status = 0;
  curl_easy_getinfo(x->curl, CURLINFO_RESPONSE_CODE, &status);
  x->response->status = static_cast<int>(status);
  if (!Is2xx(status)) {
    // Error bodies are small documents (a Kubernetes Status, an S3 <Error>); a proxy's page is cut.
    if (x->response->body.size() < x->request->max_error_body)
      x->response->body.append(data, bytes);
    return bytes;
  }
  if (!x->request->on_data) {
    x->response->body.append(data, bytes);
    return bytes;
  }
  try {
    if (x->request->on_data(std::string_view(data, bytes))) return bytes;
    x->response->stopped = true;
  } catch (...) {
    x->error = std::current_exception();
  }
  return 0;  // ends the exchange with CURLE_WRITE_ERROR
}

size_t OnRead(char* buf, size_t size, size_t n, void* user) {
  auto* x = static_cast<Exchange*>(user);
  try {
    if (std::optional<size_t> got = x->request->reader(buf, size * n)) return *got;
  } catch (...) {
    x->error = std::current_exception();
  }
  x->read_failed = true;
  return CURL_READFUNC_ABORT;
}

int OnProgress(void* user, curl_off_t down_total, curl_off_t down, curl_off_t up_total,
               curl_off_t up) {
  auto* x = static_cast<Exchange*>(user);
  const Request& r = *x->request;
  if (r.stop != nullptr && r.stop->load()) {
    x->response->stopped = true;
    return 1;
  }
  if (up != x->sent) {  // uploading counts as activity: a slow link may take long to send
    x->sent = up;
    x->last_activity = Clock::now();
  }
  if (r.idle_timeout.count() > 0 && Clock::now() - x->last_activity > r.idle_timeout) {
    x->idle = true;
    return 1;
  }
  if (r.on_progress) {
    try {
      r.on_progress(Progress{up, up_total, down, down_total});
    } catch (...) {
      x->error = std::current_exception();
      return 1;
    }
  }
  return 0;
}

Fault FaultOf(CURLcode code, const Exchange& x) {
  if (x.read_failed) return Fault::kReadBody;
  if (x.idle) return Fault::kIdle;
  static const std::pair<CURLcode, Fault> kFaults[] = {
      {CURLE_OK, Fault::kNone},
      {CURLE_COULDNT_CONNECT, Fault::kConnect},
      {CURLE_COULDNT_RESOLVE_HOST, Fault::kResolveHost},
      {CURLE_COULDNT_RESOLVE_PROXY, Fault::kResolveProxy},
      {CURLE_SSL_CONNECT_ERROR, Fault::kTls},
      {CURLE_PEER_FAILED_VERIFICATION, Fault::kTls},
      {CURLE_SEND_ERROR, Fault::kConnectionLost},
      {CURLE_RECV_ERROR, Fault::kConnectionLost},
      {CURLE_GOT_NOTHING, Fault::kConnectionLost},
      {CURLE_PARTIAL_FILE, Fault::kInterrupted},
      {CURLE_HTTP2, Fault::kInterrupted},
      {CURLE_HTTP2_STREAM, Fault::kInterrupted},
      {CURLE_OPERATION_TIMEDOUT, Fault::kTimeout},
      {CURLE_READ_ERROR, Fault::kReadBody},
      {CURLE_ABORTED_BY_CALLBACK, Fault::kReadBody},  // a read callback's CURL_READFUNC_ABORT
      {CURLE_WRITE_ERROR, Fault::kWriteBody},
      {CURLE_UNSUPPORTED_PROTOCOL, Fault::kUnsupportedProtocol},
  };
  for (const auto& [c, fault] : kFaults) {
    if (c == code) return fault;
  }
  return Fault::kOther;
}

curl_blob Blob(std::string_view pem) {
  return curl_blob{const_cast<char*>(pem.data()), pem.size(), CURL_BLOB_NOCOPY};
}

// A client certificate or key: from its file, else from memory.
void SetClientPem(CURL* c, const std::string& file, std::string_view pem, curl_blob* blob,
                  CURLoption file_option, CURLoption blob_option, CURLoption type_option) {
  if (!file.empty()) {
    curl_easy_setopt(c, file_option, file.c_str());
  } else if (!pem.empty()) {
    *blob = Blob(pem);
    curl_easy_setopt(c, blob_option, blob);
    curl_easy_setopt(c, type_option, "PEM");
  }
}

void SetTls(CURL* c, const TlsOptions& tls, std::array<curl_blob, 3>* blobs) {
  if (!tls.ca_file.empty()) curl_easy_setopt(c, CURLOPT_CAINFO, tls.ca_file.c_str());
  if (!tls.ca_pem.empty()) {
    (*blobs)[0] = Blob(tls.ca_pem);
    curl_easy_setopt(c, CURLOPT_CAINFO_BLOB, &(*blobs)[0]);
  }
  if (tls.insecure_skip_verify) {
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  SetClientPem(c, tls.client_cert_file, tls.client_cert_pem, &(*blobs)[1], CURLOPT_SSLCERT,
               CURLOPT_SSLCERT_BLOB, CURLOPT_SSLCERTTYPE);
  SetClientPem(c, tls.client_key_file, tls.client_key_pem, &(*blobs)[2], CURLOPT_SSLKEY,
               CURLOPT_SSLKEY_BLOB, CURLOPT_SSLKEYTYPE);
}

// A streamed form part's bytes (FormPart::reader).
size_t OnPartRead(char* buf, size_t size, size_t n, void* user) {
  const auto* p = static_cast<const FormPart*>(user);
  try {
    if (std::optional<size_t> got = p->reader(buf, size * n)) return *got;
  } catch (...) {  // never across libcurl's C frames: the transfer ends with a read error
  }
  return CURL_READFUNC_ABORT;
}

// A file part's file, opened before the exchange starts. libcurl's own file parts
// (curl_mime_filedata) open the file only when the body is first read, and one gone by then (a
// concurrent `forge submit` from the same directory removes the capsule it superseded) makes
// libcurl's form reader return its internal error code, which libcurl reports as "read function
// returned funny value". Opened here, the file is sent whole even if removed meanwhile, and one
// that cannot be opened is an error naming it, before anything is sent.
class OpenFile {
 public:
  OpenFile(int fd, curl_off_t size) : fd_(fd), size_(size) {}
  OpenFile(const OpenFile&) = delete;
  OpenFile& operator=(const OpenFile&) = delete;
  ~OpenFile() { ::close(fd_); }
  curl_off_t size() const { return size_; }

  static size_t Read(char* buf, size_t size, size_t n, void* user) {
    auto* f = static_cast<OpenFile*>(user);
    while (true) {
      const ssize_t got = ::pread(f->fd_, buf, size * n, f->offset_);
      if (got >= 0) {
        f->offset_ += got;
        return static_cast<size_t>(got);
      }
      if (errno != EINTR) return CURL_READFUNC_ABORT;
    }
  }
  // libcurl rewinds the body when it sends the request again (e.g. on a reused connection that
  // turned out closed).
  static int Seek(void* user, curl_off_t offset, int origin) {
    auto* f = static_cast<OpenFile*>(user);
    if (origin != SEEK_SET || offset < 0 || offset > f->size_) return CURL_SEEKFUNC_CANTSEEK;
    f->offset_ = offset;
    return CURL_SEEKFUNC_OK;
  }

 private:
  int fd_;
  curl_off_t size_;
  curl_off_t offset_ = 0;
};

// Opens `path` into `*files`, or says why not, naming it (and `what` it is).
Status OpenOne(const std::filesystem::path& path, const std::string& what,
               std::deque<OpenFile>* files) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st {};
  if (fd < 0 || ::fstat(fd, &st) != 0) {
    Status why = Status::FailedPrecondition("cannot read " + path.string() + " (" + what +
                                            "): " + std::strerror(errno));
    if (fd >= 0) ::close(fd);
    return why;
  }
  files->emplace_back(fd, static_cast<curl_off_t>(st.st_size));
  return Status::Ok();
}

// Opens every file part of `parts` into `*files`, or says which one cannot be.
Status OpenFiles(const std::vector<FormPart>& parts, std::deque<OpenFile>* files) {
  for (const FormPart& p : parts) {
    if (p.reader || p.file.empty()) continue;
    if (Status opened = OpenOne(p.file, "form part \"" + p.name + "\"", files); !opened.ok())
      return opened;
  }
  return Status::Ok();
}

// The form's parts as a libcurl mime structure bound to `c`; file parts read from `files`
// (OpenFiles, in the same order).
CurlPtr<curl_mime> Form(CURL* c, const std::vector<FormPart>& parts, std::deque<OpenFile>* files) {
  CurlPtr<curl_mime> mime(curl_mime_init(c), &curl_mime_free);
  auto file = files->begin();
  for (const FormPart& p : parts) {
    curl_mimepart* part = curl_mime_addpart(mime.get());
    curl_mime_name(part, p.name.c_str());
    if (p.reader) {
      curl_mime_data_cb(part, -1, &OnPartRead, nullptr, nullptr,
                        const_cast<void*>(static_cast<const void*>(&p)));
    } else if (!p.file.empty()) {
      OpenFile& f = *file++;
      curl_mime_data_cb(part, f.size(), &OpenFile::Read, &OpenFile::Seek, nullptr, &f);
    } else {
      curl_mime_data(part, p.data.data(), p.data.size());
    }
    if (!p.filename.empty()) curl_mime_filename(part, p.filename.c_str());
    if (!p.content_type.empty()) curl_mime_type(part, p.content_type.c_str());
  }
  return mime;
}

// The method and the body: libcurl has one option per way of sending one.
// `body_file`, when set, is the request's body_file opened (OpenFiles' way).
void SetMethodAndBody(CURL* c, const Request& r, Exchange* x, curl_mime* mime,
                      OpenFile* body_file) {
  const bool custom = r.method != "GET" && r.method != "POST";
  if (r.method == "HEAD") {
    curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  } else if (r.reader || body_file != nullptr) {
    if (body_file != nullptr) {
      curl_easy_setopt(c, CURLOPT_READFUNCTION, &OpenFile::Read);
      curl_easy_setopt(c, CURLOPT_READDATA, body_file);
      curl_easy_setopt(c, CURLOPT_SEEKFUNCTION, &OpenFile::Seek);
      curl_easy_setopt(c, CURLOPT_SEEKDATA, body_file);
    } else {
      curl_easy_setopt(c, CURLOPT_READFUNCTION, &OnRead);
      curl_easy_setopt(c, CURLOPT_READDATA, x);
    }
    const auto size =
        static_cast<curl_off_t>(body_file != nullptr ? body_file->size() : r.reader_size);
    if (r.method == "POST") {
      curl_easy_setopt(c, CURLOPT_POST, 1L);
      curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, size);
    } else {
      curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
      curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, size);
      if (r.method != "PUT") curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, r.method.c_str());
    }
  } else if (mime != nullptr) {
    curl_easy_setopt(c, CURLOPT_MIMEPOST, mime);
    if (custom) curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, r.method.c_str());
  } else if (r.body) {
    if (r.method != "POST") curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, r.method.c_str());
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(r.body->size()));
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, r.body->data());
  } else if (r.method == "GET") {
    curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
  } else {
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, r.method.c_str());
  }
}

}  // namespace

Transport::Transport() : shared_(std::make_unique<Shared>()) {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  shared_->share = curl_share_init();
  curl_share_setopt(shared_->share, CURLSHOPT_LOCKFUNC, &LockShare);
  curl_share_setopt(shared_->share, CURLSHOPT_UNLOCKFUNC, &UnlockShare);
  curl_share_setopt(shared_->share, CURLSHOPT_USERDATA, &shared_->locks);
  curl_share_setopt(shared_->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
  curl_share_setopt(shared_->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
}

Transport::~Transport() {
  for (CURL* c : shared_->idle)
    curl_easy_cleanup(c);  // before the share handle they use
  if (shared_->share != nullptr) curl_share_cleanup(shared_->share);
}

void Transport::Perform(const Request& r, Response* response) {
  *response = Response{};
  CURL* taken = nullptr;
  {
    std::lock_guard lock(shared_->idle_mu);
    if (!shared_->idle.empty()) {
      taken = shared_->idle.back();  // the most recently used: its connection is the freshest
      shared_->idle.pop_back();
    }
  }
  if (taken == nullptr) taken = curl_easy_init();
  // Back to the pool once the exchange is over (this guard is destroyed last, after the header
  // list and form it points to): reset to no options, its connections kept.
  auto give_back = [shared = shared_.get()](CURL* c) {
    curl_easy_reset(c);
    {
      std::lock_guard lock(shared->idle_mu);
      if (shared->idle.size() < Shared::kMaxIdle) {
        shared->idle.push_back(c);
        return;
      }
    }
    curl_easy_cleanup(c);
  };
  std::unique_ptr<CURL, decltype(give_back)> curl(taken, give_back);
  if (!curl) {
    response->fault = Fault::kOther;
    response->error = "cannot start an HTTP request (libcurl failed to initialise)";
    response->nothing_sent = true;
    return;
  }
  CURL* c = curl.get();
  Exchange x;
  x.curl = c;
  x.request = &r;
  x.response = response;

  CurlPtr<curl_slist> headers(nullptr, &curl_slist_free_all);
  for (const std::string& h : r.headers)
    headers.reset(curl_slist_append(headers.release(), h.c_str()));
  std::array<char, CURL_ERROR_SIZE> errbuf{};
  std::array<curl_blob, 3> blobs{};

  curl_easy_setopt(c, CURLOPT_URL, r.url.c_str());
  curl_easy_setopt(c, CURLOPT_SHARE, shared_->share);
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf.data());
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
  if (!r.user_agent.empty()) curl_easy_setopt(c, CURLOPT_USERAGENT, r.user_agent.c_str());
  if (r.connect_timeout.count() > 0)
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(r.connect_timeout.count()));
  if (r.timeout.count() > 0)
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(r.timeout.count()));
  if (r.low_speed_bytes > 0 && r.low_speed_time.count() > 0) {
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, static_cast<long>(r.low_speed_bytes));
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, static_cast<long>(r.low_speed_time.count()));
  }
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, &OnHeader);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &x);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, &OnBody);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &x);
  curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, &OnProgress);
  curl_easy_setopt(c, CURLOPT_XFERINFODATA, &x);
  SetTls(c, r.tls, &blobs);
  std::deque<OpenFile> files;  // outlives `mime`, which reads them
  CurlPtr<curl_mime> mime(nullptr, &curl_mime_free);
  Status opened;
  if (r.form != nullptr) opened = OpenFiles(*r.form, &files);
  if (!r.body_file.empty() && opened.ok())
    opened = OpenOne(r.body_file, "the request's body", &files);
  if (!opened.ok()) {
    response->fault = Fault::kReadBody;
    response->error = opened.message();
    response->nothing_sent = true;
    return;
  }
  if (r.form != nullptr) mime = Form(c, *r.form, &files);
  if (r.upload_buffer_bytes > 0)
    curl_easy_setopt(c, CURLOPT_UPLOAD_BUFFERSIZE, static_cast<long>(r.upload_buffer_bytes));
  SetMethodAndBody(c, r, &x, mime.get(), r.body_file.empty() ? nullptr : &files.back());

  x.last_activity = Clock::now();
  const CURLcode code = curl_easy_perform(c);
  if (x.error) std::rethrow_exception(x.error);
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  response->status = static_cast<int>(status);
  if (code == CURLE_OK || response->stopped) return;
  response->fault = FaultOf(code, x);
  response->error = errbuf[0] != '\0' ? errbuf.data() : curl_easy_strerror(code);
  curl_easy_getinfo(c, CURLINFO_OS_ERRNO, &response->os_errno);
  // CURLINFO_REQUEST_SIZE counts the request bytes issued: zero means the server never saw any.
  long sent = 0;
  curl_easy_getinfo(c, CURLINFO_REQUEST_SIZE, &sent);
  response->nothing_sent = sent == 0;
}

bool Transient(Fault fault) {
  return fault == Fault::kConnect || fault == Fault::kResolveHost ||
         fault == Fault::kConnectionLost || fault == Fault::kInterrupted ||
         fault == Fault::kTimeout;
}

std::chrono::milliseconds Backoff(int retry, std::chrono::milliseconds base,
                                  std::chrono::milliseconds cap, double uniform01) {
  const int shift = std::clamp(retry - 1, 0, 30);
  const double full = std::min(static_cast<double>(cap.count()),
                               static_cast<double>(base.count()) * std::ldexp(1.0, shift));
  const double u = std::clamp(uniform01, 0.0, 1.0);
  return std::chrono::milliseconds(static_cast<int64_t>(full / 2 + u * full / 2));
}

}  // namespace starforge::net
