// The mount table of the caller's mount namespace, parsed by libmount
// (which unescapes "\040" and "\012" in mount points).
#pragma once

#include <string>
#include <vector>

#include "base/result.hpp"

namespace ctx::sys {

/// One mount of a mount table, in the table's order.
struct MountEntry {
  std::string target;
  std::string fstype;
};

/// /proc/self/mountinfo, in its order (a later mount at the same target
/// covers an earlier one).
Result<std::vector<MountEntry>> read_mountinfo();

/// The path an open descriptor refers to in the caller's mount namespace
/// (readlink of /proc/self/fd/N).
Result<std::string> fd_path(int fd);

}  // namespace ctx::sys
