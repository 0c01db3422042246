// Every FORGE_* setting lives in Table() below; Settings(), Load() and Dump() are all derived from
// it, so adding a setting is one entry there plus its field in Config (and a row in
// docs/settings.md, which a test keeps in step).
#include "starforge/config/config.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <functional>
#include <limits>
#include <regex>
#include <string_view>
#include <utility>

#include "starforge/common/did_you_mean.h"
#include "starforge/common/names.h"
#include "starforge/common/quantity.h"
#include "starforge/kube/client_config.h"

// POSIX defines it, but no C++ header is required to declare it.
extern char** environ;

namespace starforge::config {

std::string ToString(FleetKind kind) {
  switch (kind) {
    case FleetKind::kLocal:
      return "local";
    case FleetKind::kKuberay:
      return "kuberay";
  }
  return "unknown";
}

std::string ToString(SubmissionMode mode) {
  switch (mode) {
    case SubmissionMode::kK8sJobMode:
      return kK8sJobModeName;
    case SubmissionMode::kHTTPMode:
      return kHTTPModeName;
  }
  return "unknown";
}

std::string ToString(S3Addressing mode) {
  switch (mode) {
    case S3Addressing::kPath:
      return "path";
    case S3Addressing::kVirtual:
      return "virtual";
  }
  return "unknown";
}

Config::operator kube::ApiServerSettings() const {
  return {k8s_api_server, k8s_token, k8s_ca_file, k8s_insecure_skip_tls_verify, k8s_context};
}

std::optional<FleetKind> ParseFleetKind(const std::string& text) {
  for (const FleetKind kind : {FleetKind::kLocal, FleetKind::kKuberay}) {
    if (text == ToString(kind)) return kind;
  }
  return std::nullopt;
}

namespace {

constexpr std::string_view kPrefix = "FORGE_";
constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

// ---------------------------------------------------------------------------------------------
// Message helpers.

// Values are echoed so that the user sees exactly what was read (a stray quote or a trailing
// space is the usual culprit); escaping keeps control characters from garbling a terminal, and
// the cut keeps one pasted file from flooding the log.
std::string Quote(std::string_view value) {
  constexpr size_t kMaxShown = 120;
  size_t shown = std::min(value.size(), kMaxShown);
  // Never cut a UTF-8 sequence in half.
  while (shown > 0 && shown < value.size() &&
         (static_cast<unsigned char>(value[shown]) & 0xC0) == 0x80) {
    --shown;
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (size_t i = 0; i < shown; ++i) {
    const auto c = static_cast<unsigned char>(value[i]);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          out += "\\x";
          out += kHex[c >> 4];
          out += kHex[c & 0xf];
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  if (shown < value.size()) return out + "...\" (" + std::to_string(value.size()) + " bytes)";
  return out + '"';
}

std::string Got(std::string_view what, std::string_view value) {
  return std::string(what) + ", got " + Quote(value);
}

// "A", "A and B", "A, B and C" (or "A, B or C").
std::string JoinList(const std::vector<std::string>& items, std::string_view last = " and ") {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += i + 1 == items.size() ? last : ", ";
    out += items[i];
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Character and number helpers (ASCII only: settings are ASCII by nature, and <cctype> depends
// on the locale).

bool IsDigit(char c) {
  return c >= '0' && c <= '9';
}
bool IsLower(char c) {
  return c >= 'a' && c <= 'z';
}
bool IsAlpha(char c) {
  return IsLower(c) || (c >= 'A' && c <= 'Z');
}
bool IsAlnum(char c) {
  return IsAlpha(c) || IsDigit(c);
}
bool IsSpaceOrControl(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u <= 0x20 || u == 0x7f;
}
char ToLower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return ToLower(x) == ToLower(y);
         });
}

bool StartsWithIgnoreCase(std::string_view text, std::string_view prefix) {
  return text.size() >= prefix.size() && EqualsIgnoreCase(text.substr(0, prefix.size()), prefix);
}

bool AllDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), IsDigit);
}

enum class IntParse { kOk, kNotInteger, kTooLarge };

// Plain decimal digits only: a sign, a space or a unit suffix is a mistake worth reporting, not
// something to guess around.
IntParse ParseDigits(std::string_view s, int64_t& out) {
  if (!AllDigits(s)) return IntParse::kNotInteger;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  if (ec == std::errc::result_out_of_range) return IntParse::kTooLarge;
  if (ec != std::errc() || end != s.data() + s.size()) return IntParse::kNotInteger;
  return IntParse::kOk;
}

std::optional<bool> ParseBool(std::string_view s) {
  for (const char* yes : {"true", "1", "yes"}) {
    if (EqualsIgnoreCase(s, yes)) return true;
  }
  for (const char* no : {"false", "0", "no"}) {
    if (EqualsIgnoreCase(s, no)) return false;
  }
  return std::nullopt;
}

// A TCP port as text: 1..65535.
bool IsPort(std::string_view s) {
  int64_t port = 0;
  return s.size() <= 5 && ParseDigits(s, port) == IntParse::kOk && port >= 1 && port <= 65535;
}

