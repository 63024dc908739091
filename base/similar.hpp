// Close-match suggestions for a mistyped name ("did you mean fs.read?"),
// shared by the parsers and the doctor so that every message suggests by
// the same rule. Pure.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace ctx {

/// Optimal string alignment distance: the fewest single-byte insertions,
/// deletions, substitutions and swaps of two adjacent bytes that turn a
/// into b, no byte being edited twice ("fs.raed" -> "fs.read" is 1).
/// Case-sensitive; O(|a| * |b|).
std::size_t edit_distance(std::string_view a, std::string_view b);

/// The one candidate `word` is clearly a slip for, or "" when there is
/// none or more than one. With case ignored (ASCII), the first of these
/// tiers that holds any candidate decides, and it must hold exactly one:
///  1. equal ("Tool" -> tool);
///  2. the smallest edit_distance within the budget: 1 for a word of up to
///     5 bytes, 2 from 6 bytes ("tol" -> tool, "fs.raed" -> fs.read);
///  3. the word, at least 3 bytes long, begins the candidate ("exec" ->
///     execute).
/// A word equal to a candidate byte for byte is returned as it is.
std::string closest(std::string_view word, const std::vector<std::string_view>& candidates);

/// closest() over owned strings.
std::string closest(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace ctx
