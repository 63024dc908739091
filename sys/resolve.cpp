#include "sys/resolve.hpp"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sys/error.hpp"

namespace ctx::sys {

Result<UniqueFd> open_in_root(int rootfd, const std::string& rel, bool directory) {
  struct open_how how {};
  how.flags = O_PATH | O_CLOEXEC | (directory ? O_DIRECTORY : 0);
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  const char* p = rel.empty() ? "." : rel.c_str();
  long fd = ::syscall(SYS_openat2, rootfd, p, &how, sizeof how);
  if (fd < 0) return CTX_FAIL_ERRNO("openat2 " + (rel.empty() ? std::string(".") : rel));
  return UniqueFd(static_cast<int>(fd));
}

Result<UniqueFd> open_dir_beneath(int dirfd, const std::string& rel) {
  struct open_how how {};
  how.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  long fd = ::syscall(SYS_openat2, dirfd, rel.c_str(), &how, sizeof how);
  if (fd < 0) return CTX_FAIL_ERRNO("openat2 " + rel);
  return UniqueFd(static_cast<int>(fd));
}

Result<UniqueFd> open_file_beneath(int dirfd, const std::string& rel) {
  struct open_how how {};
  how.flags = O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  long fd = ::syscall(SYS_openat2, dirfd, rel.c_str(), &how, sizeof how);
  if (fd < 0) return CTX_FAIL_ERRNO("openat2 " + rel);
  UniqueFd f(static_cast<int>(fd));
  struct stat st {};
  if (::fstat(f.get(), &st) < 0) return CTX_FAIL_ERRNO("fstat " + rel);
  if (!S_ISREG(st.st_mode)) return fail(Error{EINVAL, rel + ": EINVAL: not a regular file"});
  return f;
}

Result<UniqueFd> open_path_beneath(int dirfd, const std::string& rel, bool no_xdev) {
  struct open_how how {};
  how.flags = O_PATH | O_CLOEXEC;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | (no_xdev ? RESOLVE_NO_XDEV : 0);
  const std::string path = rel.empty() ? "." : rel;
  long fd = ::syscall(SYS_openat2, dirfd, path.c_str(), &how, sizeof how);
  if (fd < 0) return CTX_FAIL_ERRNO("openat2 " + path);
  return UniqueFd(static_cast<int>(fd));
}

Result<UniqueFd> open_path_no_symlinks(const std::string& path) {
  struct open_how how {};
  how.flags = O_PATH | O_CLOEXEC;
  how.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  long fd = ::syscall(SYS_openat2, AT_FDCWD, path.c_str(), &how, sizeof how);
  if (fd < 0) return CTX_FAIL_ERRNO("open " + path);
  return UniqueFd(static_cast<int>(fd));
}

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

Result<UniqueFd> open_path_at(int dirfd, const std::string& name) {
  int fd = ::openat(dirfd, name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return CTX_FAIL_ERRNO("openat " + name);
  return UniqueFd(fd);
}

Result<void> make_symlink_at(const std::string& target, int dirfd, const std::string& name, const MakeAs& as) {
  CTX_TRY_ASSIGN(FsIdScope scope, FsIdScope::enter(as));
  if (::symlinkat(target.c_str(), dirfd, name.c_str()) < 0) return CTX_FAIL_ERRNO("symlinkat " + name);
  return {};
}

Result<UniqueFd> open_path(const std::string& path, int flags) {
  int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) return CTX_FAIL_ERRNO("open " + path);
  return UniqueFd(fd);
}

Result<void> access_fd(int fd, int mode, const MakeAs& as) {
  CTX_TRY_ASSIGN(FsIdScope scope, FsIdScope::enter(as));
  if (::faccessat(fd, "", mode, AT_EACCESS | AT_EMPTY_PATH) < 0) return CTX_FAIL_ERRNO("faccessat");
  return {};
}

}  // namespace ctx::sys