// A host as it appears before ":port": a bracketed IPv6 address, or a name / IPv4 address.
bool IsHost(std::string_view host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    const std::string_view inner = host.substr(1, host.size() - 2);
    return !inner.empty() && std::all_of(inner.begin(), inner.end(), [](char c) {
      return IsDigit(c) || (ToLower(c) >= 'a' && ToLower(c) <= 'f') || c == ':' || c == '.';
    });
  }
  return !host.empty() && std::all_of(host.begin(), host.end(), [](char c) {
    return IsAlnum(c) || c == '-' || c == '.' || c == '_';
  });
}

// ---------------------------------------------------------------------------------------------
// Validators. Each takes a non-empty value, may normalise it in place, and returns "" or the
// message of a FieldError (whose path is the variable name).

using TextCheck = std::string (*)(std::string& value);

// common/names.h phrases its reasons as "must ...", so only the echo is added.
std::string WithGot(std::string reason, std::string_view value) {
  return reason.empty() ? reason : Got(reason, value);
}

std::string CheckNamespace(std::string& v) {
  return WithGot(CheckDns1123Label(v), v);
}
std::string CheckPvcName(std::string& v) {
  return WithGot(CheckDns1123Subdomain(v), v);
}
std::string CheckNodeLabelKey(std::string& v) {
  return WithGot(CheckLabelKey(v), v);
}
std::string AnyText(std::string&) {
  return "";
}

// Storage root, storage mount and the NeMo-RL directory end up in bash scripts (KubeRay pastes
// the entrypoint into `bash -ce` unquoted) and in pod specs, so a character a shell would
// interpret must never be in them: an allow-list, because a deny-list always forgets one.
// A program: a bare name looked up on PATH, or an absolute path; either way one word of the
// characters of a path (it is exec'd, never given to a shell, but must name one file).
std::string CheckProgram(std::string& v) {
  const bool word = std::all_of(v.begin(), v.end(), [](char c) {
    return IsAlnum(c) || c == '/' || c == '.' || c == '_' || c == '-' || c == '+';
  });
  if (!word)
    return Got("expected a program name or an absolute path (letters, digits, / . _ - +)", v);
  if (v.find('/') != std::string::npos && v.front() != '/')
    return Got("expected a program name (looked up on PATH) or an absolute path", v);
  return "";
}

std::string CheckShellSafePath(std::string& v) {
  if (v.front() != '/') return Got("expected an absolute path (starting with /)", v);
  const bool safe = std::all_of(v.begin(), v.end(), [](char c) {
    return IsAlnum(c) || c == '/' || c == '.' || c == '_' || c == '-' || c == '+' || c == '@' ||
           c == ',' || c == '=';
  });
  if (!safe) {
    return Got(
        "must contain only letters, digits and / . _ - + @ , = because it is pasted into shell "
        "commands and pod specs, where whitespace, quotes, '$', '`', '\\' and the like would "
        "change its meaning",
        v);
  }
  std::string_view rest = v;
  while (!rest.empty()) {
    const size_t slash = rest.find('/', 1);
    const std::string_view part =
        rest.substr(1, slash == std::string_view::npos ? rest.npos : slash - 1);
    if (part == "..") {
      return Got("must not contain a \"..\" component (Kubernetes rejects such mount paths)", v);
    }
    if (slash == std::string_view::npos) break;
    rest = rest.substr(slash);
  }
  // "/starforge/" and "/starforge" are the same directory; one spelling keeps joined paths clean.
  while (v.size() > 1 && v.back() == '/') {
    v.pop_back();
  }
  if (v == "/") return Got("must be a directory below /", v);
  return "";
}

// An http:// or https:// base URL (no query or fragment). A URL carrying credentials is refused
// without being echoed: the error would leak the password it contains.
std::string CheckHttpUrl(std::string& v, std::string_view where_credentials_go) {
  std::string_view rest = v;
  if (StartsWithIgnoreCase(rest, "http://")) {
    rest.remove_prefix(7);
  } else if (StartsWithIgnoreCase(rest, "https://")) {
    rest.remove_prefix(8);
  } else {
    // Judge the whole value before echoing it: "user:pass@host" without a scheme is still a
    // credential.
    if (v.find('@') != std::string::npos) {
      return "expected an http:// or https:// URL without credentials (the value is not shown "
             "because it looks like it contains one; " +
             std::string(where_credentials_go) + ")";
    }
    return Got("expected an http:// or https:// URL", v);
  }
  const std::string_view authority = rest.substr(0, rest.find_first_of("/?#"));
  if (authority.find('@') != std::string_view::npos) {
    return "must not contain credentials (user:password@ before the host; the value is not shown "
           "because it contains them); " +
           std::string(where_credentials_go);
  }
  if (std::any_of(v.begin(), v.end(), IsSpaceOrControl)) {
    return Got("must not contain whitespace", v);
  }
  if (rest.find_first_of("?#") != std::string_view::npos) {
    // Not echoed: a query is where presigned credentials live.
    return "must not have a query (?...) or fragment (#...): it is a base URL (the value is not "
           "shown because a query may carry credentials)";
  }
  std::string_view host = authority;
  std::string_view port;
  const size_t bracket = authority.rfind(']');
  const size_t colon = authority.rfind(':');
  if (colon != std::string_view::npos && (bracket == std::string_view::npos || colon > bracket)) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
    if (!IsPort(port)) return Got("has an invalid port (expected 1-65535)", v);
  }
  if (!IsHost(host)) return Got("expected an http:// or https:// URL with a host name", v);
  // Callers append "/api/v1/..." or "/<bucket>/<key>": one spelling of the base avoids "//".
  while (!v.empty() && v.back() == '/') {
    v.pop_back();
  }
  return "";
}

