// services/proxy: /api/v1/namespaces/{ns}/services/[scheme:]{name}[:port]/proxy/{path}.
// The backend is a pod the service selects (kubesim's pod network gives each pod a loopback
// address; node/pod_network.h) at the service port's targetPort, or, overriding that, the
// annotation kubesim.starforge.dev/proxy-target: "HOST:PORT" (every service port) or
// "portName=HOST:PORT,other=HOST:PORT". The port is resolved as kube-apiserver does
// (pkg/registry/core/service/storage ResourceLocation): a number maps to the service port's name,
// and that name must be one of the service's ports. Without the annotation and without a ready
// selected pod the service has no endpoints: 503 "no endpoints available for service". The request
// (method, path, query, body, headers without Authorization and hop-by-hop ones, plus
// X-Forwarded-*) goes to the backend; its status, headers and body come back as they are, streamed
// chunk by chunk.
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <set>
#include <thread>

#include "node/fake_ray.h"
#include "node/pod_network.h"
#include "server.h"
#include "starforge/common/json_read.h"

namespace kubesim {

using nlohmann::json;
using starforge::json_read::Field;

namespace {

constexpr const char* kProxyTargetAnnotation = "kubesim.starforge.dev/proxy-target";

std::vector<std::string> SplitOn(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t p = s.find(sep, start);
    out.push_back(s.substr(start, p == std::string::npos ? std::string::npos : p - start));
    if (p == std::string::npos) break;
    start = p + 1;
  }
  return out;
}

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t");
  size_t e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

bool AllDigits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

struct HostPort {
  std::string host;
  int port = 0;
};

HostPort ParseHostPort(const std::string& v) {
  const auto colon = v.rfind(':');
  const std::string port = colon == std::string::npos ? "" : v.substr(colon + 1);
  if (colon == std::string::npos || colon == 0 || !AllDigits(port) || port.size() > 5) {
    throw ApiError(500, "InternalError",
                   std::string("Internal error occurred: annotation ") + kProxyTargetAnnotation +
                       " must be HOST:PORT or NAME=HOST:PORT,..., not \"" + v + "\"");
  }
  return {v.substr(0, colon), std::stoi(port)};
}

// Hop-by-hop headers (RFC 7230 §6.1) and those the proxy sets itself.
bool SkipHeader(const std::string& name) {
  static const std::set<std::string> kSkip = {
      "connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding",
      "upgrade", "content-length", "host", "authorization", "accept-encoding",
      "proxy-authorization",
      // kubesim's controller credentials never reach a backend
      "x-kubesim-controller", "x-kubesim-controller-key",
      // httplib's server adds these to every request
      "local_addr", "local_port", "remote_addr", "remote_port"};
  std::string lower;
  for (char c : name)
    lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  return kSkip.count(lower) != 0;
}

// One proxied exchange: the backend request runs on its own thread and hands the response
// head and body chunks to the API server's chunked content provider.
struct ProxyStream {
  std::mutex mu;
  std::condition_variable cv;
  bool have_head = false;
  int status = 0;
  httplib::Headers headers;
  std::deque<std::string> chunks;
  bool done = false;
  httplib::Error error = httplib::Error::Success;
  bool cancel = false;
  std::unique_ptr<httplib::ClientImpl> client;
  std::thread thread;

  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu);
      cancel = true;
    }
    if (client) client->stop();
    if (thread.joinable()) thread.join();
  }
};

}  // namespace

