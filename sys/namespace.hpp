// Namespaces: entering new ones (unshare), setting up the network and UTS
// namespaces the sandbox gets, and naming a process's namespaces.
#pragma once

#include <sys/types.h>

#include <string>

#include "base/result.hpp"
#include "base/unique_fd.hpp"

namespace ctx::sys {

/// unshare(2).
Result<void> unshare_ns(int flags);

/// setns(2): the caller joins the namespace `fd` names (of type `nstype`,
/// a CLONE_NEW* flag, checked by the kernel).
Result<void> join_ns(int fd, int nstype);

/// Opens /proc/self/ns/<ns> (O_RDONLY: a descriptor setns takes).
Result<UniqueFd> open_own_ns(const std::string& ns);

/// A network namespace made beside the caller: a helper process that
/// shares the caller's memory (clone with CLONE_VM; it makes no library
/// call) unshares one while the caller goes on, on the other CPU, and
/// enter() joins it (setns through the helper's pidfd: the caller's right
/// as the namespace's owner, whose user namespace both are in). A helper
/// that has not begun by then is told not to, and the caller makes its
/// own: never a wait for a CPU the helper did not get. The helper ends in
/// enter() or with this object; a caller that dies first takes it along
/// if it is pid 1 of its pid namespace (the sandbox's init, its user).
class NetNamespaceAhead {
 public:
  /// Starts the helper; on failure the namespace is made by enter().
  static NetNamespaceAhead start();
  NetNamespaceAhead() = default;
  NetNamespaceAhead(NetNamespaceAhead&& o) noexcept;
  NetNamespaceAhead& operator=(NetNamespaceAhead&&) = delete;
  NetNamespaceAhead(const NetNamespaceAhead&) = delete;
  ~NetNamespaceAhead();
  /// The caller in a network namespace of its own: the helper's, or one
  /// unshared now. The helper is ended and reaped either way.
  Result<void> enter();
  /// Whether the helper made the namespace enter() joined (tests, benches).
  bool made_ahead() const { return made_ahead_; }

 private:
  void end();
  void* region_ = nullptr;
  pid_t pid_ = -1;
  UniqueFd pidfd_;
  bool made_ahead_ = false;
};

/// Brings the loopback interface of the caller's network namespace up.
Result<void> loopback_up();

/// sethostname(2) (in a new UTS namespace).
Result<void> set_hostname(const std::string& name);

/// The inode number of /proc/<pid>/ns/<ns> (the namespace's id); pid 0
/// is the caller.
Result<unsigned long> ns_inode(pid_t pid, const std::string& ns);

}  // namespace ctx::sys
