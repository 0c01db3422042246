#include "starforge/api/front.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include <spdlog/spdlog.h>

#include "starforge/common/api_errors.h"

namespace starforge::api {

namespace {

using Clock = std::chrono::steady_clock;

// A request head longer than this is handed to httplib as it is (it answers 414/431/400).
constexpr size_t kMaxHead = 16 << 10;
constexpr size_t kReadChunk = 16 << 10;
// Connections refused with an answer still take a descriptor until they are closed; past
// max_connections + this many, the front stops accepting (the kernel's backlog holds the rest:
// a wait, not a reset).
constexpr int kRefusalSlack = 256;
// A body gets at least this long, then min_body_bytes_per_s for each byte it declares.
constexpr auto kBodyGrace = std::chrono::seconds(30);
// A chunked body (no declared length) gets this long in all.
constexpr auto kChunkedBodyBudget = std::chrono::minutes(10);
// How long a refused connection is kept to let the client read its answer before the close.
constexpr auto kRefusalLinger = std::chrono::seconds(2);
constexpr auto kTick = std::chrono::milliseconds(100);

// Set on a worker thread by the post-routing handler, read after httplib wrote the answer.
thread_local bool tl_close_after = false;
thread_local bool tl_streaming = false;

std::string CannedAnswer(int status, const char* reason, const char* retry_after,
                         const std::string& message, const char* error) {
  const std::string body =
      std::string("{\"error\":\"") + error + "\",\"message\":\"" + message + "\"}\n";
  std::string out = "HTTP/1.1 " + std::to_string(status) + " " + reason + "\r\n";
  if (retry_after) out += std::string("Retry-After: ") + retry_after + "\r\n";
  out += "Content-Type: application/json\r\nConnection: close\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
  return out;
}

std::string PeerAddress(const sockaddr_storage& ss, int* port) {
  char host[INET6_ADDRSTRLEN] = "";
  if (ss.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
    ::inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
    *port = ntohs(a->sin_port);
  } else if (ss.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    ::inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
    *port = ntohs(a->sin6_port);
  }
  return host;
}

// Waits until fd is ready for `events` or the time is up; false on timeout or error.
bool WaitFd(int fd, short events, std::chrono::milliseconds timeout) {
  pollfd p{fd, events, 0};
  for (;;) {
    const int ms = static_cast<int>(std::max<int64_t>(0, timeout.count()));
    const auto start = Clock::now();
    const int r = ::poll(&p, 1, ms);
    if (r > 0) return (p.revents & (events | POLLHUP | POLLERR)) != 0;
    if (r == 0) return false;
    if (errno != EINTR) return false;
    timeout -= std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
  }
}

struct Conn;

// Who counts connections: told when one closes.
class ConnCounter {
 public:
  virtual void Forget(const Conn& c) = 0;

 protected:
  ~ConnCounter() = default;
};

// One client connection. Whoever drops the last reference closes it (and uncounts it).
struct Conn {
  enum class State { kHead, kRefusing, kServing };
  enum class Over { kNone, kServer, kClient };  // a cap this connection is over
  ConnCounter* owner = nullptr;
  Over over = Over::kNone;
  int fd = -1;
  std::string peer;
  int peer_port = 0;
  std::string buf;     // bytes read and not yet consumed by httplib
  size_t pos = 0;      // consumed prefix of buf
  size_t scanned = 0;  // where the search for the end of the head resumes
  Clock::time_point deadline;
  int requests = 0;
  State state = State::kHead;
  ~Conn() {
    if (fd >= 0) ::close(fd);
    if (owner) owner->Forget(*this);
  }

