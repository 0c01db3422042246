// pods/log: serves text stored per pod and container. Tests set it with PUT
// /kubesim/logs/<ns>/<pod>[?container=c] (replace) or POST (append); kubesim's kubelet names each
// container's current log file with the annotation kubesim.starforge.dev/log-file.<container>
// (a pod may also name one file for all with kubesim.starforge.dev/log-file). follow=true streams
// appended text until the container's run ends or the pod is deleted or terminal;
// previous=true reads the run before (the kubelet's files are <dir>/<restart>.log).
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "server.h"

namespace kubesim {

using nlohmann::json;

namespace {

constexpr const char* kLogFileAnnotation = "kubesim.starforge.dev/log-file";

std::vector<std::string> ContainerNames(const json& pod, const char* list = "containers") {
  std::vector<std::string> out;
  if (pod.contains("spec") && pod["spec"].contains(list) && pod["spec"][list].is_array()) {
    for (const auto& c : pod["spec"][list])
      out.push_back(c.value("name", ""));
  }
  return out;
}

// The container's status entry (containerStatuses or initContainerStatuses), or null.
json ContainerStatus(const json& pod, const std::string& container) {
  if (!pod.contains("status")) return json();
  for (const char* list : {"containerStatuses", "initContainerStatuses"}) {
    const json& st = pod["status"].value(list, json::array());
    for (const auto& c : st) {
      if (c.value("name", "") == container) return c;
    }
  }
  return json();
}

// The waiting reason of a bound pod's container that never ran ("" otherwise).
std::string WaitingReason(const json& pod, const std::string& container) {
  if (!pod.contains("spec") || pod["spec"].value("nodeName", "").empty()) return "";
  const json st = ContainerStatus(pod, container);
  if (!st.is_object() || !st.contains("state") || !st["state"].contains("waiting")) return "";
  return st["state"]["waiting"].value("reason", "ContainerCreating");
}

// ".../logs/main/3.log" -> ".../logs/main/2.log"; "" when there is no earlier run.
std::string PreviousLogFile(const std::string& file) {
  const std::filesystem::path p(file);
  if (file.empty() || p.extension() != ".log") return "";
  const std::string stem = p.stem().string();
  if (stem.empty() || stem.find_first_not_of("0123456789") != std::string::npos) return "";
  const long n = std::stol(stem);
  if (n <= 0) return "";
  return (p.parent_path() / (std::to_string(n - 1) + ".log")).string();
}

// Has the run whose log is `file` ended: the container is terminated, or it runs from another
// log file now (it was restarted)?
bool RunEnded(const json& pod, const std::string& container, const std::string& file) {
  const std::string key = std::string(kLogFileAnnotation) + "." + container;
  const json& md = pod["metadata"];
  if (md.contains("annotations") && md["annotations"].contains(key) &&
      md["annotations"][key] != file) {
    return true;
  }
  const json st = ContainerStatus(pod, container);
  return st.is_object() && st.contains("state") && st["state"].contains("terminated");
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
    const json* p = store_.Get("pods", ns, pod);
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
  const bool previous = req.has_param("previous") && req.get_param_value("previous") == "true";
  std::string file;
  {
    std::lock_guard<std::mutex> lock(store_.mu);
    const json* pod = store_.Get("pods", t.ns, t.name);
    if (pod == nullptr) throw NotFoundError(*t.r, t.name);
    auto names = ContainerNames(*pod);
    auto inits = ContainerNames(*pod, "initContainers");
    auto list_of = [](const std::vector<std::string>& v) {
      std::string list;
      for (size_t i = 0; i < v.size(); ++i)
        list += (i ? " " : "") + v[i];
      return list;
    };
    if (container.empty()) {
      if (names.size() == 1) {
        container = names[0];
      } else {
        std::string msg = "a container name must be specified for pod " + t.name +
                          ", choose one of: [" + list_of(names) + "]";
        if (!inits.empty()) msg += " or one of the init containers: [" + list_of(inits) + "]";
        throw BadRequest(msg);
      }
    } else if (std::find(names.begin(), names.end(), container) == names.end() &&
               std::find(inits.begin(), inits.end(), container) == inits.end()) {
      throw BadRequest("container " + container + " is not valid for pod " + t.name);
    }
    const json& md = (*pod)["metadata"];
    const std::string per_container = kLogFileAnnotation + std::string(".") + container;
    if (md.contains("annotations") && md["annotations"].contains(per_container)) {
      file = md["annotations"][per_container].get<std::string>();
    } else if (md.contains("annotations") && md["annotations"].contains(kLogFileAnnotation)) {
      file = md["annotations"][kLogFileAnnotation].get<std::string>();
    }
    if (previous) {
      // The kubelet names each run's log "<dir>/<restart>.log": the previous run is one less.
      const std::string prev = PreviousLogFile(file);
      if (prev.empty() || !std::filesystem::exists(prev)) {
        throw BadRequest("previous terminated container \"" + container + "\" in pod \"" + t.name +
                         "\" not found");
      }
      file = prev;
    }
    const std::string waiting = WaitingReason(*pod, container);
    std::lock_guard<std::mutex> logs_lock(logs_mu_);
    if (file.empty() && !waiting.empty() &&
        logs_.count(t.ns + "/" + t.name + "/" + container) == 0) {
      throw BadRequest("container \"" + container + "\" in pod \"" + t.name +
                       "\" is waiting to start: " + waiting);
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
  const bool follow =
      !previous && req.has_param("follow") && req.get_param_value("follow") == "true";
  std::string text = ApplyTail(read_text(), tail);
  if (limit >= 0 && static_cast<int64_t>(text.size()) > limit)
    text.resize(static_cast<size_t>(limit));
  if (!follow) {
    res.status = 200;
    res.set_content(text, "text/plain");
    return;
  }
  // Follow: what exists now, then appended text, until the container's run ends (its state is
  // terminated, or the kubelet moved on to another run's file), or the pod ends or goes away.
  auto sent = std::make_shared<size_t>(read_text().size());
  auto first = std::make_shared<std::string>(text);
  const std::string ns = t.ns;
  const std::string pod_name = t.name;
  res.status = 200;
  res.set_chunked_content_provider(
      "text/plain", [this, sent, first, read_text, ns, pod_name, container, file](
                        size_t, httplib::DataSink& sink) {
        if (!first->empty()) {
          std::string s = std::move(*first);
          first->clear();
          return sink.write(s.data(), s.size());
        }
        {
          std::unique_lock<std::mutex> lock(logs_mu_);
          logs_cv_.wait_for(lock, std::chrono::milliseconds(200));
        }
        // Decide whether the run ended before reading, so nothing written before the end is lost.
        bool ended = false;
        {
          std::lock_guard<std::mutex> lock(store_.mu);
          const json* p = store_.Get("pods", ns, pod_name);
          const std::string phase =
              p != nullptr && p->contains("status") ? (*p)["status"].value("phase", "") : "";
          ended = store_.stopping || p == nullptr || phase == "Succeeded" || phase == "Failed";
          if (!ended && p != nullptr && !file.empty()) ended = RunEnded(*p, container, file);
        }
        std::string now = read_text();
        if (now.size() > *sent) {
          std::string more = now.substr(*sent);
          *sent = now.size();
          if (!sink.write(more.data(), more.size())) return false;
        }
        if (ended) sink.done();
        return true;
      });
}

}  // namespace kubesim
