#include "launcher/plan/caller.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>

#include "base/path.hpp"
#include "sys/file.hpp"
#include "sys/identity.hpp"
#include "sys/resolve.hpp"

namespace ctx::launcher {

Result<Caller> probe_caller(const agentdir::AgentSpec& spec) {
  Caller c;
  CTX_TRY_ASSIGN(sys::Creds creds, sys::current_creds());
  c.uid = creds.uid;
  c.gid = creds.gid;
  c.groups = creds.groups;
  if (c.uid == 0) {
    CTX_TRY_ASSIGN(c.owner_ids, agentdir::read_owner_ids(spec.owner));
    c.owner_primary_gid = c.owner_ids.primary_gid;
    c.owner_groups = c.owner_ids.groups;
  }
  if (c.uid == 0 && c.owner_groups.empty()) c.owner_groups = {c.owner_primary_gid.value_or(spec.gid)};
  // Only an unprivileged `iso uid` maps ids beyond the caller's own: the
  // id map helpers and the subordinate ranges are read for it alone (an
  // NSS lookup and four files that no other launch needs).
  if (c.uid != 0 && spec.iso == agentdir::Iso::uid) {
    auto bin = sys::open(sys::at_cwd, "/usr/bin", sys::Open::directory);
    if (bin) {
      auto a = sys::stat_at(bin->get(), "newuidmap");
      auto b = sys::stat_at(bin->get(), "newgidmap");
      c.have_id_map_helpers = a && *a && b && *b;
    }
    std::string name;
    if (auto me = sys::lookup_user(c.uid); me && *me) name = (*me)->name;
    c.subuid = agentdir::parse_subid(sys::read_or_empty("/etc", "subuid"), c.uid, name);
    c.subgid = agentdir::parse_subid(sys::read_or_empty("/etc", "subgid"), c.uid, name);
  }
  return c;
}

std::vector<std::string> list_shared_spaces(const std::string& ctx_root) {
  auto d = sys::open(sys::at_cwd, ctx_root + "/shared", sys::Open::directory);
  if (!d) return {};
  auto names = sys::list_open_dir(d->get());
  if (!names) return {};
  std::vector<std::string> out;
  for (auto& n : *names) {
    auto st = sys::stat_at(d->get(), n);
    if (st && *st && S_ISDIR((*st)->mode)) out.push_back(n);
  }
  return out;
}

Result<void> fuse_usable() {
  CTX_TRY_ASSIGN(UniqueFd f, sys::open(sys::at_cwd, "/dev/fuse", sys::Open::read_write));
  return {};
}

bool shows_ctx_tree(const agentdir::AgentSpec& spec) {
  return std::any_of(spec.mounts.begin(), spec.mounts.end(), [&](const mountspec::Entry& e) {
    return path_is_at_or_under(e.source, spec.ctx_root) || path_is_at_or_under(spec.ctx_root, e.source);
  });
}

}  // namespace ctx::launcher
