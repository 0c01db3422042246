// The transport every client shares: what a caller gets back for replies, streams, bodies to send
// and faults, against a loopback server.
#include "starforge/net/http.h"

#include <httplib.h>

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace starforge::net {
namespace {

using namespace std::chrono_literals;

class Loopback {
 public:
  explicit Loopback(const std::function<void(httplib::Server&)>& routes) {
    routes(server_);
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running())
      std::this_thread::sleep_for(1ms);
  }
  ~Loopback() { Stop(); }
  void Stop() {
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }
  std::string Url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
};

TEST(Transport, ReplyHeadersAreLowerCaseAndTrimmed) {
  Loopback server([](httplib::Server& s) {
    s.Get("/x", [](const httplib::Request& req, httplib::Response& res) {
      res.set_header("X-Echo", req.get_header_value("X-Ask") + "  ");
      res.set_content("hello", "text/plain");
    });
  });
  Transport t;
  Request r;
  r.url = server.Url("/x");
  r.headers = {"X-Ask: please"};
  Response resp;
  t.Perform(r, &resp);
  EXPECT_EQ(resp.fault, Fault::kNone) << resp.error;
  EXPECT_EQ(resp.status, 200);
  EXPECT_EQ(resp.body, "hello");
  EXPECT_EQ(resp.headers["x-echo"], "please");
  EXPECT_EQ(resp.headers["content-type"], "text/plain");
}

TEST(Transport, ErrorBodiesAreCutAndNeverStreamed) {
  Loopback server([](httplib::Server& s) {
    s.Get("/big", [](const httplib::Request&, httplib::Response& res) {
      res.status = 500;
      res.set_content(std::string(1 << 20, 'e'), "text/html");
    });
  });
  Transport t;
  Request r;
  r.url = server.Url("/big");
  r.max_error_body = 1000;
  bool streamed = false;
  r.on_data = [&](std::string_view) { return streamed = true; };
  Response resp;
  t.Perform(r, &resp);
  EXPECT_EQ(resp.fault, Fault::kNone) << resp.error;
  EXPECT_EQ(resp.status, 500);
  EXPECT_FALSE(streamed);
  EXPECT_GE(resp.body.size(), 1000u);
  EXPECT_LT(resp.body.size(), size_t{1} << 20);
}

TEST(Transport, OnDataFalseStopsWithoutAFault) {
  Loopback server([](httplib::Server& s) {
    s.Get("/stream", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(std::string(4 << 20, 's'), "application/octet-stream");
    });
  });
  Transport t;
  Request r;
  r.url = server.Url("/stream");
  size_t got = 0;
  r.on_data = [&](std::string_view bytes) {
    got += bytes.size();
    return false;
  };
  Response resp;
  t.Perform(r, &resp);
  EXPECT_TRUE(resp.stopped);
  EXPECT_EQ(resp.fault, Fault::kNone);
  EXPECT_GT(got, 0u);
  EXPECT_TRUE(resp.body.empty());
}

TEST(Transport, SendsBodiesFromMemoryAndFromAReader) {
  Loopback server([](httplib::Server& s) {
    auto echo = [](const httplib::Request& req, httplib::Response& res) {
      res.set_content(req.method + " " + req.body, "text/plain");
    };
    s.Post("/echo", echo);
    s.Put("/echo", echo);
    s.Delete("/echo", echo);
  });
  Transport t;
  Response resp;
  Request post;
  post.method = "POST";
  post.url = server.Url("/echo");
  const std::string json = R"({"a":1})";
  post.body = json;
  post.headers = {"Content-Type: application/json"};
  t.Perform(post, &resp);
  EXPECT_EQ(resp.body, R"(POST {"a":1})");

  Request put;
  put.method = "PUT";
  put.url = server.Url("/echo");
  std::string_view left = "streamed bytes";
  put.reader_size = static_cast<int64_t>(left.size());
  put.reader = [&](char* buf, size_t room) -> std::optional<size_t> {
    const size_t n = std::min({room, size_t{3}, left.size()});  // in small pieces
    left.copy(buf, n);
    left.remove_prefix(n);
    return n;
  };
  t.Perform(put, &resp);
  EXPECT_EQ(resp.fault, Fault::kNone) << resp.error;
  EXPECT_EQ(resp.body, "PUT streamed bytes");

  Request del;
  del.method = "DELETE";
  del.url = server.Url("/echo");
  t.Perform(del, &resp);
  EXPECT_EQ(resp.body, "DELETE ");
}

TEST(Transport, AnUnreadableBodyIsAReadFault) {
  Loopback server([](httplib::Server& s) {
    s.Put("/x", [](const httplib::Request&, httplib::Response& res) { res.status = 204; });
  });
  Transport t;
  Request put;
  put.method = "PUT";
  put.url = server.Url("/x");
  put.reader_size = 10;
  put.reader = [](char*, size_t) -> std::optional<size_t> { return std::nullopt; };
  Response resp;
  t.Perform(put, &resp);
  EXPECT_EQ(resp.fault, Fault::kReadBody);
  EXPECT_FALSE(Transient(resp.fault));
}

