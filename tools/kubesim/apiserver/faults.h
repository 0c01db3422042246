// Fault injection and request accounting, driven through the admin endpoints
// (POST/GET/DELETE /kubesim/faults, GET/DELETE /kubesim/requests). A rule matches a request by
// verb and resource ("*" = any) and either fails it with an injected status (500/503/504 as a
// Status, 429 as plain text with Retry-After, 401, 403), delays it, or limits a watch's life.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "status.h"

namespace kubesim {

struct FaultRule {
  std::string verb = "*";      // get, list, watch, create, update, patch, delete, ...
  std::string resource = "*";  // plural, optionally with "/sub" ("pods/log", "rayjobs/status")
  int code = 0;                // 0 = no error, only latency / watch closing
  double rate = 1.0;           // probability per matching request
  int64_t count = -1;          // how many more times it may fire (-1 = unlimited)
  int retry_after = 0;         // seconds; adds Retry-After (429 always has one, default 1)
  int latency_ms = 0;
  int close_watch_after_ms = -1;  // watches: end the stream after this long
  std::string message;
};

class Faults {
 public:
  struct Decision {
    int latency_ms = 0;
    int close_watch_after_ms = -1;
    std::optional<ApiError> error;
  };

  // Replaces the rules from {"rules":[...], "watchExpiredAs":"event"|"http"}; throws
  // ApiError 400 on a malformed body.
  void Set(const nlohmann::json& body);
  void Clear();
  nlohmann::json ToJson();
  Decision Check(const std::string& verb, const std::string& resource);

  void Count(const std::string& verb, const std::string& resource);
  nlohmann::json Counts();
  void ResetCounts();
  // Whether a too-old watch resourceVersion is answered with HTTP 410 (true) or with an
  // ERROR event inside a 200 stream (false; what kube-apiserver's watch cache does).
  bool ExpiredAsHttp();

 private:
  std::mutex mu_;
  std::vector<FaultRule> rules_;
  std::map<std::string, uint64_t> counts_;
  bool expired_as_http_ = false;
  std::mt19937 rng_{12345};
};

}  // namespace kubesim
