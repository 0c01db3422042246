#include "starforge/capsule/ignore.h"

#include <cctype>

namespace starforge::capsule {

namespace {

// The result codes of git's wildmatch. The two aborts prune the backtracking: once a `*` has
// failed at the end of the text (or at a '/', for a `*` that cannot cross one), no later
// starting point of an enclosing `*` can succeed either.
enum : int { kMatch = 0, kNoMatch = 1, kAbortAll = -1, kAbortToStarStar = -2 };

bool ClassContains(std::string_view name, unsigned char c, bool* known) {
  *known = true;
  const int ch = c;
  if (name == "alnum") return std::isalnum(ch);
  if (name == "alpha") return std::isalpha(ch);
  if (name == "blank") return c == ' ' || c == '\t';
  if (name == "cntrl") return std::iscntrl(ch);
  if (name == "digit") return std::isdigit(ch);
  if (name == "graph") return std::isgraph(ch);
  if (name == "lower") return std::islower(ch);
  if (name == "print") return std::isprint(ch);
  if (name == "punct") return std::ispunct(ch);
  if (name == "space") return std::isspace(ch);
  if (name == "upper") return std::isupper(ch);
  if (name == "xdigit") return std::isxdigit(ch);
  *known = false;
  return false;
}

class Matcher {
 public:
  Matcher(std::string_view pattern, std::string_view text) : pat_(pattern), text_(text) {}
  int Match(size_t p, size_t t) const;

 private:
  // Bytes past the end read as NUL, as in the C original (neither side contains NUL).
  unsigned char P(size_t i) const { return i < pat_.size() ? pat_[i] : 0; }
  unsigned char T(size_t i) const { return i < text_.size() ? text_[i] : 0; }

  std::string_view pat_;
  std::string_view text_;
};

int Matcher::Match(size_t p, size_t t) const {
  for (; p < pat_.size(); ++t, ++p) {
    unsigned char p_ch = P(p);
    const unsigned char t_ch = T(t);
    if (t >= text_.size() && p_ch != '*') return kAbortAll;
    switch (p_ch) {
      case '\\':
        p_ch = P(++p);
        if (p >= pat_.size()) return kNoMatch;  // a trailing backslash never matches
        [[fallthrough]];
      default:
        if (t_ch != p_ch) return kNoMatch;
        continue;
      case '?':
        if (t_ch == '/') return kNoMatch;
        continue;
      case '*': {
        bool match_slash = false;
        if (P(++p) == '*') {
          const size_t first = p - 1;
          while (P(++p) == '*') {
          }
          // `**` is special only as a whole path component; elsewhere it is a plain `*`.
          if ((first == 0 || P(first - 1) == '/') &&
              (p >= pat_.size() || P(p) == '/' || (P(p) == '\\' && P(p + 1) == '/'))) {
            if (P(p) == '/' && Match(p + 1, t) == kMatch) return kMatch;  // zero directories
            match_slash = true;
          }
        }
        if (p >= pat_.size()) {
          if (!match_slash && text_.find('/', t) != std::string_view::npos) return kAbortToStarStar;
          return kMatch;
        }
        if (!match_slash && P(p) == '/') {
          // `*/`: the star must end at the next '/' of the text.
          const size_t slash = text_.find('/', t);
          if (slash == std::string_view::npos) return kAbortAll;
          t = slash;
          break;  // the loop steps over the '/' in both
        }
        for (; t < text_.size(); ++t) {
          const int m = Match(p, t);
          if (m != kNoMatch) {
            if (!match_slash || m != kAbortToStarStar) return m;
          } else if (!match_slash && T(t) == '/') {
            return kAbortToStarStar;
          }
        }
        return kAbortAll;
      }
      case '[': {
        p_ch = P(++p);
        if (p_ch == '^') p_ch = '!';
        const bool negated = p_ch == '!';
        if (negated) p_ch = P(++p);
        unsigned char prev_ch = 0;
        bool matched = false;
        // The first character after `[` (or `[!`) is a member even if it is `]`.
        do {
          if (p >= pat_.size()) return kAbortAll;  // unterminated: never matches
          if (p_ch == '\\') {
            p_ch = P(++p);
            if (p >= pat_.size()) return kAbortAll;
            if (t_ch == p_ch) matched = true;
          } else if (p_ch == '-' && prev_ch && p + 1 < pat_.size() && P(p + 1) != ']') {
            p_ch = P(++p);
            if (p_ch == '\\') {
              p_ch = P(++p);
              if (p >= pat_.size()) return kAbortAll;
            }
            if (t_ch <= p_ch && t_ch >= prev_ch) matched = true;
            p_ch = 0;  // a range cannot start another range
          } else if (p_ch == '[' && P(p + 1) == ':') {
            const size_t s = p + 2;
            size_t q = s;
            while (q < pat_.size() && P(q) != ']')
              ++q;
            if (q >= pat_.size()) return kAbortAll;
            if (q == s || P(q - 1) != ':') {
              // Not `[:name:]`: an ordinary '[' member.
              if (t_ch == '[') matched = true;
              continue;
            }
            bool known = false;
            if (ClassContains(pat_.substr(s, q - 1 - s), t_ch, &known)) matched = true;
            if (!known) return kAbortAll;  // malformed class name
            p = q;
            p_ch = 0;
          } else if (t_ch == p_ch) {
            matched = true;
          }
        } while (prev_ch = p_ch, (p_ch = P(++p)) != ']');
        if (matched == negated || t_ch == '/') return kNoMatch;
        continue;
      }
    }
  }
  return t < text_.size() ? kNoMatch : kMatch;
}

}  // namespace

bool WildMatch(std::string_view pattern, std::string_view text) {
  return Matcher(pattern, text).Match(0, 0) == kMatch;
}

IgnoreRules IgnoreRules::Defaults() {
  IgnoreRules rules;
  // `.git` without a trailing slash: in worktrees and submodules it is a file.
  for (const char* line : {".git", "__pycache__/", "*.pyc", ".venv/", ".forge/"})
    rules.Add(line);
  return rules;
}

void IgnoreRules::AddText(std::string_view text, std::string_view source) {
  size_t line_no = 0;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t nl = text.find('\n', start);
    const size_t end = nl == std::string_view::npos ? text.size() : nl;
    AddLine(text.substr(start, end - start), source, ++line_no);
    if (nl == std::string_view::npos) break;
    start = nl + 1;
  }
}

