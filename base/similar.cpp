#include "base/similar.hpp"

#include <algorithm>
#include <optional>

namespace ctx {

namespace {

std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

/// The score of a candidate that does not qualify.
constexpr std::size_t kNone = static_cast<std::size_t>(-1);

/// The one candidate with the lowest score, or nullopt when none
/// qualifies or the lowest is shared (then *tie is set).
template <class Score>
std::optional<std::string_view> only_best(const std::vector<std::string_view>& candidates, Score score, bool* tie) {
  std::size_t best = kNone;
  std::size_t hits = 0;
  std::string_view pick;
  for (std::string_view c : candidates) {
    std::size_t s = score(c);
    if (s == kNone || s > best) continue;
    if (s < best) {
      best = s;
      hits = 0;
      pick = c;
    }
    ++hits;
  }
  *tie = hits > 1;
  if (hits != 1) return std::nullopt;
  return pick;
}

}  // namespace

std::size_t edit_distance(std::string_view a, std::string_view b) {
  // Three rows suffice: a swap looks two rows back.
  std::vector<std::size_t> before(b.size() + 1), prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) cur[j] = std::min(cur[j], before[j - 2] + 1);
    }
    std::swap(before, prev);
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string closest(std::string_view word, const std::vector<std::string_view>& candidates) {
  for (std::string_view c : candidates)
    if (c == word) return std::string(c);
  const std::string w = ascii_lower(word);
  const std::size_t budget = w.size() <= 5 ? 1 : 2;
  bool tie = false;
  // Tiers 1 and 2 at once: a case-only difference is distance 0.
  auto near = only_best(
      candidates,
      [&](std::string_view c) {
        // Lengths that differ by more than the budget cannot be within it.
        std::size_t gap = c.size() > w.size() ? c.size() - w.size() : w.size() - c.size();
        if (gap > budget) return kNone;
        std::size_t d = edit_distance(w, ascii_lower(c));
        return d <= budget ? d : kNone;
      },
      &tie);
  if (near) return std::string(*near);
  if (tie || w.size() < 3) return "";
  auto prefix = only_best(
      candidates, [&](std::string_view c) { return ascii_lower(c).starts_with(w) ? std::size_t{0} : kNone; }, &tie);
  return prefix ? std::string(*prefix) : std::string();
}

std::string closest(std::string_view word, const std::vector<std::string>& candidates) {
  return closest(word, std::vector<std::string_view>(candidates.begin(), candidates.end()));
}

}  // namespace ctx
