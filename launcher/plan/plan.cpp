#include "launcher/plan/plan.hpp"

#include <sched.h>

#include <algorithm>
#include <cctype>
#include <set>

#include "agentdir/mount_rules.hpp"
#include "agentdir/tier.hpp"
#include "base/names.hpp"
#include "base/path.hpp"
#include "base/text.hpp"
#include "mountspec/geometry.hpp"
#include "mountspec/plan.hpp"
#include "access/rules.hpp"

namespace ctx::launcher {

namespace {

using agentdir::AgentSpec;
using agentdir::Iso;

std::string join_ids(const std::vector<std::uint32_t>& v) {
  std::string s;
  for (auto g : v) s += (s.empty() ? "" : ",") + std::to_string(g);
  return s.empty() ? "none" : s;
}

std::string iso_who(const AgentSpec& spec) { return spec.name + ": iso " + std::string(agentdir::to_string(spec.iso)); }

// A root caller: host ids after the mounts, within the owner's entitlement.
Result<IdPlan> plan_privileged_ids(const AgentSpec& spec, const Caller& caller) {
  IdPlan p;
  const std::string who = iso_who(spec);
  std::uint32_t owner_gid = caller.owner_primary_gid.value_or(spec.gid);
  p.privileged = true;
  // Before anything else: the owner may not choose ids it does not have.
  if (auto refused = agentdir::entitlement_errors(spec, caller.owner_ids); !refused.empty())
    return fail(refused.front());
  // Mount sources and mount points are opened as the owner, so a table
  // can never reach a path the owner could not.
  p.fs = sys::Creds{spec.owner, owner_gid, caller.owner_groups};
  switch (spec.iso) {
    case Iso::uid:
      p.host_ids = sys::Creds{spec.uid, spec.gid, spec.groups};
      p.uid = p.host_uid = spec.uid;
      p.gid = p.host_gid = spec.gid;
      p.groups = p.host_groups = spec.groups;
      break;
    case Iso::shared:
      if (spec.uid != spec.owner)
        return fail(EINVAL, who + " runs as the owner (" + std::to_string(spec.owner) + ") but uid is " +
                                std::to_string(spec.uid) + "; remove the uid file or use iso uid");
      p.host_ids = sys::Creds{spec.owner, spec.gid, spec.groups};
      p.uid = p.host_uid = spec.owner;
      p.gid = p.host_gid = spec.gid;
      p.groups = p.host_groups = spec.groups;
      break;
    case Iso::userns:
      // Drop to the owner's host ids first, then give the runtime
      // namespace-local ids mapped onto them.
      p.host_ids = sys::Creds{spec.owner, owner_gid, spec.groups};
      p.user_ns = true;
      p.user_ns_after_mounts = true;
      p.deny_setgroups = true;
      p.uid_map = {{spec.uid, spec.owner, 1}};
      p.gid_map = {{spec.gid, owner_gid, 1}};
      p.uid = spec.uid;
      p.gid = spec.gid;
      p.groups = spec.groups;
      p.host_uid = spec.owner;
      p.host_gid = owner_gid;
      p.host_groups = spec.groups;
      break;
  }
  return p;
}

// Unprivileged: the caller's own ids are all it may map (user_namespaces(7)).
Result<IdPlan> plan_unprivileged_ids(const AgentSpec& spec, const Caller& caller) {
  IdPlan p;
  const std::string who = iso_who(spec);
  if (spec.owner != caller.uid)
    return fail(EPERM, spec.name + ": owned by uid " + std::to_string(spec.owner) + ", launched by uid " +
                           std::to_string(caller.uid) + ": only the owner or root may launch it");
  p.fs = sys::Creds{caller.uid, caller.gid, caller.groups};
  p.user_ns = true;
  std::set<std::uint32_t> want(spec.groups.begin(), spec.groups.end());
  std::set<std::uint32_t> have(caller.groups.begin(), caller.groups.end());
  // The primary gid in the supplementary list changes nothing.
  have.erase(caller.gid);
  want.erase(caller.gid);
  switch (spec.iso) {
    case Iso::uid: {
      if (!caller.have_id_map_helpers)
        return fail(EPERM, who +
                               " needs privilege: launch it as root (a systemd unit), or install uidmap "
                               "(newuidmap/newgidmap) and delegate uid " +
                               std::to_string(spec.uid) + " to uid " + std::to_string(caller.uid) +
                               " in /etc/subuid and /etc/subgid");
      if (!agentdir::in_ranges(spec.uid, caller.subuid))
        return fail(EPERM, who + ": uid " + std::to_string(spec.uid) + " is not delegated to uid " +
                               std::to_string(caller.uid) + " in /etc/subuid; add a range that holds it");
      std::vector<std::uint32_t> gids{spec.gid};
      gids.insert(gids.end(), spec.groups.begin(), spec.groups.end());
      for (auto g : gids)
        if (!agentdir::in_ranges(g, caller.subgid))
          return fail(EPERM, who + ": gid " + std::to_string(g) + " is not delegated to uid " +
                                 std::to_string(caller.uid) + " in /etc/subgid; add a range that holds it");
      p.map_via_helpers = true;
      // The caller's own ids are mapped too: the sandbox sets itself up
      // as the caller (mount points it creates must have a mapped owner)
      // and takes the agent's ids only at the end.
      std::set<std::uint32_t> uids{spec.uid, caller.uid};
      for (auto u : uids) p.uid_map.push_back({u, u, 1});
      std::set<std::uint32_t> mapped(gids.begin(), gids.end());
      mapped.insert(caller.gid);
      for (auto g : mapped) p.gid_map.push_back({g, g, 1});
      p.uid = p.host_uid = spec.uid;
      p.gid = p.host_gid = spec.gid;
      p.groups = p.host_groups = spec.groups;
      return p;
    }
    case Iso::shared:
      if (spec.uid != caller.uid)
        return fail(EINVAL, who + " runs as the owner (" + std::to_string(caller.uid) + ") but uid is " +
                                std::to_string(spec.uid) + "; remove the uid file or use iso userns");
      if (spec.gid != caller.gid)
        return fail(EPERM, who + ": gid " + std::to_string(spec.gid) + " differs from the caller's gid " +
                               std::to_string(caller.gid) +
                               ", which is the only gid an unprivileged launch can map; "
                               "write " +
                               std::to_string(caller.gid) + " to gid or launch as root");
      p.uid_map = {{caller.uid, caller.uid, 1}};
      p.gid_map = {{caller.gid, caller.gid, 1}};
      p.uid = caller.uid;
      p.gid = caller.gid;
      break;
    case Iso::userns:
      p.uid_map = {{spec.uid, caller.uid, 1}};
      p.gid_map = {{spec.gid, caller.gid, 1}};
      p.uid = spec.uid;
      p.gid = spec.gid;
      break;
  }
  // The kernel keeps a process's supplementary groups in a user namespace
  // whose setgroups is denied; they can be neither dropped nor added.
  if (want != have)
    return fail(EPERM, spec.name + ": groups lists " + join_ids(std::vector<std::uint32_t>(want.begin(), want.end())) +
                           " but an unprivileged launch keeps the caller's supplementary groups " +
                           join_ids(std::vector<std::uint32_t>(have.begin(), have.end())) +
                           " (they cannot be changed without privilege): make groups list exactly these, or "
                           "launch as root (a systemd unit)");
  p.deny_setgroups = true;
  p.groups = spec.groups;
  p.host_uid = caller.uid;
  p.host_gid = caller.gid;
  p.host_groups = caller.groups;
  return p;
}

Result<IdPlan> plan_ids(const AgentSpec& spec, const Caller& caller) {
  return caller.uid == 0 ? plan_privileged_ids(spec, caller) : plan_unprivileged_ids(spec, caller);
}

MaskStep mask(std::string target, std::string why) {
  return MaskStep{
      std::move(target), {.rdonly = true, .nosuid = true, .nodev = true, .noexec = true}, std::move(why), {}};
}

// A mask is a mount over one directory, and mounts move with their
// directory: in a rw bind the agent could rename a directory above a mask
// (an ancestor's session/, the list of its own sessions) and find what
// the mask hid under the new name at its next launch. Every
// directory between the bind's root (a mount point already) and the mask
// becomes a mount point too, which the kernel refuses to rename or remove
// (EBUSY). Their targets, parents first, added to `pins` once each.
void pin_above(const BindStep& b, const std::string& mask_target, std::vector<std::string>& pins) {
  if (b.attrs.rdonly) return;
  std::vector<std::string> between;
  for (std::string_view d = path_dirname(mask_target); d.size() > b.target.size() && path_is_at_or_under(d, b.target);
       d = path_dirname(d))
    between.emplace_back(d);
  for (auto it = between.rbegin(); it != between.rend(); ++it)
    if (std::find(pins.begin(), pins.end(), *it) == pins.end()) pins.push_back(*it);
}

// The bind of a pinned directory (pin_above) onto itself: the same source
// below the bind's, with the bind's flags.
BindStep pin(const BindStep& b, const std::string& target) {
  BindStep p = b;
  p.target = target;
  p.source = path_join(b.source, path_suffix(target, b.target));
  p.pin = true;
  return p;
}

bool reserved_target(std::string_view t, bool handoff) {
  return path_is_at_or_under(t, "/proc") || path_is_at_or_under(t, "/dev") || path_is_at_or_under(t, kNotifyDir) ||
         (handoff && path_is_at_or_under(t, kHandoffDir));
}

// The shared space a host path lies in, if any: "<ctx>/shared/<name>[/...]".
std::optional<std::string> shared_space_of(std::string_view host, const std::string& shared_dir) {
  if (!path_is_at_or_under(host, shared_dir) || host.size() == shared_dir.size()) return std::nullopt;
  std::string_view rest = path_suffix(host, shared_dir);
  return std::string(rest.substr(0, rest.find('/')));
}

// One line of the table as a bind, tied to the parent mount it derives
// from when the agent is an owned child: the deepest parent mount whose
// source holds it decides, and only a non-recursive one hides submounts.
BindStep bind_of(const mountspec::Entry& e, const mountspec::Table& parent_mounts) {
  BindStep b;
  b.source = e.source;
  b.target = e.target;
  b.recursive = e.kind == mountspec::Kind::rbind;
  b.attrs = e.attrs;
  b.need_write = !b.attrs.rdonly;
  b.line = e.line;
  const mountspec::Entry* from = nullptr;
  for (const auto& pe : parent_mounts)
    if (path_is_at_or_under(e.source, pe.source) && (from == nullptr || pe.source.size() > from->source.size()))
      from = &pe;
  if (from != nullptr) {
    b.beneath = from->source;
    b.beneath_no_xdev = from->kind == mountspec::Kind::bind;
  }
  return b;
}

// The shared spaces' policy over the table: a mount of a space needs its
// read (ro) or write (rw) permission; a mount that holds <ctx>/shared
// hides the spaces without read and rebinds read-only those without write.
class SharedSpaces {
 public:
  SharedSpaces(const AgentSpec& spec, const PlanOptions& opts)
      : spec_(spec), opts_(opts), dir_(path_join(spec.ctx_root, "shared")), subject_(spec.subject()) {}

