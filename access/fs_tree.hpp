// The durable CTX tree as the access rules read it (access/rules.hpp): every
// path is resolved beneath one descriptor of the CTX root with
// openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS), so no symbolic link on
// the way is followed and nothing above the root is reached.
#pragma once

#include <cstdint>
#include <string>

#include "base/unique_fd.hpp"
#include "sys/file.hpp"
#include "access/rules.hpp"

namespace ctx::access {

class FsTree final : public HostTree {
 public:
  /// root: an open directory descriptor of the CTX root (borrowed).
  explicit FsTree(int root) : root_(root) {}

  /// nullopt only when rel (or a directory on its way) does not exist;
  /// an entry that cannot be reached is of type `other`.
  std::optional<HostEntry> stat(const std::string& rel) const override;
  std::optional<std::string> read(const std::string& rel) const override;
  std::optional<std::string> read_link(const std::string& rel) const override;
  std::vector<std::string> list(const std::string& rel) const override;

  /// The directory rel ("" the root itself) opened beneath the root.
  Result<UniqueFd> open_dir(const std::string& rel) const;

 private:
  int root_;
};

/// The tree as `base` reads it, except that an entry directly in the
/// directory dir_rel is looked at through `dir`, that directory opened
/// beneath the root (borrowed): one fstatat(2) per name, not a new walk of
/// the path beneath the root. For deciding the names of one listing.
class ListingTree final : public HostTree {
 public:
  ListingTree(const FsTree& base, std::string dir_rel, int dir)
      : base_(base), dir_rel_(std::move(dir_rel)), dir_(dir) {}

  std::optional<HostEntry> stat(const std::string& rel) const override;
  std::optional<std::string> read(const std::string& rel) const override { return base_.read(rel); }
  std::optional<std::string> read_link(const std::string& rel) const override { return base_.read_link(rel); }
  std::vector<std::string> list(const std::string& rel) const override { return base_.list(rel); }

 private:
  const FsTree& base_;
  std::string dir_rel_;
  int dir_;
};

/// How often a live reader reads the agent's label and policy again
/// (milliseconds): a revoked grant counts within this.
inline constexpr std::int64_t kPolicyRecheckMs = 250;

/// The viewer `who` (its agent, owner and runtime ids, as the launch
/// placed them) with the agent's label and policy as its control files
/// say now. A policy that cannot be read or no longer parses grants
/// nothing (fail closed).
Viewer load_viewer(const std::string& ctx_root, Viewer who);

/// A viewer read again at most every kPolicyRecheckMs: the FUSE view and
/// the supervisor's tool gate decide with it.
class LiveViewer {
 public:
  LiveViewer(std::string ctx_root, Viewer who) : ctx_root_(std::move(ctx_root)), v_(std::move(who)) {}
  const Viewer& get();

 private:
  std::string ctx_root_;
  Viewer v_;
  std::uint64_t loaded_us_ = 0;
  bool loaded_ = false;
};

/// What fstat said, as the rules read it.
HostEntry entry_of(const sys::FileStat& s);

/// Largest file the rules read (a policy, a parent file).
inline constexpr std::size_t kMaxRuleFile = 64 * 1024;

}  // namespace ctx::access