std::string CheckK8sApiServer(std::string& v) {
  return CheckHttpUrl(v, "put the token in FORGE_K8S_TOKEN");
}
std::string CheckServerUrl(std::string& v) {
  return CheckHttpUrl(v, "put the token in FORGE_TOKEN");
}
std::string CheckS3Endpoint(std::string& v) {
  return CheckHttpUrl(v, "put the keys in FORGE_S3_ACCESS_KEY and FORGE_S3_SECRET_KEY");
}

// The grammar of github.com/distribution/reference (what docker, containerd and the kubelet
// accept): [domain[:port]/]path[:tag][@digest], with a lower-case path.
std::string CheckImageRef(std::string& v) {
  static const std::regex kImageRef(
      R"(^(?:(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))*(?::[0-9]+)?/)?)"
      R"([a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*)"
      R"((?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?)"
      R"((?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?$)");
  // libstdc++'s regex recurses per character; the reference grammar caps names at 255 anyway.
  constexpr size_t kMaxLength = 512;
  if (v.size() > kMaxLength || !std::regex_match(v, kImageRef)) {
    return Got(
        "expected an image reference such as registry.example.com/team/nemo-rl:v0.7.0 "
        "(lower-case repository path, optional :tag and @sha256:digest)",
        v);
  }
  return "";
}

// rayVersion must equal the Ray in the image; KubeRay compares it as MAJOR.MINOR.PATCH.
std::string CheckRayVersion(std::string& v) {
  std::string_view rest = v;
  for (int part = 0; part < 3; ++part) {
    const size_t dot = rest.find('.');
    const bool last = part == 2;
    if (last != (dot == std::string_view::npos))
      return Got("expected a Ray version such as 2.60.0", v);
    if (!AllDigits(rest.substr(0, dot))) return Got("expected a Ray version such as 2.60.0", v);
    if (!last) rest.remove_prefix(dot + 1);
  }
  return "";
}

// A suffix "B" is the usual slip ("64GB"); Kubernetes has no such unit.
std::string QuantityHint(std::string_view v) {
  return !v.empty() && (v.back() == 'B' || v.back() == 'b')
             ? " (Kubernetes quantities have no B: write 64Gi or 64G)"
             : "";
}

std::string CheckPositiveQuantity(std::string& v) {
  const auto quantity = Quantity::Parse(v);
  if (!quantity) return Got("expected a Kubernetes quantity such as 64Gi", v) + QuantityHint(v);
  if (!quantity->IsPositive()) return Got("expected a quantity greater than zero", v);
  return "";
}

// https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html (general purpose
// buckets). S3-compatible stores accept a superset, so these rules keep a config portable.
std::string CheckBucket(std::string& v) {
  const bool shape_ok = v.size() >= 3 && v.size() <= 63 && IsAlnum(v.front()) &&
                        IsAlnum(v.back()) && std::all_of(v.begin(), v.end(), [](char c) {
                          return IsLower(c) || IsDigit(c) || c == '.' || c == '-';
                        });
  if (!shape_ok) {
    return Got(
        "must be an S3 bucket name (3-63 characters of a-z, 0-9, '.' and '-', starting and "
        "ending with a letter or digit)",
        v);
  }
  if (v.find("..") != std::string::npos) {
    return Got("must not contain two adjacent periods (S3 bucket naming rules)", v);
  }
  static const std::regex kIpv4(R"(^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$)");
  if (std::regex_match(v, kIpv4)) {
    return Got("must not be formatted as an IP address (S3 bucket naming rules)", v);
  }
  const std::string_view view = v;
  for (const char* prefix : {"xn--", "sthree-", "amzn-s3-demo-"}) {
    if (view.starts_with(prefix)) {
      return Got(std::string("must not start with \"") + prefix + "\" (reserved by S3)", v);
    }
  }
  for (const char* suffix : {"-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3"}) {
    if (view.ends_with(suffix)) {
      return Got(std::string("must not end with \"") + suffix + "\" (reserved by S3)", v);
    }
  }
  return "";
}

// The region is part of the SigV4 credential scope ("<date>/<region>/s3/aws4_request"), so a '/'
// or a space would corrupt every signature.
std::string CheckRegion(std::string& v) {
  const bool ok = v.size() <= 64 && std::all_of(v.begin(), v.end(), [](char c) {
                    return IsAlnum(c) || c == '-' || c == '_';
                  });
  return ok ? "" : Got("expected a region name such as us-east-1 (letters, digits, '-', '_')", v);
}