void IgnoreRules::AddLine(std::string_view line, std::string_view source, size_t line_no) {
  std::string s(line);
  if (!s.empty() && s.back() == '\r') s.pop_back();  // files written on Windows
  if (s.empty() || s[0] == '#') return;
  // Trailing spaces are dropped unless escaped ("foo\ ").
  while (!s.empty() && s.back() == ' ') {
    size_t backslashes = 0;
    for (size_t k = s.size() - 1; k > 0 && s[k - 1] == '\\'; --k)
      ++backslashes;
    if (backslashes % 2 == 1) break;
    s.pop_back();
  }
  Rule rule;
  if (!s.empty() && s[0] == '!') {
    rule.negated = true;
    s.erase(0, 1);
  }
  if (!s.empty() && s.back() == '/') {
    rule.dir_only = true;
    s.pop_back();
  }
  if (s.empty()) return;
  // A slash anywhere but at the end anchors the pattern to the root.
  rule.anchored = s.find('/') != std::string::npos;
  if (s[0] == '/') s.erase(0, 1);
  if (s.empty()) return;
  size_t trailing_backslashes = 0;
  for (size_t k = s.size(); k > 0 && s[k - 1] == '\\'; --k)
    ++trailing_backslashes;
  if (trailing_backslashes % 2 == 1 && !source.empty()) {
    warnings_.push_back(std::string(source) + ":" + std::to_string(line_no) + ": pattern '" +
                        std::string(line) + "' ends with a lone backslash and never matches");
  }
  rule.pattern = std::move(s);
  rules_.push_back(std::move(rule));
}

bool IgnoreRules::IsIgnored(std::string_view path, bool is_dir) const {
  const size_t slash = path.rfind('/');
  const std::string_view base = slash == std::string_view::npos ? path : path.substr(slash + 1);
  // The last rule that matches decides (as in .gitignore): read them from the end.
  for (size_t i = rules_.size(); i-- > 0;) {
    const auto& rule = rules_[i];
    if (rule.dir_only && !is_dir) continue;
    if (WildMatch(rule.pattern, rule.anchored ? path : base)) return !rule.negated;
  }
  return false;
}

}  // namespace starforge::capsule