  std::string_view Pending() const { return std::string_view(buf).substr(pos); }
  void Compact() {
    if (pos == 0) return;
    buf.erase(0, pos);
    scanned = 0;  // the next head is looked for from its start
    pos = 0;
  }
  // A complete request head is buffered (or as much of one as the front reads).
  bool HeadReady() {
    const std::string_view v(buf);
    const size_t from = std::max(pos, scanned >= 3 ? scanned - 3 : 0);
    scanned = buf.size();
    if (v.find("\r\n\r\n", from) != std::string_view::npos) return true;
    if (v.find("\n\n", from) != std::string_view::npos) return true;
    return buf.size() - pos >= kMaxHead;
  }
  // Health checks go first: they must answer while every worker is busy.
  bool Urgent() const {
    const std::string_view v = Pending();
    return v.starts_with("GET /healthz ") || v.starts_with("GET /readyz ");
  }
};

// httplib's view of a connection: reads come from the connection's buffer first, then from the
// socket with a deadline; writes wait at most write_timeout for room.
class ConnStream : public httplib::Stream {
 public:
  ConnStream(Conn& c, const FrontOptions& o, Clock::time_point read_deadline)
      : c_(c), o_(o), deadline_(read_deadline) {}

  bool is_readable() const override {
    return c_.pos < c_.buf.size() || WaitFd(c_.fd, POLLIN, ReadWait());
  }
  bool is_writable() const override {
    // A client that went away: its end is closed (a follow stream ends at once).
    char b;
    const ssize_t r = ::recv(c_.fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (r == 0) return false;
    return WaitFd(c_.fd, POLLOUT, o_.write_timeout);
  }
  ssize_t read(char* ptr, size_t size) override {
    if (c_.pos >= c_.buf.size()) {
      c_.buf.clear();
      c_.pos = c_.scanned = 0;
      if (size >= kReadChunk) {  // straight to the caller
        if (!WaitFd(c_.fd, POLLIN, ReadWait())) return -1;
        return Recv(ptr, size, 0);
      }
      // Bytes that have arrived already need no poll() first (a body streaming in usually has):
      // a 600 MiB upload costs 38 000 recv()s, not as many poll()s besides. (A bigger read-ahead
      // would cost its zero-filling by resize() at every refill.)
      c_.buf.resize(kReadChunk);
      ssize_t r = Recv(c_.buf.data(), kReadChunk, MSG_DONTWAIT);
      if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        if (!WaitFd(c_.fd, POLLIN, ReadWait())) {
          c_.buf.clear();
          return -1;
        }
        r = Recv(c_.buf.data(), kReadChunk, 0);
      }
      c_.buf.resize(r > 0 ? static_cast<size_t>(r) : 0);
      if (r <= 0) return r;
    }
    const size_t n = std::min(size, c_.buf.size() - c_.pos);
    std::memcpy(ptr, c_.buf.data() + c_.pos, n);
    c_.pos += n;
    return static_cast<ssize_t>(n);
  }
  ssize_t write(const char* ptr, size_t size) override {
    size_t done = 0;
    while (done < size) {
      const ssize_t w = ::send(c_.fd, ptr + done, size - done, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (w > 0) {
        done += static_cast<size_t>(w);
      } else if (w < 0 && errno == EINTR) {
        continue;
      } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        if (!WaitFd(c_.fd, POLLOUT, o_.write_timeout)) return -1;
      } else {
        return -1;
      }
    }
    return static_cast<ssize_t>(size);
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = c_.peer;
    port = c_.peer_port;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    port = 0;
    ip.clear();
    if (::getsockname(c_.fd, reinterpret_cast<sockaddr*>(&ss), &len) == 0)
      ip = PeerAddress(ss, &port);
  }
  socket_t socket() const override { return c_.fd; }

 private:
  std::chrono::milliseconds ReadWait() const {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now());
    return std::max(std::chrono::milliseconds(0), std::min(left, o_.read_timeout));
  }
  ssize_t Recv(char* p, size_t n, int flags) {
    for (;;) {
      const ssize_t r = ::recv(c_.fd, p, n, flags);
      if (r < 0 && errno == EINTR) continue;
      return r;
    }
  }

  Conn& c_;
  const FrontOptions& o_;
  Clock::time_point deadline_;
};

// Threads that serve connections with a complete request head. At most max_workers serve
// ordinary requests at once (the rest wait in the queue, holding no thread); a thread that
// turns to streaming an answer leaves that count, and health checks may always take a thread.
class Workers {
 public:
  struct Task {
    std::function<void()> fn;
    bool urgent = false;
  };