std::string CheckListen(std::string& v) {
  const size_t colon = v.rfind(':');
  const bool ok = colon != std::string::npos && IsHost(std::string_view(v).substr(0, colon)) &&
                  IsPort(std::string_view(v).substr(colon + 1));
  return ok ? "" : Got("expected host:port such as 127.0.0.1:8080 (port 1-65535)", v);
}

// ---------------------------------------------------------------------------------------------
// The table.

struct Entry {
  SettingInfo info;  // default_value is filled in from Config{} by Table()
  // Stores a non-empty value into the config, or returns why it cannot.
  std::function<std::string(std::string value, Config& config)> parse;
  std::function<nlohmann::json(const Config& config)> dump;
};

// default_value stays empty here: Table() derives it from Config{}, so the header's
// initialisers are the only place a default is written.
SettingInfo Info(std::string name, std::string type, std::string help, bool secret = false) {
  SettingInfo info;
  info.name = std::move(name);
  info.type = std::move(type);
  info.help = std::move(help);
  info.secret = secret;
  return info;
}

Entry Text(std::string name, std::string Config::*field, std::string type, TextCheck check,
           std::string help) {
  return Entry{
      .info = Info(std::move(name), std::move(type), std::move(help)),
      .parse =
          [field, check](std::string value, Config& config) {
            std::string error = check(value);
            if (error.empty()) config.*field = std::move(value);
            return error;
          },
      .dump = [field](const Config& config) { return nlohmann::json(config.*field); },
  };
}

// A secret is never echoed: not in errors, not in the dump.
Entry SecretText(std::string name, Secret Config::*field, std::string help) {
  return Entry{
      .info = Info(std::move(name), "secret", std::move(help), true),
      .parse = [field](std::string value, Config& config) -> std::string {
        if (std::any_of(value.begin(), value.end(), IsSpaceOrControl)) {
          return "must not contain whitespace or control characters (a trailing newline "
                 "copied from a file?); the value is not shown because it is a secret";
        }
        config.*field = Secret(std::move(value));
        return "";
      },
      .dump = [field](const Config& config) { return nlohmann::json(config.*field); },
  };
}

Entry Flag(std::string name, bool Config::*field, std::string help) {
  return Entry{
      .info = Info(std::move(name), "bool", std::move(help)),
      .parse = [field](std::string value, Config& config) -> std::string {
        const auto parsed = ParseBool(value);
        if (!parsed) return Got("expected true or false (or 1/0)", value);
        config.*field = *parsed;
        return "";
      },
      .dump = [field](const Config& config) { return nlohmann::json(config.*field); },
  };
}

// min is 0 or 1; `why_max` says where the upper bound comes from.
Entry Integer(std::string name, int64_t Config::*field, int64_t min, int64_t max,
              std::string why_max, std::string help) {
  std::string kind = min > 0 ? "positive integer" : "non-negative integer";
  return Entry{
      .info = Info(std::move(name), kind, std::move(help)),
      .parse = [field, min, max, kind, why_max](std::string value, Config& config) -> std::string {
        int64_t parsed = 0;
        const IntParse result = ParseDigits(value, parsed);
        if (result == IntParse::kNotInteger || (result == IntParse::kOk && parsed < min)) {
          return Got("expected a " + kind, value);
        }
        if (result == IntParse::kTooLarge || parsed > max) {
          return Got("must be at most " + std::to_string(max) + " (" + why_max + ")", value);
        }
        config.*field = parsed;
        return "";
      },
      .dump = [field](const Config& config) { return nlohmann::json(config.*field); },
  };
}

// One of a few words, compared exactly as KubeRay and S3 clients do. `refused` lists words that
// are real options elsewhere but wrong here, each with the reason.
template <typename E>
Entry Choice(std::string name, E Config::*field, std::vector<E> choices,
             std::vector<std::pair<std::string, std::string>> refused, std::string help) {
  std::vector<std::string> words;
  std::string type;
  for (const E choice : choices) {
    words.push_back(ToString(choice));
    type += (type.empty() ? "" : "|") + words.back();
  }
  return Entry{
      .info = Info(std::move(name), type, std::move(help)),
      .parse = [field, choices, refused, words](std::string value, Config& config) -> std::string {
        for (const E choice : choices) {
          if (value == ToString(choice)) {
            config.*field = choice;
            return "";
          }
        }
        for (const auto& [word, reason] : refused) {
          if (value == word) return reason;
        }
        std::vector<std::string> all = words;
        for (const auto& [word, reason] : refused)
          all.push_back(word);
        return Got("expected " + JoinList(words, " or "), value) + DidYouMeanSuffix(value, all);
      },
      .dump = [field](const Config& config) { return nlohmann::json(ToString(config.*field)); },
  };
}

