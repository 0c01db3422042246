// The playground routes (docs/api.md "Playgrounds"): start, list, get, stop, extend, logs,
// events, and the OpenAI-compatible paths forwarded to the model server through the Kubernetes
// API proxy. The manager returns a Status for every refusal; ErrorFor (handler.h) makes it an
// answer.
#include "starforge/api/handlers.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "starforge/api/body.h"
#include "starforge/api/convert.h"
#include "starforge/common/api_errors.h"
#include "starforge/common/format.h"
#include "starforge/playground/manager.h"

namespace starforge::api {

using nlohmann::json;

namespace {

constexpr size_t kMaxBody = 1 << 20;  // a chat request with a long history

std::string ReadBody(const httplib::Request& req, const httplib::ContentReader* reader) {
  std::optional<std::string> body = ReadSmallBody(req, reader, kMaxBody);
  if (!body) throw ApiError{413, api_errors::kPayloadTooLarge, "the request body is over 1 MiB"};
  return std::move(*body);
}

json ParseObject(const std::string& body) {
  if (body.empty()) return json::object();
  json j = json::parse(body, nullptr, false);
  if (!j.is_object())
    throw ApiError{400, api_errors::kBadRequest, "the body must be a JSON object"};
  return j;
}

void Send(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace) + "\n",
                  "application/json");
}

json PlaygroundJson(const store::Playground& p) {
  json j = playground::ToJson(p);
  const int64_t now = NowMs();
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
    const playground::ProxyReply r = ValueOrThrow(m.Proxy(user, id, call, nullptr, nullptr));
    if (r.status == 0) throw ApiError{502, api_errors::kBadGateway, r.message};
    res.status = r.status;
    res.set_content(r.body, r.content_type.empty() ? "application/json" : r.content_type);
    return;
  }
  // The playground's state and ownership are checked before anything is streamed.
  ValueOrThrow(m.Get(user, id));
  auto s = std::make_shared<Stream>();
  s->worker = std::thread([s, &m, user, id, call] {
    playground::ProxyReply r;
    try {
      StatusOr<playground::ProxyReply> got = m.Proxy(
          user, id, call,
          [s](std::string_view chunk) {
            std::lock_guard lock(s->mu);
            s->started = true;
            s->chunks.emplace_back(chunk);
            s->cv.notify_all();
            return !s->stop.load();
          },
          &s->stop);
      if (got.ok()) {
        r = std::move(got).value();
      } else {
        const ApiError e = ErrorFor(got.status());
        r.status = e.status;
        r.body = ErrorJson(e.kind, e.message, e.field, e.errors).dump();
        r.content_type = "application/json";
      }
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
    if (r.status == 0) throw ApiError{502, api_errors::kBadGateway, r.message};
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
  if (!n)
    throw ApiError{400, api_errors::kBadRequest, "tailLines must be a whole number", "tailLines"};
  return *n;
}

// The server's playgrounds, or 404 when it runs none. The handlers read what body they need.
playground::Manager& Manager(Call& c) {
  if (c.server.options.playgrounds == nullptr)
    throw ApiError{404, api_errors::kNotFound, "this server runs no playgrounds"};
  c.body_read = true;
  return *c.server.options.playgrounds;
}

void ProxyTo(Call& c, const std::string& method, const std::string& path) {
  playground::Manager& m = Manager(c);
  Proxy(m, c.user, c.Path(), method, path, c.req, c.res, c.reader, c.server.stopping);
}

}  // namespace

void CreatePlayground(Call& c) {
  playground::Manager& m = Manager(c);
  Send(c.res, 201,
       PlaygroundJson(ValueOrThrow(m.Create(c.user, ParseObject(ReadBody(c.req, c.reader))))));
}

void ListPlaygrounds(Call& c) {
  playground::Manager& m = Manager(c);
  json items = json::array();
  for (const auto& p : m.List(c.user))
    items.push_back(PlaygroundJson(p));
  // Which fleets can run one here, and what the others need: the console offers a start form
  // only for the former.
  json fleets = json::array();
  for (const auto& [kind, why] : m.Fleets()) {
    json f = {{"fleet", kind}, {"available", why.empty()}};
    if (!why.empty()) f["message"] = why;
    fleets.push_back(std::move(f));
  }
  Send(c.res, 200, {{"items", items}, {"fleets", fleets}});
}

void GetPlayground(Call& c) {
  playground::Manager& m = Manager(c);
  Send(c.res, 200, PlaygroundJson(ValueOrThrow(m.Get(c.user, c.Path()))));
}

void DeletePlayground(Call& c) {
  playground::Manager& m = Manager(c);
  ReadBody(c.req, c.reader);
  Send(c.res, 200, PlaygroundJson(ValueOrThrow(m.Stop(c.user, c.Path()))));
}

void ExtendPlayground(Call& c) {
  playground::Manager& m = Manager(c);
  const json body = ParseObject(ReadBody(c.req, c.reader));
  // Someone else's, or none: 404 before anything about the body.
  ValueOrThrow(m.Get(c.user, c.Path()));
  if (!body.contains("seconds") || !body["seconds"].is_number_integer())
    throw BadRequest("expected {\"seconds\": <whole seconds to add>}", "seconds");
  Send(c.res, 200,
       PlaygroundJson(ValueOrThrow(m.Extend(c.user, c.Path(), body["seconds"].get<int64_t>()))));
}

void PlaygroundLogs(Call& c) {
  playground::Manager& m = Manager(c);
  c.res.set_content(ValueOrThrow(m.Logs(c.user, c.Path(), TailLines(c.req))),
                    "text/plain; charset=utf-8");
}

void PlaygroundEvents(Call& c) {
  playground::Manager& m = Manager(c);
  Send(c.res, 200, {{"items", ValueOrThrow(m.Events(c.user, c.Path()))}});
}

void PlaygroundModels(Call& c) {
  ProxyTo(c, "GET", "v1/models");
}

void PlaygroundChatCompletions(Call& c) {
  ProxyTo(c, "POST", "v1/chat/completions");
}

void PlaygroundCompletions(Call& c) {
  ProxyTo(c, "POST", "v1/completions");
}

}  // namespace starforge::api