  explicit Workers(size_t max_busy) : max_busy_(max_busy) {}
  ~Workers() { Shutdown(); }

  void Push(std::function<void()> fn, bool urgent) {
    std::lock_guard lock(mu_);
    if (stop_) return;
    if (urgent)
      queue_.push_front({std::move(fn), true});
    else
      queue_.push_back({std::move(fn), false});
    if (idle_ > 0 && CanTake())
      cv_.notify_one();
    else if (CanTake())
      threads_.emplace_back([this] { Work(); });
  }

  // The calling worker streams from now on: it no longer counts against max_busy.
  void LeaveCount() {
    std::lock_guard lock(mu_);
    if (tl_streaming) return;
    tl_streaming = true;
    --busy_;
    ++streams_;
    if (CanTake()) {
      if (idle_ > 0)
        cv_.notify_one();
      else
        threads_.emplace_back([this] { Work(); });
    }
  }

  void Shutdown() {
    std::deque<Task> dropped;
    {
      std::lock_guard lock(mu_);
      if (stop_) return;
      stop_ = true;
      dropped.swap(queue_);
    }
    dropped.clear();  // their connections close
    cv_.notify_all();
    for (std::thread& t : threads_)
      t.join();
    threads_.clear();
  }

  int64_t threads() const {
    std::lock_guard lock(mu_);
    return static_cast<int64_t>(threads_.size());
  }
  int64_t streams() const {
    std::lock_guard lock(mu_);
    return static_cast<int64_t>(streams_);
  }

 private:
  bool CanTake() const { return !queue_.empty() && (busy_ < max_busy_ || queue_.front().urgent); }

  void Work() {
    std::unique_lock lock(mu_);
    for (;;) {
      ++idle_;
      cv_.wait(lock, [this] { return stop_ || CanTake(); });
      --idle_;
      if (stop_) return;
      Task t = std::move(queue_.front());
      queue_.pop_front();
      ++busy_;
      lock.unlock();
      tl_streaming = false;
      t.fn();
      t.fn = nullptr;  // the connection goes now, not under the lock
      lock.lock();
      if (tl_streaming)
        --streams_;
      else
        --busy_;
      tl_streaming = false;
      if (CanTake()) cv_.notify_one();
    }
  }

  const size_t max_busy_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> queue_;
  std::vector<std::thread> threads_;
  size_t idle_ = 0;
  size_t busy_ = 0;
  size_t streams_ = 0;
  bool stop_ = false;
};

}  // namespace

struct Front::Impl final : ConnCounter {
  Front* front;
  FrontOptions o;
  int listen_fd = -1;
  int epoll_fd = -1;
  int wake_fd = -1;
  int port = 0;
  std::thread loop;
  std::atomic<bool> stopping{false};
  Workers workers;

  std::mutex count_mu;
  std::unordered_map<std::string, int> per_client;
  std::atomic<int64_t> open{0};
  std::atomic<int64_t> parked_count{0};
  std::atomic<int64_t> refused_busy{0};
  std::atomic<int64_t> refused_client{0};
  std::atomic<int64_t> head_timeouts{0};

  std::mutex back_mu;
  std::vector<std::shared_ptr<Conn>> back;  // served connections to park again

  // Owned by the loop thread only.
  std::unordered_map<int, std::shared_ptr<Conn>> parked;
  bool accepting = true;

  Impl(Front* f, FrontOptions opts)
      : front(f), o(opts), workers(static_cast<size_t>(std::max(1, opts.max_workers))) {}

  void Forget(const Conn& c) override {
    {
      std::lock_guard lock(count_mu);
      auto it = per_client.find(c.peer);
      if (it != per_client.end() && --it->second <= 0) per_client.erase(it);
    }
    if (--open == o.max_connections + kRefusalSlack - 1) Wake();
  }

  void Wake() const {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t w = ::write(wake_fd, &one, sizeof one);
  }