// Bytes as a plain integer, or as a quantity ("512Mi") because nobody counts bytes by hand.
Entry ByteSize(std::string name, int64_t Config::*field, std::string help) {
  return Entry{
      .info = Info(std::move(name), "bytes", std::move(help)),
      .parse = [field](std::string value, Config& config) -> std::string {
        const std::string expected =
            "expected a positive number of bytes (e.g. 536870912 or 512Mi)";
        int64_t bytes = 0;
        const IntParse plain = ParseDigits(value, bytes);
        if (plain == IntParse::kTooLarge) return Got("is too large", value);
        if (plain == IntParse::kNotInteger) {
          const auto quantity = Quantity::Parse(value);
          if (!quantity) return Got(expected, value) + QuantityHint(value);
          if (quantity->MilliValue() == kInt64Max) return Got("is too large", value);
          if (quantity->MilliValue() % 1000 != 0) {
            return Got("must be a whole number of bytes", value);
          }
          bytes = quantity->Value();
        }
        if (bytes <= 0) return Got(expected, value);
        config.*field = bytes;
        return "";
      },
      .dump = [field](const Config& config) { return nlohmann::json(config.*field); },
  };
}

std::string DefaultText(const nlohmann::json& value) {
  if (value.is_string()) return value.get<std::string>();
  return value.dump();  // true/false and numbers read exactly as they would be written
}

