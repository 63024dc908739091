// The owned children a supervisor has started: which exist, their pidfds,
// status pipes and exit statuses, and which control connections wait for
// them. Bookkeeping only: no syscall is made here (children.cpp reads the
// pipes and answers, child_spawn.cpp starts and signals), so it is tested
// without a sandbox.
#pragma once

#include <poll.h>
#include <sys/types.h>

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/unique_fd.hpp"

namespace ctx::launcher {

/// One owned child as its parent's supervisor knows it.
struct OwnedChild {
  pid_t pid = 0;  ///< the child's supervisor
  UniqueFd pidfd;
  UniqueFd status;  ///< the child supervisor's --json-status-fd
  std::string status_buf;
  std::optional<int> exit_status;                         ///< set once its supervisor ended
  std::optional<pid_t> runtime_pid;                       ///< from its "started" status line
  std::vector<int> start_waiters;                         ///< connection ids
  std::vector<std::pair<int, std::string>> exit_waiters;  ///< connection id, op (stop or wait)
};

/// The connections an event concerns, taken out of the registry.
struct ChildWaiters {
  std::vector<int> start;
  std::vector<std::pair<int, std::string>> exit;
};

/// The registry, by child name. Single-threaded.
class ChildRegistry {
 public:
  /// The child of that name (running or ended), or nullptr.
  OwnedChild* find(const std::string& name);
  /// Whether a child of that name runs.
  bool running(const std::string& name) const;
  /// Number of children still running.
  std::size_t running() const;
  /// Names of the children still running, in name order.
  std::vector<std::string> running_names() const;

  /// Records a started child; an ended one of the same name is replaced.
  void add(const std::string& name, OwnedChild c);
  /// Forgets an ended child (deleted): a later wait is ESRCH. A running
  /// one stays.
  void forget_ended(const std::string& name);

  /// Appends the pidfds and status pipes of the running children.
  void add_poll_fds(std::vector<struct pollfd>& fds) const;

  /// A connection went away: it waits for nothing any more.
  void forget_waiter(int conn);
  /// Whether the connection waits for a child's start or exit.
  bool waits(int conn) const;

  /// Feeds bytes read from a child's status pipe. Once its "started" line
  /// is complete, runtime_pid is set and the start waiters are returned
  /// (taken); otherwise nothing.
  std::vector<int> feed_status(OwnedChild& c, std::string_view bytes);

  /// Records the end of a child (its status pipe closed) and takes every
  /// waiter. Nothing happens for an unknown name.
  ChildWaiters mark_exited(const std::string& name, int exit_status);

  /// Takes every waiter of every child (the control socket closes).
  std::vector<std::pair<std::string, ChildWaiters>> take_all_waiters();

 private:
  std::map<std::string, OwnedChild> children_;
};

}  // namespace ctx::launcher
