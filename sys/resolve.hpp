// Creation of missing mount points, files and links without ever
// following a symlink (opening, confined or not, is sys::open in
// sys/file.hpp).
#pragma once

#include <sys/types.h>

#include <string>

#include "base/result.hpp"
#include "base/unique_fd.hpp"
#include "sys/file.hpp"

namespace ctx::sys {

/// mkdirat(2) of one name below dirfd; EEXIST is success when the name is
/// a directory and not a symlink.
Result<void> make_dir_at(int dirfd, const std::string& name, mode_t mode);

/// Creates an empty regular file below dirfd unless the name exists as a
/// regular file; a symlink or another type is an error (never followed).
Result<void> make_file_at(int dirfd, const std::string& name, mode_t mode);

/// Creates an empty regular file `name` below dirfd and returns it open
/// read-only (a mount point that needs no second lookup); EEXIST when the
/// name exists, whatever it is (nothing is followed). Errors read like
/// make_file_at's ("openat NAME: ...").
Result<UniqueFd> create_file_at(int dirfd, const std::string& name, mode_t mode);

/// symlinkat(2): creates dirfd/name -> target, with `as`'s rights.
Result<void> make_symlink_at(const std::string& target, int dirfd, const std::string& name,
                             const MakeAs& as = std::nullopt);

/// faccessat(AT_EACCESS) on an fd: checks with the effective (file-system)
/// ids of the caller, so a set fsuid counts; with `as`, with those.
Result<void> access_fd(int fd, int mode, const MakeAs& as = std::nullopt);

}  // namespace ctx::sys