  void Run() {
    std::vector<epoll_event> events(256);
    auto next_tick = Clock::now() + kTick;
    while (!stopping) {
      const int n = ::epoll_wait(epoll_fd, events.data(), static_cast<int>(events.size()),
                                 static_cast<int>(kTick.count()));
      for (int i = 0; i < n; ++i) {
        const int fd = events[static_cast<size_t>(i)].data.fd;
        if (fd == listen_fd) {
          Accept();
        } else if (fd == wake_fd) {
          uint64_t v;
          [[maybe_unused]] ssize_t r = ::read(wake_fd, &v, sizeof v);
          TakeBack();
        } else {
          Readable(fd);
        }
      }
      if (!accepting && open < o.max_connections + kRefusalSlack) SetAccepting(true);
      if (Clock::now() >= next_tick) {
        next_tick = Clock::now() + kTick;
        Expire();
      }
    }
    for (auto& [fd, c] : parked)
      ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, fd, nullptr);
    parked.clear();
    parked_count = 0;
    std::lock_guard lock(back_mu);
    back.clear();
  }

  void SetAccepting(bool on) {
    epoll_event ev{};
    ev.events = on ? static_cast<uint32_t>(EPOLLIN) : 0U;
    ev.data.fd = listen_fd;
    ::epoll_ctl(epoll_fd, EPOLL_CTL_MOD, listen_fd, &ev);
    accepting = on;
  }

  void Park(const std::shared_ptr<Conn>& c) {
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.fd = c->fd;
    if (::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, c->fd, &ev) != 0) return;  // dropped: closes
    parked[c->fd] = c;
    ++parked_count;
  }

  std::shared_ptr<Conn> Unpark(int fd) {
    auto it = parked.find(fd);
    if (it == parked.end()) return nullptr;
    std::shared_ptr<Conn> c = std::move(it->second);
    parked.erase(it);
    --parked_count;
    ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, fd, nullptr);
    return c;
  }

  void Accept() {
    for (int i = 0; i < 256; ++i) {
      if (open >= o.max_connections + kRefusalSlack) {
        SetAccepting(false);
        return;
      }
      sockaddr_storage ss{};
      socklen_t len = sizeof ss;
      const int fd = ::accept4(listen_fd, reinterpret_cast<sockaddr*>(&ss), &len,
                               SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EMFILE || errno == ENFILE)
          spdlog::warn("accept: out of file descriptors ({} connections open)", open.load());
        return;  // EAGAIN, or a full descriptor table: the backlog holds the rest
      }
      const int yes = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
      auto c = std::make_shared<Conn>();
      c->fd = fd;
      c->peer = PeerAddress(ss, &c->peer_port);
      int for_client = 0;
      {
        std::lock_guard lock(count_mu);
        for_client = ++per_client[c->peer];
      }
      ++open;
      c->owner = this;  // from here on its destructor uncounts it
      // Over a cap, the request is still read (within the head deadline) so that the answer
      // follows it; a health check is served even then (a probe must not restart a server
      // that is only busy).
      if (open > o.max_connections)
        c->over = Conn::Over::kServer;
      else if (for_client > o.max_connections_per_client)
        c->over = Conn::Over::kClient;
      c->deadline = Clock::now() + o.head_timeout;
      Park(c);
    }
  }

  // Answers the request whose head was read, stops writing, and keeps the connection a moment
  // to drain what the client still sends (a body), so that the close is not a reset that would
  // discard the answer.
  void Refuse(const std::shared_ptr<Conn>& c, const std::string& answer) {
    [[maybe_unused]] ssize_t w = ::send(c->fd, answer.data(), answer.size(), MSG_NOSIGNAL);
    ::shutdown(c->fd, SHUT_WR);
    c->state = Conn::State::kRefusing;
    c->deadline = Clock::now() + kRefusalLinger;
    Park(c);
  }

  void Readable(int fd) {
    auto it = parked.find(fd);
    if (it == parked.end()) return;
    Conn& c = *it->second;
    char drop[4096];
    if (c.state == Conn::State::kRefusing) {
      for (;;) {
        const ssize_t r = ::recv(fd, drop, sizeof drop, MSG_DONTWAIT);
        if (r > 0) continue;
        if (r < 0 && errno == EINTR) continue;
        if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) Unpark(fd);
        return;
      }
    }
    const bool was_idle = c.Pending().empty();
    for (;;) {
      const size_t have = c.buf.size();
      if (have - c.pos >= kMaxHead) break;
      const size_t room = std::min(kReadChunk, kMaxHead - (have - c.pos));
      c.buf.resize(have + room);
      const ssize_t r = ::recv(fd, c.buf.data() + have, room, MSG_DONTWAIT);
      c.buf.resize(have + (r > 0 ? static_cast<size_t>(r) : 0));
      if (r > 0) continue;
      if (r < 0 && errno == EINTR) continue;
      if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      Unpark(fd);  // the client closed, or an error: the connection goes
      return;
    }
    if (was_idle && !c.Pending().empty()) c.deadline = Clock::now() + o.head_timeout;
    if (!c.HeadReady()) return;
    std::shared_ptr<Conn> conn = Unpark(fd);
    const bool urgent = conn->Urgent();
    if (conn->over != Conn::Over::kNone && !urgent) {
      if (conn->over == Conn::Over::kServer) {
        ++refused_busy;
        Refuse(conn, CannedAnswer(503, "Service Unavailable", "1",
                                  "the server has as many connections open as it may (" +
                                      std::to_string(o.max_connections) + "); retry in a second",
                                  api_errors::kUnavailable));
      } else {
        ++refused_client;
        Refuse(conn, CannedAnswer(429, "Too Many Requests", "2",
                                  "your address has more than " +
                                      std::to_string(o.max_connections_per_client) +
                                      " connections open, the most one client may; close some "
                                      "(reuse connections) and retry",
                                  api_errors::kTooManyRequests));
      }
      return;
    }
    conn->state = Conn::State::kServing;
    workers.Push([this, conn] { Serve(conn); }, urgent);
  }

  void Expire() {
    const auto now = Clock::now();
    std::vector<int> expired;
    for (const auto& [fd, c] : parked)
      if (c->deadline <= now) expired.push_back(fd);
    for (int fd : expired) {
      std::shared_ptr<Conn> c = Unpark(fd);
      if (!c) continue;  // listed just above; the check keeps GCC's -Wnull-dereference quiet
      if (c->state == Conn::State::kHead && !c->Pending().empty()) {
        ++head_timeouts;
        const std::string answer =
            CannedAnswer(408, "Request Timeout", nullptr,
                         "the request's head did not arrive in time", api_errors::kBadRequest);
        [[maybe_unused]] ssize_t w =
            ::send(fd, answer.data(), answer.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      }
    }
  }

  void TakeBack() {
    std::vector<std::shared_ptr<Conn>> list;
    {
      std::lock_guard lock(back_mu);
      list.swap(back);
    }
    const auto now = Clock::now();
    for (auto& c : list) {
      if (stopping) continue;
      if (c->state == Conn::State::kHead)
        c->deadline = now + (c->Pending().empty() ? o.idle_timeout : o.head_timeout);
      Park(c);
    }
  }

  Clock::time_point BodyDeadline(const Conn& c) const {
    const std::string_view head = c.Pending();
    const size_t end = head.find("\r\n\r\n");
    const std::string_view h = head.substr(0, end);
    // Content-Length, case-insensitively; a chunked body gets a fixed budget.
    for (size_t i = h.find('\n'); i != std::string_view::npos; i = h.find('\n', i + 1)) {
      static constexpr std::string_view kName = "content-length:";
      if (h.size() - i - 1 < kName.size()) break;
      if (strncasecmp(h.data() + i + 1, kName.data(), kName.size()) != 0) continue;
      const int64_t length = std::strtoll(h.data() + i + 1 + kName.size(), nullptr, 10);
      const auto extra = std::chrono::seconds(std::max<int64_t>(length, 0) /
                                              std::max<int64_t>(o.min_body_bytes_per_s, 1));
      return Clock::now() + kBodyGrace + extra;
    }
    return Clock::now() +
           (h.find("ransfer-") != std::string_view::npos ? kChunkedBodyBudget : kBodyGrace);
  }

  void Serve(const std::shared_ptr<Conn>& c) {
    for (;;) {
      ++c->requests;
      const bool last = c->requests >= o.keep_alive_max || stopping;
      ConnStream strm(*c, o, BodyDeadline(*c));
      bool closed = false;
      tl_close_after = false;
      const bool ok = front->process_request(strm, last, closed, nullptr);
      if (!ok || stopping) return;  // c closes when dropped
      if (closed || last || tl_close_after) {
        // The answer may have been chosen before the body was read: what the client still
        // sends is drained a moment, so that the close is not a reset that loses the answer.
        ::shutdown(c->fd, SHUT_WR);
        c->state = Conn::State::kRefusing;
        c->deadline = Clock::now() + kRefusalLinger;
      } else {
        c->Compact();
        if (!c->Pending().empty() && c->HeadReady()) continue;  // a pipelined request
        c->state = Conn::State::kHead;
      }
      std::lock_guard lock(back_mu);
      back.push_back(c);
      Wake();
      return;
    }
  }
};

