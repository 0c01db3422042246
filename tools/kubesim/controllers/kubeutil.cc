#include "controllers/kubeutil.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <random>

#include "parse_yaml.h"

namespace kubesim::controllers {

std::string Rand5() {
  static const char kAlphabet[] = "bcdfghjklmnpqrstvwxz2456789";
  static std::mutex mu;
  static std::mt19937_64 rng{std::random_device{}()};
  std::lock_guard<std::mutex> lock(mu);
  std::string s;
  for (int i = 0; i < 5; ++i)
    s.push_back(kAlphabet[rng() % (sizeof(kAlphabet) - 1)]);
  return s;
}

int64_t NowUnix() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int64_t NowUnixMillis() {
  return starforge::NowMs();
}

int64_t ParseRfc3339(const std::string& text) {
  const std::optional<int64_t> ms = starforge::ParseRfc3339(text);  // common/format.h
  return ms ? *ms / 1000 : -1;
}

std::string GoTimeString(int64_t unix_seconds) {
  return starforge::FormatUtc(unix_seconds, "%Y-%m-%d %H:%M:%S +0000 UTC");
}

std::string GoDateTime(int64_t unix_seconds) {
  return starforge::FormatUtc(unix_seconds, "%Y-%m-%d %H:%M:%S");
}

json ControllerRef(const json& owner) {
  return {{"apiVersion", owner.value("apiVersion", "")},
          {"kind", owner.value("kind", "")},
          {"name", Str(owner, {"metadata", "name"})},
          {"uid", Str(owner, {"metadata", "uid"})},
          {"controller", true},
          {"blockOwnerDeletion", true}};
}

bool IsControlledBy(const json& obj, const std::string& owner_uid) {
  const json& refs = At(obj, {"metadata", "ownerReferences"});
  if (!refs.is_array()) return false;
  for (const json& r : refs) {
    if (r.value("uid", "") == owner_uid && r.value("controller", false)) return true;
  }
  return false;
}

std::string PodPhase(const json& pod) {
  return Str(pod, {"status", "phase"});
}

bool PodReadyTrue(const json& pod) {
  const json& conds = At(pod, {"status", "conditions"});
  if (!conds.is_array()) return false;
  for (const json& c : conds) {
    if (c.value("type", "") == "Ready") return c.value("status", "") == "True";
  }
  return false;
}

bool PodRunningAndReady(const json& pod) {
  if (PodPhase(pod) != "Running") return false;
  const json& conds = At(pod, {"status", "conditions"});
  if (!conds.is_array()) return true;
  for (const json& c : conds) {
    if (c.value("type", "") == "Ready" && c.value("status", "") != "True") return false;
  }
  return true;
}

bool IsDeleting(const json& obj) {
  const json& ts = At(obj, {"metadata", "deletionTimestamp"});
  return ts.is_string() && !ts.get<std::string>().empty();
}

// ---- Go formatting ------------------------------------------------------------------------

std::string GoQuote(const std::string& s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"':
        out += "\\\"";
        continue;
      case '\\':
        out += "\\\\";
        continue;
      case '\a':
        out += "\\a";
        continue;
      case '\b':
        out += "\\b";
        continue;
      case '\f':
        out += "\\f";
        continue;
      case '\n':
        out += "\\n";
        continue;
      case '\r':
        out += "\\r";
        continue;
      case '\t':
        out += "\\t";
        continue;
      case '\v':
        out += "\\v";
        continue;
      default:
        break;
    }
    if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out.push_back(static_cast<char>(c));  // printable ASCII and UTF-8 text kept as is
    }
  }
  out += "\"";
  return out;
}

std::string GoJsonMarshal(const json& value) {
  const std::string raw = value.dump(-1, ' ', false, json::error_handler_t::replace);
  std::string out;
  out.reserve(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    const char c = raw[i];
    if (c == '<') {
      out += "\\u003c";
    } else if (c == '>') {
      out += "\\u003e";
    } else if (c == '&') {
      out += "\\u0026";
    } else if (static_cast<unsigned char>(c) == 0xe2 && i + 2 < raw.size() &&
               static_cast<unsigned char>(raw[i + 1]) == 0x80 &&
               (static_cast<unsigned char>(raw[i + 2]) == 0xa8 ||
                static_cast<unsigned char>(raw[i + 2]) == 0xa9)) {
      out += static_cast<unsigned char>(raw[i + 2]) == 0xa8 ? "\\u2028" : "\\u2029";
      i += 2;
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string YamlToJson(const std::string& yaml) {
  return GoJsonMarshal(kubesim::ParseYamlOrThrow(yaml));
}

std::string Dns1035LabelErrors(const std::string& value) {
  std::string errs;
  if (value.size() > 63) errs = "must be no more than 63 characters";
  bool ok = !value.empty() && value[0] >= 'a' && value[0] <= 'z';
  for (char c : value) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) ok = false;
  }
  if (!value.empty() && value.back() == '-') ok = false;
  if (!ok) {
    if (!errs.empty()) errs += " ";
    errs +=
        "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with "
        "an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or "
        "'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
  }
  return errs;
}

}  // namespace kubesim::controllers
