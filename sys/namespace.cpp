#include "sys/namespace.hpp"

#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "base/unique_fd.hpp"
#include "sys/error.hpp"

namespace ctx::sys {

Result<void> unshare_ns(int flags) {
  if (::unshare(flags) < 0) return CTX_FAIL_ERRNO("unshare");
  return {};
}

Result<void> join_ns(int fd, int nstype) {
  if (::setns(fd, nstype) < 0) return CTX_FAIL_ERRNO("setns");
  return {};
}

Result<UniqueFd> open_own_ns(const std::string& ns) {
  const std::string path = "/proc/self/ns/" + ns;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return CTX_FAIL_ERRNO("open " + path);
  return UniqueFd(fd);
}

Result<void> loopback_up() {
  int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return CTX_FAIL_ERRNO("socket");
  UniqueFd s(fd);
  struct ifreq ifr {};
  std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  if (::ioctl(fd, SIOCGIFFLAGS, &ifr) < 0) return CTX_FAIL_ERRNO("ioctl SIOCGIFFLAGS lo");
  ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP | IFF_RUNNING);
  if (::ioctl(fd, SIOCSIFFLAGS, &ifr) < 0) return CTX_FAIL_ERRNO("ioctl SIOCSIFFLAGS lo");
  return {};
}

Result<void> set_hostname(const std::string& name) {
  if (::sethostname(name.c_str(), name.size()) < 0) return CTX_FAIL_ERRNO("sethostname");
  return {};
}

Result<unsigned long> ns_inode(pid_t pid, const std::string& ns) {
  std::string path = (pid == 0 ? std::string("/proc/self") : "/proc/" + std::to_string(pid)) + "/ns/" + ns;
  struct stat st {};
  if (::stat(path.c_str(), &st) < 0) return CTX_FAIL_ERRNO("stat " + path);
  return static_cast<unsigned long>(st.st_ino);
}

}  // namespace ctx::sys
