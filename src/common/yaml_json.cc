#include "starforge/common/yaml_json.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <vector>

namespace starforge {

namespace {

using nlohmann::json;

constexpr std::string_view kCoreTagPrefix = "tag:yaml.org,2002:";

std::string Where(const YAML::Mark& mark) {
  return "line " + std::to_string(mark.line + 1) + ", column " + std::to_string(mark.column + 1);
}

// Stops the parse: yaml-cpp's own exception, so that ParseYaml's one catch of the library's
// failures reports the converter's too.
[[noreturn]] void Fail(const YAML::Mark& mark, const std::string& reason) {
  throw YAML::ParserException(mark, reason);
}

// ---- YAML 1.2 core schema (https://yaml.org/spec/1.2.2/#1032-tag-resolution) ----

// Hand-written matchers rather than std::regex: libstdc++'s regex recurses per character and
// overflows the stack on long scalars.
bool IsDigit(char c, int base = 10) {
  if (base == 8) return c >= '0' && c <= '7';
  if (base == 16 && ((c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) return true;
  return c >= '0' && c <= '9';
}

size_t CountDigits(std::string_view s, size_t pos) {
  size_t n = 0;
  while (pos + n < s.size() && IsDigit(s[pos + n]))
    ++n;
  return n;
}

bool IsDigits(std::string_view s, int base = 10) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [base](char c) { return IsDigit(c, base); });
}

std::string_view StripSign(std::string_view s) {
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) s.remove_prefix(1);
  return s;
}

// [eE][-+]?[0-9]+ at the end of `s`, from `pos`.
bool IsExponentAt(std::string_view s, size_t pos) {
  return pos < s.size() && (s[pos] == 'e' || s[pos] == 'E') &&
         IsDigits(StripSign(s.substr(pos + 1)));
}

bool IsNullWord(std::string_view s) {
  return s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL";
}

// [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?
bool IsCoreFloat(std::string_view s) {
  s = StripSign(s);
  const size_t int_digits = CountDigits(s, 0);
  size_t pos = int_digits, frac_digits = 0;
  if (pos < s.size() && s[pos] == '.') {
    frac_digits = CountDigits(s, pos + 1);
    pos += 1 + frac_digits;
  }
  if (int_digits == 0 && frac_digits == 0) return false;
  return pos == s.size() || IsExponentAt(s, pos);
}

std::optional<json> ResolveInteger(const std::string& s) {
  errno = 0;
  char* end = nullptr;
  if (IsDigits(StripSign(s))) {
    const long long v = std::strtoll(s.c_str(), &end, 10);
    if (errno == 0) return json(static_cast<int64_t>(v));
    errno = 0;
    const unsigned long long u = std::strtoull(s.c_str(), &end, 10);
    if (errno == 0 && s[0] != '-') return json(static_cast<uint64_t>(u));
    return json(std::strtod(s.c_str(), &end));  // too large for any integer type
  }
  const std::string_view digits = std::string_view(s).substr(std::min<size_t>(2, s.size()));
  const bool octal = s.rfind("0o", 0) == 0 && IsDigits(digits, 8);
  if (octal || (s.rfind("0x", 0) == 0 && IsDigits(digits, 16))) {
    const unsigned long long u = std::strtoull(digits.data(), &end, octal ? 8 : 16);
    // Beyond uint64 these stay strings: no float spelling exists for them.
    if (errno != 0) return std::nullopt;
    if (u <= static_cast<unsigned long long>(INT64_MAX)) return json(static_cast<int64_t>(u));
    return json(static_cast<uint64_t>(u));
  }
  return std::nullopt;
}

std::optional<json> ResolveFloat(const std::string& s) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  if (IsCoreFloat(s)) return json(std::strtod(s.c_str(), nullptr));
  const std::string_view unsigned_part = StripSign(s);
  if (unsigned_part == ".inf" || unsigned_part == ".Inf" || unsigned_part == ".INF") {
    return json(s[0] == '-' ? -kInf : kInf);
  }
  if (s == ".nan" || s == ".NaN" || s == ".NAN") {
    return json(std::numeric_limits<double>::quiet_NaN());
  }
  return std::nullopt;
}