const std::vector<Entry>& Table() {
  static const std::vector<Entry> table = [] {
    const std::string kInt32 = "the RayJob field is an int32";
    std::vector<Entry> t;
    t.push_back(Choice<FleetKind>(
        "FORGE_DEFAULT_FLEET_KIND", &Config::default_fleet_kind,
        {FleetKind::kLocal, FleetKind::kKuberay}, {},
        "Fleet used when a job names none: local runs jobs as processes on this machine, kuberay "
        "as one RayJob per job."));
    t.push_back(Text("FORGE_IMAGE_NEMO_RL", &Config::image_nemo_rl, "image reference",
                     CheckImageRef,
                     "Training image for the nemo-rl recipe. Unset: jobs of that recipe must name "
                     "their own image."));
    t.push_back(Text("FORGE_NEMO_RL_DIR", &Config::nemo_rl_dir, "absolute path", CheckShellSafePath,
                     "Where NeMo-RL is installed inside that image."));
    t.push_back(Text("FORGE_IMAGE_VLLM", &Config::image_vllm, "image reference", CheckImageRef,
                     "vLLM image of playgrounds (docs/playground.md). Unset: every playground "
                     "must name its image."));
    t.push_back(Text("FORGE_LOCAL_VLLM_COMMAND", &Config::local_vllm_command,
                     "program name or absolute path", CheckProgram,
                     "The vLLM program local playgrounds run as `<it> serve <model> --port …`, "
                     "looked up on forge serve's PATH (docs/playground.md). Not found: local "
                     "playgrounds are refused."));
    t.push_back(Text("FORGE_K8S_API_SERVER", &Config::k8s_api_server, "http(s) URL",
                     CheckK8sApiServer,
                     "Kubernetes API server URL. Unset: kubeconfig or the in-cluster service "
                     "account, as kubectl does."));
    t.push_back(SecretText("FORGE_K8S_TOKEN", &Config::k8s_token,
                           "Bearer (ServiceAccount) token for FORGE_K8S_API_SERVER; needs "
                           "create/get/list/watch/delete on RayJobs and Pods. Never shown."));
    t.push_back(Text("FORGE_K8S_CA_FILE", &Config::k8s_ca_file, "file path", AnyText,
                     "PEM bundle that signs FORGE_K8S_API_SERVER's certificate. Unset: the "
                     "system trust store."));
    t.push_back(Flag("FORGE_K8S_INSECURE_SKIP_TLS_VERIFY", &Config::k8s_insecure_skip_tls_verify,
                     "Do not verify the API server's certificate. Tests only."));
    t.push_back(Text("FORGE_K8S_CONTEXT", &Config::k8s_context, "kubeconfig context", AnyText,
                     "kubeconfig context to use instead of the current one (ignored when "
                     "FORGE_K8S_API_SERVER is set)."));
    t.push_back(Text("FORGE_K8S_NAMESPACE", &Config::k8s_namespace, "DNS-1123 label",
                     CheckNamespace, "Namespace for everything StarForge creates."));
    t.push_back(Text("FORGE_K8S_GPU_NODE_LABEL", &Config::k8s_gpu_node_label, "label key",
                     CheckNodeLabelKey,
                     "Node label whose value is the GPU card series (e.g. h200); the same key "
                     "feeds capacity accounting and nodeSelector."));
    t.push_back(Text("FORGE_K8S_SHM_SIZE", &Config::k8s_shm_size, "quantity", CheckPositiveQuantity,
                     "Size of the memory-backed /dev/shm in Ray pods (Ray's object store)."));
    t.push_back(Text("FORGE_STORAGE_ROOT", &Config::storage_root, "absolute path",
                     CheckShellSafePath,
                     "The single storage root: jobs, logs, checkpoints (and capsules when "
                     "FORGE_S3_ENDPOINT is unset)."));
    t.push_back(Text("FORGE_STATE_DIR", &Config::state_dir, "absolute path", CheckShellSafePath,
                     "The control plane's own directory: the store, serve.lock, uploads and "
                     "packaging scratch. Never under FORGE_STORAGE_ROOT (jobs write there). "
                     "Unset: <FORGE_STORAGE_ROOT>-state."));
    t.push_back(Text("FORGE_K8S_STORAGE_PVC", &Config::k8s_storage_pvc, "DNS-1123 subdomain",
                     CheckPvcName,
                     "ReadWriteMany PVC holding the storage root, mounted in every Ray pod. "
                     "Unset: no storage volume."));
    t.push_back(Flag("FORGE_K8S_STORAGE_SHARED", &Config::k8s_storage_shared,
                     "false when that PVC is ReadWriteOnce: multi-machine jobs are then rejected "
                     "with a clear error."));
    t.push_back(Text("FORGE_K8S_CORPUS_PVC", &Config::k8s_corpus_pvc, "DNS-1123 subdomain",
                     CheckPvcName, "Optional read-only corpus PVC."));
    t.push_back(Text("FORGE_K8S_STORAGE_MOUNT", &Config::k8s_storage_mount, "absolute path",
                     CheckShellSafePath,
                     "Mount path of the storage PVC in pods, only when FORGE_STORAGE_ROOT cannot "
                     "be used there. Unset: FORGE_STORAGE_ROOT."));
    t.push_back(Flag("FORGE_K8S_GPU_PASSTHROUGH", &Config::k8s_gpu_passthrough,
                     "0 (tests only, clusters without GPUs): pods request no nvidia.com/gpu; "
                     "Ray's logical GPU resources stay."));
    t.push_back(Text("FORGE_K8S_FETCH_IMAGE", &Config::k8s_fetch_image, "image reference",
                     CheckImageRef,
                     "Image of the init container that downloads the capsule from HTTP-only "
                     "storage. Unset: the job's own image."));
    t.push_back(Text("FORGE_K8S_S3_CA_CONFIGMAP", &Config::k8s_s3_ca_configmap,
                     "DNS-1123 subdomain", CheckPvcName,
                     "ConfigMap (key ca.crt) with the CA bundle Ray pods trust for an https "
                     "FORGE_S3_ENDPOINT: mounted in every Ray pod, named by REQUESTS_CA_BUNDLE "
                     "and SSL_CERT_FILE. Unset: the images' own trust."));
    t.push_back(Text("FORGE_KUBERAY_RAY_VERSION", &Config::kuberay_ray_version, "Ray version",
                     CheckRayVersion,
                     "rayVersion of every RayJob: the Ray version in the training images, one the "
                     "cluster's KubeRay operator supports."));
    t.push_back(Integer("FORGE_KUBERAY_TTL_SECONDS", &Config::kuberay_ttl_seconds, 0, kInt32Max,
                        kInt32,
                        "ttlSecondsAfterFinished: Kubernetes-side cleanup in case "
                        "StarForge's own deletion fails."));
    t.push_back(Integer("FORGE_KUBERAY_PRERUNNING_DEADLINE_S",
                        &Config::kuberay_prerunning_deadline_s, 1, kInt32Max, kInt32,
                        "Seconds a job may take to start running (image pull, scheduling) before "
                        "it is failed and leaves the queue."));
    t.push_back(Choice<SubmissionMode>(
        "FORGE_KUBERAY_SUBMISSION_MODE", &Config::kuberay_submission_mode,
        {SubmissionMode::kK8sJobMode, SubmissionMode::kHTTPMode},
        {{kInteractiveModeName,
          "InteractiveMode is not supported: KubeRay then waits for someone to submit the job by "
          "hand, which StarForge never does, so every job would hang until its pre-running "
          "deadline; use K8sJobMode or HTTPMode"},
         {kSidecarModeName,
          "SidecarMode is not supported: it needs KubeRay v1.5 or later (StarForge supports "
          "v1.4) and runs the submitter inside the head pod, which StarForge's RayJobs are not "
          "built for; use K8sJobMode or HTTPMode"}},
        "How KubeRay submits the entrypoint: K8sJobMode runs a submitter Kubernetes Job, "
        "HTTPMode has the operator call the Ray dashboard."));
    t.push_back(Integer("FORGE_KUEUE_MAX_WORKER_GROUPS", &Config::kueue_max_worker_groups, 1,
                        kInt32Max, "a Kubernetes int32",
                        "Most worker groups one RayJob may have when Kueue queues it. A Kueue "
                        "workload has at most 8 PodSets: the head takes one and, in K8sJobMode, "
                        "the submitter Job another (Kueue v0.17), so 6; 7 is the most with "
                        "HTTPMode."));
    t.push_back(ByteSize("FORGE_CAPSULE_MAX_BYTES", &Config::capsule_max_bytes,
                         "Largest capsule accepted, in bytes or as a quantity such as 512Mi."));
    t.push_back(Integer("FORGE_SUBMIT_DEADLINE_S", &Config::submit_deadline_s, 1, kInt32Max,
                        "a 32-bit count of seconds",
                        "Seconds Packaging and Submitting may keep retrying transient errors "
                        "(object store, API server) before the job fails with "
                        "SubmitDeadlineExceeded."));
    t.push_back(Integer("FORGE_PLAYGROUND_MAX_TTL_S", &Config::playground_max_ttl_s, 60, kInt32Max,
                        "a Kubernetes int32",
                        "Longest life of a playground, extensions included; also its pod's "
                        "activeDeadlineSeconds, the reclaim when StarForge is down."));
    t.push_back(Text("FORGE_S3_ENDPOINT", &Config::s3_endpoint, "http(s) URL", CheckS3Endpoint,
                     "S3-compatible object storage for capsules (the kuberay fleet needs it). "
                     "Unset: a filesystem store under FORGE_STORAGE_ROOT."));
    t.push_back(Text("FORGE_S3_BUCKET", &Config::s3_bucket, "S3 bucket name", CheckBucket,
                     "Bucket for capsules; required with FORGE_S3_ENDPOINT."));
    t.push_back(SecretText("FORGE_S3_ACCESS_KEY", &Config::s3_access_key,
                           "Access key id; required with FORGE_S3_ENDPOINT. Never shown."));
    t.push_back(SecretText("FORGE_S3_SECRET_KEY", &Config::s3_secret_key,
                           "Secret access key; required with FORGE_S3_ENDPOINT. Never shown."));
    t.push_back(Text("FORGE_S3_REGION", &Config::s3_region, "region", CheckRegion,
                     "Region used in SigV4 signatures."));
    t.push_back(Choice<S3Addressing>(
        "FORGE_S3_ADDRESSING", &Config::s3_addressing,
        {S3Addressing::kPath, S3Addressing::kVirtual}, {},
        "path: <endpoint>/<bucket>/<key> (MinIO and most S3-compatible stores); virtual: "
        "<bucket>.<endpoint host>/<key>."));
    t.push_back(Text("FORGE_S3_CA_FILE", &Config::s3_ca_file, "file path", AnyText,
                     "PEM bundle that signs an https FORGE_S3_ENDPOINT's certificate, for the "
                     "control plane and the forge CLI. Unset: the system trust store."));
    t.push_back(Text("FORGE_LISTEN", &Config::listen, "host:port", CheckListen,
                     "Address the control plane's HTTP API listens on."));
    t.push_back(Text("FORGE_SERVER", &Config::server, "http(s) URL", CheckServerUrl,
                     "The control plane the `forge` CLI talks to. Unset: the server saved by "
                     "`forge login`, else http://127.0.0.1:8080."));
    t.push_back(SecretText("FORGE_TOKEN", &Config::token,
                           "API token of the `forge` CLI. Unset: the token saved by `forge login`. "
                           "Never shown."));

    const Config defaults;
    for (Entry& e : t)
      e.info.default_value = e.info.secret ? "" : DefaultText(e.dump(defaults));
    return t;
  }();
  return table;
}

