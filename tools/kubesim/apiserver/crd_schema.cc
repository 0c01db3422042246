// Validation of objects against a CRD's structural OpenAPI v3 schema, using valijson (JSON Schema
// draft 4) for the traversal and our own code for what JSON Schema cannot say or says badly.
//
// The goal is to answer "would kube-apiserver accept this object with fieldValidation=Strict (the
// kubectl default)?" before the object is sent, with one clear error per mistake. The API server
// runs, in this order: decoding, pruning of non-nullable nulls, defaulting, pruning of unknown
// fields (reported as errors in Strict mode), then OpenAPI schema validation, list-type checks and
// CEL rules. Each step is mirrored below where JSON Schema allows, and documented in
// docs/crd-validation.md where it does not.

// valijson reports problems through throwRuntimeError(), which calls abort() unless exceptions are
// enabled; a malformed schema must become a std::runtime_error, never a dead process.
#ifndef VALIJSON_USE_EXCEPTIONS
#define VALIJSON_USE_EXCEPTIONS 1
#endif

#include "apiserver/crd_schema.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <utility>

// GCC 12 at -O3 reports a false -Wrestrict inside std::string::replace as inlined from valijson's
// json_pointer.hpp (GCC bug 105329); system-header suppression does not cover inlined code.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wrestrict"
#endif
#include <valijson/adapters/nlohmann_json_adapter.hpp>
#include <valijson/schema.hpp>
#include <valijson/schema_parser.hpp>
#include <valijson/validation_results.hpp>
#include <valijson/validator.hpp>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#include "parse_yaml.h"
#include "starforge/common/did_you_mean.h"

