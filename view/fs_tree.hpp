// The durable CTX tree as the view's rules read it (view/rules.hpp): every
// path is resolved beneath one descriptor of the CTX root with
// openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS), so no symbolic link on
// the way is followed and nothing above the root is reached.
#pragma once

#include <string>

#include "base/unique_fd.hpp"
#include "sys/file.hpp"
#include "view/rules.hpp"

namespace ctx::view {

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

/// What fstat said, as the rules read it.
HostEntry entry_of(const sys::FileStat& s);

/// Largest file the rules read (a policy, a parent file).
inline constexpr std::size_t kMaxRuleFile = 64 * 1024;

}  // namespace ctx::view
