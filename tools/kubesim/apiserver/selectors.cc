#include "selectors.h"

#include <algorithm>

#include "resources.h"
#include "status.h"

namespace kubesim {

using nlohmann::json;

namespace {

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

// Splits on commas that are not inside parentheses.
std::vector<std::string> SplitTop(const std::string& s) {
  std::vector<std::string> out;
  int depth = 0;
  std::string cur;
  for (char c : s) {
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (c == ',' && depth == 0) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

bool ValidKey(const std::string& k) {
  if (k.empty()) return false;
  return std::all_of(k.begin(), k.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' ||
           c == '/';
  });
}

}  // namespace

LabelSelector LabelSelector::Parse(const std::string& text) {
  LabelSelector sel;
  if (Trim(text).empty()) return sel;
  for (const std::string& raw : SplitTop(text)) {
    std::string part = Trim(raw);
    Req r;
    auto fail = [&](const std::string& why) {
      return BadRequest("unable to parse requirement: " + why + " in \"" + part + "\"");
    };
    if (part.empty()) throw fail("found '', expected: identifier");
    if (part[0] == '!') {
      r.key = Trim(part.substr(1));
      r.op = "!";
    } else if (auto p = part.find("!="); p != std::string::npos) {
      r.key = Trim(part.substr(0, p));
      r.op = "!=";
      r.values = {Trim(part.substr(p + 2))};
    } else if (auto q = part.find('='); q != std::string::npos) {
      r.key = Trim(part.substr(0, q));
      r.op = "=";
      std::string v = part.substr(q + 1);
      if (!v.empty() && v[0] == '=') v = v.substr(1);
      r.values = {Trim(v)};
    } else if (auto paren = part.find('('); paren != std::string::npos) {
      std::string head = Trim(part.substr(0, paren));
      auto sp = head.find_last_of(" \t");
      if (sp == std::string::npos || part.back() != ')')
        throw fail("found '(', expected: in, notin");
      r.key = Trim(head.substr(0, sp));
      r.op = Trim(head.substr(sp + 1));
      if (r.op != "in" && r.op != "notin") throw fail("found '" + r.op + "', expected: in, notin");
      std::string inner = part.substr(paren + 1, part.size() - paren - 2);
      for (const auto& v : SplitTop(inner))
        r.values.push_back(Trim(v));
    } else {
      r.key = part;
      r.op = "exists";
    }
    if (!ValidKey(r.key)) throw fail("invalid label key \"" + r.key + "\"");
    sel.reqs_.push_back(std::move(r));
  }
  return sel;
}

bool LabelSelector::Matches(const json& object) const {
  static const json kEmpty = json::object();
  const json* labels = &kEmpty;
  if (object.contains("metadata") && object["metadata"].contains("labels") &&
      object["metadata"]["labels"].is_object()) {
    labels = &object["metadata"]["labels"];
  }
  for (const Req& r : reqs_) {
    const bool has = labels->contains(r.key);
    const std::string v =
        has && (*labels)[r.key].is_string() ? (*labels)[r.key].get<std::string>() : "";
    const bool in = std::find(r.values.begin(), r.values.end(), v) != r.values.end();
    if (r.op == "exists" && !has) return false;
    if (r.op == "!" && has) return false;
    if (r.op == "=" && (!has || !in)) return false;
    if (r.op == "!=" && has && in) return false;
    if (r.op == "in" && (!has || !in)) return false;
    if (r.op == "notin" && has && in) return false;
  }
  return true;
}

bool LabelSelector::Equality(std::string* key, std::string* value) const {
  for (const Req& r : reqs_) {
    const bool one = r.op == "=" || (r.op == "in" && r.values.size() == 1);
    if (one && !r.values.empty() && !r.values[0].empty()) {
      *key = r.key;
      *value = r.values[0];
      return true;
    }
  }
  return false;
}

namespace {

// events.k8s.io field labels in terms of the stored core/v1 Event.
std::string ToStorageField(const std::string& f) {
  if (f.rfind("regarding.", 0) == 0) return "involvedObject." + f.substr(10);
  if (f == "reportingController") return "reportingComponent";
  if (f == "spec.host") return "spec.nodeName";
  return f;
}

}  // namespace

FieldSelector FieldSelector::Parse(const std::string& text, const ResourceInfo& r) {
  FieldSelector sel;
  if (Trim(text).empty()) return sel;
  for (const std::string& raw : SplitTop(text)) {
    std::string part = Trim(raw);
    Req q;
    std::string field;
    if (auto p = part.find("!="); p != std::string::npos) {
      field = part.substr(0, p);
      q.negate = true;
      q.value = part.substr(p + 2);
    } else if (auto e = part.find('='); e != std::string::npos) {
      field = part.substr(0, e);
      std::string v = part.substr(e + 1);
      if (!v.empty() && v[0] == '=') v = v.substr(1);
      q.value = v;
    } else {
      throw BadRequest("invalid selector: '" + part + "'; can't understand '" + part + "'");
    }
    field = Trim(field);
    const bool allowed =
        field == "metadata.name" || field == "metadata.namespace" ||
        std::find(r.field_labels.begin(), r.field_labels.end(), field) != r.field_labels.end();
    if (!allowed) throw BadRequest("field label not supported: " + field);
    q.field = ToStorageField(field);
    sel.reqs_.push_back(std::move(q));
  }
  return sel;
}

std::string FieldValue(const json& object, const std::string& field) {
  if (field == "source") {
    const json* s = object.contains("source") ? &object["source"] : nullptr;
    return s != nullptr && s->is_object() ? s->value("component", "") : "";
  }
  const json* cur = &object;
  size_t start = 0;
  while (start <= field.size()) {
    size_t dot = field.find('.', start);
    std::string key =
        field.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!cur->is_object() || !cur->contains(key)) return "";
    cur = &(*cur)[key];
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  if (cur->is_string()) return cur->get<std::string>();
  if (cur->is_boolean()) return cur->get<bool>() ? "true" : "false";
  if (cur->is_null()) return "";
  return cur->dump();
}

bool FieldSelector::Matches(const json& object) const {
  for (const Req& q : reqs_) {
    std::string v = FieldValue(object, q.field);
    if (q.field == "spec.unschedulable" && v.empty()) v = "false";
    if ((v == q.value) == q.negate) return false;
  }
  return true;
}

std::string FieldSelector::PinnedName() const {
  for (const Req& q : reqs_) {
    if (q.field == "metadata.name" && !q.negate) return q.value;
  }
  return "";
}

}  // namespace kubesim
