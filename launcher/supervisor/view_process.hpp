// The agent view's server for one launch (view/server.hpp), started by the
// supervisor when the sandbox hands over the /dev/fuse descriptor of its
// view mount. It is forked, not executed (a launch pays a fork, not a
// program start), runs with the owner's ids outside the sandbox's
// namespaces, keeps only that descriptor and stderr, and dies with the
// supervisor (PR_SET_PDEATHSIG).
#pragma once

#include <optional>

#include "base/result.hpp"
#include "base/unique_fd.hpp"
#include "launcher/plan/plan.hpp"
#include "sys/process.hpp"

namespace ctx::launcher {

class ViewProcess {
 public:
  /// Forks the server on `fuse` for the plan's agent, into the cgroup
  /// cgroup_fd when it is one (-1: the supervisor's).
  static Result<ViewProcess> start(const LaunchPlan& plan, UniqueFd fuse, int cgroup_fd);

  ViewProcess(ViewProcess&&) = default;
  ViewProcess& operator=(ViewProcess&&) = default;
  /// Ends the server (SIGKILL) and reaps it, unless reap() did.
  ~ViewProcess();

  /// Readable once the server has exited.
  int pidfd() const { return child_.pidfd.get(); }
  pid_t pid() const { return child_.pid; }
  /// Reaps an exited server: its exit status as a launcher exit code.
  int reap();

 private:
  explicit ViewProcess(sys::Child c) : child_(std::move(c)) {}
  sys::Child child_;
  bool reaped_ = false;
};

}  // namespace ctx::launcher
