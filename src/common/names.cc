#include "starforge/common/names.h"

#include <algorithm>

namespace starforge {

namespace {

bool IsLowerAlnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}
bool IsAlnum(char c) {
  return IsLowerAlnum(c) || (c >= 'A' && c <= 'Z');
}
bool IsLetter(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

std::string TooLong(size_t max_len, size_t len) {
  return "must be at most " + std::to_string(max_len) + " characters, got " + std::to_string(len);
}

bool MatchesDns1123Label(std::string_view v) {
  if (v.empty() || !IsLowerAlnum(v.front()) || !IsLowerAlnum(v.back())) return false;
  return std::all_of(v.begin(), v.end(), [](char c) { return IsLowerAlnum(c) || c == '-'; });
}

bool MatchesLabelName(std::string_view v) {
  if (v.empty() || !IsAlnum(v.front()) || !IsAlnum(v.back())) return false;
  return std::all_of(v.begin(), v.end(),
                     [](char c) { return IsAlnum(c) || c == '-' || c == '_' || c == '.'; });
}

constexpr size_t kMaxSubdomainLength = 253;
constexpr size_t kMaxLabelLength = 63;
constexpr const char* kLabelCharsHint =
    "A-Z, a-z, 0-9, '-', '_' and '.', starting and ending with a letter or digit";

}  // namespace

std::string CheckDns1123Label(std::string_view value, size_t max_len) {
  if (value.empty()) return "must not be empty";
  if (value.size() > max_len) return TooLong(max_len, value.size());
  if (!MatchesDns1123Label(value)) {
    return "must be a lower-case DNS label (a-z, 0-9 and '-', starting and ending with a letter "
           "or digit)";
  }
  return "";
}

std::string CheckDns1035Label(std::string_view value, size_t max_len) {
  std::string reason = CheckDns1123Label(value, max_len);
  if (reason.empty() && !IsLetter(value.front())) {
    reason =
        "must be a lower-case DNS label starting with a letter (a-z, 0-9 and '-', ending "
        "with a letter or digit)";
  }
  return reason;
}

std::string CheckDns1123Subdomain(std::string_view value) {
  if (value.empty()) return "must not be empty";
  if (value.size() > kMaxSubdomainLength) return TooLong(kMaxSubdomainLength, value.size());
  size_t start = 0;
  while (true) {
    const size_t dot = value.find('.', start);
    if (!MatchesDns1123Label(value.substr(start, dot - start))) {
      return "must be a lower-case DNS subdomain (dot-separated parts of a-z, 0-9 and '-', each "
             "starting and ending with a letter or digit)";
    }
    if (dot == std::string_view::npos) return "";
    start = dot + 1;
  }
}

std::string CheckLabelValue(std::string_view value) {
  if (value.empty()) return "";
  if (value.size() > kMaxLabelLength) return TooLong(kMaxLabelLength, value.size());
  if (!MatchesLabelName(value))
    return std::string("must be a valid label value (") + kLabelCharsHint + ")";
  return "";
}

std::string CheckLabelKey(std::string_view value) {
  if (value.empty()) return "must not be empty";
  const size_t slash = value.find('/');
  std::string_view name = value;
  if (slash != std::string_view::npos) {
    const std::string_view prefix = value.substr(0, slash);
    name = value.substr(slash + 1);
    if (name.find('/') != std::string_view::npos) {
      return "must be a label key (an optional DNS subdomain prefix and '/', then a name): it has "
             "more than one '/'";
    }
    if (prefix.empty() || !CheckDns1123Subdomain(prefix).empty()) {
      return "must have a lower-case DNS subdomain (at most 253 characters) before '/'";
    }
  }
  if (name.empty()) return "must have a name after '/'";
  if (name.size() > kMaxLabelLength) {
    return "must have a name of at most " + std::to_string(kMaxLabelLength) +
           " characters (after any '/'), got " + std::to_string(name.size());
  }
  if (!MatchesLabelName(name)) return std::string("must have a name of ") + kLabelCharsHint;
  return "";
}

std::string CheckEnvVarName(std::string_view value) {
  if (value.empty()) return "must not be empty";
  const bool valid =
      !(value.front() >= '0' && value.front() <= '9') &&
      std::all_of(value.begin(), value.end(), [](char c) { return IsAlnum(c) || c == '_'; });
  if (!valid) {
    return "must be a valid environment variable name (letters, digits and '_', not starting "
           "with a digit)";
  }
  return "";
}

}  // namespace starforge
