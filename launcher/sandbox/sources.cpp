#include "launcher/sandbox/sources.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include "base/path.hpp"
#include "mountspec/source_fs.hpp"
#include "sys/file.hpp"
#include "sys/mountinfo.hpp"
#include "sys/resolve.hpp"

namespace ctx::launcher {

// A root or a table's source is never reached through a symbolic link: an
// agent can write in its home (where its root lies by default) and in its
// rw binds, and a link planted there would choose its next launch's root
// or mounts (the owner's home, the durable CTX tree).
Result<UniqueFd> open_no_symlinks(const std::string& what, const std::string& path) {
  auto fd = sys::open(sys::at_cwd, path, sys::Open::path_only | sys::Open::no_symlinks);
  if (!fd && fd.error().code == ELOOP)
    return fail(Error{ELOOP, what + " " + path +
                                 ": ELOOP: reaches through a symbolic link, which a launch never follows (a link in "
                                 "a directory the agent can write would choose its next launch's mounts); name the "
                                 "real path (realpath " +
                                 path + ")"});
  return fd;
}

namespace {

// An owned child's source, resolved beneath the directory it derives
// from without symlinks (and without crossing into another mount when the
// parent's bind is non-recursive).
Result<UniqueFd> open_source(const BindStep& b) {
  // The parent mount's own source is the parent's as configured.
  if (b.beneath.empty() || b.source == b.beneath) return open_no_symlinks("source", b.source);
  if (!path_is_at_or_under(b.source, b.beneath))
    return fail(Error{EACCES, "source " + b.source + ": EACCES: not below " + b.beneath});
  CTX_TRY_ASSIGN(UniqueFd top, open_no_symlinks("source", b.beneath));
  auto src = sys::open(top.get(), std::string(path_suffix(b.source, b.beneath)),
                       sys::Open::path_only | sys::Open::beneath | sys::Open::no_symlinks |
                           sys::open_if(b.beneath_no_xdev, sys::Open::no_xdev));
  if (!src && src.error().code == ELOOP)
    return fail(Error{EACCES, "source " + b.source + ": EACCES: reaches through a symbolic link below " + b.beneath +
                                  ", which an owned child's mount never follows"});
  if (!src && src.error().code == EXDEV)
    return fail(Error{EACCES, "source " + b.source + ": EACCES: lies on another mount than " + b.beneath +
                                  ", which the parent binds without its submounts; the parent does not see it"});
  return src;
}

}  // namespace

Result<BindSource> open_bind_source(const BindStep& b, const std::vector<sys::MountEntry>* host_mounts) {
  // The source is opened with the owner's credentials (the caller's, or
  // the fs ids set for a privileged launch), so it must be reachable by
  // the owner; reading (and for rw, writing) it must be allowed too.
  CTX_TRY_ASSIGN(UniqueFd src, open_source(b));
  if (host_mounts != nullptr) {
    CTX_TRY_ASSIGN(std::string real, sys::fd_path(src.get()));
    if (auto issue = mountspec::source_fs_issue(mountspec::SourceRole::bind, real, b.recursive, *host_mounts))
      return fail(Error{EACCES, *issue});
  }
  CTX_TRY_ASSIGN(sys::FileStat st, sys::stat_fd(src.get()));
  bool dir = S_ISDIR(st.mode);
  int need = R_OK | (dir ? X_OK : 0) | (b.need_write ? W_OK : 0);
  if (auto r = sys::access_fd(src.get(), need); !r)
    return fail(Error{EACCES, "source " + b.source + ": EACCES: the owner may not " +
                                  (b.need_write ? "read and write" : "read") + " it"});
  return BindSource{std::move(src), dir};
}

std::string mount_line_context(const LaunchPlan& plan, const BindStep& m) {
  return m.line > 0 ? plan.name + ".d/mount:" + std::to_string(m.line) + ": " + m.source + " -> " + m.target
                    : m.source + " -> " + m.target;
}

Result<UniqueFd> open_root_source(const RootStep& r, const std::vector<sys::MountEntry>* host_mounts) {
  UniqueFd root_dir;
  if (r.beneath.empty()) {
    auto d = open_no_symlinks("root", r.source);
    if (!d && d.error().code == ENOENT)
      return fail(
          Error{ENOENT, "root " + r.source +
                            ": ENOENT: no such directory; create it, with the merged-/usr links (ln -s usr/bin " +
                            r.source + "/bin, and likewise sbin, lib, lib64)"});
    if (!d) return fail(d.error());
    root_dir = std::move(*d);
    CTX_TRY_ASSIGN(sys::FileStat st, sys::stat_fd(root_dir.get()));
    if (!S_ISDIR(st.mode)) return fail(Error{ENOTDIR, "root " + r.source + ": ENOTDIR: not a directory"});
  } else {
    CTX_TRY_ASSIGN(UniqueFd top, open_no_symlinks("root", r.beneath));
    auto d = sys::open(top.get(), std::string(path_suffix(r.source, r.beneath)),
                       sys::Open::path_only | sys::Open::beneath | sys::Open::no_symlinks);
    if (!d) return fail(d.error().with_context("root " + r.source));
    root_dir = std::move(*d);
  }
  if (host_mounts != nullptr) {
    CTX_TRY_ASSIGN(std::string real, sys::fd_path(root_dir.get()));
    if (auto issue = mountspec::source_fs_issue(mountspec::SourceRole::root, real, false, *host_mounts))
      return fail(Error{EACCES, *issue});
  }
  return root_dir;
}

}  // namespace ctx::launcher
