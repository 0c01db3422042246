// Time and text formatting shared by the control plane, the CLI, the fleets and kubesim.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace starforge {

// Now as Unix milliseconds (system clock, UTC).
int64_t NowMs();

// Unix seconds as calendar time in UTC, written with strftime's `format` ("%Y-%m-%d").
std::string FormatUtc(int64_t unix_seconds, const char* format);

// Unix seconds as RFC 3339 in UTC with whole seconds, as Kubernetes writes timestamps:
// "2006-01-02T15:04:05Z".
std::string FormatRfc3339(int64_t unix_seconds);
std::string NowRfc3339();  // FormatRfc3339 of now

// RFC 3339 ("2026-11-29T12:00:00Z", fractions to the millisecond, "+02:00" offsets; 't' or ' '
// for 'T') → Unix milliseconds; nullopt unless the whole text is one timestamp.
std::optional<int64_t> ParseRfc3339(std::string_view s);

// Unix seconds of a calendar time in UTC (timegm: out-of-range fields roll over, so callers that
// must refuse 31 February check a round trip).
int64_t UnixSeconds(int year, int month, int day, int hour, int minute, int second);

// `text` on one line, for a message or a table cell: control characters (newlines, tabs) become
// spaces, runs of spaces collapse to one, the ends are trimmed.
std::string OneLine(std::string_view text);

// "1 GPU", "2 GPUs": `n` and the word that goes with it.
std::string Plural(int64_t n, std::string_view one, std::string_view many);

}  // namespace starforge