void Server::ServiceProxy(const httplib::Request& req, httplib::Response& res, const Target& t) {
  // [scheme:]name[:port] (apimachinery SplitSchemeNamePort).
  const std::vector<std::string> parts = SplitOn(t.name, ':');
  std::string scheme;
  std::string name;
  std::string port;
  if (parts.size() == 1) {
    name = parts[0];
  } else if (parts.size() == 2) {
    name = parts[0];
    port = parts[1];
  } else if (parts.size() == 3) {
    scheme = parts[0];
    name = parts[1];
    port = parts[2];
  }
  if (parts.size() > 3 || name.empty() || (scheme != "" && scheme != "http" && scheme != "https")) {
    throw BadRequest("invalid service request \"" + t.name + "\"");
  }

  HostPort target;
  {
    std::lock_guard<std::mutex> lock(store_.mu);
    const json* svc = store_.Get("services", t.ns, name);
    if (svc == nullptr) {
      if (AllDigits(port)) throw NotFoundError(*t.r, name);
      ApiError e(404, "NotFound", "endpoints \"" + name + "\" not found");
      e.details = {{"name", name}, {"kind", "endpoints"}};
      throw e;
    }
    const json ports =
        svc->contains("spec") ? (*svc)["spec"].value("ports", json::array()) : json::array();
    if (AllDigits(port)) {
      bool found = false;
      for (const auto& p : ports) {
        if (p.value("port", int64_t{-1}) == std::stoll(port)) {
          port = p.value("name", "");
          found = true;
          break;
        }
      }
      if (!found) {
        throw ApiError(503, "ServiceUnavailable",
                       "no service port " + std::to_string(std::stoll(port)) +
                           " found for service \"" + name + "\"");
      }
    }
    const json& md = (*svc)["metadata"];
    std::string annotation;
    if (md.contains("annotations") && md["annotations"].contains(kProxyTargetAnnotation)) {
      annotation = md["annotations"][kProxyTargetAnnotation].get<std::string>();
    }
    // The endpoint port is the service port of that name.
    const json* service_port = nullptr;
    for (const auto& p : ports) {
      if (p.value("name", "") == port) service_port = &p;
    }
    if (Trim(annotation).empty()) {
      // No override: the pod network (node/pod_network.h) gives a selected, ready pod's address
      // and the service port's targetPort, as the service's Endpoints would.
      // Candidates from the label index, the selector's rarest pair: listing every pod of the
      // namespace made each proxied request O(pods) under the store's lock (7.6 % of kubesim's
      // CPU with 1,000 jobs running). kube-apiserver reads the service's Endpoints.
      std::vector<const json*> candidates;
      const json& selector = Field(Field(*svc, "spec"), "selector");
      if (selector.is_object()) {
        bool first = true;
        for (const auto& [k, v] : selector.items()) {
          if (!v.is_string()) {
            candidates.clear();  // a value that is not a string matches no label
            break;
          }
          std::vector<const json*> list = store_.ListByLabel("pods", t.ns, k, v.get<std::string>());
          if (first || list.size() < candidates.size()) candidates = std::move(list);
          first = false;
        }
      }
      const json* ep = node::PickEndpoint(*svc, candidates);
      const int64_t target_port = ep != nullptr && service_port != nullptr
                                      ? node::ResolveTargetPort(*service_port, *ep)
                                      : -1;
      if (ep == nullptr || target_port <= 0) {
        throw ApiError(503, "ServiceUnavailable",
                       "no endpoints available for service \"" + name + "\"");
      }
      target = {(*ep)["status"].value("podIP", ""), static_cast<int>(target_port)};
    } else if (service_port == nullptr) {
      throw ApiError(503, "ServiceUnavailable",
                     "no endpoints available for service \"" + t.name + "\"");
    } else if (annotation.find('=') == std::string::npos) {
      target = ParseHostPort(Trim(annotation));
    } else {
      bool mapped = false;
      for (const auto& item : SplitOn(annotation, ',')) {
        const auto eq = item.find('=');
        if (eq == std::string::npos) continue;
        if (Trim(item.substr(0, eq)) == port) {
          target = ParseHostPort(Trim(item.substr(eq + 1)));
          mapped = true;
          break;
        }
      }
      if (!mapped) {
        throw ApiError(503, "ServiceUnavailable",
                       "no endpoints available for service \"" + t.name + "\"");
      }
    }
  }

  // The part of the raw (still percent-encoded) request target after ".../proxy", and the query.
  std::string raw = req.target.empty() ? req.path : req.target;
  std::string query;
  if (auto q = raw.find('?'); q != std::string::npos) {
    query = raw.substr(q + 1);
    raw.resize(q);
  }
  std::string rest = "/";
  const auto svc_pos = raw.find("/services/");
  if (svc_pos != std::string::npos) {
    const auto id_end = raw.find('/', svc_pos + 10);
    if (id_end != std::string::npos && raw.compare(id_end, 6, "/proxy") == 0) {
      rest = raw.substr(id_end + 6);
      if (rest.empty()) rest = "/";
    }
  }

  // A fake Ray head (kubelet --pods fake) answers in this process: nothing listens there.
  if (auto fake = node::AnswerFakeRay(target.host, req.method,
                                      rest + (query.empty() ? "" : "?" + query), req.body)) {
    res.status = fake->status;
    res.set_content(fake->body, fake->content_type);
    return;
  }
  auto s = std::make_shared<ProxyStream>();
  if (scheme == "https") {
    auto ssl = std::make_unique<httplib::SSLClient>(target.host, target.port);
    ssl->enable_server_certificate_verification(false);
    s->client = std::move(ssl);
  } else {
    s->client = std::make_unique<httplib::ClientImpl>(target.host, target.port);
  }
  s->client->set_url_encode(false);
  s->client->set_decompress(false);
  s->client->set_keep_alive(false);
  s->client->set_connection_timeout(5, 0);
  s->client->set_read_timeout(24 * 3600, 0);  // streams may be quiet; Stop() ends them
  s->client->set_write_timeout(30, 0);

  httplib::Request breq;
  breq.method = req.method;
  breq.path = rest + (query.empty() ? "" : "?" + query);
  for (const auto& [k, v] : req.headers) {
    if (!SkipHeader(k)) breq.headers.emplace(k, v);
  }
  breq.headers.emplace("X-Forwarded-Uri", req.target.empty() ? req.path : req.target);
  breq.headers.emplace("X-Forwarded-Host", req.get_header_value("Host"));
  breq.headers.emplace("X-Forwarded-Proto", opts_.tls ? "https" : "http");
  breq.body = req.body;
  breq.response_handler = [s](const httplib::Response& r) {
    std::lock_guard<std::mutex> lock(s->mu);
    s->status = r.status;
    s->headers = r.headers;
    s->have_head = true;
    s->cv.notify_all();
    return !s->cancel;
  };
  breq.content_receiver = [s](const char* data, size_t n, uint64_t, uint64_t) {
    std::lock_guard<std::mutex> lock(s->mu);
    s->chunks.emplace_back(data, n);
    s->cv.notify_all();
    return !s->cancel;
  };
  // The thread holds the stream only through `s`; Stop() (the releaser) joins it.
  s->thread = std::thread([s, breq]() mutable {
    httplib::Response bres;
    httplib::Error err = httplib::Error::Success;
    const bool ok = s->client->send(breq, bres, err);
    std::lock_guard<std::mutex> lock(s->mu);
    s->done = true;
    if (!ok) s->error = err == httplib::Error::Success ? httplib::Error::Unknown : err;
    s->cv.notify_all();
  });

  // Wait for the backend's response head.
  bool have_head = false;
  httplib::Error error = httplib::Error::Success;
  {
    std::unique_lock<std::mutex> lock(s->mu);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!s->have_head && !s->done && std::chrono::steady_clock::now() < deadline) {
      s->cv.wait_for(lock, std::chrono::milliseconds(200));
      std::lock_guard<std::mutex> store_lock(store_.mu);
      if (store_.stopping) break;
    }
    have_head = s->have_head;
    error = s->error;
  }
  if (!have_head) {
    s->Stop();
    const std::string addr = target.host + ":" + std::to_string(target.port);
    std::string why;
    if (error == httplib::Error::Connection || error == httplib::Error::ConnectionTimeout) {
      why = "dial tcp " + addr + ": connect: connection refused";
    } else if (error == httplib::Error::Success) {
      why = "timeout awaiting response headers from " + addr;
    } else {
      why = "proxy to " + addr + " failed: " + httplib::to_string(error);
    }
    throw ApiError(503, "ServiceUnavailable", "error trying to reach service: " + why);
  }

  std::string content_type;
  {
    std::lock_guard<std::mutex> lock(s->mu);
    res.status = s->status;
    for (const auto& [k, v] : s->headers) {
      std::string lower;
      for (char c : k)
        lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
      if (lower == "content-type") {
        content_type = v;
      } else if (!SkipHeader(k)) {
        res.headers.emplace(k, v);
      }
    }
  }
  if (content_type.empty()) content_type = "application/octet-stream";
  res.set_chunked_content_provider(
      content_type,
      [this, s](size_t, httplib::DataSink& sink) {
        std::unique_lock<std::mutex> lock(s->mu);
        s->cv.wait_for(lock, std::chrono::milliseconds(200),
                       [&] { return !s->chunks.empty() || s->done; });
        if (!s->chunks.empty()) {
          std::string chunk = std::move(s->chunks.front());
          s->chunks.pop_front();
          lock.unlock();
          return sink.write(chunk.data(), chunk.size());
        }
        if (s->done) {
          lock.unlock();
          sink.done();
          return true;
        }
        lock.unlock();
        std::lock_guard<std::mutex> store_lock(store_.mu);
        return !store_.stopping;
      },
      [s](bool) { s->Stop(); });
}

}  // namespace kubesim
