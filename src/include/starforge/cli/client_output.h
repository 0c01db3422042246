// How the client commands show jobs: kubectl-style tables, ages, `describe` text. Pure functions
// of the API's JSON and the current time, so they are tested without a server.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "starforge/common/format.h"  // NowMs, ParseRfc3339 (used with these functions)

namespace starforge::cli {

// kubectl's short durations (HumanDuration): "0s", "119s", "5m12s" (< 10 min), "42m" (< 3 h),
// "5h3m" (< 8 h), "20h", "3d4h" (< 8 days), "45d", "2y30d" (< 8 years), "9y". Negative (clock
// skew) counts as 0.
std::string FormatAge(int64_t ms);

// The age of the time `field` of `object` at `now_ms`, or "<unknown>".
std::string AgeOf(const nlohmann::json& object, const char* field, int64_t now_ms);

// ANSI colour of a phase ("" for none): green Succeeded, red Failed, yellow Cancelled, ...
std::string_view PhaseColor(std::string_view phase);

// Columns left-aligned, three spaces apart (the last column unpadded); when `color` is set,
// PHASE cells and Warning TYPE cells get their ANSI colour (widths count the plain text).
// `widths`, when given, holds minimum column widths and receives the ones used, so that rows
// printed later (--watch) line up with the first table.
std::string RenderTable(const std::vector<std::string>& header,
                        const std::vector<std::vector<std::string>>& rows, bool color = false,
                        std::vector<size_t>* widths = nullptr);

// The `forge get jobs` columns: ID NAME PHASE REASON AGE (+ FLEET OWNER CAPSULE MESSAGE when wide).
std::vector<std::string> JobHeader(bool wide);
std::vector<std::string> JobRow(const nlohmann::json& job, bool wide, int64_t now_ms);

// `forge describe job`: the job (with spec and timeline) and its events ({"items": [...]}).
std::string DescribeJob(const nlohmann::json& job, const nlohmann::json& events, int64_t now_ms,
                        bool color = false);

// `forge capacity`: one row per fleet, one column per (flattened) key of any fleet's JSON.
std::string CapacityTable(const nlohmann::json& capacity);

// A JSON value as a table cell: strings as is, null as "<none>", numbers/bools as JSON, arrays
// of scalars comma-joined, anything else compact JSON.
std::string Cell(const nlohmann::json& value);

// Where the last `n` lines of `text` start (a final newline ends the last line, it does not
// start an empty one); text.size() for n ≤ 0.
size_t TailStart(std::string_view text, int64_t n);

}  // namespace starforge::cli
