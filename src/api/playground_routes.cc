#include "starforge/api/playground_routes.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "starforge/api/convert.h"

namespace starforge::api {

using nlohmann::json;
using playground::Error;

namespace {

constexpr size_t kMaxBody = 1 << 20;  // a chat request with a long history

std::string ReadBody(const httplib::Request& req, const httplib::ContentReader* reader) {
  std::string body;
  if (reader == nullptr ||
      (!req.has_header("Content-Length") && !req.has_header("Transfer-Encoding")))
    return body;
  bool too_large = false;
  (*reader)([&](const char* data, size_t n) {
    if (body.size() + n > kMaxBody) {
      too_large = true;
      return false;
    }
    body.append(data, n);
    return true;
  });
  if (too_large) throw Error{413, "PayloadTooLarge", "the request body is over 1 MiB", "", {}};
  return body;
}

json ParseObject(const std::string& body) {
  if (body.empty()) return json::object();
  json j = json::parse(body, nullptr, false);
  if (!j.is_object()) throw Error{400, "BadRequest", "the body must be a JSON object", "", {}};
  return j;
}

void Send(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace) + "\n",
                  "application/json");
}

json PlaygroundJson(const store::Playground& p) {
  json j = playground::ToJson(p);
  const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  // What is left of the TTL, so that clients count down without comparing clocks.
  j["ttlRemainingSeconds"] =
      store::IsTerminal(p.state) ? 0 : std::max<int64_t>(0, (p.expires_at - now) / 1000);
  for (const char* key : {"expiresAt", "createdAt", "readyAt", "finishedAt"})
    j[key] = TimeOrNull(j[key].get<int64_t>());
  return j;
}

// One streamed answer: the upstream request runs on its own thread and hands its chunks to the
// connection's writer, so that each SSE event leaves as soon as vLLM sends it.
struct Stream {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::string> chunks;
  bool started = false;  // the first chunk arrived (the answer is 2xx)
  bool done = false;
  playground::ProxyReply reply;
  std::atomic<bool> stop{false};
  std::thread worker;
};

void Proxy(playground::Manager& m, const store::User& user, const std::string& id,
           const std::string& method, const std::string& path, const httplib::Request& req,
           httplib::Response& res, const httplib::ContentReader* reader,
           const std::atomic<bool>& stopping) {
  playground::ProxyCall call;
  call.method = method;
  call.path = path;
  if (method == "POST") {
    call.body = ReadBody(req, reader);
    call.content_type = "application/json";
  }
  const json body = call.body.empty() ? json() : json::parse(call.body, nullptr, false);
  const bool streamed = body.is_object() && body.value("stream", false) == true;
  if (!streamed) {
    const playground::ProxyReply r = m.Proxy(user, id, call, nullptr, nullptr);
    if (r.status == 0) throw Error{502, "BadGateway", r.message, "", {}};
    res.status = r.status;
    res.set_content(r.body, r.content_type.empty() ? "application/json" : r.content_type);
    return;
  }
  // The playground's state and ownership are checked before anything is streamed.
  m.Get(user, id);
  auto s = std::make_shared<Stream>();
  s->worker = std::thread([s, &m, user, id, call] {
    playground::ProxyReply r;
    try {
      r = m.Proxy(
          user, id, call,
          [s](std::string_view chunk) {
            std::lock_guard lock(s->mu);
            s->started = true;
            s->chunks.emplace_back(chunk);
            s->cv.notify_all();
            return !s->stop.load();
          },
          &s->stop);
    } catch (const Error& e) {
      r.status = e.status;
      r.body = ErrorJson(e.kind, e.message, e.field, e.errors).dump();
      r.content_type = "application/json";
    } catch (const std::exception& e) {
      r.status = 0;
      r.message = e.what();
    }
    std::lock_guard lock(s->mu);
    s->reply = std::move(r);
    s->done = true;
    s->cv.notify_all();
  });
  {
    std::unique_lock lock(s->mu);
    s->cv.wait(lock, [&] { return s->started || s->done; });
  }
  if (!s->started) {  // an error before any byte of a 2xx answer
    s->worker.join();
    const playground::ProxyReply& r = s->reply;
    if (r.status == 0) throw Error{502, "BadGateway", r.message, "", {}};
    res.status = r.status;
    res.set_content(r.body, r.content_type.empty() ? "application/json" : r.content_type);
    return;
  }
  res.status = 200;
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  // Exactly text/event-stream: httplib compresses other text types, holding events back.
  res.set_chunked_content_provider(
      "text/event-stream",
      [s, &stopping](size_t, httplib::DataSink& sink) {
        std::unique_lock lock(s->mu);
        s->cv.wait_for(lock, std::chrono::milliseconds(200),
                       [&] { return !s->chunks.empty() || s->done; });
        while (!s->chunks.empty()) {
          std::string chunk = std::move(s->chunks.front());
          s->chunks.pop_front();
          lock.unlock();
          if (!sink.write(chunk.data(), chunk.size())) return false;
          lock.lock();
        }
        if (s->done) {
          sink.done();
          return true;
        }
        return !stopping.load() && sink.is_writable();
      },
      [s](bool) {
        s->stop = true;
        if (s->worker.joinable()) s->worker.join();
      });
}