  Result<void> add(const mountspec::Entry& e, BindStep b, std::vector<BindStep>& binds,
                   std::vector<MaskStep>& masks) const {
    if (auto space = shared_space_of(e.source, dir_)) {
      const char* perm = b.attrs.rdonly ? "read" : "write";
      if (!allowed(*space, perm))
        return fail(Error{EACCES,
                          located(spec_.name + ".d/mount", e.line, 0, EACCES,
                                  "source " + e.source + " is in shared space " + *space + " and the policy lacks " +
                                      policy::missing_rule(subject_, policy::Class::shared, *space, perm))
                              .msg,
                          "shared_policy"});
      binds.push_back(std::move(b));
      return {};
    }
    binds.push_back(b);
    if (!path_is_at_or_under(dir_, e.source)) return {};
    std::string inner_shared = path_join(e.target, path_suffix(dir_, e.source));
    for (const auto& space : opts_.shared_spaces) {
      std::string inner = path_join(inner_shared, space);
      if (!allowed(space, "read")) {
        masks.push_back(mask(inner, "no 'shared:" + space + " read' in policy"));
      } else if (!b.attrs.rdonly && !allowed(space, "write")) {
        BindStep ro = b;
        ro.source = path_join(dir_, space);
        ro.target = inner;
        ro.attrs.rdonly = true;
        ro.need_write = false;
        binds.push_back(ro);
      }
    }
    return {};
  }

