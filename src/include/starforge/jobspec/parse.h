// Parsing and validating JobSpecs from YAML or JSON, and their canonical JSON form.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "starforge/common/field_error.h"
#include "starforge/common/status_or.h"
#include "starforge/common/yaml_json.h"
#include "starforge/jobspec/jobspec.h"

namespace starforge::jobspec {

// Settings that supply JobSpec defaults (taken from the FORGE_* configuration by the caller, so
// that this module stays independent of it).
struct Defaults {
  std::string fleet = "local";         // FORGE_DEFAULT_FLEET_KIND
  std::string nemo_rl_image;           // FORGE_IMAGE_NEMO_RL ("" = unset)
  int64_t pre_running_seconds = 1800;  // FORGE_KUBERAY_PRERUNNING_DEADLINE_S
};

// What a JobSpec document may expand to (aliases included): a real one is a few KiB, so these
// keep a hostile one from costing the server more than a few MiB.
inline constexpr YamlLimits kJobSpecYamlLimits{/*max_nodes=*/100'000, /*max_bytes=*/2u << 20,
                                               /*max_depth=*/64};

inline constexpr size_t kMaxReportedErrors = 50;

struct ParseResult {
  std::optional<JobSpec> spec;  // set iff errors is empty
  // The problems found, in document order, each with its path: at most kMaxReportedErrors, then
  // one saying that more were not listed (a JobSpec of 100,000 unknown keys costs little).
  FieldErrors errors;
  bool ok() const { return errors.empty(); }
};

// Parses a JobSpec document (YAML or JSON text). Unknown fields are errors with a "did you mean"
// hint; type and range errors name the field path (`pools[1].gpusPerMachine: must be ≥ 0, got
// -1`). A syntax error is reported as one error with path "" and the line/column.
ParseResult Parse(std::string_view text, const Defaults& defaults);

// Same, from an already-parsed JSON value (e.g. the body of an API request).
ParseResult FromJson(const nlohmann::json& doc, const Defaults& defaults);

// The canonical form: sorted keys, every default filled in, `code` omitted (it names a directory
// on the submitting machine, so it is not part of the job's identity), entrypoint as a list.
// FromJson(ToCanonicalJson(s), any defaults) yields s (without code).
nlohmann::json ToCanonicalJson(const JobSpec& spec);

// The canonical JSON text: ToCanonicalJson(spec).dump() with a trailing newline; byte-identical
// for equal specs.
std::string ToCanonicalText(const JobSpec& spec);

// Splits a command line into words the way a POSIX shell does for quoting (single quotes, double
// quotes with \" \\ \$ \` escapes, backslash escapes, whitespace separation) without any
// expansion or operators: `;`, `|`, `$(…)` stay literal characters of words. kInvalidArgument
// on an unterminated quote or trailing backslash.
StatusOr<std::vector<std::string>> SplitShellWords(std::string_view line);

}  // namespace starforge::jobspec
