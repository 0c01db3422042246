#include "starforge/common/did_you_mean.h"

#include <algorithm>
#include <cctype>

namespace starforge {

namespace {

char Lower(char c) {
  return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
}

}  // namespace

size_t EditDistance(std::string_view a, std::string_view b) {
  // Two rolling rows keep memory linear in the shorter dimension.
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t substitution = prev[j - 1] + (Lower(a[i - 1]) == Lower(b[j - 1]) ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, substitution});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string ClosestMatch(std::string_view word, const std::vector<std::string>& candidates) {
  const size_t threshold = std::max<size_t>(2, word.size() / 3);
  std::string best;
  size_t best_distance = threshold + 1;
  for (const auto& candidate : candidates) {
    const size_t d = EditDistance(word, candidate);
    // A distance equal to the word's length means nothing of the word survived: not a typo.
    if (d < best_distance && d < std::max(word.size(), size_t{1})) {
      best = candidate;
      best_distance = d;
    }
  }
  return best;
}

std::string DidYouMeanSuffix(std::string_view word, const std::vector<std::string>& candidates) {
  const std::string match = ClosestMatch(word, candidates);
  return match.empty() ? "" : " (did you mean \"" + match + "\"?)";
}

}  // namespace starforge
