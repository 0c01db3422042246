// Event recording for kubesim's controllers, in the two shapes real components use
// (client-go tools/record and tools/events; see docs/kubesim.md):
//  - legacy core/v1 (client-go tools/record): source{component, host}, firstTimestamp /
//    lastTimestamp / count, reportingComponent = source.component, reportingInstance = host;
//    a repeat of the same (object, type, reason, message) PATCHes count and lastTimestamp;
//  - events.k8s.io/v1 (client-go tools/events): reportingController, reportingInstance, action,
//    note, eventTime (MicroTime), no first/lastTimestamp; a repeat within 6 minutes sets
//    series{count, lastObservedTime}.
// The name is `<object name>.<hex UnixNano>` in both. Recording is best effort (an error is
// logged to stderr and dropped), as with client-go's recorders. The correlation cache is bounded.
#pragma once

#include <chrono>
#include <cstdint>
#include <list>
#include <map>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "starforge/kube/client.h"

namespace kubesim::controllers {

struct EventSource {
  // true: events.k8s.io/v1 (reportingController); false: core/v1 (source.component).
  bool new_api = true;
  std::string component;  // "rayjob-controller", "job-controller", "default-scheduler", "kubelet"
  std::string instance;   // reportingInstance / source.host (e.g. the node name); may be ""
};

class EventRecorder {
 public:
  EventRecorder(starforge::kube::Client& client, EventSource source);

  // `regarding` is the object (its apiVersion, kind, metadata.name/namespace/uid/resourceVersion
  // are copied). `type` is Normal|Warning; `action` is used by the new API only. `field_path`
  // e.g. "spec.containers{main}" ("" = none).
  void Emit(const nlohmann::json& regarding, const std::string& type, const std::string& reason,
            const std::string& action, const std::string& note, const std::string& field_path = "");

  // The object reference an event carries for `object`.
  static nlohmann::json Reference(const nlohmann::json& object, const std::string& field_path = "");
  // "2006-01-02T15:04:05.000000Z" (MicroTime) and "2006-01-02T15:04:05Z" for now.
  static std::string NowMicro();
  static std::string NowSeconds();

 private:
  struct Seen {
    std::string ns;
    std::string name;  // the Event's name
    int64_t count = 1;
    std::chrono::steady_clock::time_point first;
  };
  starforge::kube::Client& client_;
  EventSource source_;
  std::mutex mu_;
  std::map<std::string, Seen> seen_;  // correlation key -> the event written
  std::list<std::string> order_;      // oldest first, to bound seen_
};

}  // namespace kubesim::controllers