 private:
  bool allowed(const std::string& space, const char* perm) const {
    return !subject_.empty() && spec_.policy.allows(subject_, policy::Class::shared, space, perm);
  }
  const AgentSpec& spec_;
  const PlanOptions& opts_;
  std::string dir_;
  std::string subject_;
};

// The agent's own sessions, <ctx>/home/<owner>/agent/<name>/session, as
// a launch shows them wherever a bind or the root shows that directory
// (docs/abi-policy.md, "session"): the launch's session (a home one),
// `index`, and each session with session:<name> read, read-only. Listed
// at launch: a session made while the agent runs is not among them, and
// the agent can add nothing there (the list is a read-only tmpfs).
class AgentSessions {
 public:
  AgentSessions(const AgentSpec& spec, const PlanOptions& opts)
      : spec_(spec),
        opts_(opts),
        dir_(path_join(spec.ctx_root, "home/" + sessions_rel(spec.owner, spec.name))),
        subject_(spec.subject()) {}

  const std::string& dir() const { return dir_; }

  // The allow-list over the session directory shown at `target`.
  MaskStep list(const std::string& target) const {
    MaskStep m = mask(target, "the agent's sessions: its own, index and those with session:<name> read");
    const bool home = opts_.session_space.empty();
    if (home) m.keep.push_back({opts_.session, true, true});
    m.keep.push_back({"index", false, home});
    for (const auto& other : opts_.sessions)
      if (!(home && other == opts_.session) && readable(other)) m.keep.push_back({other, false, false});
    return m;
  }

  // A source (or the root) below the session directory lies in an entry
  // the list shows, and only in the launch's own session may it be
  // written. `where` names the file (and line) it comes from; `written`
  // is the fix when it would be written there (a rw line, the root), ""
  // when it is not.
  Result<void> check_inside(const std::string& source, std::string_view written, const std::string& where) const {
    if (!path_is_at_or_under(source, dir_) || source == dir_) return {};
    const std::string_view rest = path_suffix(source, dir_);
    const std::string name(rest.substr(0, rest.find('/')));
    if (opts_.session_space.empty() && name == opts_.session) return {};
    if (name != "index" && !readable(name))
      return fail(Error{
          EACCES,
          where + ": " + source + ": EACCES: lies in the agent's session " + name + ", which its policy hides; add " +
              policy::missing_rule(subject_, policy::Class::session, name, "read") + " or show another directory",
          "session_policy"});
    if (!written.empty())
      return fail(
          Error{EACCES,
                where + ": " + source + ": EACCES: lies in " +
                    (name == "index" ? std::string("the index of the agent's sessions, which the launcher writes")
                                     : "the agent's session " + name + ", which its policy lets it read") +
                    ", shown read-only; " + std::string(written),
                "session_policy"});
    return {};
  }

