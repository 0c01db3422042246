// Validators for names that Kubernetes sees. Each returns an empty string when the value is
// valid, else a reason phrased to follow "must be ..." style field errors, e.g.
// "must be a lower-case DNS label (a-z, 0-9 and '-', starting and ending with a letter or digit)".
#pragma once

#include <string>
#include <string_view>

namespace starforge {

// RFC 1123 label: [a-z0-9]([-a-z0-9]*[a-z0-9])?, at most max_len (≤ 63) characters.
std::string CheckDns1123Label(std::string_view value, size_t max_len = 63);
// RFC 1035 label: like 1123 but must start with a letter.
std::string CheckDns1035Label(std::string_view value, size_t max_len = 63);
// RFC 1123 subdomain: dot-separated 1123 labels, at most 253 characters.
std::string CheckDns1123Subdomain(std::string_view value);
// Label value: empty, or ≤ 63 chars of [A-Za-z0-9_.-] starting and ending alphanumeric.
std::string CheckLabelValue(std::string_view value);
// Label key: optional DNS-subdomain prefix + '/' + name (≤ 63, [A-Za-z0-9_.-], alnum ends).
std::string CheckLabelKey(std::string_view value);
// Environment variable name as Kubernetes and POSIX shells accept it: [A-Za-z_][A-Za-z0-9_]*.
std::string CheckEnvVarName(std::string_view value);

}  // namespace starforge