namespace kubesim {

using kubesim::ParseYamlOrThrow;
using starforge::DidYouMeanSuffix;
using starforge::FieldError;
using starforge::FieldErrors;

namespace {

using json = nlohmann::json;

constexpr std::string_view kIntOrString = "x-kubernetes-int-or-string";
constexpr std::string_view kPreserveUnknown = "x-kubernetes-preserve-unknown-fields";
constexpr std::string_view kEmbeddedResource = "x-kubernetes-embedded-resource";
constexpr std::string_view kListType = "x-kubernetes-list-type";
constexpr std::string_view kListMapKeys = "x-kubernetes-list-map-keys";

// kube-openapi's date-time check (strfmt.IsDateTime): a date, "T" (either case), hh:mm:ss,
// optional fraction, and a mandatory zone "Z" or ±hh:mm. valijson's own `format` support is not
// used because it calls asString() on any value (so a nullable date-time rejects null, and a
// non-empty object throws); `pattern` only ever looks at strings.
constexpr const char* kDateTimePattern =
    "^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])[Tt]([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]"
    "(\\.[0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})$";
constexpr const char* kDatePattern = "^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])$";
// resource.Quantity's pattern as controller-gen writes it; a regex is a poor error message.
constexpr const char* kQuantityPattern =
    "^(\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\\+|-)?(([0-9]+("
    "\\.[0-9]*)?)|(\\.[0-9]+))))?$";

bool Flag(const json& node, std::string_view key) {
  const auto it = node.find(key);
  return it != node.end() && it->is_boolean() && it->get<bool>();
}

std::string StringField(const json& node, std::string_view key) {
  const auto it = node.find(key);
  return it != node.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// A non-negative integer keyword (minItems, maxLength, ...), whichever way the parser stored it.
std::optional<size_t> CountField(const json& node, std::string_view key) {
  const auto it = node.find(key);
  if (it == node.end() || !it->is_number_integer() || it->get<int64_t>() < 0) return std::nullopt;
  return it->get<size_t>();
}

// ---------------------------------------------------------------------------------------------
// Translation OpenAPI v3 (structural) → JSON Schema draft 4.

// Where a schema node sits decides how strict it may be.
enum class Where {
  kRoot,          // the openAPIV3Schema node itself
  kStructural,    // a node reached through properties / items / additionalProperties
  kValueOnly,     // inside allOf/anyOf/oneOf/not: adds constraints, never declares fields
  kRootMetadata,  // `metadata` of the root or of an embedded resource: ObjectMeta, not ours
};

class Translator {
 public:
  json Node(const json& in, Where where);

 private:
  // The steps of Node, each for one family of keywords; `all_of` collects what needs an allOf.
  static std::string Types(const json& in, json& out);
  void ValueConstraints(const json& in, json& out);
  static void Format(const json& in, const std::string& type, json& out, json& all_of);
  void Object(const json& in, Where where, const std::string& type, json& out);
  static json Required(const json& in);
  void Junctors(const json& in, json& out, json& all_of);
  // std::regex speaks ECMAScript, Kubernetes speaks RE2. A pattern that std::regex rejects would
  // make valijson throw while validating, so it is dropped here instead (documented).
  bool PatternUsable(const std::string& pattern);
  std::map<std::string, bool> pattern_ok_;
};

bool Translator::PatternUsable(const std::string& pattern) {
  const auto [it, inserted] = pattern_ok_.try_emplace(pattern, true);
  if (inserted) {
    try {
      std::regex compiled(pattern);
    } catch (const std::regex_error&) {
      it->second = false;
    }
  }
  return it->second;
}

json Translator::Node(const json& in, Where where) {
  if (!in.is_object()) return json::object();  // not a schema: accept anything rather than throw
  json out = json::object();
  json all_of = json::array();
  const std::string type = Types(in, out);
  ValueConstraints(in, out);
  Format(in, type, out, all_of);
  // list-type "set": items must be unique, which draft 4 can say. list-type "map" (unique by key
  // fields, after defaulting) cannot be said in JSON Schema; CrdValidator checks it separately.
  if (StringField(in, kListType) == "set") out["uniqueItems"] = true;
  Object(in, where, type, out);
  // Arrays. OpenAPI v3 `items` is a single schema; a tuple form is not valid in a CRD.
  if (in.contains("items") && in["items"].is_object()) {
    out["items"] =
        Node(in["items"], where == Where::kValueOnly ? Where::kValueOnly : Where::kStructural);
  }
  Junctors(in, out, all_of);
  if (!all_of.empty()) out["allOf"] = std::move(all_of);

  // Everything else is dropped on purpose: description/title/example/externalDocs are prose,
  // `default` is applied by the server rather than checked, `nullable`/`format`/x-kubernetes-*
  // were consumed above, and x-kubernetes-validations (CEL) has no JSON Schema equivalent.
  return out;
}

// Types; returns the node's type ("" for int-or-string or none). OpenAPI's `nullable` has no
// draft-4 equivalent; "null" as an extra type is exactly it.
std::string Translator::Types(const json& in, json& out) {
  const bool nullable = Flag(in, "nullable");
  std::string type = StringField(in, "type");
  if (Flag(in, kIntOrString)) {
    // The structural form of IntOrString: no `type`, anyOf integer|string (controller-gen also
    // writes that anyOf; it is rebuilt here so a hand-written schema without it works too).
    json any_of = json::array({{{"type", "integer"}}, {{"type", "string"}}});
    if (nullable) any_of.push_back({{"type", "null"}});
    out["anyOf"] = std::move(any_of);
    type.clear();
  } else if (!type.empty()) {
    out["type"] = nullable ? json::array({type, "null"}) : json(type);
  }
  return type;
}

// Value constraints that mean the same in OpenAPI v3.0 and draft 4. Each is copied only when
// well-formed: valijson throws on a malformed keyword, and the API server would not have accepted
// such a CRD anyway.
void Translator::ValueConstraints(const json& in, json& out) {
  if (in.contains("enum") && in["enum"].is_array()) out["enum"] = in["enum"];
  if (in.contains("uniqueItems") && in["uniqueItems"].is_boolean()) {
    out["uniqueItems"] = in["uniqueItems"];
  }
  if (in.contains("multipleOf") && in["multipleOf"].is_number() &&
      in["multipleOf"].get<double>() > 0) {
    out["multipleOf"] = in["multipleOf"];
  }
  for (const char* key :
       {"minItems", "maxItems", "minLength", "maxLength", "minProperties", "maxProperties"}) {
    if (const auto n = CountField(in, key)) out[key] = *n;
  }
  for (const auto& [bound, exclusive] :
       {std::pair{"minimum", "exclusiveMinimum"}, std::pair{"maximum", "exclusiveMaximum"}}) {
    if (!in.contains(bound) || !in[bound].is_number()) continue;
    out[bound] = in[bound];
    // draft 4 (and valijson) reject a boolean exclusive bound without its bound, so only carry
    // it along with one.
    if (in.contains(exclusive) && in[exclusive].is_boolean()) out[exclusive] = in[exclusive];
  }
  if (in.contains("pattern") && in["pattern"].is_string()) {
    const std::string pattern = in["pattern"].get<std::string>();
    if (PatternUsable(pattern)) out["pattern"] = pattern;
  }
}

// `format`: valijson's FormatConstraint is unsafe on non-strings (see kDateTimePattern), so no
// `format` keyword is ever emitted; the formats that matter become ranges or patterns.
void Translator::Format(const json& in, const std::string& type, json& out, json& all_of) {
  const std::string format = StringField(in, "format");
  if ((format == "int32" || format == "int64") && type == "integer") {
    // kube-apiserver itself does not range-check integer formats, but the operator decodes these
    // fields into Go int32/int64: an out-of-range value is stored and then the RayJob cannot be
    // read by the controller at all. Rejecting it up front is the useful behaviour.
    const bool is32 = format == "int32";
    const json lo = is32 ? json(std::numeric_limits<int32_t>::min())
                         : json(std::numeric_limits<int64_t>::min());
    const json hi = is32 ? json(std::numeric_limits<int32_t>::max())
                         : json(std::numeric_limits<int64_t>::max());
    if (!out.contains("minimum") || out["minimum"].get<double>() < lo.get<double>()) {
      out["minimum"] = lo;
      out.erase("exclusiveMinimum");
    }
    if (!out.contains("maximum") || out["maximum"].get<double>() > hi.get<double>()) {
      out["maximum"] = hi;
      out.erase("exclusiveMaximum");
    }
  } else if (format == "date-time" || format == "date") {
    const json pattern = format == "date" ? kDatePattern : kDateTimePattern;
    // A node can carry both a format and a pattern; the second one goes through allOf.
    if (out.contains("pattern")) {
      all_of.push_back({{"pattern", pattern}});
    } else {
      out["pattern"] = pattern;
    }
  }
  // Other formats (byte, uuid, ipv4, cidr, ...) are dropped: see docs/crd-validation.md.
}

// Objects: properties, the implicit fields of an embedded resource, additionalProperties (what
// structural pruning means) and required.
void Translator::Object(const json& in, Where where, const std::string& type, json& out) {
  const bool value_only = where == Where::kValueOnly;
  const Where child_where = value_only ? Where::kValueOnly : Where::kStructural;
  const bool embedded = Flag(in, kEmbeddedResource);
  const bool is_object = type == "object" || in.contains("properties");
  if (in.contains("properties") && in["properties"].is_object()) {
    json props = json::object();
    for (const auto& [name, sub] : in["properties"].items()) {
      const bool is_metadata = name == "metadata" && (where == Where::kRoot || embedded);
      props[name] = Node(sub, is_metadata ? Where::kRootMetadata : child_where);
    }
    out["properties"] = std::move(props);
  }
  if (embedded && !value_only) {
    // An embedded resource implicitly has apiVersion/kind/metadata (the API server adds them to
    // the structural schema), even when the CRD does not spell them out.
    json& props = out["properties"];
    if (!props.contains("apiVersion")) props["apiVersion"] = {{"type", "string"}};
    if (!props.contains("kind")) props["kind"] = {{"type", "string"}};
    if (!props.contains("metadata")) props["metadata"] = {{"type", "object"}};
  }
  if (in.contains("additionalProperties")) {
    const json& ap = in["additionalProperties"];
    if (ap.is_object()) {
      out["additionalProperties"] = Node(ap, child_where);
    } else if (ap.is_boolean()) {
      out["additionalProperties"] = ap;
    }
  } else if (is_object && !value_only && where != Where::kRootMetadata &&
             !Flag(in, kPreserveUnknown)) {
    // Structural pruning drops every field the schema does not declare, and fieldValidation=Strict
    // (kubectl's default) turns each dropped field into an error. An object without `properties`
    // is no exception: the server prunes all of its fields. ObjectMeta is exempt because the
    // server validates it itself; x-kubernetes-preserve-unknown-fields switches pruning off.
    out["additionalProperties"] = false;
  }
  if (json required = Required(in); !required.empty()) out["required"] = std::move(required);
}

// `required` less the fields that have a default: the server defaults before it validates, so
// such a field can never be missing by then. (draft 4 wants at least one entry: an empty list is
// omitted.)
json Translator::Required(const json& in) {
  json required = json::array();
  if (!in.contains("required") || !in["required"].is_array()) return required;
  const json* props = in.contains("properties") ? &in["properties"] : nullptr;
  for (const auto& name : in["required"]) {
    if (!name.is_string()) continue;
    const std::string field = name.get<std::string>();
    const bool has_default = props && props->contains(field) && (*props)[field].is_object() &&
                             (*props)[field].contains("default") &&
                             !(*props)[field]["default"].is_null();
    if (!has_default) required.push_back(field);
  }
  return required;
}

// Junctors only add value validation in structural schemas: their branches never declare fields,
// so they must not get additionalProperties:false.
void Translator::Junctors(const json& in, json& out, json& all_of) {
  for (const char* key : {"allOf", "anyOf", "oneOf"}) {
    if (!in.contains(key) || !in[key].is_array()) continue;
    if (key == std::string_view("anyOf") && out.contains("anyOf")) {
      // int-or-string already produced the type anyOf; any extra anyOf must hold as well.
      json extra = json::array();
      bool only_types = true;
      for (const auto& branch : in[key]) {
        extra.push_back(Node(branch, Where::kValueOnly));
        if (!branch.is_object() || branch.size() != 1 || !branch.contains("type")) {
          only_types = false;
        }
      }
      if (!only_types) all_of.push_back({{"anyOf", std::move(extra)}});
      continue;
    }
    json branches = json::array();
    for (const auto& branch : in[key]) {
      branches.push_back(Node(branch, Where::kValueOnly));
    }
    if (key == std::string_view("allOf")) {
      for (auto& b : branches) {
        all_of.push_back(std::move(b));
      }
    } else {
      out[key] = std::move(branches);
    }
  }
  if (in.contains("not") && in["not"].is_object()) out["not"] = Node(in["not"], Where::kValueOnly);
}

// ---------------------------------------------------------------------------------------------
// Walking a document and a schema side by side.

struct Step {
  bool is_index = false;
  size_t index = 0;
  std::string key;
};
using Steps = std::vector<Step>;

bool StepLess(const Steps& a, const Steps& b) {
  const size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    if (a[i].is_index != b[i].is_index) return a[i].is_index;
    if (a[i].is_index) {
      if (a[i].index != b[i].index) return a[i].index < b[i].index;
    } else if (a[i].key != b[i].key) {
      return a[i].key < b[i].key;
    }
  }
  return a.size() < b.size();
}

const json* ChildSchema(const json* schema, const Step& step) {
  if (schema == nullptr || !schema->is_object()) return nullptr;
  if (step.is_index) {
    const auto it = schema->find("items");
    return it != schema->end() && it->is_object() ? &*it : nullptr;
  }
  const auto props = schema->find("properties");
  if (props != schema->end() && props->is_object()) {
    const auto it = props->find(step.key);
    if (it != props->end()) return &*it;
  }
  const auto ap = schema->find("additionalProperties");
  return ap != schema->end() && ap->is_object() ? &*ap : nullptr;
}

// Kubernetes' field-path style: declared fields are joined with dots, map entries (keys of an
// additionalProperties map such as labels) in brackets, list items by index.
std::string FormatPath(const json& root_schema, const Steps& steps) {
  std::string out;
  const json* schema = &root_schema;
  for (const Step& step : steps) {
    if (step.is_index) {
      out += "[" + std::to_string(step.index) + "]";
    } else {
      bool map_entry = false;
      if (schema != nullptr && schema->is_object()) {
        const auto props = schema->find("properties");
        const bool declared =
            props != schema->end() && props->is_object() && props->contains(step.key);
        const auto ap = schema->find("additionalProperties");
        map_entry = !declared && ap != schema->end() && ap->is_object();
      }
      if (map_entry) {
        out += "[" + step.key + "]";
      } else {
        out += (out.empty() ? "" : ".") + step.key;
      }
    }
    schema = ChildSchema(schema, step);
  }
  return out;
}

const json* SchemaAt(const json& root_schema, const Steps& steps) {
  const json* schema = &root_schema;
  for (const Step& step : steps) {
    schema = ChildSchema(schema, step);
    if (schema == nullptr) return nullptr;
  }
  return schema;
}

// Turns valijson's context (["<root>", "[spec]", "[containers]", "[0]"]) into steps. Array
// indices and object keys look alike in that form, so the document decides which one it is.
std::optional<Steps> ContextToSteps(const json& doc, const std::vector<std::string>& context) {
  Steps steps;
  const json* cur = &doc;
  for (size_t i = 1; i < context.size(); ++i) {
    const std::string& raw = context[i];
    if (raw.size() < 2 || raw.front() != '[' || raw.back() != ']') return std::nullopt;
    std::string part = raw.substr(1, raw.size() - 2);
    Step step;
    if (cur != nullptr && cur->is_array()) {
      if (part.empty() ||
          !std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        return std::nullopt;
      }
      step.is_index = true;
      step.index = std::stoul(part);
      cur = step.index < cur->size() ? &(*cur)[step.index] : nullptr;
    } else {
      step.key = std::move(part);
      cur = cur != nullptr && cur->is_object() && cur->contains(step.key) ? &(*cur)[step.key]
                                                                          : nullptr;
    }
    steps.push_back(std::move(step));
  }
  return steps;
}

const json* ValueAt(const json& doc, const Steps& steps) {
  const json* cur = &doc;
  for (const Step& step : steps) {
    if (step.is_index) {
      if (!cur->is_array() || step.index >= cur->size()) return nullptr;
      cur = &(*cur)[step.index];
    } else {
      if (!cur->is_object() || !cur->contains(step.key)) return nullptr;
      cur = &(*cur)[step.key];
    }
  }
  return cur;
}

// ---------------------------------------------------------------------------------------------
// Messages.

std::string JsonTypeName(const json& v) {
  switch (v.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return "boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return "integer";
    case json::value_t::number_float:
      return "number";
    case json::value_t::string:
      return "string";
    case json::value_t::array:
      return "array";
    default:
      return "object";
  }
}

// A value as JSON, cut short so that a pasted script in a string field cannot flood the message.
std::string Scalar(const json& v) {
  std::string text = v.dump();
  constexpr size_t kMax = 60;
  if (text.size() > kMax) {
    size_t cut = kMax;
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80)
      --cut;  // UTF-8
    text = text.substr(0, cut) + "...";
  }
  return text;
}

// `string "zero"`, `integer 5`, `object`: enough to recognise the value without dumping it.
std::string Describe(const json& v) {
  const std::string name = JsonTypeName(v);
  if (v.is_null() || v.is_object() || v.is_array()) return name;
  return name + " " + Scalar(v);
}

bool TypeMatches(const json& v, std::string_view type) {
  if (type == "integer") return v.is_number_integer();
  if (type == "number") return v.is_number();
  if (type == "string") return v.is_string();
  if (type == "boolean") return v.is_boolean();
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "null") return v.is_null();
  return true;
}

