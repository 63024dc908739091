#include "test/support/namespaces.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/prctl.h>
#include <unistd.h>

namespace ctx::test {

bool write_file(const char* path, const std::string& v, int extra_flags) {
  int fd = ::open(path, O_WRONLY | O_CLOEXEC | extra_flags, 0644);
  if (fd < 0) return false;
  bool ok = ::write(fd, v.data(), v.size()) == static_cast<ssize_t>(v.size());
  ::close(fd);
  return ok;
}

bool enter_own_userns(const TestUser& u, int extra_flags) {
  if (::prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) < 0 || ::unshare(CLONE_NEWUSER | extra_flags) < 0) return false;
  std::string uid = std::to_string(u.uid), gid = std::to_string(u.gid);
  return write_file("/proc/self/setgroups", "deny") && write_file("/proc/self/uid_map", uid + " " + uid + " 1") &&
         write_file("/proc/self/gid_map", gid + " " + gid + " 1");
}

}  // namespace ctx::test
