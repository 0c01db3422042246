// The HTTP front under hostile clients (docs/security.md): caps on connections
// answered with Retry-After, request heads held to a deadline, bursts answered rather than
// reset, and uploads that hold disk space before they write it. Bounded: every wait has an end,
// and no test asserts how long anything took.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <regex>
#include <thread>

#include "api_test_support.h"

namespace starforge::api {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;
using testing::MakeZip;
using testing::ServeProcess;
using ::testing::StartsWith;
using testing::TempDir;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

const std::regex kTokenLine("admin token \\(shown once, store it now\\): (sf_[a-z0-9]{40})\n");

// A loopback connection from `source` (any 127.x.y.z is this machine's), or -1.
int ConnectFrom(int port, const std::string& source) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in from{};
  from.sin_family = AF_INET;
  ::inet_pton(AF_INET, source.c_str(), &from.sin_addr);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0 ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
    ::close(fd);
    return -1;
  }
  timeval tv{30, 0};  // a bound on every read below, not a timing assertion
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

void SendAll(int fd, const std::string& bytes) {
  for (size_t sent = 0; sent < bytes.size();) {
    const ssize_t w = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (w <= 0) return;
    sent += static_cast<size_t>(w);
  }
}

// Reads until the answer's head is complete, the connection ends, or 30 s of silence.
std::string ReadHead(int fd) {
  std::string got;
  char c;
  while (got.find("\r\n\r\n") == std::string::npos && ::recv(fd, &c, 1, 0) == 1)
    got += c;
  return got;
}

// Reads until the server closes the connection (or 30 s of silence).
std::string ReadToEnd(int fd) {
  std::string got;
  char buf[4096];
  ssize_t n;
  while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0)
    got.append(buf, static_cast<size_t>(n));
  return got;
}

class Front : public ::testing::Test {
 protected:
  void Start(std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
    args.insert(args.begin(), {"--resync-ms", "100"});
    std::string error;
    serve_ = ServeProcess::Start(root_, env, args, &error);
    ASSERT_TRUE(serve_) << error;
    std::smatch m;
    const std::string out = serve_->Stdout();
    if (std::regex_search(out, m, kTokenLine)) admin_ = m[1];
    ASSERT_FALSE(admin_.empty()) << out;
  }

  std::string Whoami(const char* connection = "keep-alive") const {
    return "GET /api/v1/whoami HTTP/1.1\r\nHost: x\r\nConnection: " + std::string(connection) +
           "\r\nAuthorization: Bearer " + admin_ + "\r\n\r\n";
  }

  // Polls `probe` until it returns true, for at most 30 s.
  static bool Eventually(const std::function<bool()>& probe) {
    const auto deadline = Clock::now() + seconds(30);
    while (Clock::now() < deadline) {
      if (probe()) return true;
      std::this_thread::sleep_for(milliseconds(50));
    }
    return false;
  }

  // The value of a /metrics line.
  int64_t Metric(const std::string& name) {
    auto r = serve_->Client()->Get("/metrics");
    if (!r) return -1;
    std::smatch m;
    const std::regex line("\n" + name + " (\\d+)");
    return std::regex_search(r->body, m, line) ? std::stoll(m[1]) : -1;
  }

  TempDir tmp_;
  fs::path root_ = tmp_ / "root";
  std::unique_ptr<ServeProcess> serve_;
  std::string admin_;
};

