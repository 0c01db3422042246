// What a user asks for when starting a playground (POST /api/v1/playgrounds), validated and with
// its defaults filled in. Pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "starforge/common/field_error.h"
#include "starforge/common/status_or.h"
#include "starforge/config/config.h"

namespace starforge::playground {

inline constexpr int64_t kDefaultTtlSeconds = 3600;
inline constexpr int64_t kMinTtlSeconds = 60;

struct Spec {
  // A directory a job of the user wrote, relative to the storage root ("jobs/<job id>/…"), or a
  // model name the image can load (e.g. "Qwen/Qwen2.5-0.5B-Instruct"); see docs/playground.md.
  std::string model;
  std::string fleet;   // "kuberay" | "local" (default: FORGE_DEFAULT_FLEET_KIND)
  std::string series;  // card series (the GPU node label's value); required on kuberay
  int64_t gpus = 1;    // ≥ 0
  int64_t ttl_seconds = kDefaultTtlSeconds;
  std::string image;              // default FORGE_IMAGE_VLLM
  std::string served_name;        // the model name clients send; default: the model's last segment
  std::vector<std::string> args;  // more `vllm serve` arguments
  std::optional<std::string> cpus;
  std::optional<std::string> memory;
};

struct ParseResult {
  Spec spec;
  FieldErrors errors;  // field paths as in the request (model, ttlSeconds, args[2], …)
  bool ok() const { return errors.empty(); }
};

// Reads a request body ({model, fleet?, series?, gpus?, ttlSeconds?, image?, servedModelName?,
// args?, cpus?, memory?}); unknown fields are errors.
ParseResult Parse(const nlohmann::json& body, const config::Config& cfg);

nlohmann::json ToJson(const Spec& spec);  // the request's field names
Spec FromJson(const nlohmann::json& j);   // ToJson's inverse (stored rows)

// Where the model lives. A path on the storage volume names the job that wrote it.
struct ModelLocation {
  bool on_storage = false;
  std::string job_id;    // when on_storage
  std::string relative;  // when on_storage: "jobs/<job id>/<rest>", normalised
};
// "jobs/<id>/…" (or the same under an absolute FORGE_STORAGE_ROOT) is a path; anything else is a
// model name. kInvalidArgument for a path that leaves its job's directory ("..") or names none.
StatusOr<ModelLocation> Locate(const std::string& model, const std::string& storage_root);

// "90", "90s", "15m", "2h", "1d" → seconds; nullopt when not such a duration.
std::optional<int64_t> ParseDuration(const std::string& text);

}  // namespace starforge::playground
