// Path resolution confined to a directory: openat2(RESOLVE_IN_ROOT |
// RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS), and creation of missing
// mount points without ever following a symlink.
#pragma once

#include <sys/types.h>

#include <string>

#include "base/result.hpp"
#include "base/unique_fd.hpp"
#include "sys/file.hpp"

namespace ctx::sys {

/// Opens rel (relative, no leading '/') below rootfd with O_PATH, treating
/// rootfd as "/" and refusing every symlink on the way (ELOOP).
Result<UniqueFd> open_in_root(int rootfd, const std::string& rel, bool directory);

/// mkdirat(2) of one name below dirfd; EEXIST is success when the name is
/// a directory and not a symlink.
Result<void> make_dir_at(int dirfd, const std::string& name, mode_t mode);

/// Creates an empty regular file below dirfd unless the name exists as a
/// regular file; a symlink or another type is an error (never followed).
Result<void> make_file_at(int dirfd, const std::string& name, mode_t mode);

/// Opens the directory dirfd/rel (several components) with
/// openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS): never above dirfd,
/// never through a symlink.
Result<UniqueFd> open_dir_beneath(int dirfd, const std::string& rel);

/// An O_PATH fd of dirfd/rel ("" is dirfd itself) with
/// openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS),
/// plus RESOLVE_NO_XDEV with no_xdev (never into another mount): ELOOP for
/// a symlink on the way, EXDEV for a mount crossing.
Result<UniqueFd> open_path_beneath(int dirfd, const std::string& rel, bool no_xdev);

/// O_PATH of an absolute path with openat2(RESOLVE_NO_SYMLINKS |
/// RESOLVE_NO_MAGICLINKS): ELOOP when any component is a symbolic link.
Result<UniqueFd> open_path_no_symlinks(const std::string& path);

/// Opens the regular file dirfd/rel for reading with
/// openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)
/// and O_NONBLOCK (a FIFO never blocks the caller); anything but a
/// regular file is EINVAL.
Result<UniqueFd> open_file_beneath(int dirfd, const std::string& rel);

/// Opens dirfd/name O_PATH|O_NOFOLLOW (the last component only).
Result<UniqueFd> open_path_at(int dirfd, const std::string& name);

/// symlinkat(2): creates dirfd/name -> target, with `as`'s rights.
Result<void> make_symlink_at(const std::string& target, int dirfd, const std::string& name,
                             const MakeAs& as = std::nullopt);

/// open(2) of a host path with flags (O_CLOEXEC added).
Result<UniqueFd> open_path(const std::string& path, int flags);

/// faccessat(AT_EACCESS) on an fd: checks with the effective (file-system)
/// ids of the caller, so a set fsuid counts; with `as`, with those.
Result<void> access_fd(int fd, int mode, const MakeAs& as = std::nullopt);

}  // namespace ctx::sys
