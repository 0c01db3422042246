#include "starforge/jobspec/parse.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <map>

#include "starforge/common/did_you_mean.h"
#include "starforge/common/names.h"
#include "starforge/common/quantity.h"
#include "starforge/common/yaml_json.h"

namespace starforge::jobspec {

namespace {

using nlohmann::json;
using Fields = std::vector<std::string>;

constexpr int64_t kMaxInt32 = std::numeric_limits<int32_t>::max();
constexpr int64_t kMaxMachinesPerPool = 10000;
constexpr int64_t kMaxGpusPerMachine = 64;
constexpr size_t kMaxQueueLength = 63;  // a Kueue queue name is also a label value
constexpr size_t kMaxQuotedLength = 64;
constexpr std::string_view kReservedEnvPrefix = "FORGE_";

const Fields kTopFields = {"name", "fleet", "recipe",    "image",  "entrypoint", "env",
                           "code", "pools", "deadlines", "corpus", "queue",      "resumeFrom"};
const Fields kPoolFields = {"name",           "gpuSeries",      "machines",
                            "gpusPerMachine", "cpusPerMachine", "memoryPerMachine"};
const Fields kDeadlineFields = {"preRunningSeconds", "runningSeconds", "queueSeconds"};
const Fields kFleets = {"local", "kuberay"};
const Fields kRecipes = {"none", "nemo-rl"};

// A JSON string literal, shortened so that one error line stays readable.
std::string Quote(std::string_view s) {
  std::string text(s.substr(0, kMaxQuotedLength));
  if (s.size() > kMaxQuotedLength) text += "...";
  return json(text).dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string Describe(const json& v) {
  switch (v.type()) {
    case json::value_t::string:
      return "string " + Quote(v.get_ref<const std::string&>());
    case json::value_t::boolean:
      return std::string("boolean ") + (v.get<bool>() ? "true" : "false");
    case json::value_t::null:
      return "null";
    case json::value_t::array:
      return "a list";
    case json::value_t::object:
      return "a mapping";
    default:
      return "number " + v.dump();
  }
}

// Validators from names.h phrase length and emptiness problems completely; the others gain the
// offending value.
std::string WithValue(const std::string& reason, std::string_view value) {
  if (reason.rfind("must be at most", 0) == 0 || reason == "must not be empty") return reason;
  return reason + ", got " + Quote(value);
}

std::string Join(const std::string& prefix, std::string_view key) {
  const bool plain = !key.empty() && std::all_of(key.begin(), key.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
  });
  const std::string part = plain ? std::string(key) : "[" + Quote(key) + "]";
  if (prefix.empty() || !plain) return prefix + part;
  return prefix + "." + part;
}

std::string Index(const std::string& prefix, size_t i) {
  return prefix + "[" + std::to_string(i) + "]";
}

std::string ListOf(const Fields& words) {
  std::string out;
  for (const auto& w : words)
    out += (out.empty() ? "" : ", ") + Quote(w);
  return out;
}

// The value of `key`, or nullptr when it is absent or null (both mean "not given").
const json* Get(const json& object, const char* key) {
  const auto it = object.find(key);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

class SpecReader {
 public:
  explicit SpecReader(const Defaults& defaults) : defaults_(defaults) {}

  ParseResult Read(const json& doc) {
    if (!doc.is_object()) {
      Error("",
            "a JobSpec must be a mapping of fields (name, image, entrypoint, pools, ...), got " +
                Describe(doc));
      return Finish(JobSpec{});
    }
    CheckKnownFields(doc, "", kTopFields);
    JobSpec spec;
    spec.name = ReadName(doc, "name", kMaxJobNameLength);
    spec.fleet = ReadEnum(doc, "fleet", kFleets, defaults_.fleet);
    spec.recipe = ReadEnum(doc, "recipe", kRecipes, "none");
    spec.image = ReadImage(doc, spec.recipe);
    spec.entrypoint = ReadEntrypoint(doc);
    spec.env = ReadEnv(doc);
    spec.code = ReadCode(doc);
    spec.pools = ReadPools(doc);
    ReadDeadlines(doc, spec);
    spec.corpus = ReadCorpus(doc);
    spec.queue = ReadQueue(doc);
    spec.resume_from = ReadResumeFrom(doc);
    return Finish(std::move(spec));
  }

 private:
  ParseResult Finish(JobSpec spec) {
    ParseResult result;
    result.errors = std::move(errors_);
    if (result.errors.empty()) result.spec = std::move(spec);
    return result;
  }

  void Error(std::string path, std::string message) {
    if (errors_.size() < kMaxReportedErrors) {
      errors_.push_back({std::move(path), std::move(message)});
    } else if (errors_.size() == kMaxReportedErrors) {
      errors_.push_back({"", "and more problems, not listed (fix the ones above first)"});
    }
  }
  bool ErrorsFull() const { return errors_.size() > kMaxReportedErrors; }

  void CheckKnownFields(const json& object, const std::string& prefix, const Fields& known) {
    for (const auto& [key, value] : object.items()) {
      if (ErrorsFull()) return;  // the "did you mean" of each key costs: stop counting
      if (std::find(known.begin(), known.end(), key) != known.end()) continue;
      std::string hint = DidYouMeanSuffix(key, known);
      if (hint.empty()) hint = " (known fields: " + ListOf(known) + ")";
      Error(Join(prefix, key), "unknown field" + hint);
    }
  }

  std::optional<std::string> String(const json& v, const std::string& path) {
    if (v.is_string()) return v.get<std::string>();
    Error(path, "must be a string, got " + Describe(v));
    return std::nullopt;
  }

  // An optional non-empty string field.
  std::optional<std::string> NonEmptyString(const json& object, const char* key) {
    const json* v = Get(object, key);
    if (v == nullptr) return std::nullopt;
    std::optional<std::string> s = String(*v, key);
    if (s && s->empty()) {
      Error(key, "must not be empty");
      return std::nullopt;
    }
    return s;
  }

  std::optional<int64_t> Integer(const json& v, const std::string& path, int64_t min, int64_t max) {
    if (!v.is_number_integer()) {
      Error(path, "must be an integer, got " + (v.is_number() ? v.dump() : Describe(v)));
      return std::nullopt;
    }
    // JSON parsers give non-negative numbers as unsigned; those beyond int64 exceed any max.
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(max)) {
      Error(path, "must be ≤ " + std::to_string(max) + ", got " + v.dump());
      return std::nullopt;
    }
    const auto value = v.get<int64_t>();
    if (value < min || value > max) {
      Error(path, "must be " +
                      (value < min ? "≥ " + std::to_string(min) : "≤ " + std::to_string(max)) +
                      ", got " + std::to_string(value));
      return std::nullopt;
    }
    return value;
  }

  // The required `name` of the job or of a pool: a lower-case DNS label.
  std::string ReadName(const json& object, const std::string& path, size_t max_len) {
    const json* v = Get(object, "name");
    if (v == nullptr) {
      Error(path, "required");
      return "";
    }
    const std::optional<std::string> name = String(*v, path);
    if (!name) return "";
    const std::string reason = CheckDns1123Label(*name, max_len);
    if (!reason.empty()) Error(path, WithValue(reason, *name));
    return *name;
  }

  std::string ReadEnum(const json& doc, const char* key, const Fields& allowed,
                       const std::string& fallback) {
    const json* v = Get(doc, key);
    if (v == nullptr) return fallback;
    const std::optional<std::string> s = String(*v, key);
    if (!s) return fallback;
    if (std::find(allowed.begin(), allowed.end(), *s) == allowed.end()) {
      Error(key, "must be one of " + ListOf(allowed) + ", got " + Quote(*s) +
                     DidYouMeanSuffix(*s, allowed));
    }
    return *s;
  }

  std::string ReadImage(const json& doc, const std::string& recipe) {
    if (const std::optional<std::string> image = NonEmptyString(doc, "image")) {
      if (image->find_first_of(" \t\r\n") != std::string::npos) {
        Error("image", "must not contain whitespace, got " + Quote(*image));
      }
      return *image;
    }
    if (Get(doc, "image") != nullptr) return "";  // already reported
    if (recipe == "nemo-rl") {
      if (!defaults_.nemo_rl_image.empty()) return defaults_.nemo_rl_image;
      Error("image",
            "required (no image given and recipe \"nemo-rl\" has none because "
            "FORGE_IMAGE_NEMO_RL is not set)");
    } else if (recipe == "none") {
      Error("image", "required (recipe \"none\" supplies no image)");
    }
    return "";
  }

  std::vector<std::string> ReadEntrypoint(const json& doc) {
    const json* v = Get(doc, "entrypoint");
    if (v == nullptr) {
      Error("entrypoint", "required");
      return {};
    }
    std::optional<std::vector<std::string>> words;
    if (v->is_string()) {
      StatusOr<std::vector<std::string>> split = SplitShellWords(v->get_ref<const std::string&>());
      if (split.ok()) {
        words = std::move(split).value();
      } else {
        Error("entrypoint", split.status().message());
      }
    } else if (v->is_array()) {
      words = EntrypointList(*v);
    } else {
      Error("entrypoint", "must be a string or a list of strings, got " + Describe(*v));
    }
    if (!words) return {};
    if (words->empty()) {
      Error("entrypoint", "must not be empty");
    } else if (words->front().empty()) {
      Error("entrypoint", "the first word (the program to run) must not be empty");
    }
    return *words;
  }

  std::optional<std::vector<std::string>> EntrypointList(const json& list) {
    std::vector<std::string> words;
    bool ok = true;
    for (size_t i = 0; i < list.size(); ++i) {
      const std::optional<std::string> word = String(list[i], Index("entrypoint", i));
      ok = ok && word.has_value();
      if (word) words.push_back(*word);
    }
    if (!ok) return std::nullopt;
    return words;
  }

  std::map<std::string, std::string> ReadEnv(const json& doc) {
    std::map<std::string, std::string> env;
    const json* v = Get(doc, "env");
    if (v == nullptr) return env;
    if (!v->is_object()) {
      Error("env", "must be a mapping of variable names to strings, got " + Describe(*v));
      return env;
    }
    for (const auto& [name, value] : v->items()) {
      if (ReadEnvVar(name, value)) env[name] = value.get<std::string>();
    }
    return env;
  }

  bool ReadEnvVar(const std::string& name, const json& value) {
    const std::string path = Join("env", name);
    const bool name_ok = CheckEnvName(path, name);
    const bool value_ok = CheckEnvValue(path, value);
    return name_ok && value_ok;
  }

  bool CheckEnvName(const std::string& path, const std::string& name) {
    const std::string reason = CheckEnvVarName(name);
    if (!reason.empty()) {
      Error(path, reason);
      return false;
    }
    if (name.rfind(kReservedEnvPrefix, 0) == 0) {
      Error(path, "names starting with FORGE_ are reserved for StarForge");
      return false;
    }
    return true;
  }

  // YAML reads `4`, `true` and an empty value as non-strings; the hint says how to keep the text.
  bool CheckEnvValue(const std::string& path, const json& value) {
    if (value.is_string()) {
      if (value.get_ref<const std::string&>().find('\0') == std::string::npos) return true;
      Error(path, "must not contain NUL characters");
    } else if (value.is_null()) {
      Error(path, "must be a string, got null (write \"\" for an empty value)");
    } else if (value.is_primitive()) {
      Error(path, "must be a string, got " + Describe(value) +
                      " (quote it: " + Quote(value.dump()) + ")");
    } else {
      Error(path, "must be a string, got " + Describe(value));
    }
    return false;
  }

  std::optional<std::string> ReadCode(const json& doc) { return NonEmptyString(doc, "code"); }

  std::vector<Pool> ReadPools(const json& doc) {
    std::vector<Pool> pools;
    const json* v = Get(doc, "pools");
    if (v != nullptr && !v->is_array()) {
      Error("pools", "must be a list of pools, got " + Describe(*v));
      return pools;
    }
    if (v == nullptr || v->empty()) {
      Error("pools", "at least one pool is required");
      return pools;
    }
    std::map<std::string, size_t> seen;  // pool name -> first index
    for (size_t i = 0; i < v->size(); ++i) {
      pools.push_back(ReadPool((*v)[i], Index("pools", i)));
      const std::string& name = pools.back().name;
      if (name.empty()) continue;
      const auto [it, inserted] = seen.emplace(name, i);
      if (!inserted) {
        Error(Index("pools", i) + ".name",
              "duplicate pool name " + Quote(name) + " (also " + Index("pools", it->second) + ")");
      }
    }
    return pools;
  }

  Pool ReadPool(const json& v, const std::string& path) {
    Pool pool;
    if (!v.is_object()) {
      Error(path, "must be a mapping, got " + Describe(v));
      return pool;
    }
    CheckKnownFields(v, path, kPoolFields);
    pool.name = ReadName(v, path + ".name", kMaxPoolNameLength);
    if (const json* m = Get(v, "machines")) {
      pool.machines = Integer(*m, path + ".machines", 1, kMaxMachinesPerPool).value_or(1);
    }
    if (const json* g = Get(v, "gpusPerMachine")) {
      pool.gpus_per_machine =
          Integer(*g, path + ".gpusPerMachine", 0, kMaxGpusPerMachine).value_or(0);
    }
    pool.gpu_series = ReadGpuSeries(v, path, pool.gpus_per_machine);
    pool.cpus_per_machine = ReadQuantity(v, "cpusPerMachine", path);
    pool.memory_per_machine = ReadQuantity(v, "memoryPerMachine", path);
    return pool;
  }

  std::string ReadGpuSeries(const json& pool, const std::string& prefix, int64_t gpus) {
    const std::string path = prefix + ".gpuSeries";
    const json* v = Get(pool, "gpuSeries");
    const std::optional<std::string> series = v == nullptr ? "" : String(*v, path);
    if (!series) return "";
    const std::string reason = CheckLabelValue(*series);
    if (!reason.empty()) {
      Error(path, WithValue(reason, *series));
    } else if (series->empty() && gpus > 0) {
      Error(path, "required when gpusPerMachine > 0 (the card series of the nodes, e.g. \"h200\")");
    }
    return *series;
  }

  std::optional<std::string> ReadQuantity(const json& pool, const char* key,
                                          const std::string& prefix) {
    const json* v = Get(pool, key);
    if (v == nullptr) return std::nullopt;
    const std::string path = prefix + "." + key;
    std::string text;
    if (v->is_string()) {
      text = v->get<std::string>();
    } else if (v->is_number()) {
      text = v->dump();  // YAML `cpusPerMachine: 32` means the quantity "32"
    }
    const std::optional<Quantity> q = Quantity::Parse(text);
    if (!q) {
      Error(path, "must be a Kubernetes quantity such as \"32\", \"500m\" or \"256Gi\", got " +
                      Describe(*v));
      return std::nullopt;
    }
    if (!q->IsPositive()) {
      Error(path, "must be > 0, got " + Quote(text));
      return std::nullopt;
    }
    return text;
  }

  void ReadDeadlines(const json& doc, JobSpec& spec) {
    spec.pre_running_seconds = defaults_.pre_running_seconds;
    const json* v = Get(doc, "deadlines");
    if (v == nullptr) return;
    if (!v->is_object()) {
      Error("deadlines", "must be a mapping, got " + Describe(*v));
      return;
    }
    CheckKnownFields(*v, "deadlines", kDeadlineFields);
    if (const json* pre = Get(*v, "preRunningSeconds")) {
      spec.pre_running_seconds = Integer(*pre, "deadlines.preRunningSeconds", 1, kMaxInt32)
                                     .value_or(defaults_.pre_running_seconds);
    }
    if (const json* run = Get(*v, "runningSeconds")) {
      spec.running_seconds = Integer(*run, "deadlines.runningSeconds", 0, kMaxInt32).value_or(0);
    }
    if (const json* queue = Get(*v, "queueSeconds")) {
      spec.queue_seconds = Integer(*queue, "deadlines.queueSeconds", 0, kMaxInt32).value_or(0);
    }
    if (spec.running_seconds > 0 && spec.pre_running_seconds + spec.running_seconds > kMaxInt32) {
      Error("deadlines.runningSeconds", "preRunningSeconds + runningSeconds must be ≤ " +
                                            std::to_string(kMaxInt32) +
                                            " (their sum becomes activeDeadlineSeconds), got " +
                                            std::to_string(spec.pre_running_seconds) + " + " +
                                            std::to_string(spec.running_seconds));
    }
  }

  bool ReadCorpus(const json& doc) {
    const json* v = Get(doc, "corpus");
    if (v == nullptr) return false;
    if (v->is_boolean()) return v->get<bool>();
    Error("corpus", "must be true or false, got " + Describe(*v));
    return false;
  }

  std::optional<std::string> ReadQueue(const json& doc) {
    std::optional<std::string> queue = NonEmptyString(doc, "queue");
    if (!queue) return std::nullopt;
    std::string reason = CheckDns1123Subdomain(*queue);
    if (reason.empty() && queue->size() > kMaxQueueLength) {
      reason = "must be at most " + std::to_string(kMaxQueueLength) +
               " characters (it is also a label value), got " + std::to_string(queue->size());
    }
    if (!reason.empty()) Error("queue", WithValue(reason, *queue));
    return queue;
  }

  // Job ids: DNS labels (the shape of every id the store hands out), so that one is also a safe
  // path component (jobs/<id>) and subPath on every fleet; no duplicates.
  std::vector<std::string> ReadResumeFrom(const json& doc) {
    std::vector<std::string> ids;
    const json* v = Get(doc, "resumeFrom");
    if (v == nullptr) return ids;
    if (!v->is_array()) {
      Error("resumeFrom", "must be a list of job ids (earlier jobs of yours), got " + Describe(*v));
      return ids;
    }
    if (v->size() > kMaxResumeFrom) {
      Error("resumeFrom", "names " + std::to_string(v->size()) + " jobs, more than the " +
                              std::to_string(kMaxResumeFrom) + " allowed");
      return ids;
    }
    for (size_t i = 0; i < v->size(); ++i) {
      const std::string path = Index("resumeFrom", i);
      const std::optional<std::string> id = String((*v)[i], path);
      if (!id) continue;
      if (const std::string reason = CheckDns1123Label(*id, 63); !reason.empty()) {
        Error(path, "must be a job id such as \"j-0123456789\": " + WithValue(reason, *id));
      } else if (std::find(ids.begin(), ids.end(), *id) != ids.end()) {
        Error(path, "names " + Quote(*id) + " twice");
      } else {
        ids.push_back(*id);
      }
    }
    return ids;
  }

  const Defaults& defaults_;
  FieldErrors errors_;
};

// NUL cannot be passed to a program (argv and the environment are C strings) nor safely stored
// in most of what a JobSpec feeds: refused wherever it appears, key or value, with its path.
void FindNul(const json& v, const std::string& path, FieldErrors& errors) {
  constexpr const char* kNul = "must not contain a NUL character (\\0)";
  if (errors.size() >= kMaxReportedErrors) return;
  if (v.is_string()) {
    if (v.get_ref<const std::string&>().find('\0') != std::string::npos)
      errors.push_back({path, kNul});
  } else if (v.is_array()) {
    for (size_t i = 0; i < v.size(); ++i)
      FindNul(v[i], path + "[" + std::to_string(i) + "]", errors);
  } else if (v.is_object()) {
    for (const auto& [key, value] : v.items()) {
      const std::string at = path.empty() ? key : path + "." + key;
      if (key.find('\0') != std::string::npos)
        errors.push_back({path, "a key " + std::string(kNul)});
      else
        FindNul(value, at, errors);
    }
  }
}

}  // namespace

ParseResult FromJson(const json& doc, const Defaults& defaults) {
  FieldErrors nul;
  FindNul(doc, "", nul);
  if (!nul.empty()) return ParseResult{std::nullopt, std::move(nul)};
  return SpecReader(defaults).Read(doc);
}

ParseResult Parse(std::string_view text, const Defaults& defaults) {
  StatusOr<json> doc = ParseYaml(text, kJobSpecYamlLimits);
  if (!doc.ok()) {
    ParseResult result;
    result.errors.push_back({"", "syntax error: " + doc.status().message()});
    return result;
  }
  return FromJson(*doc, defaults);
}

}  // namespace starforge::jobspec