json ResolvePlain(const std::string& s) {
  if (IsNullWord(s)) return nullptr;
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  if (auto i = ResolveInteger(s)) return *i;
  if (auto f = ResolveFloat(s)) return *f;
  return s;
}

// ---- Parsing: yaml-cpp events -> json ----

std::string ShortTag(const std::string& tag) {
  return tag.rfind(kCoreTagPrefix, 0) == 0 ? "!!" + tag.substr(kCoreTagPrefix.size()) : tag;
}

class JsonBuilder : public YAML::EventHandler {
 public:
  explicit JsonBuilder(const YamlLimits& limits) : limits_(limits) {}
  json TakeRoot() { return std::move(root_); }

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}

  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    // Plain "null"/"~" keys become "null", as sigs.k8s.io/yaml (kubectl) does.
    if (AwaitingKey()) return SetKey(mark, "null", anchor);
    Count(mark, 1, 1);
    Add(nullptr, anchor, 1, 1);
  }

  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    if (AwaitingKey()) Fail(mark, "aliases cannot be mapping keys");
    const auto it = anchors_.find(anchor);
    // yaml-cpp rejects undefined anchors itself, so a miss is an alias inside its own anchor.
    if (it == anchors_.end()) Fail(mark, "an alias cannot refer to a node that contains it");
    Count(mark, it->second.nodes, it->second.bytes);
    Add(it->second.value, 0, it->second.nodes, it->second.bytes);
  }

  void OnScalar(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                const std::string& value) override {
    if (AwaitingKey()) return SetKey(mark, value, anchor);
    const size_t bytes = value.size() + 1;
    Count(mark, 1, bytes);
    if (tag == "?") return Add(ResolvePlain(value), anchor, 1, bytes);
    if (tag == "!" || tag == std::string(kCoreTagPrefix) + "str")
      return Add(value, anchor, 1, bytes);
    Fail(mark, "unsupported tag " + ShortTag(tag) + " (only !!str is supported; remove the tag)");
  }

  void OnSequenceStart(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    Open(mark, tag, "seq", json::array(), anchor);
  }
  void OnSequenceEnd() override { Close(); }

  void OnMapStart(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    Open(mark, tag, "map", json::object(), anchor);
  }
  void OnMapEnd() override { Close(); }

 private:
  struct Frame {
    json value;
    YAML::anchor_t anchor = 0;
    size_t nodes_at_start = 0;
    size_t bytes_at_start = 0;
    std::optional<std::string> key;  // the key whose value comes next (maps only)
  };
  // clang-tidy 14 says its implicit move constructor may throw; nlohmann::json's is noexcept.
  struct Anchored {  // NOLINT(bugprone-exception-escape)
    json value;
    size_t nodes = 0;
    size_t bytes = 0;
  };

  bool AwaitingKey() const {
    return !stack_.empty() && stack_.back().value.is_object() && !stack_.back().key;
  }

  void SetKey(const YAML::Mark& mark, const std::string& key, YAML::anchor_t anchor) {
    Count(mark, 0, key.size() + 1);
    if (anchor != 0) anchors_[anchor] = {key, 1, key.size() + 1};
    Frame& top = stack_.back();
    if (top.value.contains(key)) Fail(mark, "duplicate key \"" + key + "\"");
    top.key = key;
  }

  void Count(const YAML::Mark& mark, size_t nodes, size_t bytes) {
    nodes_ += nodes;
    bytes_ += bytes;
    if (nodes_ > limits_.max_nodes) {
      Fail(mark, "document too large (more than " + std::to_string(limits_.max_nodes) +
                     " values once aliases are expanded)");
    }
    if (bytes_ > limits_.max_bytes) {
      Fail(mark, "document too large (more than " + std::to_string(limits_.max_bytes) +
                     " bytes of keys and values once aliases are expanded)");
    }
  }

  // `nodes`, `bytes`: the size of `value` once expanded, already counted by the caller.
  void Add(json value, YAML::anchor_t anchor, size_t nodes, size_t bytes) {
    if (anchor != 0) anchors_[anchor] = {value, nodes, bytes};
    if (stack_.empty()) {
      root_ = std::move(value);
      return;
    }
    Frame& top = stack_.back();
    if (top.value.is_array()) {
      top.value.push_back(std::move(value));
    } else {
      top.value[*top.key] = std::move(value);
      top.key.reset();
    }
  }

  void Open(const YAML::Mark& mark, const std::string& tag, const std::string& kind, json empty,
            YAML::anchor_t anchor) {
    if (AwaitingKey()) Fail(mark, "mapping keys must be scalars");
    if (tag != "?" && tag != "!" && tag != std::string(kCoreTagPrefix) + kind) {
      Fail(mark, "unsupported tag " + ShortTag(tag) + " (remove the tag)");
    }
    Count(mark, 1, 1);
    if (stack_.size() >= limits_.max_depth)
      Fail(mark, "nested more than " + std::to_string(limits_.max_depth) + " levels deep");
    stack_.push_back({std::move(empty), anchor, nodes_, bytes_, std::nullopt});
  }

  void Close() {
    Frame frame = std::move(stack_.back());
    stack_.pop_back();
    Add(std::move(frame.value), frame.anchor, nodes_ - frame.nodes_at_start + 1,
        bytes_ - frame.bytes_at_start + 1);
  }

  std::vector<Frame> stack_;
  json root_;
  const YamlLimits limits_;
  std::map<YAML::anchor_t, Anchored> anchors_;
  size_t nodes_ = 0;
  size_t bytes_ = 0;
};

