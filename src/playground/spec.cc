#include "starforge/playground/spec.h"

#include <filesystem>
#include <regex>
#include <set>

#include "starforge/common/quantity.h"

namespace starforge::playground {

using nlohmann::json;

namespace {

// StarForge sets these itself: the Service and the readiness probe depend on them.
const std::set<std::string>& ReservedArgs() {
  static const std::set<std::string> kReserved = {"--host", "--port", "--served-model-name"};
  return kReserved;
}

bool HasControl(const std::string& s) {
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f) return true;
  }
  return false;
}

std::string LastSegment(std::string model) {
  while (!model.empty() && model.back() == '/')
    model.pop_back();
  const size_t slash = model.rfind('/');
  return slash == std::string::npos ? model : model.substr(slash + 1);
}

}  // namespace

std::optional<int64_t> ParseDuration(const std::string& text) {
  static const std::regex kDuration("([0-9]{1,9})([smhd]?)");
  std::smatch m;
  if (!std::regex_match(text, m, kDuration)) return std::nullopt;
  const int64_t n = std::stoll(m[1].str());
  const std::string unit = m[2].str();
  if (unit == "m") return n * 60;
  if (unit == "h") return n * 3600;
  if (unit == "d") return n * 86400;
  return n;
}

StatusOr<ModelLocation> Locate(const std::string& model, const std::string& storage_root) {
  ModelLocation loc;
  std::string rel = model;
  const std::string root =
      storage_root.empty() || storage_root.back() == '/' ? storage_root : storage_root + "/";
  if (!root.empty() && rel.rfind(root, 0) == 0) {
    rel = rel.substr(root.size());
  } else if (!rel.empty() && rel.front() == '/') {
    return Status::Invalid("an absolute model path must be under the storage root " + storage_root +
                           " (e.g. " + root +
                           "jobs/<job id>/checkpoints/final), or name the path relative to "
                           "it: jobs/<job id>/…");
  }
  if (rel.rfind("jobs/", 0) != 0) return loc;  // a model name the image loads
  // ".." anywhere is refused, not resolved: the path must say plainly which job wrote it.
  for (const auto& part : std::filesystem::path(rel)) {
    if (part == "..") {
      return Status::Invalid(
          "the path leaves its job's directory (\"..\"); name a directory inside it");
    }
  }
  const std::filesystem::path p = std::filesystem::path(rel).lexically_normal();
  auto it = p.begin();
  ++it;  // "jobs"
  if (it == p.end() || it->string().empty() || it->string() == "..") {
    return Status::Invalid("the path names no job: expected jobs/<job id>/<directory>");
  }
  loc.on_storage = true;
  loc.job_id = it->string();
  loc.relative = p.string();
  while (!loc.relative.empty() && loc.relative.back() == '/')
    loc.relative.pop_back();
  return loc;
}

