// "Did you mean" suggestions for misspelled keys.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace starforge {

// Levenshtein distance (case-insensitive).
size_t EditDistance(std::string_view a, std::string_view b);

// The candidate closest to `word` if it is close enough to be a plausible typo (distance ≤ 2,
// or ≤ a third of the word's length for long words), else an empty string.
std::string ClosestMatch(std::string_view word, const std::vector<std::string>& candidates);

// " (did you mean \"x\"?)" when ClosestMatch finds one, else "".
std::string DidYouMeanSuffix(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace starforge
