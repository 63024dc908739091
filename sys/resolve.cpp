#include "sys/resolve.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sys/error.hpp"

namespace ctx::sys {

Result<void> make_dir_at(int dirfd, const std::string& name, mode_t mode) {
  if (::mkdirat(dirfd, name.c_str(), mode) == 0) return {};
  int err = errno;
  if (err == EEXIST) {
    struct stat st {};
    if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) return {};
    if (S_ISLNK(st.st_mode)) return fail(Error{ELOOP, "mkdirat " + name + ": ELOOP: is a symbolic link"});
    return fail(Error{ENOTDIR, "mkdirat " + name + ": ENOTDIR: exists and is not a directory"});
  }
  return fail(sys_error("mkdirat " + name, err));
}

Result<void> make_file_at(int dirfd, const std::string& name, mode_t mode) {
  int fd = ::openat(dirfd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd >= 0) {
    ::close(fd);
    return {};
  }
  int err = errno;
  if (err == EEXIST) {
    struct stat st {};
    if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(st.st_mode) && !S_ISLNK(st.st_mode))
      return {};
    if (S_ISLNK(st.st_mode)) return fail(Error{ELOOP, "openat " + name + ": ELOOP: is a symbolic link"});
    return fail(Error{EISDIR, "openat " + name + ": EISDIR: exists and is a directory"});
  }
  return fail(sys_error("openat " + name, err));
}

Result<UniqueFd> create_file_at(int dirfd, const std::string& name, mode_t mode) {
  int fd = ::openat(dirfd, name.c_str(), O_RDONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) return CTX_FAIL_ERRNO("openat " + name);
  return UniqueFd(fd);
}

Result<void> make_symlink_at(const std::string& target, int dirfd, const std::string& name, const MakeAs& as) {
  CTX_TRY_ASSIGN(FsIdScope scope, FsIdScope::enter(as));
  if (::symlinkat(target.c_str(), dirfd, name.c_str()) < 0) return CTX_FAIL_ERRNO("symlinkat " + name);
  return {};
}

Result<void> access_fd(int fd, int mode, const MakeAs& as) {
  CTX_TRY_ASSIGN(FsIdScope scope, FsIdScope::enter(as));
  if (::faccessat(fd, "", mode, AT_EACCESS | AT_EMPTY_PATH) < 0) return CTX_FAIL_ERRNO("faccessat");
  return {};
}

}  // namespace ctx::sys