std::string JoinOr(const std::vector<std::string>& words) {
  std::string out;
  for (size_t i = 0; i < words.size(); ++i) {
    if (i > 0) out += i + 1 == words.size() ? " or " : ", ";
    out += words[i];
  }
  return out;
}

std::string FormatNumber(double d) {
  if (std::abs(d) < 1e18 && d == std::floor(d)) {
    return std::to_string(static_cast<long long>(d));
  }
  std::ostringstream os;
  os << d;
  return os.str();
}

// The name of the integer range a bound came from, for "must be at most 2147483647 (int32)".
std::string RangeNote(const json* original, double bound) {
  if (original == nullptr) return "";
  const std::string format = StringField(*original, "format");
  if (format == "int32" && (bound == std::numeric_limits<int32_t>::max() ||
                            bound == std::numeric_limits<int32_t>::min())) {
    return " (int32)";
  }
  if (format == "int64" && (bound == static_cast<double>(std::numeric_limits<int64_t>::max()) ||
                            bound == static_cast<double>(std::numeric_limits<int64_t>::min()))) {
    return " (int64)";
  }
  return "";
}

// "1 item", "3 items".
std::string Count(size_t n, const std::string& noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

size_t Utf8Length(const std::string& s) {
  return static_cast<size_t>(std::count_if(
      s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

struct LocatedError {
  Steps steps;
  FieldError error;
};

Steps Append(const Steps& base, Step step) {
  Steps out = base;
  out.push_back(std::move(step));
  return out;
}
Step Key(std::string key) {
  return Step{false, 0, std::move(key)};
}
Step Index(size_t i) {
  return Step{true, i, {}};
}

// Whether the node's anyOf is the int-or-string shape: branches that each only name a type.
bool AnyOfIsTypesOnly(const json& schema) {
  const auto any = schema.find("anyOf");
  if (any == schema.end() || !any->is_array() || any->empty()) return false;
  return std::all_of(any->begin(), any->end(), [](const json& branch) {
    return branch.is_object() && branch.size() == 1 && branch.contains("type") &&
           branch["type"].is_string();
  });
}

// The types a node accepts: its `type`, or the branches of an int-or-string anyOf. Empty when the
// node does not constrain the type.
std::vector<std::string> AllowedTypes(const json& schema) {
  std::vector<std::string> types;
  if (const auto t = schema.find("type"); t != schema.end()) {
    if (t->is_string()) types.push_back(t->get<std::string>());
    if (t->is_array()) {
      for (const auto& e : *t) {
        if (e.is_string()) types.push_back(e.get<std::string>());
      }
    }
    return types;
  }
  if (AnyOfIsTypesOnly(schema)) {
    for (const auto& branch : schema["anyOf"]) {
      types.push_back(branch["type"].get<std::string>());
    }
  }
  return types;
}

using Explained = std::vector<LocatedError>;

void Add(Explained* out, const Steps& at, std::string message) {
  out->push_back({at, FieldError{"", std::move(message)}});
}

// The value's JSON type is none the schema allows: the message, or "" when the type is right.
std::string WrongType(const json& schema, const json& value) {
  const std::vector<std::string> types = AllowedTypes(schema);
  if (types.empty() || std::any_of(types.begin(), types.end(),
                                   [&](const std::string& t) { return TypeMatches(value, t); })) {
    return "";
  }
  std::string message = "expected " + JoinOr(types) + ", got " + Describe(value);
  const bool wants_int = std::find(types.begin(), types.end(), "integer") != types.end();
  const bool wants_string = std::find(types.begin(), types.end(), "string") != types.end();
  if (wants_int && value.is_number_float() && std::abs(value.get<double>()) >= 9.2e18) {
    message += " (too large for a 64-bit integer)";
  } else if (wants_int && wants_string && value.is_number_float()) {
    // The classic int-or-string trap (`cpu: 0.5`): only a quoted quantity is accepted.
    message += "; quote it: \"" + Scalar(value) + "\"";
  }
  return message;
}

void ExplainEnum(const json& schema, const json& value, const Steps& steps, Explained* out) {
  const auto e = schema.find("enum");
  if (e == schema.end() || !e->is_array() || std::find(e->begin(), e->end(), value) != e->end())
    return;
  std::string list;
  for (const auto& a : *e) {
    list += (list.empty() ? "" : ", ") + Scalar(a);
  }
  Add(out, steps, "unsupported value " + Scalar(value) + ": must be one of " + list);
}

void ExplainNumber(const json& schema, const json* original, const json& value, const Steps& steps,
                   Explained* out) {
  const double d = value.get<double>();
  if (const auto m = schema.find("minimum"); m != schema.end() && m->is_number()) {
    const double bound = m->get<double>();
    const bool exclusive = Flag(schema, "exclusiveMinimum");
    if (exclusive ? d <= bound : d < bound) {
      Add(out, steps,
          std::string(exclusive ? "must be greater than " : "must be at least ") +
              FormatNumber(bound) + RangeNote(original, bound) + ", got " + Scalar(value));
    }
  }
  if (const auto m = schema.find("maximum"); m != schema.end() && m->is_number()) {
    const double bound = m->get<double>();
    const bool exclusive = Flag(schema, "exclusiveMaximum");
    if (exclusive ? d >= bound : d > bound) {
      Add(out, steps,
          std::string(exclusive ? "must be less than " : "must be at most ") + FormatNumber(bound) +
              RangeNote(original, bound) + ", got " + Scalar(value));
    }
  }
  if (const auto m = schema.find("multipleOf"); m != schema.end() && m->is_number()) {
    const double divisor = m->get<double>();
    if (divisor > 0 && std::fmod(d, divisor) != 0) {
      Add(out, steps, "must be a multiple of " + FormatNumber(divisor) + ", got " + Scalar(value));
    }
  }
}

void ExplainString(const json& schema, const json& value, const Steps& steps, Explained* out) {
  const std::string s = value.get<std::string>();
  const size_t length = Utf8Length(s);
  if (const auto n = CountField(schema, "minLength"); n && length < *n) {
    Add(out, steps,
        "must be at least " + Count(*n, "character") + " long, got " + std::to_string(length));
  }
  if (const auto n = CountField(schema, "maxLength"); n && length > *n) {
    Add(out, steps,
        "must be at most " + Count(*n, "character") + " long, got " + std::to_string(length));
  }
  const std::string pattern = StringField(schema, "pattern");
  if (pattern.empty() || std::regex_search(s, std::regex(pattern))) return;
  std::string what = "does not match the regular expression " + json(pattern).dump();
  if (pattern == kDateTimePattern) {
    what = "is not an RFC 3339 date-time (e.g. \"2024-05-01T12:00:00Z\")";
  } else if (pattern == kDatePattern) {
    what = "is not a date (YYYY-MM-DD)";
  } else if (pattern == kQuantityPattern) {
    what = "is not a quantity (e.g. \"2\", \"500m\", \"4Gi\")";
  }
  Add(out, steps, Scalar(value) + " " + what);
}

void ExplainArray(const json& schema, const json& value, const Steps& steps, Explained* out) {
  if (const auto n = CountField(schema, "minItems"); n && value.size() < *n) {
    Add(out, steps,
        "must have at least " + Count(*n, "item") + ", got " + std::to_string(value.size()));
  }
  if (const auto n = CountField(schema, "maxItems"); n && value.size() > *n) {
    Add(out, steps,
        "must have at most " + Count(*n, "item") + ", got " + std::to_string(value.size()));
  }
  if (!Flag(schema, "uniqueItems")) return;
  for (size_t j = 1; j < value.size(); ++j) {
    for (size_t i = 0; i < j; ++i) {
      if (value[i] == value[j]) {
        Add(out, Append(steps, Index(j)),
            "duplicate value " + Scalar(value[j]) + " (already at index " + std::to_string(i) +
                ")");
        break;
      }
    }
  }
}

void ExplainObject(const json& schema, const json& value, const Steps& steps, Explained* out) {
  const auto props = schema.find("properties");
  const bool has_props = props != schema.end() && props->is_object();
  if (const auto req = schema.find("required"); req != schema.end() && req->is_array()) {
    for (const auto& name : *req) {
      if (name.is_string() && !value.contains(name.get<std::string>())) {
        Add(out, Append(steps, Key(name.get<std::string>())),
            "missing required field " + name.dump());
      }
    }
  }
  if (const auto ap = schema.find("additionalProperties");
      ap != schema.end() && ap->is_boolean() && !ap->get<bool>()) {
    std::vector<std::string> known;
    if (has_props) {
      for (const auto& [name, sub] : props->items()) {
        known.push_back(name);
      }
    }
    for (const auto& [name, sub] : value.items()) {
      if (has_props && props->contains(name)) continue;
      Add(out, Append(steps, Key(name)),
          "unknown field " + json(name).dump() + DidYouMeanSuffix(name, known));
    }
  }
  if (const auto n = CountField(schema, "minProperties"); n && value.size() < *n) {
    Add(out, steps,
        "must have at least " + Count(*n, "field") + ", got " + std::to_string(value.size()));
  }
  if (const auto n = CountField(schema, "maxProperties"); n && value.size() > *n) {
    Add(out, steps,
        "must have at most " + Count(*n, "field") + ", got " + std::to_string(value.size()));
  }
}

// Value-validation junctors cannot be explained keyword by keyword; valijson's verdict at this
// very node is reported in plain words instead.
void ExplainJunctors(const json& schema, const Steps& steps,
                     const std::vector<std::string>& raw_messages, Explained* out) {
  for (const std::string& raw : raw_messages) {
    if (raw.find("anyOf constraint") != std::string::npos && !AnyOfIsTypesOnly(schema)) {
      Add(out, steps, "does not match any of the allowed alternatives (anyOf)");
    } else if (raw.find("oneOf constraint") != std::string::npos ||
               raw.find("exactly one child schema") != std::string::npos) {
      Add(out, steps, "must match exactly one of the allowed alternatives (oneOf)");
    } else if (raw.find("'not' constraint") != std::string::npos) {
      Add(out, steps, "matches a schema it must not match (not)");
    }
  }
}

// Explains why `value` violates the keywords of `schema` (the translated node) itself, not those
// of its children: valijson reports every failing ancestor too, and only the node that actually
// breaks a rule should produce a message. `original` is the untranslated node, for wording.
Explained ExplainNode(const json& schema, const json* original, const json& value,
                      const Steps& steps, const std::vector<std::string>& raw_messages) {
  Explained out;
  if (std::string wrong = WrongType(schema, value); !wrong.empty()) {
    Add(&out, steps, std::move(wrong));
    return out;  // every other keyword assumes the right type
  }
  ExplainEnum(schema, value, steps, &out);
  if (value.is_number()) ExplainNumber(schema, original, value, steps, &out);
  if (value.is_string()) ExplainString(schema, value, steps, &out);
  if (value.is_array()) ExplainArray(schema, value, steps, &out);
  if (value.is_object()) ExplainObject(schema, value, steps, &out);
  // allOf branches apply to this same value; their own keywords are explained the same way.
  if (const auto all = schema.find("allOf"); all != schema.end() && all->is_array()) {
    for (const auto& branch : *all) {
      if (!branch.is_object()) continue;
      Explained more = ExplainNode(branch, nullptr, value, steps, {});
      out.insert(out.end(), more.begin(), more.end());
    }
  }
  ExplainJunctors(schema, steps, raw_messages, &out);
  return out;
}

// Messages valijson adds to every ancestor of a failing node; they carry no information of
// their own.
bool IsPropagationNoise(const std::string& raw) {
  for (const char* prefix :
       {"Failed to validate item #", "Failed to validate against schema associated with property",
        "Failed to validate against additional properties schema",
        "Failed to validate against child schema #"}) {
    if (raw.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

// ---------------------------------------------------------------------------------------------
// What the API server does to an object before validating it.

bool SchemaTypeIs(const json* schema, std::string_view type) {
  return schema != nullptr && schema->is_object() && schema->contains("type") &&
         (*schema)["type"] == type;
}

// Mirrors two decoding/defaulting steps that change what validation sees:
//  - a null in a field that is not nullable is removed (PruneNonNullableNullsWithoutDefaults, or
//    replaced by the default, which amounts to the same for validation);
//  - a whole number written as a float (`replicas: 1.0`) is an integer for the server's type check
//    (kube-openapi accepts an integral float where `integer` is expected).
void Normalize(json& value, const json* schema) {
  if (value.is_object()) {
    for (auto it = value.begin(); it != value.end();) {
      const json* sub = ChildSchema(schema, Key(it.key()));
      if (it->is_null() && sub != nullptr && !Flag(*sub, "nullable")) {
        it = value.erase(it);
        continue;
      }
      Normalize(*it, sub);
      ++it;
    }
  } else if (value.is_array()) {
    const json* items = ChildSchema(schema, Index(0));
    for (auto& item : value) {
      Normalize(item, items);
    }
  } else if (value.is_number_unsigned() &&
             value.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    // valijson reads integers as int64_t, so 2^64-1 would wrap to -1 and slip under any maximum.
    // No Kubernetes integer can hold it; as a float it fails the integer type check instead.
    value = value.get<double>();
  } else if (value.is_number_float() && schema != nullptr &&
             (SchemaTypeIs(schema, "integer") || Flag(*schema, kIntOrString))) {
    const double d = value.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::abs(d) < 9.2e18) {
      value = static_cast<int64_t>(d);
    }
  }
}

std::string KeyFieldsText(const std::vector<std::string>& fields) {
  if (fields.size() == 1) return fields[0];
  std::string out = "the combination of ";
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i > 0) out += i + 1 == fields.size() ? " and " : ", ";
    out += fields[i];
  }
  return out;
}

// x-kubernetes-list-type: map — items are identified by their key fields, which must be unique
// (the server answers `Duplicate value`). A missing key field counts with its default, as the
// server compares after defaulting (a container port without `protocol` is TCP).
void CheckListMaps(const json& value, const json* schema, Steps& steps,
                   std::vector<LocatedError>& out) {
  if (schema == nullptr || !schema->is_object()) return;
  if (value.is_object()) {
    for (const auto& [key, child] : value.items()) {
      steps.push_back(Key(key));
      CheckListMaps(child, ChildSchema(schema, steps.back()), steps, out);
      steps.pop_back();
    }
    return;
  }
  if (!value.is_array()) return;
  const json* items = ChildSchema(schema, Index(0));
  if (StringField(*schema, kListType) == "map" && schema->contains(kListMapKeys) &&
      (*schema)[kListMapKeys].is_array() && items != nullptr) {
    std::vector<std::string> key_fields;
    for (const auto& k : (*schema)[kListMapKeys]) {
      if (k.is_string()) key_fields.push_back(k.get<std::string>());
    }
    std::map<json, size_t> seen;
    for (size_t i = 0; i < value.size(); ++i) {
      const json& item = value[i];
      if (!item.is_object() || key_fields.empty()) continue;
      json identity = json::object();
      bool complete = true;
      for (const std::string& field : key_fields) {
        if (item.contains(field)) {
          identity[field] = item[field];
          continue;
        }
        const json* field_schema = ChildSchema(items, Key(field));
        if (field_schema != nullptr && field_schema->contains("default")) {
          identity[field] = (*field_schema)["default"];
        } else {
          complete = false;  // a missing key is reported as a missing required field
        }
      }
      if (!complete) continue;
      const auto [it, inserted] = seen.emplace(identity, i);
      if (!inserted) {
        std::string keys;
        for (const auto& [field, v] : identity.items()) {
          keys += (keys.empty() ? "" : ", ") + field + "=" + Scalar(v);
        }
        out.push_back({Append(steps, Index(i)),
                       FieldError{"", "duplicate entry " + keys + " (same as index " +
                                          std::to_string(it->second) + "); entries must be " +
                                          "unique by " + KeyFieldsText(key_fields)}});
      }
    }
  }
  for (size_t i = 0; i < value.size(); ++i) {
    steps.push_back(Index(i));
    CheckListMaps(value[i], items, steps, out);
    steps.pop_back();
  }
}

json WithoutDescriptions(const json& node) {
  if (node.is_object()) {
    json out = json::object();
    for (const auto& [key, value] : node.items()) {
      if (key == "description") continue;
      // `properties` maps field names to schemas; a field may well be called "description".
      if (key == "properties" && value.is_object()) {
        json props = json::object();
        for (const auto& [name, sub] : value.items()) {
          props[name] = WithoutDescriptions(sub);
        }
        out[key] = std::move(props);
      } else {
        out[key] = WithoutDescriptions(value);
      }
    }
    return out;
  }
  if (node.is_array()) {
    json out = json::array();
    for (const auto& e : node) {
      out.push_back(WithoutDescriptions(e));
    }
    return out;
  }
  return node;
}

}  // namespace

nlohmann::json TranslateOpenApiV3(const nlohmann::json& openapi) {
  Translator translator;
  return translator.Node(openapi, Where::kRoot);
}

struct CrdValidator::Impl {
  std::string api_version;  // "group/version"
  json openapi;             // the version's openAPIV3Schema, descriptions stripped
  json translated;          // TranslateOpenApiV3(openapi)
  valijson::Schema schema;  // translated, parsed once
};

CrdValidator::CrdValidator() : impl_(std::make_unique<Impl>()) {}
CrdValidator::~CrdValidator() = default;

std::unique_ptr<CrdValidator> CrdValidator::FromFile(const std::string& crd_path,
                                                     const std::string& version) {
  std::ifstream in(crd_path, std::ios::binary);
  if (!in) throw std::runtime_error(crd_path + ": cannot open CRD file");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw std::runtime_error(crd_path + ": cannot read CRD file");
  try {
    return FromCrd(ParseYamlOrThrow(text.str()), version);
  } catch (const std::exception& e) {
    throw std::runtime_error(crd_path + ": " + e.what());
  }
}

namespace {

// The version's openAPIV3Schema plus the identity of the resource it describes.
struct SelectedVersion {
  std::string group;
  std::string kind;
  const json* schema = nullptr;
};

SelectedVersion SelectVersion(const json& crd, const std::string& version) {
  if (!crd.is_object() || crd.value("kind", json()) != "CustomResourceDefinition") {
    throw std::runtime_error(
        "not a CustomResourceDefinition (kind: " +
        (crd.is_object() && crd.contains("kind") ? crd["kind"].dump() : std::string("missing")) +
        ")");
  }
  static const json kNone = json::object();
  const json& spec = crd.contains("spec") ? crd["spec"] : kNone;
  const std::string group = StringField(spec, "group");
  const std::string kind =
      spec.contains("names") ? StringField(spec["names"], "kind") : std::string();
  if (group.empty() || kind.empty()) {
    throw std::runtime_error("CRD lacks spec.group or spec.names.kind");
  }
  const json* schema = nullptr;
  std::string available;
  if (spec.contains("versions") && spec["versions"].is_array()) {
    for (const auto& v : spec["versions"]) {
      if (!v.is_object()) continue;
      const std::string name = StringField(v, "name");
      available += (available.empty() ? "" : ", ") + name;
      if (name != version) continue;
      if (v.contains("schema") && v["schema"].is_object() &&
          v["schema"].contains("openAPIV3Schema")) {
        schema = &v["schema"]["openAPIV3Schema"];
      }
      // apiextensions v1beta1 allowed one schema for all versions at spec.validation.
      if (schema == nullptr && spec.contains("validation") && spec["validation"].is_object() &&
          spec["validation"].contains("openAPIV3Schema")) {
        schema = &spec["validation"]["openAPIV3Schema"];
      }
      if (schema == nullptr) {
        throw std::runtime_error("CRD version " + version + " has no schema.openAPIV3Schema");
      }
    }
  }
  if (schema == nullptr) {
    const std::string name =
        crd.contains("metadata") ? StringField(crd["metadata"], "name") : std::string();
    throw std::runtime_error("CRD " + (name.empty() ? kind : name) + " has no version \"" +
                             version +
                             "\" (available: " + (available.empty() ? "none" : available) + ")");
  }
  if (!schema->is_object()) throw std::runtime_error("openAPIV3Schema is not an object");
  return {group, kind, schema};
}

}  // namespace

std::unique_ptr<CrdValidator> CrdValidator::FromCrd(const nlohmann::json& crd,
                                                    const std::string& version) {
  const SelectedVersion selected = SelectVersion(crd, version);
  std::unique_ptr<CrdValidator> v(new CrdValidator());
  v->kind_ = selected.kind;
  v->impl_->api_version = selected.group + "/" + version;
  v->impl_->openapi = WithoutDescriptions(*selected.schema);
  v->impl_->translated = TranslateOpenApiV3(v->impl_->openapi);
  try {
    valijson::SchemaParser parser(valijson::SchemaParser::kDraft4);
    valijson::adapters::NlohmannJsonAdapter adapter(v->impl_->translated);
    parser.populateSchema(adapter, v->impl_->schema);
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string("cannot compile the translated schema: ") + e.what());
  }
  return v;
}

FieldErrors CrdValidator::Validate(const nlohmann::json& object) const {
  if (!object.is_object()) {
    return {FieldError{"", "expected a " + kind_ + " object, got " + Describe(object)}};
  }

  // Identity first: a schema only means something for its own group/version/kind, and checking a
  // RayCluster against the RayJob schema would drown the one real mistake in unknown fields.
  FieldErrors identity;
  auto check_identity = [&](const char* field, const std::string& expected) {
    if (!object.contains(field)) {
      identity.push_back({field, "missing required field \"" + std::string(field) +
                                     "\" (expected " + json(expected).dump() + ")"});
    } else if (object[field] != expected) {
      identity.push_back(
          {field, "expected " + json(expected).dump() + ", got " + Describe(object[field])});
    }
  };
  check_identity("apiVersion", impl_->api_version);
  check_identity("kind", kind_);
  if (!identity.empty()) return identity;

  json doc = object;
  Normalize(doc, &impl_->openapi);

  valijson::ValidationResults results;
  bool valid = true;
  try {
    // A Validator per call: it caches compiled regexes in itself, and Validate() is const and may
    // run on several threads at once.
    valijson::Validator validator(valijson::Validator::kStrongTypes);
    valijson::adapters::NlohmannJsonAdapter target(doc);
    valid = validator.validate(impl_->schema, target, &results);
  } catch (const std::exception& e) {
    return {FieldError{"", std::string("schema validation failed: ") + e.what()}};
  }

  std::vector<LocatedError> located;
  std::vector<LocatedError> unexplained;
  std::vector<Steps> explained_at;
  if (!valid) {
    // Group valijson's messages by node, keeping the order in which nodes first appear.
    std::vector<std::vector<std::string>> contexts;
    std::map<std::vector<std::string>, std::vector<std::string>> messages;
    valijson::ValidationResults::Error error;
    while (results.popError(error)) {
      auto [it, inserted] = messages.try_emplace(error.context);
      if (inserted) contexts.push_back(error.context);
      it->second.push_back(error.description);
    }
    for (const auto& context : contexts) {
      const std::optional<Steps> steps = ContextToSteps(doc, context);
      if (!steps) continue;
      const json* value = ValueAt(doc, *steps);
      const json* schema = SchemaAt(impl_->translated, *steps);
      const std::vector<std::string>& raw = messages[context];
      std::vector<LocatedError> explained;
      if (value != nullptr && schema != nullptr) {
        explained = ExplainNode(*schema, SchemaAt(impl_->openapi, *steps), *value, *steps, raw);
      }
      if (!explained.empty()) explained_at.push_back(*steps);
      located.insert(located.end(), explained.begin(), explained.end());
      for (const std::string& r : raw) {
        if (!IsPropagationNoise(r)) unexplained.push_back({*steps, FieldError{"", r}});
      }
    }
    // valijson's own wording survives only where nothing at or above the node was explained,
    // e.g. a constraint inside a value-validation branch (anyOf/allOf with properties) that the
    // structural walk above does not see. Under an explained anyOf those are the failed
    // alternatives, which the anyOf message already covers.
    for (auto& e : unexplained) {
      const bool covered =
          std::any_of(explained_at.begin(), explained_at.end(), [&](const Steps& at) {
            return at.size() <= e.steps.size() &&
                   std::equal(
                       at.begin(), at.end(), e.steps.begin(), [](const Step& a, const Step& b) {
                         return a.is_index == b.is_index && a.index == b.index && a.key == b.key;
                       });
          });
      if (!covered) located.push_back(std::move(e));
    }
    // Never claim "valid" when valijson disagrees, even if no message could be produced.
    if (located.empty()) located.push_back({{}, FieldError{"", "does not match the schema"}});
  }

  Steps steps;
  CheckListMaps(doc, &impl_->openapi, steps, located);

  std::stable_sort(
      located.begin(), located.end(),
      [](const LocatedError& a, const LocatedError& b) { return StepLess(a.steps, b.steps); });
  FieldErrors out;
  for (auto& e : located) {
    FieldError fe{FormatPath(impl_->openapi, e.steps), std::move(e.error.message)};
    if (std::find(out.begin(), out.end(), fe) == out.end()) out.push_back(std::move(fe));
  }
  return out;
}

}  // namespace kubesim
