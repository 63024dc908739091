#include "ctx/init.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "agentdir/mount_rules.hpp"
#include "base/names.hpp"
#include "base/path.hpp"
#include "base/text.hpp"
#include "ctx/new_options.hpp"
#include "ctx/tool.hpp"
#include "mountspec/table.hpp"
#include "policy/policy.hpp"
#include "sys/file.hpp"
#include "sys/identity.hpp"
#include "sys/process.hpp"
#include "sys/resolve.hpp"
#include "sys/socket.hpp"

namespace ctx::helper {

namespace {

int error(const Error& e) {
  std::fprintf(stderr, "ctx: %s\n", printable(e.msg).c_str());
  return 1;
}

// Makes rel below dirfd (each missing component), recording what it made.
Result<UniqueFd> make_below(int dirfd, const std::string& at, const std::string& rel, std::vector<std::string>& made) {
  UniqueFd cur;
  int from = dirfd;
  std::string path = at;
  std::size_t i = 0;
  while (i <= rel.size()) {
    std::size_t j = rel.find('/', i);
    if (j == std::string::npos) j = rel.size();
    const std::string c = rel.substr(i, j - i);
    i = j + 1;
    if (c.empty()) continue;
    CTX_TRY_ASSIGN(bool now, sys::make_dir_if_missing_at(from, c, 0755));
    CTX_TRY_ASSIGN(cur, sys::open(from, c, sys::Open::directory | sys::Open::no_follow));
    from = cur.get();
    path = path_join(path, c);
    if (now) made.push_back(path);
  }
  return cur;
}

// Opens `abs`, making the directories that are missing (0755), each one
// named in `made`. The part that exists is taken as it is.
Result<UniqueFd> make_dirs(const std::string& abs, std::vector<std::string>& made) {
  std::string base = abs;
  while (base != "/" && !sys::open(sys::at_cwd, base, sys::Open::directory))
    base = base.substr(0, std::max<std::size_t>(base.rfind('/'), 1));
  CTX_TRY_ASSIGN(UniqueFd fd, sys::open(sys::at_cwd, base, sys::Open::directory));
  if (base == abs) return fd;
  return make_below(fd.get(), base, std::string(path_suffix(abs, base)), made);
}

// The caller's supplementary groups besides its primary gid: an
// unprivileged launch keeps them and the agent's `groups` must list them
// exactly (launcher/plan/plan.cpp), so a first agent lists them. Root's launch
// chooses the groups: none.
std::string groups_file(uid_t uid, gid_t gid) {
  std::string out;
  if (uid == 0) return out;
  auto creds = sys::current_creds();
  if (!creds) return out;
  std::set<std::uint32_t> gs(creds->groups.begin(), creds->groups.end());
  gs.erase(gid);
  for (auto g : gs) out += std::to_string(g) + "\n";
  return out;
}

// The label type of a new agent: its name with '-' as '_' (a type has
// no '-'), then "_t"; "a_" first when the name begins with a digit (a
// type begins with a letter); at most 64 bytes.
std::string label_type(const std::string& name) {
  std::string t = name;
  std::replace(t.begin(), t.end(), '-', '_');
  if (!t.empty() && !std::isalpha(static_cast<unsigned char>(t.front()))) t = "a_" + t;
  return t.substr(0, 62) + "_t";
}

// Whom a new agent is for (see run_new): the caller, or with --owner a
// user whose tier holds it.
struct ForWhom {
  uid_t uid = 0;
  gid_t gid = 0;
  std::string name;                 ///< the user's name (--owner only)
  std::string groups;               ///< the groups file: supplementary gids, one a line
  std::vector<std::uint32_t> gids;  ///< the user's supplementary gids (--owner only)
  bool user_tier = false;           ///< home/<uid>/agent/<name>.d with its entry (--owner)
};

// The lines of a first agent's mount table (see run_new): the defaults,
// the template's, then each --mount.
std::string mount_table(const std::string& ctx_root, const std::string& name, uid_t uid, const TemplatePlan* tp,
                        const std::vector<MountOption>& extra) {
  const std::string home_rel = "home/" + std::to_string(uid) + "/agent/" + name;
  std::string mount = "# source\ttarget\tro|rw\toptions: one mount a line (docs/abi.md)\n";
  mount += "/usr\t/usr\tro\trbind,nodev\n";
  for (const char* etc : {"/etc/alternatives", "/etc/ssl", "/etc/ca-certificates"})
    if (auto d = sys::open(sys::at_cwd, etc, sys::Open::path_only | sys::Open::no_symlinks))
      mount += std::string(etc) + "\t" + etc + "\tro\tbind,nosuid,nodev\n";
  mount += ctx_root + "\t/ctx\tro\trbind,nosuid,nodev\n";
  mount += path_join(ctx_root, home_rel) + "\t/ctx/" + home_rel + "\trw\tbind,nosuid,nodev\n";
  if (tp) mount += tp->mount;
  for (const auto& m : extra) mount += mount_line(m);
  return mount;
}

// The control files of a first agent (see run_new).
std::vector<std::pair<std::string, std::string>> control_files(const std::string& ctx_root, const std::string& name,
                                                               const ForWhom& who, const std::string& root,
                                                               const TemplatePlan* tp, const NewOptions& opt,
                                                               const std::vector<MountOption>& mounts) {
  const uid_t uid = who.uid;
  const std::string home_rel = "home/" + std::to_string(uid) + "/agent/" + name;
  const std::string mount = mount_table(ctx_root, name, uid, tp, mounts);
  // Every mount line needs its rule (docs/abi-policy.md, "What each class
  // gates"): read its target, and write it for a rw line.
  const std::string type = label_type(name);
  std::string policy = "# " + name +
                       "'s policy v0: one rule a line, default deny (docs/abi-policy.md). For example:\n"
                       "# allow " +
                       type +
                       " tool:fs.read execute\n"
                       "# Its session `default`: made by the first launch (write), continued by the next (resume).\n"
                       "allow " +
                       type + " session:default write\nallow " + type +
                       " session:default resume\n"
                       "# Each line of the mount file needs its mount rules:\n";
  auto mt = mountspec::parse(name + ".d/mount", mount);
  if (mt)
    for (const auto& r : agentdir::mount_rules(*mt, type)) policy += policy::format_rule(r) + "\n";
  if (tp) policy += tp->policy;
  policy += grant_rules(type, opt.tools, opt.models);
  std::vector<std::pair<std::string, std::string>> files{
      {"owner", std::to_string(uid) + "\n"},
      {"gid", std::to_string(who.gid) + "\n"},
      {"label", type + "\n"},
      {"iso", "userns\n"},
      {"root", root + "\n"},
      {"cwd", tp ? "/work\n" : "/ctx/" + home_rel + "\n"},
      {"path", "/ctx/tool\n/ctx/home/" + std::to_string(uid) + "/tool\n"},
      {"mount", mount},
      {"policy", policy},
  };
  if (!who.groups.empty()) files.emplace_back("groups", who.groups);
  if (tp) {
    files.emplace_back("env", tp->env);
    files.emplace_back("model", tp->model);
  }
  return files;
}

std::string runtime_script(const std::string& name) {
  return "#!/bin/sh\n"
         "# " +
         name +
         "'s runtime: ctx-agent-run runs it inside the sandbox. Replace it with\n"
         "# your agent; CTX_AGENT, CTX_HOME, CTX_PATH and CTX_SESSION are set.\n"
         "echo \"$CTX_AGENT is running in its sandbox: uid $(id -u), cwd $(pwd)\"\n";
}

// The template's plan for agent `name`: its CLI found and its project
// resolved, nothing made yet (bad input changes nothing).
Result<TemplatePlan> template_plan(const std::string& ctx_root, const std::string& name, uid_t uid,
                                   const NewOptions& opt) {
  CTX_TRY_ASSIGN(CliInstall cli, find_cli(*opt.tmpl, opt.agents_dir, opt.path));
  const std::string home_rel = "home/" + std::to_string(uid) + "/agent/" + name;
  std::string project = path_join(ctx_root, home_rel + "/work");
  if (!opt.project.empty()) {
    // The real path: the launcher opens mount sources without following
    // a symbolic link.
    auto real = sys::real_path(opt.project);
    if (!real)
      return fail(Error{real.error().code, "--project " + opt.project + ": " + errno_name(real.error().code) +
                                          ": no such directory; name the project's directory"});
    if (auto d = sys::open(sys::at_cwd, *real, sys::Open::directory); !d)
      return fail(Error{d.error().code, "--project " + opt.project + ": " + errno_name(d.error().code) +
                                       ": not a directory you can open; name the project's directory"});
    project = *real;
  }
  TemplateInput in{ctx_root, name, label_type(name), uid, cli, project};
  if (sys::open(sys::at_cwd, project + "/.git", sys::Open::directory | sys::Open::no_follow)) {
    const bool hooks = sys::open(sys::at_cwd, project + "/.git/hooks", sys::Open::directory | sys::Open::no_follow) &&
                       sys::open(sys::at_cwd, project + "/.git/config", sys::Open::path_only | sys::Open::no_follow);
    in.git = hooks ? TemplateInput::Git::config_hooks : TemplateInput::Git::whole;
  }
  TemplatePlan p = plan_template(*opt.tmpl, in);
  if (opt.project.empty()) p.home_dirs.push_back(home_rel + "/work");
  return p;
}

// Writes f (its path relative to the CTX root) unless it exists: whole
// under a temporary name, then renamed in without replacing anything.
Result<void> write_new(int top, const std::string& ctx_root, const TemplateFile& f, std::vector<std::string>& made) {
  CTX_TRY_ASSIGN(UniqueFd dir, make_below(top, ctx_root, std::string(path_dirname(f.rel)), made));
  const std::string name(path_basename(f.rel));
  const std::string tmp = "." + name + ".new";
  CTX_TRY(sys::atomic_replace(dir.get(), tmp, f.text, f.mode));
  if (auto r = sys::rename_noreplace_at(dir.get(), tmp, dir.get(), name); !r) {
    (void)sys::remove_at(dir.get(), tmp);
    if (r.error().code != EEXIST) return fail(r.error().with_context(path_join(ctx_root, f.rel)));
    return {};
  }
  made.push_back(path_join(ctx_root, f.rel));
  return {};
}

// The template's files in the agent's home.
Result<void> write_template_home(int top, const std::string& ctx_root, const TemplatePlan& p,
                                 std::vector<std::string>& made) {
  for (const auto& d : p.home_dirs) CTX_TRY(make_below(top, ctx_root, d, made));
  for (const auto& f : p.home_files) CTX_TRY(write_new(top, ctx_root, f, made));
  return {};
}

// The template's model files in the system tier. A model entry that
// exists is kept whole, with the key its .d/env may hold.
Result<void> write_template_model(int top, const std::string& ctx_root, const TemplatePlan& p,
                                  std::vector<std::string>& made) {
  const std::string& entry = p.models.back().rel;
  CTX_TRY_ASSIGN(auto st, sys::stat_at(top, entry));
  if (st) {
    std::printf("kept %s (it exists)\n", path_join(ctx_root, entry).c_str());
    return {};
  }
  for (const auto& f : p.models) CTX_TRY(write_new(top, ctx_root, f, made));
  return {};
}

}  // namespace

int run_init(const std::string& ctx_root, const std::vector<std::string>& shared) {
  for (const auto& p : shared)
    if (auto issue = space_name_issue(p)) return error(Error{EINVAL, "--shared " + p + ": EINVAL: " + *issue});
  std::vector<std::string> made;
  auto root = make_dirs(ctx_root, made);
  if (!root) return error(root.error());
  const std::string uid = std::to_string(::getuid());
  for (const char* rel : {"agent", "tool", "model", "shared", "bin"})
    if (auto r = make_below(root->get(), ctx_root, rel, made); !r) return error(r.error());
  for (const char* tier : {"agent", "tool", "model"})
    if (auto r = make_below(root->get(), ctx_root, "home/" + uid + "/" + tier, made); !r) return error(r.error());
  // The root's status (docs/abi.md "The root's `status` file"):
  // "ok" when missing, never replacing one that exists.
  if (auto st = sys::stat_at(root->get(), "status"); !st) {
    return error(st.error().with_context(ctx_root + "/status"));
  } else if (!*st) {
    if (auto r = sys::atomic_replace(root->get(), ".status.new", "ok\n", 0644); !r)
      return error(r.error().with_context(ctx_root + "/status"));
    if (auto r = sys::rename_noreplace_at(root->get(), ".status.new", root->get(), "status"); r) {
      made.push_back(ctx_root + "/status");
    } else {
      (void)sys::remove_at(root->get(), ".status.new");
      if (r.error().code != EEXIST) return error(r.error().with_context(ctx_root + "/status"));
    }
  }
  // A shared space as docs/abi.md "Shared spaces" lays it out: agent/ for its
  // shared sessions, data/, and the queue's states.
  for (const auto& p : shared)
    for (const char* rel : {"agent", "data", "queue/inbox", "queue/pending", "queue/lease", "queue/claimed",
                            "queue/done", "queue/failed", "queue/result"})
      if (auto r = make_below(root->get(), ctx_root, "shared/" + p + "/" + rel, made); !r) return error(r.error());
  auto bin = sys::open(root->get(), "bin", sys::Open::directory | sys::Open::no_follow);
  if (!bin) return error(bin.error());
  auto self = sys::read_link_at(AT_FDCWD, "/proc/self/exe");
  if (!self) return error(self.error());
  // bin/ctx: the small program of tool and model calls (ctx/call_main.cpp)
  // with this helper beside it as bin/ctx-helper, where the small one is
  // installed (beside this program in a build, else the package's); this
  // helper alone at bin/ctx otherwise. What exists is left as it is.
  std::vector<std::pair<std::string, std::string>> copies;  // (source, name in bin/)
  std::string call;
  for (const std::string& c : {std::string(path_dirname(*self)) + "/ctx-call", std::string(CTX_CALL_PATH)})
    if (auto st = sys::stat_at(AT_FDCWD, c); st && *st && S_ISREG((*st)->mode)) {
      call = c;
      break;
    }
  if (call.empty()) {
    copies.emplace_back(*self, "ctx");
  } else {
    copies.emplace_back(call, "ctx");
    copies.emplace_back(*self, kFullHelperName);
  }
  for (const auto& [from, name] : copies) {
    if (auto r = sys::copy_file_new(from, bin->get(), name, 0755); r) {
      made.push_back(ctx_root + "/bin/" + name);
    } else if (r.error().code != EEXIST) {
      return error(r.error().with_context(ctx_root + "/bin/" + name));
    }
  }
  for (const auto& m : made) std::printf("created %s\n", m.c_str());
  std::printf("%s is a CTX tree for uid %s%s; next: ctx new NAME --ctx-root %s\n", ctx_root.c_str(), uid.c_str(),
              made.empty() ? " (it was already)" : "", ctx_root.c_str());
  return 0;
}

namespace {

// --owner's user (see run_new), or the caller when spec is empty.
Result<ForWhom> resolve_owner(const std::string& spec) {
  ForWhom w{::getuid(), ::getgid(), "", groups_file(::getuid(), ::getgid()), {}, false};
  if (spec.empty()) return w;
  const bool digits =
      spec.size() <= 10 && std::all_of(spec.begin(), spec.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
  auto e = digits ? sys::lookup_user(static_cast<std::uint32_t>(std::stoull(spec))) : sys::lookup_user_name(spec);
  if (!e) return fail(e.error().with_context("--owner " + spec));
  if (!*e)
    return fail(Error{ENOENT, "--owner " + spec + ": ENOENT: no such user on this machine; name a user of " +
                                  "getent passwd, by name or uid"});
  if ((*e)->uid == 0)
    return fail(Error{EINVAL, "--owner " + spec + ": EINVAL: root's agents are system agents; leave --owner out"});
  if (::getuid() != 0 && (*e)->uid != ::getuid())
    return fail(Error{EPERM, "--owner " + spec +
                                 ": EPERM: only root makes an agent for another user; run ctx new "
                                 "as root, or leave --owner out"});
  CTX_TRY_ASSIGN(std::vector<std::uint32_t> all, sys::user_groups((*e)->uid, (*e)->gid));
  std::set<std::uint32_t> gs(all.begin(), all.end());
  gs.erase((*e)->gid);
  std::string groups;
  for (auto g : gs) groups += std::to_string(g) + "\n";
  return ForWhom{(*e)->uid, (*e)->gid, (*e)->name, groups, std::vector<std::uint32_t>(gs.begin(), gs.end()), true};
}

// The rights a new agent is written with: the owner's, when root makes
// it for another user, so the kernel checks each step as the owner's and
// what is made is the owner's; else the caller's own.
sys::MakeAs rights_of(const ForWhom& who) {
  if (!who.user_tier || ::getuid() != 0) return std::nullopt;
  return sys::Creds{who.uid, who.gid, who.gids};
}

// The --mount, --tool and --model values checked whole (bad input
// changes nothing): the mounts parsed, each source looked up with the
// owner's rights (the launch opens it with them).
Result<std::vector<MountOption>> check_options(const std::string& ctx_root, const std::string& name, const ForWhom& who,
                                               const TemplatePlan* tp, const NewOptions& opt) {
  CTX_TRY(check_grant_names(opt.tools, opt.models));
  std::vector<std::string> taken;
  if (auto base = mountspec::parse(name + ".d/mount", mount_table(ctx_root, name, who.uid, tp, {})))
    for (const auto& e : *base) taken.push_back(e.target);
  std::vector<MountOption> out;
  for (const auto& spec : opt.mounts) {
    CTX_TRY_ASSIGN(MountOption m, parse_mount_option(spec));
    CTX_TRY(check_mount_target(m, taken));
    CTX_TRY_ASSIGN(sys::FsIdScope scope, sys::FsIdScope::enter(rights_of(who)));
    CTX_TRY(check_mount_source(m));
    taken.push_back(m.target);
    out.push_back(std::move(m));
  }
  return out;
}

// The owner's tier directory home/<uid>/agent, made the owner's where
// missing; someone else's is refused, since the owner's own launch binds
// the agent's socket there.
Result<UniqueFd> user_tier_dir(int top, const std::string& ctx_root, const ForWhom& who,
                               std::vector<std::string>& made) {
  const std::string uid = std::to_string(who.uid);
  const std::string home = path_join(ctx_root, "home/" + uid);
  auto not_theirs = [&](const std::string& path, uid_t by) {
    return Error{EPERM, path + ": EPERM: owned by uid " + std::to_string(by) + ", not the agent's owner " + uid +
                            ", whose own launch makes the agent's socket there; chown " + uid + ":" +
                            std::to_string(who.gid) + " " + path + ", or choose another owner"};
  };
  CTX_TRY_ASSIGN(UniqueFd homes, make_below(top, ctx_root, "home", made));
  CTX_TRY_ASSIGN(bool now, sys::make_dir_if_missing_at(homes.get(), uid, 0755));
  if (now) {
    CTX_TRY(sys::chown_at(homes.get(), uid, sys::Ownership{who.uid, who.gid}));
    made.push_back(home);
  }
  CTX_TRY_ASSIGN(UniqueFd h, sys::open(homes.get(), uid, sys::Open::directory | sys::Open::no_follow));
  CTX_TRY_ASSIGN(sys::FileStat hst, sys::stat_fd(h.get()));
  if (hst.uid != who.uid && hst.uid != 0) return fail(not_theirs(home, hst.uid));
  // In a home of root's the owner cannot make it; root does, then gives it.
  const sys::MakeAs as = hst.uid == who.uid ? rights_of(who) : std::nullopt;
  CTX_TRY_ASSIGN(bool made_agent, sys::make_dir_if_missing_at(h.get(), "agent", 0755, as));
  if (made_agent && !as) CTX_TRY(sys::chown_at(h.get(), "agent", sys::Ownership{who.uid, who.gid}));
  if (made_agent) made.push_back(home + "/agent");
  CTX_TRY_ASSIGN(UniqueFd dir, sys::open(h.get(), "agent", sys::Open::directory | sys::Open::no_follow));
  CTX_TRY_ASSIGN(sys::FileStat st, sys::stat_fd(dir.get()));
  if (st.uid != who.uid) return fail(not_theirs(home + "/agent", st.uid));
  return dir;
}

}  // namespace

namespace {

// The agent's home: data, cache, log, session, and a root with the
// merged-/usr links (the loader and /bin/sh of the /usr mount).
Result<void> write_home(int top, const std::string& ctx_root, const std::string& home_rel,
                        std::vector<std::string>& made) {
  for (const char* d : {"root", "data", "cache", "log", "session"})
    CTX_TRY(make_below(top, ctx_root, home_rel + "/" + d, made));
  CTX_TRY_ASSIGN(UniqueFd root, sys::open(sys::at_cwd, path_join(ctx_root, home_rel + "/root"), sys::Open::directory | sys::Open::no_follow));
  for (const char* l : {"bin", "sbin", "lib", "lib32", "lib64", "libx32"})
    if (sys::open(sys::at_cwd, std::string("/usr/") + l, sys::Open::path_only | sys::Open::no_symlinks))
      if (auto r = sys::make_symlink_at(std::string("usr/") + l, root.get(), l); !r && r.error().code != EEXIST)
        return fail(r.error());
  return {};
}

// The control files, complete under a temporary name, then the runtime
// (a system agent's entry beside it; a user agent's `entry` inside) and
// the directory renamed into place without replacing anything.
Result<void> write_dot_d(int tier, const std::string& name,
                         const std::vector<std::pair<std::string, std::string>>& files, const std::string& runtime,
                         bool user_tier) {
  CTX_TRY_ASSIGN(std::string tmp, sys::make_temp_dir_at(tier, "." + name + ".d.new.", 0755));
  auto undo = [&](const Error& e) -> Result<void> {
    (void)sys::remove_tree_at(tier, tmp);
    return fail(e);
  };
  auto dir = sys::open(tier, tmp, sys::Open::directory | sys::Open::no_follow);
  if (!dir) return undo(dir.error());
  for (const auto& [file, text] : files)
    if (auto r = sys::atomic_replace(dir->get(), file, text, 0644); !r) return undo(r.error());
  if (auto r = sys::atomic_replace(dir->get(), user_tier ? "entry" : "runtime.new", runtime, 0755); !r)
    return undo(r.error());
  // A user agent's log, the owner's from the start: a root launch appends
  // to it, where a log it made would be root's and refuse the owner's.
  if (user_tier)
    if (auto r = sys::atomic_replace(dir->get(), "log", "", 0644); !r) return undo(r.error());
  if (!user_tier)
    if (auto r = sys::rename_noreplace_at(dir->get(), "runtime.new", tier, name); !r) return undo(r.error());
  if (auto r = sys::rename_noreplace_at(tier, tmp, tier, name + ".d"); !r) {
    if (!user_tier) (void)sys::remove_at(tier, name);
    return undo(r.error());
  }
  return {};
}

// Refuses a name the tier holds already (EEXIST). In a user tier
// home/<uid>/agent/<name> is the agent's home, which may exist.
Result<void> check_free(int tier, const std::string& tier_path, const std::string& name, bool user_tier) {
  std::vector<std::string> names{name + ".d"};
  if (!user_tier) names.insert(names.begin(), name);
  for (const std::string& n : names) {
    auto st = sys::stat_at(tier, n);
    if (!st || *st) return fail(Error{EEXIST, tier_path + "/" + n + ": EEXIST: the agent exists; choose another name"});
  }
  return {};
}

}  // namespace

int run_new(const std::string& ctx_root, const std::string& name, const NewOptions& opt) {
  if (auto issue = agent_name_issue(name)) return error(Error{EINVAL, name + ": EINVAL: " + *issue});
  auto agents = sys::open(sys::at_cwd, ctx_root + "/agent", sys::Open::directory);
  if (!agents)
    return error(Error{agents.error().code, ctx_root + "/agent: " + errno_name(agents.error().code) +
                                                ": not a CTX tree; make one first: ctx init --ctx-root " + ctx_root});
  auto who = resolve_owner(opt.owner);
  if (!who) return error(who.error());
  const bool user_tier = who->user_tier;
  const std::string home_rel = "home/" + std::to_string(who->uid) + "/agent/" + name;
  const std::string tier_path = path_join(ctx_root, user_tier ? std::string(path_dirname(home_rel)) : "agent");
  if (!user_tier) {
    if (auto r = check_free(agents->get(), tier_path, name, false); !r) return error(r.error());
  } else if (auto t = sys::open(sys::at_cwd, tier_path, sys::Open::directory | sys::Open::no_follow)) {
    if (auto r = check_free(t->get(), tier_path, name, true); !r) return error(r.error());
  }
  std::optional<TemplatePlan> tp;
  if (opt.tmpl) {
    auto p = template_plan(ctx_root, name, who->uid, opt);
    if (!p) return error(p.error());
    tp = std::move(*p);
  }
  auto mounts = check_options(ctx_root, name, *who, tp ? &*tp : nullptr, opt);
  if (!mounts) return error(mounts.error());
  std::vector<std::string> made;
  auto top = sys::open(sys::at_cwd, ctx_root, sys::Open::directory);
  if (!top) return error(top.error());
  auto tier = user_tier ? user_tier_dir(top->get(), ctx_root, *who, made) : std::move(agents);
  if (!tier) return error(tier.error());
  // What is the agent's is written with the owner's rights (rights_of).
  auto owned = [&](const std::function<Result<void>()>& write) -> Result<void> {
    CTX_TRY_ASSIGN(sys::FsIdScope scope, sys::FsIdScope::enter(rights_of(*who)));
    return write();
  };
  auto r = owned([&]() -> Result<void> {
    CTX_TRY(write_home(top->get(), ctx_root, home_rel, made));
    if (tp) CTX_TRY(write_template_home(top->get(), ctx_root, *tp, made));
    return {};
  });
  if (r && tp) r = write_template_model(top->get(), ctx_root, *tp, made);
  if (r)
    r = owned([&]() -> Result<void> {
      const auto files = control_files(ctx_root, name, *who, path_join(ctx_root, home_rel + "/root"),
                                       tp ? &*tp : nullptr, opt, *mounts);
      return write_dot_d(tier->get(), name, files, tp ? tp->runtime : runtime_script(name), user_tier);
    });
  if (!r) return error(r.error());
  if (!user_tier) made.push_back(tier_path + "/" + name);
  made.push_back(tier_path + "/" + name + ".d");
  for (const auto& m : made) std::printf("created %s\n", m.c_str());
  if (user_tier)
    std::printf("launch it as %s: ctx-agent-run --ctx-root %s %s; as root: ctx-agent-run --ctx-root %s --user %u %s\n",
                who->name.c_str(), ctx_root.c_str(), name.c_str(), ctx_root.c_str(), who->uid, name.c_str());
  else
    std::printf("launch it: ctx-agent-run --ctx-root %s %s\n", ctx_root.c_str(), name.c_str());
  if (tp)
    std::printf("its model %s: put your API key after CTX_UPSTREAM_KEY= in %s.d/env\n", tp->model_name.c_str(),
                path_join(ctx_root, tp->models.back().rel).c_str());
  return 0;
}

std::optional<std::uint32_t> owner_uid(const std::string& spec) {
  auto who = resolve_owner(spec);
  if (!who || !who->user_tier) return std::nullopt;
  return who->uid;
}

}  // namespace ctx::helper