// ---------------------------------------------------------------------------------------------
// Checks that involve more than one setting.

void CrossCheck(const std::map<std::string, std::string>& env, LoadResult& result) {
  auto is_set = [&env](const std::string& name) {
    const auto it = env.find(name);
    return it != env.end() && !it->second.empty();
  };
  const Config& config = result.config;

  const std::vector<std::string> s3_parts = {"FORGE_S3_BUCKET", "FORGE_S3_ACCESS_KEY",
                                             "FORGE_S3_SECRET_KEY"};
  std::vector<std::string> missing;
  std::vector<std::string> present;
  for (const auto& name : s3_parts)
    (is_set(name) ? present : missing).push_back(name);
  if (is_set("FORGE_S3_ENDPOINT")) {
    if (!missing.empty()) {
      result.errors.push_back(
          {"FORGE_S3_ENDPOINT",
           "is set without " + JoinList(missing) +
               ": S3 object storage needs a bucket and both keys (or unset FORGE_S3_ENDPOINT to "
               "keep capsules in the filesystem store under FORGE_STORAGE_ROOT)"});
    }
  } else if (!present.empty()) {
    result.warnings.push_back(JoinList(present) + (present.size() == 1 ? " is" : " are") +
                              " ignored because FORGE_S3_ENDPOINT is not set (capsules stay in "
                              "the filesystem store under FORGE_STORAGE_ROOT)");
  }
  if (!is_set("FORGE_S3_ENDPOINT") && config.default_fleet_kind == FleetKind::kKuberay) {
    result.warnings.push_back(
        "FORGE_DEFAULT_FLEET_KIND is kuberay but FORGE_S3_ENDPOINT is not set: Ray pods fetch "
        "capsules from S3 object storage, so kuberay jobs cannot start");
  }
  if (config.s3_addressing == S3Addressing::kVirtual &&
      config.s3_bucket.find('.') != std::string::npos &&
      StartsWithIgnoreCase(config.s3_endpoint, "https://")) {
    result.warnings.push_back(
        "FORGE_S3_BUCKET contains '.', so with FORGE_S3_ADDRESSING=virtual its host name does not "
        "match the endpoint's wildcard TLS certificate; use path addressing or a bucket without "
        "dots");
  }

  // Jobs write under the storage root; the store there would let a job make its user admin.
  if (const std::string state = config.StateDir();
      state == config.storage_root || state.rfind(config.storage_root + "/", 0) == 0) {
    result.errors.push_back(
        {"FORGE_STATE_DIR",
         "is " + state + ", inside FORGE_STORAGE_ROOT (" + config.storage_root +
             "), where jobs write: the control plane's state must live elsewhere (e.g. " +
             config.storage_root + "-state, the default)"});
  }

  if (is_set("FORGE_K8S_TOKEN") && !is_set("FORGE_K8S_API_SERVER")) {
    result.errors.push_back(
        {"FORGE_K8S_TOKEN",
         "is set without FORGE_K8S_API_SERVER: the token is only sent to an explicit API server "
         "(set FORGE_K8S_API_SERVER, or unset FORGE_K8S_TOKEN to use kubeconfig or the in-cluster "
         "service account)"});
  }
  if (!config.k8s_token.empty() && StartsWithIgnoreCase(config.k8s_api_server, "http://")) {
    result.warnings.push_back(
        "FORGE_K8S_TOKEN is sent unencrypted: FORGE_K8S_API_SERVER is an http:// URL");
  }
  if (is_set("FORGE_K8S_CONTEXT") && is_set("FORGE_K8S_API_SERVER")) {
    result.warnings.push_back(
        "FORGE_K8S_CONTEXT is ignored because FORGE_K8S_API_SERVER is set (a context only "
        "selects a kubeconfig entry)");
  }
  if (config.k8s_insecure_skip_tls_verify) {
    result.warnings.push_back(
        "FORGE_K8S_INSECURE_SKIP_TLS_VERIFY is on: the API server's certificate is not checked "
        "(tests only)");
  }
  if (!config.k8s_gpu_passthrough) {
    result.warnings.push_back(
        "FORGE_K8S_GPU_PASSTHROUGH is off: pods request no nvidia.com/gpu (clusters without GPUs; "
        "tests only)");
  }
}

