#include "starforge/kuberay/shell.h"

namespace starforge::kuberay {

std::string ShellQuote(std::string_view word) {
  // Single quotes make every byte literal in bash and POSIX sh; the only byte that cannot
  // appear inside them is the quote itself, which is closed, escaped, and reopened.
  std::string out = "'";
  for (char c : word) {
    if (c == '\'') {
      out += "'\"'\"'";
    } else {
      out += c;
    }
  }
  out += '\'';
  return out;
}

std::string ShellJoin(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) {
    if (!out.empty()) out += ' ';
    out += ShellQuote(w);
  }
  return out;
}

}  // namespace starforge::kuberay
