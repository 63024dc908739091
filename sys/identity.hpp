// Credentials: user-namespace id maps, uid/gid/groups, file-system ids,
// capabilities, namespaces joined by unshare.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/result.hpp"

namespace ctx::sys {

/// One line of an id map: `inner outer count`.
struct IdMapLine {
  std::uint32_t inner = 0;
  std::uint32_t outer = 0;
  std::uint32_t count = 1;
  bool operator==(const IdMapLine&) const = default;
};

/// Writes /proc/<pid>/setgroups ("deny" when deny_setgroups) and the
/// uid_map and gid_map of the process's user namespace. pid 0 means the
/// caller itself ("self").
Result<void> write_id_maps(pid_t pid, const std::vector<IdMapLine>& uid_map, const std::vector<IdMapLine>& gid_map,
                           bool deny_setgroups);

/// Runs newuidmap/newgidmap (the setuid helpers of the uidmap package)
/// for pid: the way an unprivileged caller maps ids delegated to it in
/// /etc/subuid and /etc/subgid.
Result<void> run_id_map_helpers(pid_t pid, const std::vector<IdMapLine>& uid_map,
                                const std::vector<IdMapLine>& gid_map);

/// setgroups, setresgid, setresuid, in that order (each is needed before
/// the next loses the privilege to do it).
Result<void> set_ids(std::uint32_t uid, std::uint32_t gid, const std::vector<std::uint32_t>& groups);

/// Sets the file-system ids and supplementary groups used for permission
/// checks on paths, keeping CAP_SYS_ADMIN (setfsuid drops only the
/// file-system capabilities), so mount sources are opened as the owner.
Result<void> set_fs_ids(std::uint32_t uid, std::uint32_t gid, const std::vector<std::uint32_t>& groups);

/// The caller's effective uid, gid and supplementary groups.
struct Creds {
  std::uint32_t uid = 0;
  std::uint32_t gid = 0;
  std::vector<std::uint32_t> groups;
};
Result<Creds> current_creds();

/// The caller's file-system uid and gid (setfsuid/setfsgid read back)
/// and supplementary groups: the ids every path is checked with.
Result<Creds> current_fs_ids();

/// The file-system ids and groups set to `as` for a scope: a root process
/// that looks up, makes and writes paths with another user's rights (the
/// owner of the agent it launches, DESIGN.md section 3), so the kernel
/// checks every step as that user's and what it makes belongs to that
/// user. The previous file-system ids (not the effective ones) come back
/// at its end, so scopes nest. Without `as`, or with the ids in force
/// already, it changes nothing. The ids
/// are the process's: single-threaded callers only.
class FsIdScope {
 public:
  /// Takes `as` (set_fs_ids) until the scope ends; the error of the
  /// kernel's refusal, with nothing changed.
  static Result<FsIdScope> enter(const std::optional<Creds>& as);
  FsIdScope(FsIdScope&& o) noexcept
      : saved_(std::move(o.saved_)), death_signal_(o.death_signal_), parent_(o.parent_) {
    o.saved_.reset();
  }
  FsIdScope& operator=(FsIdScope&&) = delete;
  ~FsIdScope();

 private:
  explicit FsIdScope(std::optional<Creds> saved) : saved_(std::move(saved)) {}
  std::optional<Creds> saved_;
  // The parent-death signal the change of ids clears (the kernel clears it
  // on every change of the file-system ids), armed again at the end.
  int death_signal_ = 0;
  pid_t parent_ = 0;
};

/// A user's passwd entry, in the fields the project uses.
struct UserEntry {
  std::string name;
  std::uint32_t uid = 0;
  std::uint32_t gid = 0;
};

/// getpwuid_r(3): nullopt if the uid has no entry.
Result<std::optional<UserEntry>> lookup_user(std::uint32_t uid);

/// getpwnam_r(3): nullopt if no user has that name.
Result<std::optional<UserEntry>> lookup_user_name(const std::string& name);

/// The group list of a user from the group database (getgrouplist), the
/// primary gid included.
Result<std::vector<std::uint32_t>> user_groups(std::uint32_t uid, std::uint32_t primary_gid);

/// Drops every capability still in the bounding set (needs CAP_SETPCAP,
/// so a privileged launch does it before leaving root).
Result<void> drop_bounding_set();

/// Drops every capability but the bounding set's (drop_bounding_set):
/// the ambient set (prctl), then the effective, permitted and inheritable
/// sets (one capset).
Result<void> drop_all_capabilities();

}  // namespace ctx::sys
