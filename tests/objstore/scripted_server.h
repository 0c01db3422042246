// A loopback HTTP/1.1 server that answers from a script of canned replies, one per request,
// and records what it received. For what a real S3 peer will not do on demand: 503 SlowDown,
// 200-with-<Error>, an upload part that fails.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace starforge::objstore::testing {

struct CannedReply {
  int status = 200;
  std::string body;
  std::string extra_headers;  // "Name: value\r\n" lines
};

struct Received {
  std::string request_line;  // "GET /b/k HTTP/1.1"
  std::string headers;       // raw header block, lower-cased names not guaranteed
  std::string body;
};

class ScriptedServer {
 public:
  explicit ScriptedServer(std::vector<CannedReply> script) : script_(std::move(script)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    ::listen(fd_, 16);
    socklen_t len = sizeof addr;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~ScriptedServer() {
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
  }
  ScriptedServer(const ScriptedServer&) = delete;
  ScriptedServer& operator=(const ScriptedServer&) = delete;

  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int port() const { return port_; }
  std::vector<Received> received() {
    std::lock_guard<std::mutex> lock(mu_);
    return received_;
  }

 private:
  static std::string ContentLengthOf(const std::string& headers) {
    std::string lower = headers;
    for (char& c : lower)
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const size_t at = lower.find("content-length:");
    if (at == std::string::npos) return "0";
    return std::to_string(std::atoll(lower.c_str() + at + 15));
  }

  void Serve() {
    for (size_t next = 0;; ++next) {
      const int conn = ::accept(fd_, nullptr, nullptr);
      if (conn < 0) return;
      std::string data;
      char buf[65536];
      size_t header_end;
      while ((header_end = data.find("\r\n\r\n")) == std::string::npos) {
        const ssize_t n = ::read(conn, buf, sizeof buf);
        if (n <= 0) break;
        data.append(buf, static_cast<size_t>(n));
      }
      Received r;
      if (header_end != std::string::npos) {
        const size_t line_end = data.find("\r\n");
        r.request_line = data.substr(0, line_end);
        r.headers = data.substr(line_end + 2, header_end - line_end - 2);
        const size_t want = std::stoul(ContentLengthOf(r.headers));
        if (r.headers.find("100-continue") != std::string::npos) {
          const std::string cont = "HTTP/1.1 100 Continue\r\n\r\n";
          (void)!::write(conn, cont.data(), cont.size());
        }
        r.body = data.substr(header_end + 4);
        while (r.body.size() < want) {
          const ssize_t n = ::read(conn, buf, sizeof buf);
          if (n <= 0) break;
          r.body.append(buf, static_cast<size_t>(n));
        }
      }
      const CannedReply reply = next < script_.size() ? script_[next] : CannedReply{599, "", ""};
      const bool head = r.request_line.rfind("HEAD ", 0) == 0;
      {
        std::lock_guard<std::mutex> lock(mu_);
        received_.push_back(std::move(r));
      }
      std::string out =
          "HTTP/1.1 " + std::to_string(reply.status) + " Scripted\r\n" + reply.extra_headers +
          "Content-Length: " + std::to_string(reply.body.size()) + "\r\nConnection: close\r\n\r\n";
      if (!head) out += reply.body;
      (void)!::write(conn, out.data(), out.size());
      ::close(conn);
    }
  }

  std::vector<CannedReply> script_;
  int fd_ = -1;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::vector<Received> received_;
};

}  // namespace starforge::objstore::testing
