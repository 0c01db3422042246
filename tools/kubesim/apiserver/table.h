// Server-side printing: the meta.k8s.io Table that kube-apiserver answers when a GET or watch
// asks for `Accept: application/json;as=Table;v=v1;g=meta.k8s.io` (what `kubectl get` sends).
// Pure functions of the objects and a clock: column definitions and cells follow kube-apiserver
// 1.32's printers (pkg/printers/internalversion) for the built-in kinds kubesim serves, the
// CRD's additionalPrinterColumns for custom resources (apiextensions' tableconvertor), and the
// default "Name"/"Created At" table for every other kind. See docs/kubesim.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kubesim::table {

// Which printer a resource uses.
struct Printer {
  std::string group;   // "" = core
  std::string plural;  // "pods", "rayjobs"
  bool custom = false;
  nlohmann::json crd_columns;  // custom only: additionalPrinterColumns of the served version
};

enum class IncludeObject { kNone, kMetadata, kObject };

struct Options {
  std::string group_version = "meta.k8s.io/v1";  // or meta.k8s.io/v1beta1
  IncludeObject include = IncludeObject::kMetadata;
  bool no_headers = false;  // watch events after the first carry no columnDefinitions
};

// The Table group/version the Accept header negotiates ("meta.k8s.io/v1" or ".../v1beta1"), or
// nullopt when the first acceptable entry is plain JSON (or nothing matches: kubesim then answers
// JSON rather than 406).
std::optional<std::string> NegotiateTable(const std::string& accept);

// The includeObject query parameter ("" = Metadata). Throws ApiError 400 on another value.
IncludeObject ParseIncludeObject(const std::string& value);

// columnDefinitions of the printer, in order; priority > 0 columns are kubectl's `-o wide` ones.
nlohmann::json Columns(const Printer& p);

// The cells of one object (in the form the resource presents it), as kube-apiserver fills them
// (all columns, wide included). `now` is the unix time ages are computed against.
nlohmann::json Cells(const Printer& p, const nlohmann::json& obj, int64_t now);
// The same, plus the row's conditions (pods: `Completed` once Succeeded/Failed; else null).
nlohmann::json CellsAndConditions(const Printer& p, const nlohmann::json& obj, int64_t now,
                                  nlohmann::json* conditions);

// A Table of `objects` (presented form). `list_meta` is the list's metadata (resourceVersion,
// continue, remainingItemCount) or, for a single object, null (its resourceVersion is used).
nlohmann::json ToTable(const Printer& p, const std::vector<nlohmann::json>& objects,
                       const nlohmann::json& list_meta, const Options& o, int64_t now);

// The value at a dotted JSONPath (`.status.jobStatus`), or null when absent. Only `.a.b.c` is
// supported (what the KubeRay CRDs use); any other syntax yields null.
nlohmann::json EvalDottedPath(const nlohmann::json& obj, const std::string& path);

// apimachinery's duration.HumanDuration of a number of seconds ("5m3s", "3h", "2d4h", "<invalid>").
std::string HumanDuration(int64_t seconds);

// Unix seconds of an RFC3339 timestamp (fraction ignored; Z or ±hh:mm), nullopt if malformed.
std::optional<int64_t> ParseRfc3339(const std::string& text);

}  // namespace kubesim::table