// The length of the well-formed UTF-8 sequence at text[i] (RFC 3629: no overlong forms, no
// surrogates, at most U+10FFFF), or 0.
size_t Utf8SequenceLength(std::string_view text, size_t i) {
  const auto lead = static_cast<unsigned char>(text[i]);
  if (lead < 0x80) return 1;
  const size_t len = (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xE ? 3 : (lead >> 3) == 0x1E ? 4 : 0;
  if (len == 0 || i + len > text.size()) return 0;
  uint32_t cp = lead & (0x7F >> len);
  for (size_t k = 1; k < len; ++k) {
    const auto c = static_cast<unsigned char>(text[i + k]);
    if ((c >> 6) != 0x2) return 0;
    cp = (cp << 6) | (c & 0x3F);
  }
  static constexpr uint32_t kMinForLength[] = {0, 0, 0x80, 0x800, 0x10000};
  const bool valid = cp >= kMinForLength[len] && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
  return valid ? len : 0;
}

// yaml-cpp passes bytes through unchecked, and nlohmann::json refuses to dump invalid UTF-8.
void CheckUtf8(std::string_view text) {
  YAML::Mark mark;
  mark.line = 0;
  mark.column = 0;
  for (size_t i = 0; i < text.size();) {
    const size_t len = Utf8SequenceLength(text, i);
    if (len == 0) Fail(mark, "invalid UTF-8");
    if (text[i] == '\n') {
      ++mark.line;
      mark.column = 0;
    } else {
      ++mark.column;
    }
    i += len;
  }
}

// yaml-cpp reads flow collections ("[[[[…") recursively and holds the whole nesting before its
// own depth guard fails: half a million '[' cost 135 MB and a third of a second before the
// refusal. Counted here first, cheaply: brackets outside quoted scalars and comments. A plain
// scalar with more than max_depth unmatched brackets is refused too (quoting it fixes that).
void CheckFlowDepth(std::string_view text, size_t max_depth) {
  YAML::Mark mark;
  mark.line = 0;
  mark.column = 0;
  size_t depth = 0;
  char quote = 0;
  bool comment = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') {
      ++mark.line;
      mark.column = 0;
      comment = false;
      continue;
    }
    ++mark.column;
    if (comment) continue;
    if (quote) {
      if (quote == '"' && c == '\\') {
        ++i;  // an escaped character
      } else if (c == quote) {
        if (quote == '\'' && i + 1 < text.size() && text[i + 1] == '\'')
          ++i;  // '' is a quote
        else
          quote = 0;
      }
      continue;
    }
    if (c == '#' && (i == 0 || text[i - 1] == ' ' || text[i - 1] == '\t' || text[i - 1] == '\n')) {
      comment = true;
    } else if (c == '"' || c == '\'') {
      // A quote opens a quoted scalar only where a scalar starts (not inside a plain one: it's).
      const char before = i == 0 ? ' ' : text[i - 1];
      if (before == ' ' || before == '\t' || before == '\n' || before == '[' || before == '{' ||
          before == ',' || before == ':' || before == '-')
        quote = c;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth)
        Fail(mark, "nested more than " + std::to_string(max_depth) +
                       " levels deep (if this is part of a string, quote the string)");
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
}

