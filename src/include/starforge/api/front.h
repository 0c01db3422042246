// The HTTP front of `forge serve`: an event-driven connection layer under cpp-httplib's routing.
//
// httplib alone gives every connection a thread for its whole life, so idle keep-alive clients,
// clients that send their headers a byte at a time, and bursts of connects used up the threads
// that serve everyone else. Here one epoll thread owns every connection while it has no complete
// request head: it accepts, counts connections (in all and per client address), reads request
// heads without blocking and holds them to a deadline, and parks idle keep-alive connections.
// Only a connection with a complete request head is handed to a worker thread, which runs
// httplib's own request processing (routing, body reading, response writing) on it and gives the
// connection back to the epoll thread afterwards. A connection over a cap gets a canned 503/429
// with Retry-After once its request head is read, never a reset (health checks are served even
// then). Streams (text/event-stream answers: log follows) keep their
// worker thread, but leave the count of workers that serve ordinary requests.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <httplib.h>

namespace starforge::api {

struct FrontOptions {
  int max_connections = 2048;            // open connections in all (parked or served)
  int max_connections_per_client = 256;  // per peer address; beyond it 429 + Retry-After
  int max_workers = 64;  // requests handled at once (others wait parked); streams excluded
  std::chrono::milliseconds head_timeout{10'000};  // a request head must be complete in this
  std::chrono::milliseconds idle_timeout{30'000};  // a kept-alive connection with no request
  std::chrono::milliseconds read_timeout{5'000};   // silence while reading a body
  std::chrono::milliseconds write_timeout{5'000};  // a client that reads nothing for this long
  int64_t min_body_bytes_per_s = 256 << 10;        // a body slower than this (after 30 s) is cut
  int keep_alive_max = 100;                        // requests on one connection
};

// What the front counts (for /metrics and tests).
struct FrontStats {
  int64_t open = 0;            // connections open now
  int64_t parked = 0;          // of which waiting for a request head, no thread held
  int64_t streams = 0;         // responses being streamed (log follows)
  int64_t refused_busy = 0;    // 503: over max_connections (since start)
  int64_t refused_client = 0;  // 429: over max_connections_per_client
  int64_t head_timeouts = 0;   // closed: no complete request head in time
  int64_t worker_threads = 0;  // threads that exist (idle ones included)
};

// An httplib::Server (register routes and handlers on it as usual) that serves connections
// through the front instead of httplib's listen loop. The front takes httplib's post-routing
// handler (it learns there whether an answer closes its connection or streams).
class Front : public httplib::Server {
 public:
  explicit Front(FrontOptions options = {});
  ~Front() override;  // Shutdown()

  // Binds host:port (0 = any free port) with backlog SOMAXCONN; returns "" or why not.
  std::string Bind(const std::string& host, int port);
  int port() const;
  // Serves on background threads until Shutdown().
  void Start();
  // Stops accepting, closes parked connections, waits for requests being served to end.
  void Shutdown();
  FrontStats Stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  friend struct FrontAccess;
};

}  // namespace starforge::api