// POSTs `parts` as multipart/form-data to `url`.
Response PostForm(const std::string& url, const std::vector<FormPart>& parts) {
  Request r;
  r.method = "POST";
  r.url = url;
  r.form = &parts;
  Transport t;
  Response resp;
  t.Perform(r, &resp);
  return resp;
}

// Several `forge submit`s from one directory at once: one removes the capsule another is about to
// send. Here the file goes after the request is under way and before its body is read
// (in the server's answer to `Expect: 100-continue`, which libcurl sends for bodies over 1 MiB):
// it is still sent whole, where libcurl's own file parts said "read function returned funny
// value".
TEST(Transport, AFormFileRemovedWhileTheRequestIsUnderWayIsSentWhole) {
  namespace fs = std::filesystem;
  const fs::path file =
      fs::path(::testing::TempDir()) / ("http_test_form_" + std::to_string(::getpid()));
  std::string content(2 << 20, '\0');
  for (size_t i = 0; i < content.size(); ++i)
    content[i] = static_cast<char>('a' + i % 26);
  std::ofstream(file, std::ios::binary) << content;
  std::atomic<bool> removed{false};
  std::string got, got_filename;
  Loopback server([&](httplib::Server& s) {
    s.set_expect_100_continue_handler([&](const httplib::Request&, httplib::Response&) {
      removed = fs::remove(file);
      return 100;
    });
    s.Post("/form", [&](const httplib::Request& req, httplib::Response& res) {
      if (req.has_file("capsule")) {
        got = req.get_file_value("capsule").content;
        got_filename = req.get_file_value("capsule").filename;
      }
      res.status = 201;
    });
  });
  std::vector<FormPart> parts(1);
  parts[0].name = "capsule";
  parts[0].file = file;
  parts[0].filename = "capsule.zip";
  parts[0].content_type = "application/zip";
  const Response resp = PostForm(server.Url("/form"), parts);
  EXPECT_TRUE(removed) << "the file was not removed during the exchange: nothing was tested";
  EXPECT_EQ(resp.fault, Fault::kNone) << resp.error;
  EXPECT_EQ(resp.status, 201);
  EXPECT_EQ(got.size(), content.size());
  EXPECT_TRUE(got == content);
  EXPECT_EQ(got_filename, "capsule.zip");
  std::error_code ec;
  fs::remove(file, ec);
}

TEST(Transport, AFormFileThatCannotBeOpenedIsAReadFaultNamingIt) {
  std::atomic<int> requests{0};
  Loopback server([&](httplib::Server& s) {
    s.Post("/form", [&](const httplib::Request&, httplib::Response& res) {
      ++requests;
      res.status = 201;
    });
  });
  std::vector<FormPart> parts(2);
  parts[0].name = "spec";
  parts[0].data = "name: x";
  parts[1].name = "capsule";
  parts[1].file = "/nonexistent-dir/capsule.zip";
  const Response resp = PostForm(server.Url("/form"), parts);
  EXPECT_EQ(resp.fault, Fault::kReadBody);
  EXPECT_NE(resp.error.find("/nonexistent-dir/capsule.zip"), std::string::npos) << resp.error;
  EXPECT_NE(resp.error.find("No such file or directory"), std::string::npos) << resp.error;
  EXPECT_TRUE(resp.nothing_sent);
  EXPECT_EQ(requests, 0);
}

TEST(Transport, ARefusedConnectionIsTransientAndSentNothing) {
  std::string url;
  {
    Loopback gone([](httplib::Server&) {});
    url = gone.Url("/x");
  }
  Transport t;
  Request r;
  r.method = "POST";
  r.url = url;
  r.body = "x";
  Response resp;
  t.Perform(r, &resp);
  EXPECT_EQ(resp.fault, Fault::kConnect) << resp.error;
  EXPECT_EQ(resp.status, 0);
  EXPECT_TRUE(resp.nothing_sent);
  EXPECT_TRUE(Transient(resp.fault));
  EXPECT_FALSE(resp.error.empty());
}

TEST(Transport, OnlyHttpAndHttps) {
  Transport t;
  Request r;
  r.url = "file:///etc/passwd";
  Response resp;
  t.Perform(r, &resp);
  EXPECT_EQ(resp.fault, Fault::kUnsupportedProtocol);
  EXPECT_TRUE(resp.body.empty());
}

