#include "ctx/init.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
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

// The control files of a first agent (see run_new).
std::vector<std::pair<std::string, std::string>> control_files(const std::string& ctx_root, const std::string& name,
                                                               uid_t uid, gid_t gid, const std::string& root,
                                                               const TemplatePlan* tp) {
  const std::string home_rel = "home/" + std::to_string(uid) + "/agent/" + name;
  std::string mount = "# source\ttarget\tro|rw\toptions: one mount a line (docs/abi.md)\n";
  mount += "/usr\t/usr\tro\trbind,nodev\n";
  for (const char* etc : {"/etc/alternatives", "/etc/ssl", "/etc/ca-certificates"})
    if (auto d = sys::open(sys::at_cwd, etc, sys::Open::path_only | sys::Open::no_symlinks))
      mount += std::string(etc) + "\t" + etc + "\tro\tbind,nosuid,nodev\n";
  mount += ctx_root + "\t/ctx\tro\trbind,nosuid,nodev\n";
  mount += path_join(ctx_root, home_rel) + "\t/ctx/" + home_rel + "\trw\tbind,nosuid,nodev\n";
  if (tp) mount += tp->mount;
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
  std::vector<std::pair<std::string, std::string>> files{
      {"owner", std::to_string(uid) + "\n"},
      {"gid", std::to_string(gid) + "\n"},
      {"label", type + "\n"},
      {"iso", "userns\n"},
      {"root", root + "\n"},
      {"cwd", tp ? "/work\n" : "/ctx/" + home_rel + "\n"},
      {"path", "/ctx/tool\n/ctx/home/" + std::to_string(uid) + "/tool\n"},
      {"mount", mount},
      {"policy", policy},
  };
  if (auto g = groups_file(uid, gid); !g.empty()) files.emplace_back("groups", g);
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

// The template's home and model files. A model entry that exists is
// kept whole, with the key its .d/env may hold.
Result<void> write_template(int top, const std::string& ctx_root, const TemplatePlan& p,
                            std::vector<std::string>& made) {
  for (const auto& d : p.home_dirs) CTX_TRY(make_below(top, ctx_root, d, made));
  for (const auto& f : p.home_files) CTX_TRY(write_new(top, ctx_root, f, made));
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
  if (auto r = sys::copy_file_new(*self, bin->get(), "ctx", 0755); r) {
    made.push_back(ctx_root + "/bin/ctx");
  } else if (r.error().code != EEXIST) {
    return error(r.error().with_context(ctx_root + "/bin/ctx"));
  }
  for (const auto& m : made) std::printf("created %s\n", m.c_str());
  std::printf("%s is a CTX tree for uid %s%s; next: ctx new NAME --ctx-root %s\n", ctx_root.c_str(), uid.c_str(),
              made.empty() ? " (it was already)" : "", ctx_root.c_str());
  return 0;
}

int run_new(const std::string& ctx_root, const std::string& name, const NewOptions& opt) {
  if (auto issue = agent_name_issue(name)) return error(Error{EINVAL, name + ": EINVAL: " + *issue});
  auto agents = sys::open(sys::at_cwd, ctx_root + "/agent", sys::Open::directory);
  if (!agents)
    return error(Error{agents.error().code, ctx_root + "/agent: " + errno_name(agents.error().code) +
                                                ": not a CTX tree; make one first: ctx init --ctx-root " + ctx_root});
  for (const std::string& n : {name, name + ".d"})
    if (auto st = sys::stat_at(agents->get(), n); !st || *st)
      return error(Error{EEXIST, ctx_root + "/agent/" + n + ": EEXIST: the agent exists; choose another name"});
  const uid_t uid = ::getuid();
  const gid_t gid = ::getgid();
  std::optional<TemplatePlan> tp;
  if (opt.tmpl) {
    auto p = template_plan(ctx_root, name, uid, opt);
    if (!p) return error(p.error());
    tp = std::move(*p);
  }
  std::vector<std::string> made;
  // Its home: data, cache, log, session, and a root with the merged-/usr
  // links (the loader and /bin/sh of the /usr mount).
  auto top = sys::open(sys::at_cwd, ctx_root, sys::Open::directory);
  if (!top) return error(top.error());
  const std::string home_rel = "home/" + std::to_string(uid) + "/agent/" + name;
  for (const char* d : {"root", "data", "cache", "log", "session"})
    if (auto r = make_below(top->get(), ctx_root, home_rel + "/" + d, made); !r) return error(r.error());
  auto root =
      sys::open(sys::at_cwd, path_join(ctx_root, home_rel + "/root"), sys::Open::directory | sys::Open::no_follow);
  if (!root) return error(root.error());
  for (const char* l : {"bin", "sbin", "lib", "lib32", "lib64", "libx32"})
    if (sys::open(sys::at_cwd, std::string("/usr/") + l, sys::Open::path_only | sys::Open::no_symlinks))
      if (auto r = sys::make_symlink_at(std::string("usr/") + l, root->get(), l); !r && r.error().code != EEXIST)
        return error(r.error());
  if (tp)
    if (auto r = write_template(top->get(), ctx_root, *tp, made); !r) return error(r.error());
  // The control files, complete under a temporary name, then the runtime
  // and the directory renamed into place without replacing anything.
  const std::string root_path = path_join(ctx_root, home_rel + "/root");
  auto tmp = sys::make_temp_dir_at(agents->get(), "." + name + ".d.new.", 0755);
  if (!tmp) return error(tmp.error());
  auto undo = [&](const Error& e) {
    (void)sys::remove_tree_at(agents->get(), *tmp);
    return error(e);
  };
  auto dir = sys::open(agents->get(), *tmp, sys::Open::directory | sys::Open::no_follow);
  if (!dir) return undo(dir.error());
  for (const auto& [file, text] : control_files(ctx_root, name, uid, gid, root_path, tp ? &*tp : nullptr))
    if (auto r = sys::atomic_replace(dir->get(), file, text, 0644); !r) return undo(r.error());
  if (auto r = sys::atomic_replace(dir->get(), "runtime.new", tp ? tp->runtime : runtime_script(name), 0755); !r) return undo(r.error());
  if (auto r = sys::rename_noreplace_at(dir->get(), "runtime.new", agents->get(), name); !r) return undo(r.error());
  if (auto r = sys::rename_noreplace_at(agents->get(), *tmp, agents->get(), name + ".d"); !r) {
    (void)sys::remove_at(agents->get(), name);
    return undo(r.error());
  }
  made.push_back(ctx_root + "/agent/" + name);
  made.push_back(ctx_root + "/agent/" + name + ".d");
  for (const auto& m : made) std::printf("created %s\n", m.c_str());
  std::printf("launch it: ctx-agent-run --ctx-root %s %s\n", ctx_root.c_str(), name.c_str());
  if (tp)
    std::printf("its model %s: put your API key after CTX_UPSTREAM_KEY= in %s.d/env\n", tp->model_name.c_str(),
                path_join(ctx_root, tp->models.back().rel).c_str());
  return 0;
}

}  // namespace ctx::helper
