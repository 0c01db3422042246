// `.forgeignore`: which files of a code directory stay out of the capsule, in gitignore syntax
// (see docs/capsule.md for the rules and the defaults).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace starforge::capsule {

inline constexpr const char* kIgnoreFileName = ".forgeignore";

class IgnoreRules {
 public:
  // No rules: nothing is ignored.
  IgnoreRules() = default;
  // The rules every capsule starts from: .git, __pycache__/, *.pyc, .venv/, .forge/.
  static IgnoreRules Defaults();

  // Appends the rules of a gitignore-syntax text; later rules win. Lines that can never match
  // are reported in warnings() as "<source>:<line>: <why>".
  void AddText(std::string_view text, std::string_view source);
  // Appends one rule (one line of a gitignore file).
  void Add(std::string_view line) { AddLine(line, "", 0); }

  // Whether `path` ('/'-separated, relative to the root, no leading or trailing '/') is ignored:
  // the last rule that matches decides. Callers do not descend into ignored directories, which
  // is why a `!` rule cannot bring back a file under an ignored directory (as in git).
  bool IsIgnored(std::string_view path, bool is_dir) const;

  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  struct Rule {
    std::string pattern;  // without the `!`, the leading '/' and the trailing '/'
    bool negated = false;
    bool dir_only = false;
    bool anchored = false;  // matched against the whole path, else against the last component
  };
  void AddLine(std::string_view line, std::string_view source, size_t line_no);

  std::vector<Rule> rules_;
  std::vector<std::string> warnings_;
};

// Git's wildmatch with WM_PATHNAME: `*`, `?` and `[...]` (ranges, `!`/`^` negation, [:class:])
// never match '/'; `**` as a whole component matches any number of directories; `\` escapes.
bool WildMatch(std::string_view pattern, std::string_view text);

}  // namespace starforge::capsule
