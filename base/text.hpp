// Strict reading of control-file text (docs/abi.md "Text in every control
// file"): UTF-8,
// one value per file or one item per line, every line ending in '\n'.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/result.hpp"

namespace ctx {

/// Largest control file accepted, in bytes.
inline constexpr std::size_t kMaxControlFileSize = 64 * 1024;

/// Makes an error that reads like a compiler's:
/// "coder.d/mount:3:2: EINVAL: target must be an absolute path".
/// line and col are 1-based; 0 leaves them out.
Error located(std::string_view file, int line, int col, int code, std::string_view text);

/// One line of a control file, without its '\n'.
struct Line {
  std::string_view text;
  int number = 0;  ///< 1-based
};

/// Checks the whole content and splits it into lines. Refused, with the
/// position of the first offence: NUL, CR, invalid UTF-8, a last line
/// without '\n'. An empty content has no lines.
Result<std::vector<Line>> split_lines(std::string_view file, std::string_view content);

/// The items of a list or key/value file: lines that are neither empty nor
/// comments ('#' as first character).
std::vector<Line> list_items(const std::vector<Line>& lines);

/// The one value of a single-value file: exactly one line, not empty, no
/// leading or trailing blanks.
Result<Line> single_value(std::string_view file, std::string_view content);

/// The text as it may appear inside a message or on a terminal, so that
/// hostile control-file or request text cannot forge a line, move the
/// cursor, ring the bell or reorder what a person reads: C0 controls and
/// DEL become \xNN, bytes that are not UTF-8 become \xNN each, and the C1
/// controls (U+0080..U+009F) and the bidirectional formatting characters
/// (U+061C, U+200E, U+200F, U+202A..U+202E, U+2066..U+2069) become \u{XXXX}.
/// Other UTF-8 text is kept as it is.
std::string printable(std::string_view s);

/// Returns the 1-based column of the first byte of `part` inside `line`,
/// where part is a view into line.
int column_of(std::string_view line, std::string_view part);

}  // namespace ctx