// ---- Emitting ----

bool IsYaml11Special(std::string_view s) {
  static const char* const kWords[] = {"y",  "Y",  "yes", "Yes", "YES", "n",   "N",   "no", "No",
                                       "NO", "on", "On",  "ON",  "off", "Off", "OFF", "=",  "<<"};
  for (const char* w : kWords) {
    if (s == w) return true;
  }
  return false;
}

// Numbers as YAML 1.1 or other readers might see them ("1_000", "0b11", "12:30", "0X1F"):
// [-+]?(\.?[0-9][0-9_.:]*([eE][-+]?[0-9]+)?|0[bBoOxX][0-9a-fA-F_]+)
bool LooksNumeric(std::string_view s) {
  s = StripSign(s);
  if (s.size() > 2 && s[0] == '0' &&
      std::string_view("bBoOxX").find(s[1]) != std::string_view::npos &&
      std::all_of(s.begin() + 2, s.end(), [](char c) { return IsDigit(c, 16) || c == '_'; })) {
    return true;
  }
  if (!s.empty() && s[0] == '.') s.remove_prefix(1);
  if (s.empty() || !IsDigit(s[0])) return false;
  const size_t end = s.find_first_not_of("0123456789_.:");
  return end == std::string_view::npos || IsExponentAt(s, end);
}

// Plain strings that another reader would take for a different type, a document marker, or
// a line break.
bool NeedsQuotes(const std::string& s) {
  return !ResolvePlain(s).is_string() || IsYaml11Special(s) || LooksNumeric(s) ||
         s.rfind("---", 0) == 0 || s.rfind("...", 0) == 0;
}

bool HasUnprintable(std::string_view s) {
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7F) return true;
  }
  // NEL, LINE SEPARATOR, PARAGRAPH SEPARATOR are line breaks to some readers; BOM is stripped.
  for (const char* seq : {"\xC2\x85", "\xE2\x80\xA8", "\xE2\x80\xA9", "\xEF\xBB\xBF"}) {
    if (s.find(seq) != std::string_view::npos) return true;
  }
  return false;
}

// Literal style ("|", clip chomping, auto-detected indentation) reproduces the string exactly
// only when it ends in exactly one newline, its first line starts with a visible character, and
// no line has trailing blanks or unprintable characters.
bool FitsLiteralBlock(std::string_view s) {
  if (s.size() < 2 || s.back() != '\n' || s[s.size() - 2] == '\n') return false;
  if (s[0] == ' ' || s[0] == '\t' || s[0] == '\n' || HasUnprintable(s)) return false;
  for (size_t i = s.find('\n'); i != std::string_view::npos; i = s.find('\n', i + 1)) {
    if (s[i - 1] == ' ' || s[i - 1] == '\t') return false;
  }
  return true;
}

