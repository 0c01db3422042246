// events.k8s.io/v1 Event fields and the core/v1 Event fields they are stored as (kube-apiserver
// keeps one storage form and converts on the way in and out).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace kubesim {

// {events.k8s.io/v1 name, core/v1 name}.
inline const std::vector<std::pair<std::string, std::string>> kEventV1ToCore = {
    {"regarding", "involvedObject"},
    {"note", "message"},
    {"deprecatedSource", "source"},
    {"deprecatedFirstTimestamp", "firstTimestamp"},
    {"deprecatedLastTimestamp", "lastTimestamp"},
    {"deprecatedCount", "count"},
    {"reportingController", "reportingComponent"}};

}  // namespace kubesim