int64_t TailLines(const httplib::Request& req) {
  if (!req.has_param("tailLines")) return 0;
  const auto n = ParseCount(req.get_param_value("tailLines"));
  if (!n) throw Error{400, "BadRequest", "tailLines must be a whole number", "tailLines", {}};
  return *n;
}

}  // namespace

bool IsPlaygroundRoute(RouteId id) {
  switch (id) {
    case RouteId::kCreatePlayground:
    case RouteId::kListPlaygrounds:
    case RouteId::kGetPlayground:
    case RouteId::kDeletePlayground:
    case RouteId::kExtendPlayground:
    case RouteId::kPlaygroundLogs:
    case RouteId::kPlaygroundEvents:
    case RouteId::kPlaygroundModels:
    case RouteId::kPlaygroundChatCompletions:
    case RouteId::kPlaygroundCompletions:
      return true;
    default:
      return false;
  }
}

void HandlePlaygroundRoute(RouteId id, playground::Manager& m, const store::User& user,
                           const httplib::Request& req, httplib::Response& res,
                           const httplib::ContentReader* reader,
                           const std::atomic<bool>& stopping) {
  const std::string pid = req.matches.size() > 1 ? req.matches[1].str() : "";
  switch (id) {
    case RouteId::kCreatePlayground:
      return Send(res, 201, PlaygroundJson(m.Create(user, ParseObject(ReadBody(req, reader)))));
    case RouteId::kListPlaygrounds: {
      json items = json::array();
      for (const auto& p : m.List(user))
        items.push_back(PlaygroundJson(p));
      return Send(res, 200, {{"items", items}});
    }
    case RouteId::kGetPlayground:
      return Send(res, 200, PlaygroundJson(m.Get(user, pid)));
    case RouteId::kDeletePlayground:
      ReadBody(req, reader);
      return Send(res, 200, PlaygroundJson(m.Stop(user, pid)));
    case RouteId::kExtendPlayground: {
      const json body = ParseObject(ReadBody(req, reader));
      m.Get(user, pid);  // someone else's, or none: 404 before anything about the body
      if (!body.contains("seconds") || !body["seconds"].is_number_integer())
        throw Error{
            400, "BadRequest", "expected {\"seconds\": <whole seconds to add>}", "seconds", {}};
      return Send(res, 200, PlaygroundJson(m.Extend(user, pid, body["seconds"].get<int64_t>())));
    }
    case RouteId::kPlaygroundLogs:
      res.set_content(m.Logs(user, pid, TailLines(req)), "text/plain; charset=utf-8");
      return;
    case RouteId::kPlaygroundEvents:
      return Send(res, 200, {{"items", m.Events(user, pid)}});
    case RouteId::kPlaygroundModels:
      return Proxy(m, user, pid, "GET", "v1/models", req, res, reader, stopping);
    case RouteId::kPlaygroundChatCompletions:
      return Proxy(m, user, pid, "POST", "v1/chat/completions", req, res, reader, stopping);
    case RouteId::kPlaygroundCompletions:
      return Proxy(m, user, pid, "POST", "v1/completions", req, res, reader, stopping);
    default:
      return;
  }
}

}  // namespace starforge::api
