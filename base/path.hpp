// Pure checks and arithmetic on absolute paths. Nothing here touches the
// file system.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace ctx {

/// What is wrong with a path, and at which byte offset.
struct PathIssue {
  std::size_t offset = 0;
  std::string what;
};

/// Checks a strict absolute path: starts with '/'; no empty, "." or ".."
/// component; no trailing '/' (except "/" itself); no control characters
/// (bytes below 0x20 and 0x7f); at most 4095 bytes, components at most 255.
/// Returns the first issue, or nullopt if the path is acceptable.
std::optional<PathIssue> abs_path_issue(std::string_view p);

/// True if `p` equals `prefix` or lies below it, component-wise
/// ("/work" covers "/work/a" but not "/workshop"). Both must be strict.
bool path_is_at_or_under(std::string_view p, std::string_view prefix);

/// The part of `p` below `prefix`, without a leading '/': "" when equal.
/// Precondition: path_is_at_or_under(p, prefix).
std::string_view path_suffix(std::string_view p, std::string_view prefix);

/// Joins a strict absolute base and a relative suffix ("" gives base).
std::string path_join(std::string_view base, std::string_view rel);

/// Orders paths component-wise so that a directory sorts before everything
/// below it ("/a" < "/a/b" < "/a-b"). A strict weak order.
bool path_less(std::string_view a, std::string_view b);

/// Number of components ("/" has 0, "/a/b" has 2).
std::size_t path_depth(std::string_view p);

/// The directory part of an absolute path ("/run/ctx/notify" -> "/run/ctx";
/// "/x" -> "/").
std::string_view path_dirname(std::string_view p);

/// The last component ("/run/ctx/notify" -> "notify").
std::string_view path_basename(std::string_view p);

}  // namespace ctx
