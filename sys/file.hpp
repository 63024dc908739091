// File-system calls on descriptors: opening without following symlinks,
// bounded reads of control files, listing, atomic replacement.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.hpp"
#include "base/unique_fd.hpp"
#include "sys/identity.hpp"

namespace ctx::sys {

/// What fstat says about an open file, in the fields the project uses.
struct FileStat {
  mode_t mode = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  std::uint64_t size = 0;
  dev_t dev = 0;
  ino_t ino = 0;
  std::int64_t mtime_ns = 0;  ///< st_mtim in nanoseconds
  std::int64_t ctime_ns = 0;  ///< st_ctim in nanoseconds
};

/// How sys::open opens a name: a set of flags, combined with `|`. Each
/// maps to one O_* or RESOLVE_* bit, in sys::open and nowhere else.
enum class Open : unsigned {
  read = 0,                ///< O_RDONLY (the default)
  read_write = 1u << 0,    ///< O_RDWR
  path_only = 1u << 1,     ///< O_PATH: a handle that cannot be read or written
  directory = 1u << 2,     ///< O_DIRECTORY: anything else is ENOTDIR
  no_follow = 1u << 3,     ///< O_NOFOLLOW: a symlink as the last component is ELOOP
  nonblock = 1u << 4,      ///< O_NONBLOCK: a FIFO never blocks the open
  beneath = 1u << 5,       ///< RESOLVE_BENEATH: never above dirfd (`..`, absolute: EXDEV)
  in_root = 1u << 6,       ///< RESOLVE_IN_ROOT: dirfd is "/" for the lookup
  no_symlinks = 1u << 7,   ///< RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS: a symlink anywhere is ELOOP
  no_xdev = 1u << 8,       ///< RESOLVE_NO_XDEV: never into another mount (EXDEV)
  regular = 1u << 9,       ///< only a regular file (EINVAL otherwise), with O_NONBLOCK|O_NOCTTY
};

/// The union of two flag sets.
constexpr Open operator|(Open a, Open b) { return static_cast<Open>(static_cast<unsigned>(a) | static_cast<unsigned>(b)); }

/// True if every flag of `f` is in `set`.
constexpr bool has(Open set, Open f) { return (static_cast<unsigned>(set) & static_cast<unsigned>(f)) == static_cast<unsigned>(f); }

/// `flag` when `on`, else no flag: for a flag a caller decides at run time.
constexpr Open open_if(bool on, Open flag) { return on ? flag : Open::read; }

/// The current directory as sys::open's dirfd (AT_FDCWD): path is then a
/// host path, absolute or relative to the working directory.
inline constexpr int at_cwd = -100;

/// Opens dirfd/path (O_CLOEXEC always) as `how` says; "" is dirfd itself.
/// Any of beneath, in_root, no_symlinks, no_xdev makes the call
/// openat2(2), else it is openat(2). A failure reads "<call> <path>:
/// <ERRNO>", where <call> is "open" for at_cwd, else "openat2" or
/// "openat"; a `regular` refusal reads "<path>: EINVAL: not a regular file".
Result<UniqueFd> open(int dirfd, const std::string& path, Open how);

/// fstat(2) of an open descriptor.
Result<FileStat> stat_fd(int fd);

/// fstatat(2) of one name below dirfd, not following a symlink; nullopt if
/// the name does not exist.
Result<std::optional<FileStat>> stat_at(int dirfd, const std::string& name);

/// A control file as read: its bytes and its metadata.
struct FileContent {
  std::string data;
  FileStat st;
};

/// Reads one name below dirfd: never through a symlink (O_NOFOLLOW), only
/// a regular file, at most max_size bytes. nullopt if it does not exist.
/// Refusals carry a sentence for the caller to prefix with the file's name:
/// ELOOP (symlink), EINVAL (not a regular file), EFBIG (too large); other
/// errors are the syscall's.
Result<std::optional<FileContent>> read_small_file(int dirfd, const std::string& name, std::size_t max_size);

/// A uid and gid to give a file (chown).
struct Ownership {
  uid_t uid = 0;
  gid_t gid = 0;
};

/// Whose rights a call that makes or writes files uses: nullopt, the
/// caller's own; set, a root process writing for an agent (the agent
/// owner's file-system ids, IdPlan::fs), which the call takes for its
/// duration (FsIdScope). The kernel then checks every lookup, create and
/// write as the owner's, and what the call makes belongs to the owner:
/// a root launch makes nothing its owner could not (docs/security.md,
/// "Root writes only where the owner may").
using MakeAs = std::optional<Creds>;

/// Opens dirfd/rel, creating missing directories (mode) one component at a
/// time; no component is ever followed as a symlink. Done with `as`'s
/// rights.
Result<UniqueFd> open_or_make_dirs(int dirfd, const std::string& rel, mode_t mode, const MakeAs& as = std::nullopt);

/// mkdirat(2) of one name below dirfd, with `as`'s rights: true if this
/// call made the directory, false if a directory (not a symlink) was
/// already there. Anything else under the name is an error (ELOOP, ENOTDIR).
Result<bool> make_dir_if_missing_at(int dirfd, const std::string& name, mode_t mode, const MakeAs& as = std::nullopt);

/// Makes a new directory below dirfd named `prefix` followed by random
/// characters (mkdtemp(3) relative to dirfd) and returns its name.
Result<std::string> make_temp_dir_at(int dirfd, const std::string& prefix, mode_t mode);

/// renameat2(RENAME_NOREPLACE): moves olddirfd/oldname to newdirfd/newname
/// in one step, only if newname does not exist (EEXIST otherwise).
Result<void> rename_noreplace_at(int olddirfd, const std::string& oldname, int newdirfd, const std::string& newname);

/// Removes dirfd/name and, for a directory, everything below it, never
/// following a symbolic link (a link is removed as a link) and never
/// leaving the file system of dirfd/name; at most `depth` levels.
/// ENOENT is success.
Result<void> remove_tree_at(int dirfd, const std::string& name, int depth = 16);

/// renameat(2): moves olddirfd/oldname over newdirfd/newname in one step.
Result<void> rename_at(int olddirfd, const std::string& oldname, int newdirfd, const std::string& newname);

/// fchownat(2) of dirfd/name, never following a symlink; "" changes dirfd
/// itself (AT_EMPTY_PATH).
Result<void> chown_at(int dirfd, const std::string& name, Ownership owner);

/// mkdtemp(3): a new directory (mode 0700) named by `prefix` and six
/// random characters; its path.
Result<std::string> make_temp_dir(const std::string& prefix);

/// readlinkat(2): the target of the symbolic link dirfd/name.
Result<std::string> read_link_at(int dirfd, const std::string& name);

/// Writes data to an existing file below dirfd with one write(2) (cgroup
/// control files: no O_CREAT, no O_APPEND, no truncation).
Result<void> write_existing_at(int dirfd, const std::string& name, std::string_view data);

/// access(2)-like check with the effective ids on dirfd/name ("" for
/// dirfd itself): true if the caller may write it.
bool writable_at(int dirfd, const std::string& name);

/// faccessat(X_OK, AT_EACCESS | AT_SYMLINK_NOFOLLOW): may the caller's
/// effective ids execute dirfd/name (mode bits, never through a symlink)?
bool executable_at(int dirfd, const std::string& name);

/// True if the file system holding fd is mounted noexec (fstatvfs).
Result<bool> on_noexec_mount(int fd);

/// Whether fd lies on a FUSE file system (fstatfs f_type): inside a
/// sandbox, where nothing can mount one, that is the agent view.
bool on_fuse(int fd);

/// true if path is a directory owned by the caller's effective uid with no
/// access for group or other (lstat: a symlink is not).
bool is_private_dir(const std::string& path);

/// fchmodat(2) of dirfd/name (it follows a symlink: use it on names only
/// the caller can have made, such as a socket it just bound).
Result<void> chmod_at(int dirfd, const std::string& name, mode_t mode);

/// The content of dir/name (read_small_file, at most 1 MiB), or "" when it
/// is missing or unreadable: for best-effort reads of /proc and /etc.
std::string read_or_empty(const std::string& dir, const std::string& name);

/// Names in a directory, without "." and "..", sorted.
Result<std::vector<std::string>> list_dir(int dirfd);
/// list_dir read through dirfd itself, not a descriptor of its own (two
/// system calls fewer): for a descriptor just opened, at the directory's
/// start, whose position nothing else reads; it is left at the end.
Result<std::vector<std::string>> list_open_dir(int dirfd);

/// One entry of a directory as getdents64(2) gives it.
struct DirEntry {
  std::string name;
  /// The position just after it (d_off): where a later read resumes.
  std::uint64_t next = 0;
};

/// Entries of the open directory dirfd from position `from` (0 the start,
/// else a `next` an earlier call gave), "." and ".." included, in the file
/// system's order: what one getdents64(2) of a buffer of `bytes` returns
/// (none at the end). A position stays valid across opens of the
/// directory on the file systems NFS can export (ext4, xfs, btrfs, tmpfs),
/// which use stable cookies for that.
Result<std::vector<DirEntry>> read_dir_from(int dirfd, std::uint64_t from, std::size_t bytes);

/// Replaces dirfd/name atomically: writes a temporary file in the same
/// directory and renames it over the name, so a reader sees the old or the
/// new content, never a mix. With `durable` the file is fsynced before the
/// rename (control files that must survive a crash); runtime state such as
/// status is not, and is swapped in without forcing its write-back, so
/// after a power loss it may be empty. On any failure the temporary file
/// is removed and the old content stays. Done with `as`'s rights.
Result<void> atomic_replace(int dirfd, const std::string& name, std::string_view data, mode_t mode = 0644,
                            bool durable = false, const MakeAs& as = std::nullopt);

/// Copies the regular file `from` (never through a symlink at its last
/// component) to dirfd/name with `mode`, only if name does not exist
/// (EEXIST otherwise): written under a temporary name, then linked in
/// with RENAME_NOREPLACE, so name is never seen half-written.
Result<void> copy_file_new(const std::string& from, int dirfd, const std::string& name, mode_t mode);

/// pread(2): up to size bytes at offset into buf; the count read (0 at
/// the end), EINTR retried.
Result<std::size_t> read_at(int fd, char* buf, std::size_t size, std::uint64_t offset);

/// Opens dirfd/name for appending (created with mode if missing), never
/// through a symlink, and only if it is a regular file (a FIFO planted
/// there cannot block the caller). Opened with `as`'s rights.
Result<UniqueFd> open_append(int dirfd, const std::string& name, mode_t mode, const MakeAs& as = std::nullopt);
/// open_append, with the file's size when opened.
Result<std::pair<UniqueFd, std::uint64_t>> open_append_sized(int dirfd, const std::string& name, mode_t mode,
                                                             const MakeAs& as = std::nullopt);

/// Appends data to the open O_APPEND descriptor fd with as few write(2)s
/// as the kernel allows, all or nothing: when a later write fails (ENOSPC,
/// EDQUOT, EFBIG after a short write), what this call wrote is cut off
/// again, while its bytes are still the end of the file (another
/// appender's line after them is not cut), so a file of lines only ever
/// holds whole lines.
Result<void> append_whole(int fd, std::string_view data);

/// Appends data to dirfd/name (created with mode if missing) with one
/// write(2) on an O_APPEND descriptor, so concurrent appenders of lines
/// shorter than PIPE_BUF do not interleave. All or nothing: when the file
/// system fills up part-way (a short write, then ENOSPC or EDQUOT), the
/// part written is truncated away again and the error returned, so a file
/// of whole lines stays one. Done with `as`'s rights.
Result<void> append_file(int dirfd, const std::string& name, std::string_view data, mode_t mode = 0644,
                         const MakeAs& as = std::nullopt);

/// Appends data to dirfd/name only if it exists and is a regular file
/// (never created: ENOENT), never through a symlink at name (O_NOFOLLOW:
/// ELOOP), with one write(2) on an O_APPEND descriptor, all or nothing
/// (append_file). When the file would grow past `cap` bytes it is emptied
/// first, so it never holds much more than cap.
Result<void> append_existing(int dirfd, const std::string& name, std::string_view data, std::uint64_t cap);

/// Replaces the content of dirfd/name by data, only if it exists and is a
/// regular file (never created: ENOENT), never through a symlink at name
/// (ELOOP): truncated, then one pwrite(2) at 0. Not atomic: a reader may
/// see it empty for a moment.
Result<void> overwrite_existing(int dirfd, const std::string& name, std::string_view data);

}  // namespace ctx::sys
