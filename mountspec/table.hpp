// The v0 mount table (docs/abi.md "Mount table v0") as plain data, and its
// parser. Pure: nothing here touches the file system.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.hpp"
#include "mountspec/attrs.hpp"

namespace ctx::mountspec {

/// bind: the source mount only; rbind: with every mount below it.
/// The option "-" alone means bind without extra flags.
enum class Kind { bind, rbind };

/// One line of a mount table: source<TAB>target<TAB>mode<TAB>options.
struct Entry {
  std::string source;  ///< strict absolute path (base/path.hpp)
  std::string target;  ///< strict absolute path, never "/"
  /// The mode (ro: rdonly) and the flags of the options; read-only unless
  /// set otherwise.
  Attrs attrs{.rdonly = true};
  Kind kind = Kind::bind;
  int line = 0;  ///< 1-based line in the file it came from; 0 if derived

  bool operator==(const Entry&) const = default;
};

using Table = std::vector<Entry>;

/// The flags of a v0 options field.
struct Options {
  std::optional<Kind> kind;  ///< none when the field says neither bind nor rbind
  /// nosuid, nodev, noexec; never rdonly, which is the mode field's.
  Attrs attrs;
};

/// Why an options field is refused, and the byte offset of the offending
/// option in it.
struct OptionIssue {
  std::size_t offset = 0;
  std::string what;
};

/// Parses a v0 options field strictly (docs/abi.md "Mount table v0"): a
/// comma-separated list of bind, rbind, nosuid, nodev, noexec, each at most
/// once, bind and rbind not both; or "-" alone for none. The one parser of
/// options, for the mount file and a child's request alike.
std::optional<OptionIssue> parse_options(std::string_view field, Options& out);

/// Parses a v0 mount file. `file` names it in messages ("coder.d/mount").
/// On failure returns the first error; when `all` is given, every error of
/// the file is appended to it (for `ctx check`). Errors read
/// "coder.d/mount:3:2: EINVAL: target must be an absolute path".
Result<Table> parse(std::string_view file, std::string_view content, std::vector<Error>* all = nullptr);

/// Formats one entry back as a mount-file line (without '\n'); parse of the
/// result gives the same entry.
std::string format_entry(const Entry& e);

/// Formats a table as a whole mount file.
std::string format_table(const Table& t);

/// The mode field for attrs: "ro" when rdonly, else "rw".
std::string_view mode_name(const Attrs& a);

/// Parses a mode field ("ro" or "rw") into a.rdonly; false (a unchanged)
/// for anything else. The one reader of modes, for the mount file and a
/// child's request alike.
bool parse_mode(std::string_view field, Attrs& a);

std::string_view to_string(Kind k);

}  // namespace ctx::mountspec
