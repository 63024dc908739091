// The agent view without FUSE (docs/view.md, "Without FUSE"): the same
// rules (access/rules.hpp), applied once at launch. Each view step becomes a
// tmpfs holding the view's directories, with every shown file bound
// read-only from the durable tree onto an empty file of its name, the
// agent's own home and its readable shared spaces bound whole (their tool
// tiers built the same way over them), and at each allowed tool's name the
// `ctx` helper, which asks the supervisor to run the tool (a direct call is
// recorded like `ctx tool`; the tool itself is never on a path the sandbox
// can reach). The tmpfs is then made read-only. Nothing is live: what the
// agent sees is the tree and its policy as they were at launch.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/result.hpp"
#include "base/unique_fd.hpp"
#include "launcher/plan/plan.hpp"
#include "access/fs_tree.hpp"

namespace ctx::launcher {

/// Who looks, as the launch placed it: the agent, its owner and the
/// runtime's host ids (the label and policy are the tree's to say:
/// access::load_viewer, access::LiveViewer).
access::Viewer runtime_viewer(const LaunchPlan& plan);

/// Most mounts one static view makes; a larger view is refused (the FUSE
/// view has no such bound).
inline constexpr std::size_t kMaxStaticViewMounts = 4096;

/// One bind a static view made at launch: its kind (what the plan's
/// StaticBuild says of it) and its place in the sandbox.
struct StaticBind {
  mountspec::StaticBindKind kind;
  std::string target;
};

class StaticView {
 public:
  /// Reads the agent's label and policy and opens the CTX root, with the
  /// credentials the sandbox has now (the owner's).
  static Result<StaticView> open(const LaunchPlan& plan);

  /// Whether the view shows rel (below the CTX root; "" the root).
  bool shows(const std::string& rel) const;

  /// Counts one more mount of the view: E2BIG past kMaxStaticViewMounts.
  Result<void> count_mount();

  /// Fills the directory dirfd (an empty tmpfs, at `inner` in the
  /// sandbox) with the view's subtree `rel`: its directories, and each
  /// entry it shows bound with the attributes `b` gives its kind.
  Result<void> fill(int dirfd, const std::string& rel, const std::string& inner, const mountspec::StaticBuild& b);

  /// Every bind made so far, in order.
  const std::vector<StaticBind>& binds() const { return binds_; }

 private:
  StaticView(UniqueFd root, access::Viewer v);
  Result<bool> bind_file(int dirfd, const std::string& name, const std::string& host_rel, const std::string& inner,
                         mountspec::StaticBindKind kind, const mountspec::StaticBuild& b);
  Result<void> bind_whole(int dirfd, const std::string& name, const std::string& host_rel, const std::string& inner,
                          const mountspec::StaticBuild& b);

  UniqueFd root_;
  access::FsTree tree_;
  access::Viewer v_;
  std::optional<std::string> helper_;  ///< "bin/ctx" when it is an executable file
  std::size_t mounts_ = 0;
  std::vector<StaticBind> binds_;
};

}  // namespace ctx::launcher
