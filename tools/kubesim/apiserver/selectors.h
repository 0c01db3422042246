// Label and field selectors as the list/watch query parameters carry them.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kubesim {

struct ResourceInfo;

class LabelSelector {
 public:
  // Parses `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k` joined by commas.
  // Throws ApiError 400 on a syntax error.
  static LabelSelector Parse(const std::string& text);
  bool Matches(const nlohmann::json& object) const;
  bool Empty() const { return reqs_.empty(); }
  // A requirement `key=value` with a non-empty value that every match must meet (what the
  // store's label index answers), if the selector has one.
  bool Equality(std::string* key, std::string* value) const;

 private:
  struct Req {
    std::string key;
    std::string op;  // "=", "!=", "in", "notin", "exists", "!"
    std::vector<std::string> values;
  };
  std::vector<Req> reqs_;
};

class FieldSelector {
 public:
  // Parses `f=v`, `f==v`, `f!=v` joined by commas; every field must be on the resource's
  // allow-list (400 `field label not supported: X` otherwise).
  static FieldSelector Parse(const std::string& text, const ResourceInfo& r);
  // `object` is in storage form (core/v1 for events).
  bool Matches(const nlohmann::json& object) const;
  bool Empty() const { return reqs_.empty(); }
  // The value of `metadata.name=X` if the selector pins one name (for faster paths); else "".
  std::string PinnedName() const;

 private:
  struct Req {
    std::string field;  // translated to storage form
    bool negate = false;
    std::string value;
  };
  std::vector<Req> reqs_;
};

// The string value of a field label on a stored object ("" when absent; bools as true/false).
std::string FieldValue(const nlohmann::json& object, const std::string& field);

}  // namespace kubesim
