// Small helpers shared by kubesim's controllers: random names, times, owner references, pod
// readiness, resource quantities (apimachinery's Quantity arithmetic and canonical form), and the
// Go formatting the KubeRay operator's outputs depend on (strconv.Quote, json.Marshal, YAMLToJSON).
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "starforge/common/format.h"
#include "starforge/common/json_read.h"
#include "starforge/common/quantity.h"

namespace kubesim::controllers {

using nlohmann::json;

// 5 random characters of apimachinery's rand.String alphabet "bcdfghjklmnpqrstvwxz2456789".
std::string Rand5();

// Times: RFC 3339 UTC with seconds ("2006-01-02T15:04:05Z"), as metav1.Time serializes.
int64_t NowUnix();
int64_t NowUnixMillis();
inline std::string Rfc3339(int64_t unix_seconds) {  // common/format.h
  return starforge::FormatRfc3339(unix_seconds);
}
using starforge::NowRfc3339;
// Seconds since the epoch, or -1 when unparsable. Fractions and offsets are accepted.
int64_t ParseRfc3339(const std::string& text);
// What Go's fmt %v prints for a metav1.Time read from the API in a UTC process:
// "2006-01-02 15:04:05 +0000 UTC".
std::string GoTimeString(int64_t unix_seconds);
// time.DateTime: "2006-01-02 15:04:05" (UTC).
std::string GoDateTime(int64_t unix_seconds);

// A controller ownerReference to `owner` (apiVersion, kind, name, uid).
json ControllerRef(const json& owner);
// Whether `obj` has a controller ownerReference with this uid.
bool IsControlledBy(const json& obj, const std::string& owner_uid);

// Path reads (common/json_read.h): obj[a][b]... as a string, or the sub-object (null when absent).
using starforge::json_read::At;
using starforge::json_read::Str;

// Pod helpers.
bool PodReadyTrue(const json& pod);        // condition Ready=True
bool PodRunningAndReady(const json& pod);  // phase Running and no Ready condition != True
std::string PodPhase(const json& pod);
bool IsDeleting(const json& obj);  // metadata.deletionTimestamp set

// Resource quantities (parsing, sums, canonical text): common/quantity.h.
using starforge::Quantity;

// Go strconv.Quote for UTF-8 text.
std::string GoQuote(const std::string& s);
// Go json.Marshal of a JSON value: compact, map keys sorted, '<' '>' '&' U+2028 U+2029 escaped.
std::string GoJsonMarshal(const json& value);
// sigs.k8s.io/yaml.YAMLToJSON: YAML text to compact JSON text (throws kubesim::YamlError).
std::string YamlToJson(const std::string& yaml);

// DNS-1035 label check as apimachinery words it; "" when valid, else the joined error list.
std::string Dns1035LabelErrors(const std::string& value);

}  // namespace kubesim::controllers