Front::Front(FrontOptions options) : impl_(std::make_unique<Impl>(this, options)) {
  set_keep_alive_timeout(
      std::chrono::duration_cast<std::chrono::seconds>(options.idle_timeout).count());
  set_keep_alive_max_count(static_cast<size_t>(options.keep_alive_max));
  set_post_routing_handler([this](const httplib::Request&, httplib::Response& res) {
    if (res.get_header_value("Connection") == "close") tl_close_after = true;
    if (res.get_header_value("Content-Type").starts_with("text/event-stream"))
      impl_->workers.LeaveCount();
  });
}

Front::~Front() {
  Shutdown();
  for (int* fd : {&impl_->listen_fd, &impl_->epoll_fd, &impl_->wake_fd}) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
  }
}

std::string Front::Bind(const std::string& host, int port) {
  Impl& s = *impl_;
  // Every connection is a descriptor: take what the hard limit allows.
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &rl);
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc =
          ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &res);
      rc != 0)
    return std::string("cannot resolve ") + host + ": " + ::gai_strerror(rc);
  std::string error = "no address";
  for (addrinfo* a = res; a; a = a->ai_next) {
    const int fd =
        ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) continue;
    // No SO_REUSEPORT: a second server must not bind the same port and share its connections.
    // The listening socket is close-on-exec: jobs must not keep the port bound after we exit.
    const int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, SOMAXCONN) == 0) {
      s.listen_fd = fd;
      break;
    }
    error = std::strerror(errno);
    ::close(fd);
  }
  ::freeaddrinfo(res);
  if (s.listen_fd < 0) return error;
  // httplib's content providers run only while it believes it is listening (svr_sock_ set):
  // without it every streamed answer ended before its first byte.
  svr_sock_ = s.listen_fd;
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  ::getsockname(s.listen_fd, reinterpret_cast<sockaddr*>(&ss), &len);
  PeerAddress(ss, &s.port);
  return "";
}