ParseResult Parse(const json& body, const config::Config& cfg) {
  ParseResult r;
  Spec& s = r.spec;
  if (!body.is_object()) {
    r.errors.push_back({"", "the request body must be a JSON object"});
    return r;
  }
  static const std::set<std::string> kKnown = {"model",      "fleet", "series",          "gpus",
                                               "ttlSeconds", "image", "servedModelName", "args",
                                               "cpus",       "memory"};
  for (const auto& [key, value] : body.items()) {
    if (kKnown.count(key) == 0) r.errors.push_back({key, "unknown field"});
  }
  auto text = [&](const char* key, std::string* out) {
    if (!body.contains(key) || body[key].is_null()) return;
    if (!body[key].is_string()) {
      r.errors.push_back({key, "must be a string"});
      return;
    }
    *out = body[key].get<std::string>();
  };
  auto integer = [&](const char* key, int64_t* out) {
    if (!body.contains(key) || body[key].is_null()) return;
    if (!body[key].is_number_integer()) {
      r.errors.push_back({key, "must be an integer"});
      return;
    }
    *out = body[key].get<int64_t>();
  };
  text("model", &s.model);
  text("fleet", &s.fleet);
  text("series", &s.series);
  integer("gpus", &s.gpus);
  integer("ttlSeconds", &s.ttl_seconds);
  text("image", &s.image);
  text("servedModelName", &s.served_name);
  std::string cpus, memory;
  text("cpus", &cpus);
  text("memory", &memory);
  if (!cpus.empty()) s.cpus = cpus;
  if (!memory.empty()) s.memory = memory;
  if (body.contains("args") && !body["args"].is_null()) {
    if (!body["args"].is_array()) {
      r.errors.push_back({"args", "must be a list of strings"});
    } else {
      for (size_t i = 0; i < body["args"].size(); ++i) {
        const json& a = body["args"][i];
        const std::string path = "args[" + std::to_string(i) + "]";
        if (!a.is_string()) {
          r.errors.push_back({path, "must be a string"});
          continue;
        }
        const std::string arg = a.get<std::string>();
        const std::string flag = arg.substr(0, arg.find('='));
        if (ReservedArgs().count(flag) != 0) {
          r.errors.push_back({path, flag + " is set by StarForge (the Service and the readiness "
                                           "probe use it); use servedModelName for the name"});
        } else if (HasControl(arg)) {
          r.errors.push_back({path, "contains a control character"});
        } else {
          s.args.push_back(arg);
        }
      }
    }
  }
  if (s.model.empty()) {
    r.errors.push_back({"model",
                        "required: a directory a job wrote (jobs/<job id>/…, relative "
                        "to the storage root) or a model name the image can load"});
  } else if (HasControl(s.model) || s.model.size() > 1024) {
    r.errors.push_back({"model", "must be at most 1024 characters without control characters"});
  }
  if (s.fleet.empty()) s.fleet = config::ToString(cfg.default_fleet_kind);
  if (s.fleet != "kuberay" && s.fleet != "local") {
    r.errors.push_back({"fleet", "must be kuberay or local, got \"" + s.fleet + "\""});
  }
  if (s.gpus < 0 || s.gpus > 64) r.errors.push_back({"gpus", "must be between 0 and 64"});
  if (s.fleet == "kuberay" && s.series.empty() && s.gpus > 0) {
    r.errors.push_back({"series",
                        "required with GPUs: the card series to run on (the value of "
                        "the " +
                            cfg.k8s_gpu_node_label + " node label, e.g. h200)"});
  }
  if (s.ttl_seconds < kMinTtlSeconds || s.ttl_seconds > cfg.playground_max_ttl_s) {
    r.errors.push_back({"ttlSeconds", "must be between " + std::to_string(kMinTtlSeconds) +
                                          " and " + std::to_string(cfg.playground_max_ttl_s) +
                                          " (FORGE_PLAYGROUND_MAX_TTL_S)"});
  }
  if (s.image.empty()) s.image = cfg.image_vllm;
  if (s.image.empty() && s.fleet == "kuberay") {
    r.errors.push_back({"image",
                        "required: this server has no FORGE_IMAGE_VLLM; name a vLLM "
                        "image (e.g. vllm/vllm-openai:v0.11.0)"});
  }
  if (s.served_name.empty()) s.served_name = LastSegment(s.model);
  static const std::regex kServedName("[A-Za-z0-9][A-Za-z0-9._/-]{0,127}");
  if (!s.model.empty() && !std::regex_match(s.served_name, kServedName)) {
    r.errors.push_back({"servedModelName",
                        "must be 1-128 characters of A-Z a-z 0-9 . _ / -, "
                        "starting with a letter or digit"});
  }
  for (const auto& [field, value] : {std::pair{"cpus", s.cpus}, std::pair{"memory", s.memory}}) {
    const auto q = value ? Quantity::Parse(*value) : std::nullopt;
    if (value && (!q || !q->IsPositive())) {
      r.errors.push_back({field, "must be a positive Kubernetes quantity (e.g. 8, 500m, 64Gi)"});
    }
  }
  return r;
}

json ToJson(const Spec& s) {
  json j = {{"model", s.model},
            {"fleet", s.fleet},
            {"series", s.series},
            {"gpus", s.gpus},
            {"ttlSeconds", s.ttl_seconds},
            {"image", s.image},
            {"servedModelName", s.served_name},
            {"args", s.args}};
  if (s.cpus) j["cpus"] = *s.cpus;
  if (s.memory) j["memory"] = *s.memory;
  return j;
}

Spec FromJson(const json& j) {
  Spec s;
  s.model = j.value("model", "");
  s.fleet = j.value("fleet", "");
  s.series = j.value("series", "");
  s.gpus = j.value("gpus", int64_t{1});
  s.ttl_seconds = j.value("ttlSeconds", kDefaultTtlSeconds);
  s.image = j.value("image", "");
  s.served_name = j.value("servedModelName", "");
  s.args = j.value("args", std::vector<std::string>{});
  if (j.contains("cpus")) s.cpus = j["cpus"].get<std::string>();
  if (j.contains("memory")) s.memory = j["memory"].get<std::string>();
  return s;
}

}  // namespace starforge::playground