void EmitString(YAML::Emitter& out, const std::string& s) {
  const bool quote = NeedsQuotes(s);
  if (!quote && s.find('\n') == std::string::npos && !HasUnprintable(s)) {
    out << s;  // yaml-cpp quotes it if plain style cannot represent it
  } else if (!quote && FitsLiteralBlock(s)) {
    // yaml-cpp writes the block's final line break itself; passing it would add an empty line.
    out << YAML::Literal << s.substr(0, s.size() - 1);
  } else {
    out << YAML::DoubleQuoted << s;
  }
}

void EmitKey(YAML::Emitter& out, const std::string& key) {
  if (NeedsQuotes(key) || key.find('\n') != std::string::npos || HasUnprintable(key)) {
    out << YAML::DoubleQuoted << key;
  } else {
    out << key;
  }
}

std::string FormatFloat(double d) {
  if (std::isnan(d)) return ".nan";
  if (std::isinf(d)) return d < 0 ? "-.inf" : ".inf";
  return json(d).dump();  // shortest round-trip form, always with '.' or an exponent
}

void EmitValue(YAML::Emitter& out, const json& v) {
  switch (v.type()) {
    case json::value_t::object:
      if (v.empty()) out << YAML::Flow;
      out << YAML::BeginMap;
      for (const auto& [key, item] : v.items()) {
        out << YAML::Key;
        EmitKey(out, key);
        out << YAML::Value;
        EmitValue(out, item);
      }
      out << YAML::EndMap;
      break;
    case json::value_t::array:
      if (v.empty()) out << YAML::Flow;
      out << YAML::BeginSeq;
      for (const auto& item : v)
        EmitValue(out, item);
      out << YAML::EndSeq;
      break;
    case json::value_t::string:
      EmitString(out, v.get_ref<const std::string&>());
      break;
    case json::value_t::boolean:
      out << v.get<bool>();
      break;
    case json::value_t::number_integer:
      out << v.get<int64_t>();
      break;
    case json::value_t::number_unsigned:
      out << v.get<uint64_t>();
      break;
    case json::value_t::number_float:
      out << FormatFloat(v.get<double>());
      break;
    case json::value_t::null:
      out << YAML::Null;
      break;
    case json::value_t::binary:
    case json::value_t::discarded:
      throw std::invalid_argument("EmitYaml: binary and discarded JSON values have no YAML form");
  }
}

// yaml-cpp indents the empty lines inside literal blocks; those blanks carry no content.
std::string StripTrailingBlanks(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    if (c == '\n') {
      while (!out.empty() && out.back() == ' ')
        out.pop_back();
    }
    out += c;
  }
  return out;
}

}  // namespace

StatusOr<json> ParseYaml(std::string_view text, const YamlLimits& limits) {
  try {
    CheckUtf8(text);
    CheckFlowDepth(text, limits.max_depth);
    std::istringstream in{std::string(text)};
    JsonBuilder builder(limits);
    YAML::Parser parser(in);
    if (!parser.HandleNextDocument(builder)) return json(nullptr);
    json root = builder.TakeRoot();
    JsonBuilder rest(limits);
    if (parser.HandleNextDocument(rest)) {
      return Status::Invalid("expected a single YAML document, found more than one ('---')");
    }
    return root;
  } catch (const YAML::Exception& e) {
    return Status::Invalid(Where(e.mark) + ": " + e.msg);
  }
}

std::string EmitYaml(const json& value) {
  YAML::Emitter out;
  EmitValue(out, value);
  if (!out.good()) throw std::logic_error("EmitYaml: " + out.GetLastError());
  std::string text = out.c_str();
  if (text.empty() || text.back() != '\n') text += '\n';
  return StripTrailingBlanks(text);
}

}  // namespace starforge
