// pods/log: serves text stored per pod and container. Tests (and, later, the simulated kubelet)
// set it with PUT /kubesim/logs/<ns>/<pod>[?container=c] (replace) or POST (append); a pod may
// instead name a file with the annotation kubesim.starforge.dev/log-file. follow=true streams
// appended text until the pod is deleted or terminal (Succeeded/Failed).
#include <chrono>
#include <fstream>
#include <memory>
#include <sstream>

#include "server.h"

namespace kubesim {

using nlohmann::json;

namespace {

constexpr const char* kLogFileAnnotation = "kubesim.starforge.dev/log-file";

std::vector<std::string> ContainerNames(const json& pod) {
  std::vector<std::string> out;
  if (pod.contains("spec") && pod["spec"].contains("containers")) {
    for (const auto& c : pod["spec"]["containers"])
      out.push_back(c.value("name", ""));
  }
  return out;
}

std::string ApplyTail(const std::string& text, int64_t tail) {
  if (tail < 0) return text;
  size_t pos = text.size();
  if (pos > 0 && text[pos - 1] == '\n') --pos;
  int64_t lines = 0;
  while (pos > 0) {
    if (text[pos - 1] == '\n') {
      if (++lines == tail) break;
    }
    --pos;
  }
  if (tail == 0) return "";
  return text.substr(pos);
}

}  // namespace

void Server::SetLog(const httplib::Request& req, httplib::Response& res, const std::string& ns,
                    const std::string& pod, bool append) {
  std::string container = req.has_param("container") ? req.get_param_value("container") : "";
  if (container.empty()) {
    std::lock_guard<std::mutex> lock(store_.mu);
    json* p = store_.Get("pods", ns, pod);
    if (p == nullptr) throw ApiError(404, "NotFound", "pods \"" + pod + "\" not found");
    auto names = ContainerNames(*p);
    if (!names.empty()) container = names[0];
  }
  {
    std::lock_guard<std::mutex> lock(logs_mu_);
    std::string& slot = logs_[ns + "/" + pod + "/" + container];
    slot = append ? slot + req.body : req.body;
  }
  logs_cv_.notify_all();
  WriteJson(res, 200, {{"container", container}});
}

void Server::Log(const httplib::Request& req, httplib::Response& res, const Target& t) {
  std::string container = req.has_param("container") ? req.get_param_value("container") : "";
  std::string file;
  {
    std::lock_guard<std::mutex> lock(store_.mu);
    json* pod = store_.Get("pods", t.ns, t.name);
    if (pod == nullptr) throw NotFoundError(*t.r, t.name);
    auto names = ContainerNames(*pod);
    if (container.empty()) {
      if (names.size() == 1) {
        container = names[0];
      } else {
        std::string list;
        for (size_t i = 0; i < names.size(); ++i)
          list += (i ? " " : "") + names[i];
        throw BadRequest("a container name must be specified for pod " + t.name +
                         ", choose one of: [" + list + "]");
      }
    } else if (std::find(names.begin(), names.end(), container) == names.end()) {
      throw BadRequest("container " + container + " is not valid for pod " + t.name);
    }
    const json& md = (*pod)["metadata"];
    if (md.contains("annotations") && md["annotations"].contains(kLogFileAnnotation)) {
      file = md["annotations"][kLogFileAnnotation].get<std::string>();
    }
  }
  const std::string key = t.ns + "/" + t.name + "/" + container;
  auto read_text = [this, key, file]() {
    if (!file.empty()) {
      std::ifstream in(file);
      std::stringstream ss;
      ss << in.rdbuf();
      return ss.str();
    }
    std::lock_guard<std::mutex> lock(logs_mu_);
    auto it = logs_.find(key);
    return it == logs_.end() ? std::string() : it->second;
  };
  int64_t tail = -1;
  if (req.has_param("tailLines")) tail = std::stoll(req.get_param_value("tailLines"));
  int64_t limit = -1;
  if (req.has_param("limitBytes")) limit = std::stoll(req.get_param_value("limitBytes"));
  const bool follow = req.has_param("follow") && req.get_param_value("follow") == "true";
  std::string text = ApplyTail(read_text(), tail);
  if (limit >= 0 && static_cast<int64_t>(text.size()) > limit)
    text.resize(static_cast<size_t>(limit));
  if (!follow) {
    res.status = 200;
    res.set_content(text, "text/plain");
    return;
  }
  // Follow: what exists now, then appended text, until the pod ends or goes away.
  auto sent = std::make_shared<size_t>(read_text().size());
  auto first = std::make_shared<std::string>(text);
  const std::string ns = t.ns;
  const std::string pod_name = t.name;
  res.status = 200;
  res.set_chunked_content_provider(
      "text/plain", [this, sent, first, read_text, ns, pod_name](size_t, httplib::DataSink& sink) {
        if (!first->empty()) {
          std::string s = std::move(*first);
          first->clear();
          return sink.write(s.data(), s.size());
        }
        {
          std::unique_lock<std::mutex> lock(logs_mu_);
          logs_cv_.wait_for(lock, std::chrono::milliseconds(200));
        }
        std::string now = read_text();
        if (now.size() > *sent) {
          std::string more = now.substr(*sent);
          *sent = now.size();
          return sink.write(more.data(), more.size());
        }
        bool ended = false;
        {
          std::lock_guard<std::mutex> lock(store_.mu);
          json* p = store_.Get("pods", ns, pod_name);
          const std::string phase =
              p != nullptr && p->contains("status") ? (*p)["status"].value("phase", "") : "";
          ended = store_.stopping || p == nullptr || phase == "Succeeded" || phase == "Failed";
        }
        if (ended) sink.done();
        return true;
      });
}

}  // namespace kubesim
