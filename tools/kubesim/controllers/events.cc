#include "controllers/events.h"

#include <cstdio>
#include <ctime>

#include "starforge/common/format.h"

namespace kubesim::controllers {

using nlohmann::json;
namespace kube = starforge::kube;

namespace {

constexpr size_t kMaxSeen = 4096;
constexpr auto kSeriesWindow = std::chrono::minutes(6);

std::string HexNanos() {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
  char buf[32];
  std::snprintf(buf, sizeof buf, "%llx", static_cast<unsigned long long>(ns));
  return buf;
}

}  // namespace

EventRecorder::EventRecorder(kube::Client& client, EventSource source)
    : client_(client), source_(std::move(source)) {}

std::string EventRecorder::NowSeconds() {
  return starforge::NowRfc3339();
}

std::string EventRecorder::NowMicro() {
  const auto now = std::chrono::system_clock::now();
  const auto us =
      std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count();
  char frac[16];
  std::snprintf(frac, sizeof frac, ".%06lldZ", static_cast<long long>(us % 1000000));
  return starforge::FormatUtc(us / 1000000, "%Y-%m-%dT%H:%M:%S") + frac;
}

json EventRecorder::Reference(const json& object, const std::string& field_path) {
  const json& md = object.value("metadata", json::object());
  json ref = {{"apiVersion", object.value("apiVersion", "")},
              {"kind", object.value("kind", "")},
              {"name", md.value("name", "")},
              {"uid", md.value("uid", "")},
              {"resourceVersion", md.value("resourceVersion", "")}};
  if (md.contains("namespace")) ref["namespace"] = md["namespace"];
  if (!field_path.empty()) ref["fieldPath"] = field_path;
  return ref;
}

void EventRecorder::Emit(const json& regarding, const std::string& type, const std::string& reason,
                         const std::string& action, const std::string& note,
                         const std::string& field_path) {
  const json ref = Reference(regarding, field_path);
  const std::string ns = ref.value("namespace", "default");
  const std::string key = ref.value("uid", "") + "|" + ref.value("name", "") + "|" + field_path +
                          "|" + type + "|" + reason + "|" + action + "|" + note;
  const auto now = std::chrono::steady_clock::now();
  try {
    std::string existing;
    int64_t count = 1;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = seen_.find(key);
      if (it != seen_.end() && (!source_.new_api || now - it->second.first < kSeriesWindow)) {
        existing = it->second.name;
        count = ++it->second.count;
        // client-go tools/events sends the series once (count 2) and keeps later repeats in its
        // cache until the periodic refresh; the legacy recorder patches every repeat.
        if (source_.new_api && count > 2) return;
      }
    }
    if (!existing.empty()) {
      json patch;
      if (source_.new_api) {
        patch = {{"series", {{"count", count}, {"lastObservedTime", NowMicro()}}}};
      } else {
        patch = {{"count", count}, {"lastTimestamp", NowSeconds()}};
      }
      try {
        client_.MergePatch(source_.new_api ? kube::resources::kEventsV1 : kube::resources::kEvents,
                           ns, existing, patch);
        return;
      } catch (const kube::ApiError&) {
        // Gone (TTL, namespace deleted): record a new one below.
      }
    }
    const std::string name = ref.value("name", "") + "." + HexNanos();
    json ev;
    if (source_.new_api) {
      ev = {{"apiVersion", "events.k8s.io/v1"},
            {"kind", "Event"},
            {"metadata", {{"name", name}, {"namespace", ns}}},
            {"regarding", ref},
            {"reason", reason},
            {"note", note},
            {"type", type},
            {"action", action},
            {"eventTime", NowMicro()},
            {"reportingController", source_.component},
            {"reportingInstance", source_.instance}};
      client_.Create(kube::resources::kEventsV1, ns, ev);
    } else {
      const std::string ts = NowSeconds();
      json src = {{"component", source_.component}};
      if (!source_.instance.empty()) src["host"] = source_.instance;
      ev = {{"apiVersion", "v1"},
            {"kind", "Event"},
            {"metadata", {{"name", name}, {"namespace", ns}}},
            {"involvedObject", ref},
            {"reason", reason},
            {"message", note},
            {"type", type},
            {"source", src},
            {"firstTimestamp", ts},
            {"lastTimestamp", ts},
            {"count", 1},
            {"reportingComponent", source_.component},
            {"reportingInstance", source_.instance}};
      client_.Create(kube::resources::kEvents, ns, ev);
    }
    std::lock_guard<std::mutex> lock(mu_);
    auto [it, inserted] = seen_.insert_or_assign(key, Seen{ns, name, 1, now});
    (void)it;
    if (inserted) order_.push_back(key);
    while (seen_.size() > kMaxSeen && !order_.empty()) {
      seen_.erase(order_.front());
      order_.pop_front();
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kubesim: %s: cannot record event %s on %s/%s: %s\n",
                 source_.component.c_str(), reason.c_str(), ns.c_str(),
                 ref.value("name", "").c_str(), e.what());
  }
}

}  // namespace kubesim::controllers