// Past the per-client cap a client gets 429, past the total cap everyone gets 503, each with
// Retry-After and after the request was read (so the answer is its answer); health checks are
// served all the same, and the slots come back when connections close.
TEST_F(Front, ConnectionsOverTheCapsAreAnsweredWithRetryAfter) {
  Start({"--max-connections", "24", "--max-connections-per-client", "8"});
  const int port = serve_->port();
  std::vector<int> held;
  struct CloseAll {
    std::vector<int>& fds;
    ~CloseAll() {
      for (int fd : fds)
        ::close(fd);
    }
  } close_all{held};
  // One address: 8 kept-alive connections are served, the next is 429.
  for (int i = 0; i < 8; ++i) {
    held.push_back(ConnectFrom(port, "127.0.0.1"));
    SendAll(held.back(), Whoami());
    ASSERT_THAT(ReadHead(held.back()), StartsWith("HTTP/1.1 200")) << i;
  }
  int fd = ConnectFrom(port, "127.0.0.1");
  SendAll(fd, Whoami());
  std::string reply = ReadToEnd(fd);
  ::close(fd);
  EXPECT_THAT(reply, StartsWith("HTTP/1.1 429")) << reply;
  EXPECT_THAT(reply, HasSubstr("Retry-After: 2"));
  EXPECT_THAT(reply, HasSubstr("\"error\":\"TooManyRequests\""));
  fd = ConnectFrom(port, "127.0.0.1");
  SendAll(fd, "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  reply = ReadToEnd(fd);
  ::close(fd);
  EXPECT_THAT(reply, StartsWith("HTTP/1.1 200")) << "a health check is served over the cap";

  // Other addresses fill the server: somewhere past 24 open connections, 503.
  std::string refused;
  for (int i = 0; i < 40 && refused.empty(); ++i) {
    fd = ConnectFrom(port, "127.0.0." + std::to_string(2 + i / 6));
    ASSERT_GE(fd, 0);
    SendAll(fd, Whoami());
    reply = ReadHead(fd);
    if (reply.starts_with("HTTP/1.1 200")) {
      held.push_back(fd);
      continue;
    }
    refused = reply;
    ::close(fd);
  }
  EXPECT_THAT(refused, StartsWith("HTTP/1.1 503"));
  EXPECT_THAT(refused, HasSubstr("Retry-After: 1"));
  EXPECT_LE(held.size(), 24u);

  for (int h : held)
    ::close(h);
  held.clear();
  EXPECT_TRUE(Eventually([&] {
    const int c = ConnectFrom(port, "127.0.0.1");
    SendAll(c, Whoami("close"));
    const bool ok = ReadToEnd(c).starts_with("HTTP/1.1 200");
    ::close(c);
    return ok;
  })) << "the closed connections' slots never came back";
  EXPECT_GE(Metric("starforge_http_refused_busy_total"), 1);
  EXPECT_GE(Metric("starforge_http_refused_client_total"), 1);
}

// A slowloris: request heads that never end are answered 408 and closed at the head deadline
// (they hold no thread meanwhile), and their client's slots come back.
TEST_F(Front, HeadsThatNeverEndAreDroppedAtTheirDeadline) {
  Start({"--max-connections-per-client", "6", "--head-timeout-s", "1"});
  const int port = serve_->port();
  std::vector<int> slow;
  for (int i = 0; i < 6; ++i) {
    slow.push_back(ConnectFrom(port, "127.0.0.7"));
    SendAll(slow.back(), "GET /api/v1/jobs HTTP/1.1\r\nHost: x\r\nX-Slow: a");
  }
  // Meanwhile the server answers others.
  auto h = serve_->Client()->Get("/healthz");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  for (int fd : slow) {
    EXPECT_THAT(ReadToEnd(fd), StartsWith("HTTP/1.1 408"));
    ::close(fd);
  }
  EXPECT_GE(Metric("starforge_http_head_timeouts_total"), 6);
  EXPECT_TRUE(Eventually([&] {
    const int c = ConnectFrom(port, "127.0.0.7");
    SendAll(c, Whoami("close"));
    const bool ok = ReadToEnd(c).starts_with("HTTP/1.1 200");
    ::close(c);
    return ok;
  }));
}

// Many connections at once, beyond every cap: each one gets an answer (200, or 429/503 with
// Retry-After); none is reset or closed without one.
TEST_F(Front, ABurstIsAnsweredNotReset) {
  Start({"--max-connections", "64", "--max-connections-per-client", "40"});
  const int port = serve_->port();
  constexpr int kBurst = 300;
  std::vector<int> fds;
  for (int i = 0; i < kBurst; ++i) {
    const int fd = ConnectFrom(port, "127.0.0." + std::to_string(2 + i % 4));
    ASSERT_GE(fd, 0) << "connect " << i << ": " << std::strerror(errno);
    fds.push_back(fd);
  }
  for (int fd : fds)
    SendAll(fd, Whoami("close"));
  std::map<std::string, int> statuses;
  for (int fd : fds) {
    const std::string reply = ReadToEnd(fd);
    ::close(fd);
    const std::string status = reply.size() >= 12 ? reply.substr(9, 3) : "no answer";
    ++statuses[status];
    if (status == "429" || status == "503") {
      EXPECT_THAT(reply, HasSubstr("Retry-After: "));
    }
  }
  int answered = 0;
  for (const char* s : {"200", "429", "503"})
    answered += statuses[s];
  EXPECT_EQ(answered, kBurst) << ::testing::PrintToString(statuses);
  EXPECT_GE(statuses["200"], 1);
}

// An upload holds its disk space (its declared length) before it writes: while one holds most
// of the space, another is 503 + Retry-After; one larger than the space is 507 at once, before
// its body is read. Neither blames the user's code.
TEST_F(Front, UploadsHoldDiskSpaceBeforeWriting) {
  Start({"--upload-space-bytes", "3000000"}, {{"FORGE_CAPSULE_MAX_BYTES", "1Mi"}});
  const int port = serve_->port();
  const std::string head = "POST /api/v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
                           admin_ +
                           "\r\nContent-Type: multipart/form-data; boundary=b\r\nContent-Length: ";
  // 2 MB declared, a little sent: the server holds 2 MB while it waits for the rest.
  const int held = ConnectFrom(port, "127.0.0.1");
  SendAll(held, head +
                    "2000000\r\n\r\n--b\r\nContent-Disposition: form-data; name=\"code\"; "
                    "filename=\"c.zip\"\r\n\r\nPK");
  // A byte now and then keeps it from the read timeout while the rest of the test runs.
  std::atomic<bool> done{false};
  std::thread trickle([&] {
    while (!done) {
      SendAll(held, "K");
      std::this_thread::sleep_for(milliseconds(500));
    }
  });
  struct Join {
    std::atomic<bool>& done;
    std::thread& t;
    ~Join() {
      done = true;
      if (t.joinable()) t.join();
    }
  } join{done, trickle};
  ASSERT_TRUE(Eventually([&] { return Metric("starforge_upload_reserved_bytes") >= 2000000; }));

  // Another upload that would fit alone but not beside the held one: 503, answered before its
  // body is sent. (The code's check inflates entries in memory, so an upload holds only its own
  // length: a small zip still fits beside the held one.)
  const int busy = ConnectFrom(port, "127.0.0.1");
  SendAll(busy, head + "1500000\r\n\r\n");
  const std::string refused = ReadToEnd(busy);
  ::close(busy);
  EXPECT_THAT(refused, StartsWith("HTTP/1.1 503")) << refused;
  EXPECT_THAT(refused, HasSubstr("Retry-After: 30"));
  EXPECT_THAT(refused, HasSubstr("not a problem with your code"));

  // Larger than all the space: 507, answered before the body is sent.
  const int big = ConnectFrom(port, "127.0.0.1");
  SendAll(big, head + "3100000\r\n\r\n");
  const std::string reply = ReadHead(big);
  ::close(big);
  EXPECT_THAT(reply, StartsWith("HTTP/1.1 507")) << reply;
  EXPECT_THAT(reply, HasSubstr("Retry-After: "));

  // The held upload goes away: its space comes back, and an upload is accepted.
  done = true;
  trickle.join();
  ::close(held);
  ASSERT_TRUE(Eventually([&] { return Metric("starforge_upload_reserved_bytes") == 0; }));
  TempDir t;
  const std::string zip = MakeZip(t, {{{"name", "main.py"}, {"data", "print(1)\n"}}});
  httplib::MultipartFormDataItems items = {
      {"spec",
       "name: small\nimage: python:3.11-slim\nentrypoint: [python3, main.py]\n"
       "pools: [{name: main, cpusPerMachine: 1}]\n",
       "", ""},
      {"code", zip, "code.zip", "application/zip"}};
  auto client = serve_->Client();
  auto r = client->Post("/api/v1/jobs", {{"Authorization", "Bearer " + admin_}}, items);
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 201) << r->body;
}

}  // namespace
}  // namespace starforge::api