  // A line of the table whose target lies in a list of the agent's
  // sessions (`list`) names an entry the list shows: the list is
  // read-only, and no mount point can be made beside what it keeps.
  static Result<void> check_target(const MaskStep& list, const BindStep& b, const std::string& file) {
    if (!path_is_at_or_under(b.target, list.target) || b.target == list.target) return {};
    const std::string_view rest = path_suffix(b.target, list.target);
    const std::string name(rest.substr(0, rest.find('/')));
    if (std::any_of(list.keep.begin(), list.keep.end(), [&](const MaskKeep& k) { return k.name == name; })) return {};
    std::string shown;
    for (const auto& k : list.keep) shown += (shown.empty() ? "" : ", ") + k.name;
    return fail(Error{EACCES, file + ":" + std::to_string(b.line) + ": target " + b.target + ": EACCES: lies in " +
                                  list.target + ", the list of the agent's sessions, which shows only " + shown +
                                  " and is read-only; put the target elsewhere"});
  }

 private:
  bool readable(const std::string& name) const {
    return !session_name_issue(name) && !subject_.empty() &&
           spec_.policy.allows(subject_, policy::Class::session, name, "read");
  }
  const AgentSpec& spec_;
  const PlanOptions& opts_;
  std::string dir_;
  std::string subject_;
};

// An owned child's handoff: the parent's instructions read-only, the
// result channels writable, nothing else of the parent's context.
void add_handoff(const AgentSpec& spec, const std::string& handoff_dir, std::vector<BindStep>& binds) {
  for (const char* f : {"handoff.md", "input.jsonl", "output.md", "result.md", "refs.jsonl", "artifact"}) {
    BindStep b;
    b.source = path_join(handoff_dir, f);
    b.target = path_join(kHandoffDir, f);
    const std::string_view n(f);
    b.attrs = {.rdonly = n == "handoff.md" || n == "input.jsonl" || n == "output.md",
               .nosuid = true,
               .nodev = true,
               .noexec = true};
    b.need_write = !b.attrs.rdonly;
    b.beneath = spec.ctx_root;
    binds.push_back(std::move(b));
  }
}

// The root, the table's binds (parents before children), then the masks
// over them: shared spaces the policy hides, and ancestors' sessions
// wherever a bind shows them.
Result<void> plan_mounts(const AgentSpec& spec, const PlanOptions& opts, LaunchPlan& plan) {
  const std::string file = spec.name + ".d/mount";
  const mountspec::Table ordered = mountspec::order_for_apply(spec.mounts);
  const SharedSpaces shared(spec, opts);
  std::vector<BindStep> binds;
  std::vector<MaskStep> masks;
  for (const auto& e : ordered) {
    if (reserved_target(e.target, !opts.handoff_dir.empty()))
      return fail(located(file, e.line, 0, EINVAL,
                          "target " + e.target + " is provided by the launcher (fresh /proc, minimal /dev, " +
                              kNotifyDir + (opts.handoff_dir.empty() ? "" : std::string(", ") + kHandoffDir) +
                              "); remove the line"));
    // The mount class of the policy: the line's target, read (and write
    // for rw).
    CTX_TRY(agentdir::check_mount_policy(spec.name, {e}, spec.policy, spec.subject()));
    CTX_TRY(shared.add(e, bind_of(e, opts.parent_mounts), binds, masks));
  }
  // Pins: the directories between a rw bind's root and a mask below it,
  // each bound onto itself right after that bind (before any bind nested
  // below it), by the bind's index; then that bind's view of the agent's
  // sessions.
  std::vector<std::vector<std::string>> pins(binds.size());
  std::vector<std::optional<MaskStep>> session_lists(binds.size());
  auto hide = [&](std::size_t i, const std::string& hidden, const std::string& why) {
    const BindStep& b = binds[i];
    const std::string target = path_join(b.target, path_suffix(hidden, b.source));
    masks.push_back(mask(target, why));
    pin_above(b, target, pins[i]);
  };
  for (const auto& hidden : opts.hidden_dirs)
    for (std::size_t i = 0; i < binds.size(); ++i)
      if (path_is_at_or_under(hidden, binds[i].source)) hide(i, hidden, "an ancestor's sessions");
  // The agent's own session/, wherever a bind shows it, by allow-list:
  // what is not listed at launch is never seen, made or moved there.
  const AgentSessions sessions(spec, opts);
  for (std::size_t i = 0; i < binds.size(); ++i) {
    const BindStep& b = binds[i];
    if (path_is_at_or_under(sessions.dir(), b.source)) {
      const std::string target = path_join(b.target, path_suffix(sessions.dir(), b.source));
      session_lists[i] = sessions.list(target);
      pin_above(b, target, pins[i]);
    } else if (b.line > 0) {
      CTX_TRY(sessions.check_inside(b.source, b.attrs.rdonly ? "" : "make the line ro",
                                    file + ":" + std::to_string(b.line)));
    }
  }
  if (!opts.handoff_dir.empty()) add_handoff(spec, opts.handoff_dir, binds);
  // A root inside the CTX tree lies in the agent's own home: anywhere
  // else there (another agent's home, a tier, the CTX root itself) it
  // would show the durable tree the agent view hides.
  const std::string own_home = path_join(spec.ctx_root, "home/" + std::to_string(spec.owner) + "/agent/" + spec.name);
  if (path_is_at_or_under(spec.root, spec.ctx_root) && !path_is_at_or_under(spec.root, own_home))
    return fail(Error{EACCES, spec.name + ".d/root: " + spec.root +
                                  ": EACCES: lies in the CTX tree outside the agent's own home (" + own_home +
                                  "), which would show the durable tree; put the root in the agent's home or outside "
                                  "the CTX tree"});
  RootStep root;
  root.source = spec.root;
  root.attrs = {.nosuid = true, .nodev = true};
  if (spec.parent && path_is_at_or_under(spec.root, spec.ctx_root)) root.beneath = spec.ctx_root;
  // A root in the agent's own home is the home itself (or a place below
  // it, which must not be in a session the agent may not see).
  std::optional<MaskStep> root_sessions;
  if (path_is_at_or_under(sessions.dir(), spec.root)) {
    if (spec.root == sessions.dir())
      return fail(Error{EACCES, spec.name + ".d/root: " + spec.root +
                                    ": EACCES: is the agent's session directory, which would show the sessions its "
                                    "policy hides; put the root in the agent's home or in one of its sessions"});
    root_sessions = sessions.list(path_join("/", path_suffix(sessions.dir(), spec.root)));
  } else {
    CTX_TRY(sessions.check_inside(spec.root, "put the root elsewhere (it is written)", spec.name + ".d/root"));
  }
  // The table's targets below a list.
  for (std::size_t i = 0; i < binds.size(); ++i) {
    if (binds[i].line == 0) continue;
    if (root_sessions) CTX_TRY(AgentSessions::check_target(*root_sessions, binds[i], file));
    for (std::size_t j = 0; j < i; ++j)
      if (session_lists[j]) CTX_TRY(AgentSessions::check_target(*session_lists[j], binds[i], file));
  }
  plan.mounts.push_back(std::move(root));
  if (root_sessions) plan.mounts.push_back(std::move(*root_sessions));
  pins.resize(binds.size());  // the handoff's binds came after the masks
  session_lists.resize(binds.size());
  for (std::size_t i = 0; i < binds.size(); ++i) {
    std::vector<BindStep> pinned;
    for (const auto& target : pins[i]) pinned.push_back(pin(binds[i], target));
    plan.mounts.push_back(std::move(binds[i]));
    for (auto& p : pinned) plan.mounts.push_back(std::move(p));
    if (session_lists[i]) plan.mounts.push_back(std::move(*session_lists[i]));
  }
  for (auto& m : masks) plan.mounts.push_back(std::move(m));
  return {};
}

// A view step in place of (or below) the root or a bind `from`, with its
// flags and its line.
ViewStep view_step(std::string target, std::string rel, mountspec::Attrs from_attrs, int from_line) {
  ViewStep v;
  v.target = std::move(target);
  v.source = std::move(rel);
  v.attrs = from_attrs;
  v.attrs.rdonly = v.attrs.nosuid = v.attrs.nodev = true;
  v.line = from_line;
  return v;
}

// The agent view over the binds: where a bind would show the durable CTX
// tree, the view shows the agent's part of it. A bind of the CTX root
// itself becomes the view; a bind of a directory above it keeps the rest
// and gets the view at the root's place; a bind of a gated part (a tier,
// agent/, home/<uid>) becomes that part of the view; the agent's own home
// and shared spaces stay binds, with the view at the tool tiers they
// bring. Masks the view makes needless (what it never shows) go.
// One bind of the table that shows the CTX tree (its source holds the
// CTX root or lies in it), appended to `out` as plan_view says.
void view_over_bind(const access::Viewer& who, const PlanOptions& opts, const std::string& ctx, BindStep b,
                    std::vector<MountStep>& out) {
  if (path_is_at_or_under(ctx, b.source)) {
    ViewStep v = view_step(path_join(b.target, path_suffix(ctx, b.source)), "", b.attrs, b.line);
    if (b.source != ctx) out.push_back(std::move(b));
    out.push_back(std::move(v));
    return;
  }
  std::string rel(path_suffix(b.source, ctx));
  if (!access::plain(who, rel)) {
    // A gated part bound at its own place in a whole view, with no flag
    // the view lacks (an owned child's carried mount), adds nothing:
    // the view decides there. One with a flag (noexec) is that part of
    // the view with it.
    ViewStep as_view = view_step(b.target, rel, b.attrs, b.line);
    bool in_place = std::any_of(out.begin(), out.end(), [&](const MountStep& s) {
      const auto* v = std::get_if<ViewStep>(&s);
      return v != nullptr && v->source.empty() && b.target == path_join(v->target, rel) &&
             (as_view.attrs | v->attrs) == v->attrs;
    });
    if (!in_place) out.push_back(std::move(as_view));
    return;
  }
  std::vector<ViewStep> tiers;
  for (const auto& tier : access::tool_tiers_under(rel, opts.shared_spaces)) {
    tiers.push_back(view_step(path_join(b.target, path_suffix(tier, rel)), tier, b.attrs, b.line));
    tiers.back().why = "a tool tier the bind brings";
  }
  out.push_back(std::move(b));
  for (auto& t : tiers) out.push_back(std::move(t));
}

// The agent view over the binds: where a bind would show the durable CTX
// tree, the view shows the agent's part of it. A bind of the CTX root
// itself becomes the view; a bind of a directory above it keeps the rest
// and gets the view at the root's place; a bind of a gated part (a tier,
// agent/, home/<uid>) becomes that part of the view; the agent's own home
// and shared spaces stay binds, with the view at the tool tiers they
// bring. Masks the view makes needless (what it never shows) go.
void plan_view(const AgentSpec& spec, const PlanOptions& opts, LaunchPlan& plan) {
  access::Viewer who;
  who.agent = spec.name;
  who.owner = spec.owner;
  const std::string& ctx = spec.ctx_root;
  std::vector<MountStep> out;
  for (auto& m : plan.mounts) {
    // A root that holds the CTX root (a root file naming "/", say) keeps
    // the rest and gets the view at the CTX root's place, like a bind
    // above it. One inside the CTX tree is the agent's own home's.
    if (const auto* r = std::get_if<RootStep>(&m); r != nullptr && path_is_at_or_under(ctx, r->source)) {
      ViewStep v = view_step(path_join("/", path_suffix(ctx, r->source)), "", r->attrs, 0);
      out.push_back(std::move(m));
      out.push_back(std::move(v));
      continue;
    }
    // A pin stays only where its bind stayed a bind: below the view its
    // directory is the view's (read-only, never renamed), and a pin there
    // would bring back a rw bind the view replaced.
    const auto* b = std::get_if<BindStep>(&m);
    if (b != nullptr && b->pin) {
      const MountStep* c = mountspec::covering_step(out, b->target, {StepKind::bind, StepKind::view});
      if (c != nullptr && std::holds_alternative<BindStep>(*c)) out.push_back(std::move(m));
      continue;
    }
    // Binds the launcher makes itself (an owned child's handoff, a space
    // rebound read-only) are not the table's, and stay.
    if (b == nullptr || b->line == 0 || !(path_is_at_or_under(b->source, ctx) || path_is_at_or_under(ctx, b->source))) {
      out.push_back(std::move(m));
      continue;
    }
    view_over_bind(who, opts, ctx, std::get<BindStep>(std::move(m)), out);
  }
  // A mask below a view covers what the view does not show anyway (and
  // might not even find its mount point there): the view that covers it
  // where it is made (a list of the agent's sessions comes right after
  // its bind, and a bind the view replaced leaves the view there); so
  // does a tier's view below a mask of its space.
  auto needless = [&](std::size_t i) {
    const MountStep& m = out[i];
    if (const auto* k = std::get_if<MaskStep>(&m)) {
      const MountStep* c = mountspec::covering_step(out, i, k->target, {StepKind::bind, StepKind::view});
      return c != nullptr && std::holds_alternative<ViewStep>(*c);
    }
    const auto* v = std::get_if<ViewStep>(&m);
    if (v == nullptr || v->source.empty()) return false;
    return std::any_of(out.begin(), out.end(), [&](const MountStep& s) {
      const auto* k = std::get_if<MaskStep>(&s);
      return k != nullptr && path_is_at_or_under(v->target, k->target);
    });
  };
  std::vector<bool> drop;
  for (std::size_t i = 0; i < out.size(); ++i) drop.push_back(needless(i));
  plan.mounts.clear();
  for (std::size_t i = 0; i < out.size(); ++i)
    if (!drop[i]) plan.mounts.push_back(std::move(out[i]));
}

std::string ctx_home(const AgentSpec& spec) {
  return std::string(kInnerCtxRoot) + "/home/" + std::to_string(spec.owner);
}

void set_env(std::vector<std::string>& env, const std::string& key, const std::string& value) {
  for (auto& kv : env)
    if (kv.compare(0, key.size() + 1, key + "=") == 0) {
      kv = key + "=" + value;
      return;
    }
  env.push_back(key + "=" + value);
}

// A variable of the launcher's that the agent's own env file did not set
// (the owner's value wins).
void set_default_env(const AgentSpec& spec, std::vector<std::string>& env, const std::string& key,
                     const std::string& value) {
  if (std::none_of(spec.env.begin(), spec.env.end(), [&](const auto& kv) { return kv.first == key; }))
    set_env(env, key, value);
}

// What the proxy of a sandbox without network answers every request
// (docs/models.md, "Without network"): the cause, that retrying will not help, and the one
// line of the policy that would change it.
std::string network_refusal(const AgentSpec& spec, bool models) {
  // Named within the CTX tree: the agent learns nothing of the host's paths.
  const std::string file = agentdir::agents_rel(spec.tier_user) + "/" + spec.name + ".d/policy";
  return "ctx-agent-run: EACCES: agent " + spec.name +
         " has no network: its policy grants none, so nothing beyond the sandbox's loopback is reachable "
         "(name lookups fail for the same reason). This is the sandbox's policy, not a fault; retrying will not help. To allow "
         "it, add " +
         policy::missing_rule(spec.subject(), policy::Class::network, "default", "connect") + " to the policy of " +
         spec.name + " (" + file + " in its CTX tree) and launch again." + (models ? " Models are reached through $CTX_MODEL_URL." : "");
}

// The HTTP model endpoint: for an agent whose policy grants a model (its
// token where the agent's SDKs look for their key, unless the agent's own
// env sets one: `ctx check` warns of a real key there; its URL when the
// port is fixed), and for every agent without network, as the HTTP proxy
// that says why nothing is reachable (the loopback addresses bypass it).
void plan_endpoint(const agentdir::AgentSpec& spec, const PlanOptions& opts, LaunchPlan& plan,
                   std::vector<std::string>& env) {
  const std::string subject = spec.subject();
  const auto& rules = spec.policy.rules();
  const bool grants = !subject.empty() && std::any_of(rules.begin(), rules.end(), [&](const policy::Rule& r) {
    return r.subject == subject && r.cls == policy::Class::model && r.permission == "use";
  });
  const bool models = grants && !opts.model_token.empty();
  if (!models && !plan.net_ns) return;
  EndpointPlan e{plan.net_ns ? kEndpointPort : std::uint16_t{0}, models ? opts.model_token : "", ""};
  if (plan.net_ns) {
    const std::string url = "http://127.0.0.1:" + std::to_string(kEndpointPort);
    e.refusal = network_refusal(spec, models);
    if (models) set_env(env, "CTX_MODEL_URL", url);
    for (const char* key : {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"}) set_default_env(spec, env, key, url);
    for (const char* key : {"NO_PROXY", "no_proxy"}) set_default_env(spec, env, key, "localhost,127.0.0.1,::1");
  }
  plan.endpoint = std::move(e);
  if (!models) return;
  set_env(env, "CTX_MODEL_TOKEN", opts.model_token);
  for (const char* key : {"ANTHROPIC_API_KEY", "OPENAI_API_KEY"}) set_default_env(spec, env, key, opts.model_token);
}

// The caller's terminal type and language, where their values are plain.
void pass_terminal_env(const std::vector<std::string>& caller_env, std::vector<std::string>& env) {
  for (std::string_view key : kTerminalEnv)
    for (const std::string& kv : caller_env)
      if (kv.size() > key.size() && kv.compare(0, key.size(), key) == 0 && kv[key.size()] == '=') {
        const std::string value = kv.substr(key.size() + 1);
        if (terminal_env_value_ok(value)) set_env(env, std::string(key), value);
        break;
      }
}

}  // namespace

Result<void> check_session_policy(const AgentSpec& spec, const std::string& session, bool exists) {
  if (spec.parent) return {};
  const std::string subject = spec.subject();
  const std::string file = spec.ctx_root + "/" + agentdir::agents_rel(spec.tier_user) + "/" + spec.name + ".d/policy";
  for (const char* perm : {"write", "resume"}) {
    if (!exists && std::string_view(perm) == "resume") break;
    if (!subject.empty() && spec.policy.allows(subject, policy::Class::session, session, perm)) continue;
    return fail(Error{EACCES,
                      file + ": EACCES: " + (exists ? "resuming" : "creating") + " session " + session + " needs " +
                          policy::missing_rule(subject, policy::Class::session, session, perm) +
                          "; add that line to the policy (the agent was not started)",
                      "session_policy"});
  }
  return {};
}

Result<void> check_session_space(const AgentSpec& spec, const std::string& space, bool space_exists) {
  const std::string dir = spec.ctx_root + "/shared/" + space;
  if (!space_exists)
    return fail(Error{ENOENT,
                      "--session-space " + space + ": " + dir +
                          ": ENOENT: no such shared space; make it with 'ctx init --shared " + space +
                          "' (the agent was not started)",
                      "session_space"});
  const std::string subject = spec.subject();
  if (!subject.empty() && spec.policy.allows(subject, policy::Class::shared, space, "write")) return {};
  return fail(Error{EACCES,
                    spec.ctx_root + "/agent/" + spec.name + ".d/policy: EACCES: a session in shared space " + space +
                        " needs " + policy::missing_rule(subject, policy::Class::shared, space, "write") +
                        "; add that line to the policy (the agent was not started)",
                    "session_policy"});
}

std::string session_dir_rel(std::uint32_t owner, const std::string& name, const std::string& space) {
  if (space.empty()) return "home/" + sessions_rel(owner, name);
  return "shared/" + space + "/agent/" + name + "/session";
}

std::string home_session(const LaunchPlan& plan) { return plan.session_space.empty() ? plan.session : ""; }

bool terminal_env_value_ok(std::string_view value) {
  if (value.empty() || value.size() > 128) return false;
  for (char c : value)
    if (!std::isalnum(static_cast<unsigned char>(c)) && std::string_view("._+-@:").find(c) == std::string_view::npos)
      return false;
  return true;
}

Result<LaunchPlan> make_plan(const AgentSpec& spec, const Caller& caller, const PlanOptions& opts) {
  LaunchPlan plan;
  plan.name = spec.name;
  plan.session = opts.session;
  plan.session_space = opts.session_space;
  plan.ctx_root = spec.ctx_root;
  plan.owner = spec.owner;
  plan.tier_user = spec.tier_user;
  plan.ancestor_types = spec.ancestor_types;
  plan.root = spec.root;
  plan.cwd = spec.cwd;
  plan.hostname = spec.name;
  CTX_TRY_ASSIGN(plan.ids, plan_ids(spec, caller));

  // Network: loopback only unless the policy allows network:default connect.
  const std::string subject = spec.subject();
  plan.net_ns = subject.empty() || !spec.policy.allows(subject, policy::Class::network, "default", "connect");
  plan.clone_flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP;
  if (plan.net_ns) plan.clone_flags |= CLONE_NEWNET;
  if (plan.ids.user_ns && !plan.ids.user_ns_after_mounts) plan.clone_flags |= CLONE_NEWUSER;
  if (plan.ids.user_ns_after_mounts) plan.unshare_flags = CLONE_NEWUSER;

  CTX_TRY(plan_mounts(spec, opts, plan));

  // Environment: built from nothing (startup steps 2 and 3).
  const std::string home = ctx_home(spec);
  std::string ctx_path;
  if (spec.path_set) {
    for (const auto& d : spec.path) ctx_path += (ctx_path.empty() ? "" : ":") + d;
  } else {
    ctx_path = std::string(kInnerCtxRoot) + "/tool:" + home + "/tool";
  }
  std::vector<std::string> env{
      std::string("CTX_ROOT=") + kInnerCtxRoot,
      "CTX_HOME=" + home,
      "CTX_PATH=" + ctx_path,
      "HOME=" + home + "/agent/" + spec.name,
      std::string("PATH=") + kDefaultPath,
  };
  if (opts.terminal) pass_terminal_env(opts.caller_env, env);
  for (const auto& [k, v] : spec.env) set_env(env, k, v);
  set_env(env, "CTX_AGENT", spec.name);
  set_env(env, "CTX_SESSION", opts.session);
  if (!opts.session_space.empty()) {
    // docs/abi.md, "Shared sessions": the space always; the directory
    // where the planned mounts show it (a mask over it hides it).
    set_env(env, "CTX_SESSION_SPACE", opts.session_space);
    if (auto inner = mountspec::inner_path_of(
            plan.mounts, spec.ctx_root,
            path_join(spec.ctx_root, session_dir_rel(spec.owner, spec.name, opts.session_space) + "/" + opts.session)))
      set_env(env, "CTX_SESSION_DIR", *inner);
  }
  set_env(env, "NOTIFY_SOCKET", kNotifyPath);
  set_env(env, "LISTEN_FDS", "1");
  set_env(env, "LISTEN_FDNAMES", spec.name + ".sock");
  if (!opts.handoff_dir.empty()) set_env(env, "CTX_HANDOFF", kHandoffDir);
  plan_endpoint(spec, opts, plan, env);
  plan.env = std::move(env);
  plan.notify_target = kNotifyPath;
  plan.terminal = opts.terminal;
  plan.limits = spec.limits;
  plan.shm_size = spec.limits && spec.limits->shm_max ? *spec.limits->shm_max : kDefaultShmSize;
  // The agent view where the table shows the CTX tree, then what every
  // sandbox gets: the mount plan is complete here.
  if (opts.view) plan_view(spec, opts, plan);
  if (opts.view && opts.static_view)
    for (auto& m : plan.mounts)
      if (auto* v = std::get_if<ViewStep>(&m)) v->built = mountspec::static_build(v->attrs);
  mountspec::append_fixed_steps(plan.mounts, plan.shm_size, kNotifyDir, kNotifyPath, kSupervisorPath);
  plan.nproc = spec.limits && spec.limits->nproc_max ? std::stoull(*spec.limits->nproc_max) : kDefaultNproc;

  if (!opts.command.empty()) {
    plan.argv = opts.command;
  } else {
    // A user agent's entry is in its .d/: home/<U>/agent/<name> is its
    // home's state directory (seed 000 "Agent Home").
    plan.argv = {spec.tier_user
                     ? path_join(kInnerCtxRoot, agentdir::agents_rel(spec.tier_user) + "/" + spec.name + ".d/entry")
                     : std::string(kInnerCtxRoot) + "/agent/" + spec.name};
  }
  return plan;
}

namespace {

bool has_view(const LaunchPlan& plan, bool built) {
  return std::any_of(plan.mounts.begin(), plan.mounts.end(), [&](const MountStep& m) {
    const auto* v = std::get_if<ViewStep>(&m);
    return v != nullptr && v->built.has_value() == built;
  });
}

}  // namespace

bool serves_view(const LaunchPlan& plan) { return has_view(plan, false); }
bool builds_view(const LaunchPlan& plan) { return has_view(plan, true); }

bool lists_home_sessions(const LaunchPlan& plan) {
  return std::any_of(plan.mounts.begin(), plan.mounts.end(), [](const MountStep& m) {
    const auto* k = std::get_if<MaskStep>(&m);
    return k != nullptr && !k->keep.empty();
  });
}

}  // namespace ctx::launcher