int Front::port() const {
  return impl_->port;
}

void Front::Start() {
  Impl& s = *impl_;
  s.epoll_fd = ::epoll_create1(EPOLL_CLOEXEC);
  s.wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  for (int fd : {s.listen_fd, s.wake_fd}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    ::epoll_ctl(s.epoll_fd, EPOLL_CTL_ADD, fd, &ev);
  }
  s.loop = std::thread([&s] { s.Run(); });
}

void Front::Shutdown() {
  Impl& s = *impl_;
  if (s.stopping.exchange(true)) return;
  svr_sock_ = INVALID_SOCKET;  // httplib's content providers stop
  if (s.loop.joinable()) {
    s.Wake();
    s.loop.join();
  }
  if (s.listen_fd >= 0) {
    ::close(s.listen_fd);
    s.listen_fd = -1;
  }
  s.workers.Shutdown();
  std::lock_guard lock(s.back_mu);
  s.back.clear();
}

FrontStats Front::Stats() const {
  const Impl& s = *impl_;
  FrontStats st;
  st.open = s.open.load();
  st.parked = s.parked_count.load();
  st.streams = s.workers.streams();
  st.refused_busy = s.refused_busy.load();
  st.refused_client = s.refused_client.load();
  st.head_timeouts = s.head_timeouts.load();
  st.worker_threads = s.workers.threads();
  return st;
}

}  // namespace starforge::api
