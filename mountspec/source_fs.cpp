#include "mountspec/source_fs.hpp"

#include <array>

#include "base/path.hpp"

namespace ctx::mountspec {

namespace {

// docs/security.md, "Mount sources of a root launch", gives the reason
// for each kind, and for what is left out.
constexpr std::array kAllowed{
    AllowedFs{"ext4", FsKind::disk},         AllowedFs{"ext3", FsKind::disk},
    AllowedFs{"ext2", FsKind::disk},         AllowedFs{"xfs", FsKind::disk},
    AllowedFs{"btrfs", FsKind::disk},        AllowedFs{"f2fs", FsKind::disk},
    AllowedFs{"zfs", FsKind::disk},          AllowedFs{"bcachefs", FsKind::disk},
    AllowedFs{"vfat", FsKind::removable},    AllowedFs{"exfat", FsKind::removable},
    AllowedFs{"ntfs3", FsKind::removable},   AllowedFs{"tmpfs", FsKind::memory},
    AllowedFs{"ramfs", FsKind::memory},      AllowedFs{"rootfs", FsKind::memory},
    AllowedFs{"overlay", FsKind::layered},   AllowedFs{"squashfs", FsKind::image},
    AllowedFs{"erofs", FsKind::image},       AllowedFs{"iso9660", FsKind::image},
    AllowedFs{"nfs", FsKind::network},       AllowedFs{"nfs4", FsKind::network},
    AllowedFs{"cifs", FsKind::network},      AllowedFs{"smb3", FsKind::network},
    AllowedFs{"ceph", FsKind::network},      AllowedFs{"9p", FsKind::vm_share},
    AllowedFs{"virtiofs", FsKind::vm_share}, AllowedFs{"fuse", FsKind::fuse},
    AllowedFs{"fuseblk", FsKind::fuse},      AllowedFs{"fuse.*", FsKind::fuse},
};

constexpr std::string_view kNotFiles =
    ", which is not a file system of plain files: a root launch takes mount sources only from those "
    "(docs/security.md, \"Mount sources of a root launch\")";

}  // namespace

std::string_view to_string(FsKind k) {
  switch (k) {
    case FsKind::disk: return "disk";
    case FsKind::removable: return "removable";
    case FsKind::memory: return "memory";
    case FsKind::layered: return "layered";
    case FsKind::image: return "image";
    case FsKind::network: return "network";
    case FsKind::vm_share: return "vm_share";
    case FsKind::fuse: return "fuse";
  }
  return "?";
}

std::span<const AllowedFs> root_source_fs_types() { return kAllowed; }

bool root_source_fs_allowed(std::string_view t) {
  for (const auto& a : kAllowed) {
    if (a.name == t) return true;
    // "fuse.*": a FUSE file system names its server's subtype after the dot.
    if (a.name.ends_with(".*") && t.size() > a.name.size() - 1 && t.starts_with(a.name.substr(0, a.name.size() - 1)))
      return true;
  }
  return false;
}

const MountEntry* mount_holding(std::string_view path, const std::vector<MountEntry>& mounts) {
  const MountEntry* on = nullptr;
  for (const auto& m : mounts)
    if (path_is_at_or_under(path, m.target) && (on == nullptr || m.target.size() >= on->target.size())) on = &m;
  return on;
}

const MountEntry* refused_submount(std::string_view source, const std::vector<MountEntry>& mounts) {
  for (const auto& m : mounts)
    if (path_is_at_or_under(m.target, source) && m.target != source && !root_source_fs_allowed(m.fstype)) return &m;
  return nullptr;
}

std::optional<std::string> source_fs_issue(SourceRole role, std::string_view source, bool recursive,
                                           const std::vector<MountEntry>& mounts) {
  const std::string what = std::string(role == SourceRole::root ? "root " : "source ") + std::string(source);
  const MountEntry* on = mount_holding(source, mounts);
  if (on == nullptr)
    return what +
           ": EACCES: lies on no mount of the launcher's mount table, so its file system is unknown: a root launch "
           "takes mount sources only from file systems of plain files (docs/security.md, \"Mount sources of a root "
           "launch\"); name a directory that lies on one of them";
  if (!root_source_fs_allowed(on->fstype)) {
    switch (role) {
      case SourceRole::bind:
        return what + ": EACCES: lies on " + on->fstype + std::string(kNotFiles) +
               "; bind a directory of a disk, memory or network file system instead, or remove the line";
      case SourceRole::root:
        return what + ": EACCES: lies on " + on->fstype + std::string(kNotFiles) +
               "; make the root a directory of a disk or memory file system";
    }
  }
  if (!recursive) return std::nullopt;
  if (const MountEntry* m = refused_submount(source, mounts))
    return what + ": EACCES: holds " + m->target + " (" + m->fstype + ")" + std::string(kNotFiles) +
           "; use bind instead of rbind, or bind only the directories the agent needs";
  return std::nullopt;
}

}  // namespace ctx::mountspec
