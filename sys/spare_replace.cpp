#include "sys/spare_replace.hpp"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "base/unique_fd.hpp"
#include "sys/error.hpp"
#include "sys/identity.hpp"

namespace ctx::sys {

namespace {

// The spare opened and leased for writing: nobody else has it open, and
// nobody can open it until the lease ends with the descriptor. An opener
// waits for that (it breaks the lease); its notice to us is SIGURG, whose
// default is to be ignored, not SIGIO, whose default ends the process.
// A spare that was there already is used only if it is what a replace
// leaves: a regular file with one link, of the user the call writes as
// (`uid`) and of `mode`. So a file someone else put at the name (another
// user's file its directory's owner could only rename there) is never
// opened for writing, chmod'ed or truncated. Any doubt is no spare (an
// invalid descriptor).
UniqueFd leased_spare(int spare_dirfd, const std::string& spare, mode_t mode, uid_t uid, std::size_t& size) {
  constexpr int kFlags = O_WRONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY;
  // Usually there from the last replace: opened first, made only when
  // missing (one system call a record fewer than making it first).
  bool made = false;
  int raw = ::openat(spare_dirfd, spare.c_str(), kFlags);
  if (raw < 0 && errno == ENOENT) {
    made = true;
    raw = ::openat(spare_dirfd, spare.c_str(), kFlags | O_CREAT | O_EXCL, mode);
  }
  if (raw < 0) return UniqueFd();
  UniqueFd fd(raw);
  struct stat st {};
  if (::fstat(fd.get(), &st) < 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1 || st.st_uid != uid) return UniqueFd();
  if (!made && (st.st_mode & 07777) != mode) return UniqueFd();
  if (::fcntl(fd.get(), F_SETSIG, SIGURG) < 0 || ::fcntl(fd.get(), F_SETLEASE, F_WRLCK) < 0) return UniqueFd();
  // fchmod: a spare just made under a narrower umask.
  if (made && (st.st_mode & 07777) != mode && ::fchmod(fd.get(), mode) < 0) return UniqueFd();
  size = static_cast<std::size_t>(st.st_size);
  return fd;
}

// Writes data at the start of fd and cuts what an older, longer content
// left after it (never to 0 bytes: ext4 forces the write-back of a file
// truncated to empty).
bool rewrite(int fd, std::string_view data, std::size_t old_size) {
  std::size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::pwrite(fd, data.data() + done, data.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return old_size <= data.size() || ::ftruncate(fd, static_cast<off_t>(data.size())) == 0;
}

}  // namespace

Result<void> replace_via_spare(int dirfd, const std::string& name, std::string_view data, int spare_dirfd,
                               const std::string& spare, mode_t mode, const MakeAs& as) {
  if (!data.empty()) {
    CTX_TRY_ASSIGN(FsIdScope scope, FsIdScope::enter(as));
    std::size_t old_size = 0;
    // setfsuid(-1) changes nothing and returns the ids files are made with.
    const auto uid = static_cast<uid_t>(::setfsuid(static_cast<uid_t>(-1)));
    UniqueFd fd = leased_spare(spare_dirfd, spare, mode, uid, old_size);
    const bool written = fd.valid() && rewrite(fd.get(), data, old_size);
    fd.reset();  // the lease ends here, before the spare is the record
    if (written) {
      if (::renameat2(spare_dirfd, spare.c_str(), dirfd, name.c_str(), RENAME_EXCHANGE) == 0) return {};
      // No record yet: the spare becomes it (the next replace makes one).
      if (errno == ENOENT && ::renameat2(spare_dirfd, spare.c_str(), dirfd, name.c_str(), RENAME_NOREPLACE) == 0)
        return {};
    }
  }
  return atomic_replace(dirfd, name, data, mode, false, as);
}

Result<void> retire_to_spare(int dirfd, const std::string& name, int spare_dirfd, const std::string& spare,
                             const MakeAs& as) {
  CTX_TRY_ASSIGN(FsIdScope scope, FsIdScope::enter(as));
  if (::renameat2(dirfd, name.c_str(), spare_dirfd, spare.c_str(), RENAME_NOREPLACE) == 0) return {};
  if (errno == ENOENT) return {};
  if (::unlinkat(dirfd, name.c_str(), 0) == 0 || errno == ENOENT) return {};
  return CTX_FAIL_ERRNO("unlinkat " + name);
}

}  // namespace ctx::sys