// Defence in depth: no message built above contains a secret, but a secret pasted into the
// wrong variable (or an unknown one) would otherwise be echoed back. Very short values are left
// alone: masking "a" would mangle every message and protects nothing.
void ScrubSecrets(const std::map<std::string, std::string>& env, LoadResult& result) {
  auto scrub = [](std::string& text, const std::string& secret) {
    for (size_t at = text.find(secret); at != std::string::npos; at = text.find(secret, at)) {
      text.replace(at, secret.size(), Secret::kMask);
      at += std::char_traits<char>::length(Secret::kMask);
    }
  };
  for (const Entry& e : Table()) {
    if (!e.info.secret) continue;
    const auto it = env.find(e.info.name);
    if (it == env.end() || it->second.size() < 4) continue;
    for (FieldError& error : result.errors)
      scrub(error.message, it->second);
    for (std::string& warning : result.warnings)
      scrub(warning, it->second);
  }
}

}  // namespace

const std::vector<SettingInfo>& Settings() {
  static const std::vector<SettingInfo> settings = [] {
    std::vector<SettingInfo> out;
    for (const Entry& e : Table())
      out.push_back(e.info);
    return out;
  }();
  return settings;
}

LoadResult Load(const std::map<std::string, std::string>& env) {
  LoadResult result;
  std::vector<std::string> names;
  for (const Entry& e : Table()) {
    names.push_back(e.info.name);
    const auto it = env.find(e.info.name);
    if (it == env.end() || it->second.empty()) continue;
    std::string error = e.parse(it->second, result.config);
    if (!error.empty()) result.errors.push_back({e.info.name, std::move(error)});
  }
  for (const auto& [name, value] : env) {
    if (!std::string_view(name).starts_with(kPrefix)) continue;
    if (std::find(names.begin(), names.end(), name) != names.end()) continue;
    // Never the value: a misspelt secret name still holds a secret.
    result.name_warnings.push_back(name + " is not a StarForge setting" +
                                   DidYouMeanSuffix(name, names));
    result.warnings.push_back(result.name_warnings.back());
  }
  CrossCheck(env, result);
  ScrubSecrets(env, result);
  return result;
}

std::map<std::string, std::string> ProcessEnvironment() {
  std::map<std::string, std::string> env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string_view text(*entry);
    if (!text.starts_with(kPrefix)) continue;
    const size_t eq = text.find('=');
    if (eq == std::string_view::npos) continue;
    // emplace keeps the first of duplicate entries, which is the one getenv() returns.
    env.emplace(std::string(text.substr(0, eq)), std::string(text.substr(eq + 1)));
  }
  return env;
}

nlohmann::json Dump(const Config& config) {
  nlohmann::json out = nlohmann::json::object();
  for (const Entry& e : Table())
    out[e.info.name] = e.dump(config);
  return out;
}

jobspec::Defaults JobDefaults(const Config& config) {
  jobspec::Defaults defaults;
  defaults.fleet = ToString(config.default_fleet_kind);
  defaults.nemo_rl_image = config.image_nemo_rl;
  defaults.pre_running_seconds = config.kuberay_prerunning_deadline_s;
  return defaults;
}

}  // namespace starforge::config
