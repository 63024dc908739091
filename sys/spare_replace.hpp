// Replacing a small record atomically without making and freeing an inode
// each time: the replaced content's inode is kept under a spare name and
// written again at the next replace, once nobody holds it open.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>

#include "base/result.hpp"
#include "sys/file.hpp"

namespace ctx::sys {

/// Replaces dirfd/name by data as atomic_replace does (a reader sees the
/// old or the new content, never a mix, and after a power loss the name
/// may hold an empty file), reusing the spare file spare_dirfd/spare
/// instead of a new temporary file: the spare is written (made with
/// `mode` if missing), then exchanged with the name, and the old content
/// stays behind as the next spare. The spare is written only while
/// nobody else has it open (a write lease, F_SETLEASE, is granted only
/// then), so a reader that opened the name before an earlier replace and
/// still reads it never sees it change; a spare that is not a regular
/// file with one link, is open elsewhere, or cannot be exchanged (another
/// file system, no RENAME_EXCHANGE) makes the call an atomic_replace,
/// whose errors it returns. Both directories on one file system;
/// done with `as`'s rights.
Result<void> replace_via_spare(int dirfd, const std::string& name, std::string_view data, int spare_dirfd,
                               const std::string& spare, mode_t mode = 0644, const MakeAs& as = std::nullopt);

/// Removes dirfd/name, keeping its inode as spare_dirfd/spare when no
/// spare is there yet (else unlinking it); nothing if it does not exist.
/// Done with `as`'s rights.
Result<void> retire_to_spare(int dirfd, const std::string& name, int spare_dirfd, const std::string& spare,
                             const MakeAs& as = std::nullopt);

}  // namespace ctx::sys