TEST(Transport, WhatACallbackThrowsReachesTheCaller) {
  Loopback server([](httplib::Server& s) {
    s.Get("/x", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("data", "text/plain");
    });
  });
  Transport t;
  Request r;
  r.url = server.Url("/x");
  r.on_data = [](std::string_view) -> bool { throw std::runtime_error("decoder says no"); };
  Response resp;
  EXPECT_THROW(t.Perform(r, &resp), std::runtime_error);
}

TEST(Transport, KeepsItsConnectionAliveBetweenExchanges) {
  std::mutex mu;
  std::set<std::string> peers;  // the client ends of the connections the server saw
  Loopback server([&](httplib::Server& s) {
    s.set_keep_alive_max_count(100);  // httplib closes a connection after 5 requests by default
    s.Get("/x", [&](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard lock(mu);
      peers.insert(req.remote_addr + ":" + std::to_string(req.remote_port));
      res.set_content("x", "text/plain");
    });
  });
  Transport t;
  for (int i = 0; i < 20; ++i) {
    Request r;
    r.url = server.Url("/x");
    Response resp;
    t.Perform(r, &resp);
    ASSERT_EQ(resp.fault, Fault::kNone) << resp.error;
  }
  std::lock_guard lock(mu);
  EXPECT_EQ(peers.size(), 1u);
}

// Many threads on one Transport, as kubesim's controllers and forge serve use theirs: replies
// kept alive, connections the server closes, streams the caller cuts short. Each exchange must
// get its own reply whole. (libcurl's shared connection cache, which the transport used before,
// is not thread-safe: two threads could get the same connection, and one free it under the other;
// run under ASan, that is a use-after-free or double free, else replies mixed up.)
TEST(Transport, ManyThreadsShareOneTransport) {
  Loopback server([](httplib::Server& s) {
    // A worker per connection the clients may hold (httplib's default pool has 8).
    s.new_task_queue = [] { return new httplib::ThreadPool(64); };
    s.Get("/echo", [](const httplib::Request& req, httplib::Response& res) {
      if (req.get_param_value("close") == "1") res.set_header("Connection", "close");
      res.set_content("reply " + req.get_param_value("id"), "text/plain");
    });
    s.Get("/stream", [](const httplib::Request&, httplib::Response& res) {
      res.set_chunked_content_provider("text/plain", [](size_t, httplib::DataSink& sink) {
        const std::string line(64, 'l');
        for (int i = 0; i < 8; ++i)
          if (!sink.write(line.data(), line.size())) return false;
        sink.done();
        return true;
      });
    });
  });
  Transport t;
  constexpr int kThreads = 16;
  constexpr int kExchanges = 150;
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      for (int k = 0; k < kExchanges; ++k) {
        Request r;
        Response resp;
        const std::string id = std::to_string(i) + "-" + std::to_string(k);
        if (k % 5 == 4) {  // a stream cut after its first bytes: the connection is not reused
          r.url = server.Url("/stream");
          r.on_data = [](std::string_view) { return false; };
          t.Perform(r, &resp);
          if (!resp.stopped || resp.fault != Fault::kNone) ++wrong;
          continue;
        }
        r.url = server.Url("/echo?id=" + id + (k % 5 == 2 ? "&close=1" : ""));
        t.Perform(r, &resp);
        if (resp.fault != Fault::kNone || resp.status != 200 || resp.body != "reply " + id) ++wrong;
      }
    });
  }
  for (auto& th : threads)
    th.join();
  EXPECT_EQ(wrong.load(), 0);
}

TEST(Backoff, DoublesWithJitterAndCap) {
  EXPECT_EQ(Backoff(1, 200ms, 10s, 0.0), 100ms);
  EXPECT_EQ(Backoff(1, 200ms, 10s, 0.999), 199ms);
  EXPECT_EQ(Backoff(2, 200ms, 10s, 0.0), 200ms);
  EXPECT_EQ(Backoff(3, 200ms, 10s, 0.5), 600ms);
  EXPECT_EQ(Backoff(20, 200ms, 10s, 0.0), 5s);
  EXPECT_EQ(Backoff(20, 200ms, 10s, 1.0), 10s);
  EXPECT_EQ(Backoff(100000, 200ms, 10s, 1.0), 10s);  // no overflow
}

TEST(Transient, OnlyFaultsASecondTryMayCure) {
  for (Fault f : {Fault::kConnect, Fault::kResolveHost, Fault::kConnectionLost, Fault::kInterrupted,
                  Fault::kTimeout}) {
    EXPECT_TRUE(Transient(f)) << static_cast<int>(f);
  }
  for (Fault f : {Fault::kNone, Fault::kResolveProxy, Fault::kTls, Fault::kIdle, Fault::kReadBody,
                  Fault::kWriteBody, Fault::kUnsupportedProtocol, Fault::kOther}) {
    EXPECT_FALSE(Transient(f)) << static_cast<int>(f);
  }
}

}  // namespace
}  // namespace starforge::net
