#include "launcher/sandbox/preflight.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <deque>

#include "base/path.hpp"
#include "launcher/records/as_owner.hpp"
#include "launcher/sandbox/sources.hpp"
#include "mountspec/geometry.hpp"
#include "sys/file.hpp"
#include "sys/mountinfo.hpp"
#include "sys/resolve.hpp"

namespace ctx::launcher {

namespace {

constexpr int kMaxLinks = 40;

const SymlinkStep* planned_symlink(const LaunchPlan& plan, const std::string& inner) {
  for (const auto& s : plan.mounts)
    if (const auto* l = std::get_if<SymlinkStep>(&s); l != nullptr && l->target == inner) return l;
  return nullptr;
}

// Whether a step makes something at or below `inner` (a fresh file
// system's mount points exist because the steps make them).
bool made_by_steps(const LaunchPlan& plan, const std::string& inner) {
  for (const auto& s : plan.mounts)
    if (!std::holds_alternative<SealStep>(s) && path_is_at_or_under(mountspec::target_of(s), inner)) return true;
  return false;
}

std::vector<std::string> components(const std::string& p) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < p.size();) {
    std::size_t j = p.find('/', i);
    if (j == std::string::npos) j = p.size();
    if (j > i) out.push_back(p.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

std::string parent_of(const std::string& p) {
  auto i = p.rfind('/');
  return i == 0 || i == std::string::npos ? "/" : p.substr(0, i);
}

struct Resolved {
  std::string inner;                ///< after every symlink
  std::optional<std::string> host;  ///< the host file that shows it (nullopt: made by a step)
};

// `inner` as the sandbox would resolve it: symlinks followed inside the
// planned tree (an absolute one from its root), each component looked up
// where the plan shows it.
Result<Resolved> resolve(const LaunchPlan& plan, const std::string& inner) {
  std::deque<std::string> todo;
  for (auto& c : components(inner)) todo.push_back(std::move(c));
  std::string cur = "/";
  int links = 0;
  auto follow = [&](const std::string& link) -> Result<void> {
    if (++links > kMaxLinks) return fail(Error{ELOOP, inner + ": ELOOP: too many symbolic links in the sandbox"});
    auto cs = components(link);
    todo.insert(todo.begin(), cs.begin(), cs.end());
    if (!link.empty() && link[0] == '/') cur = "/";
    return {};
  };
  while (!todo.empty()) {
    std::string c = todo.front();
    todo.pop_front();
    if (c == ".") continue;
    if (c == "..") {
      cur = parent_of(cur);
      continue;
    }
    const std::string next = path_join(cur, c);
    if (const SymlinkStep* l = planned_symlink(plan, next)) {
      CTX_TRY(follow(l->link));
      continue;
    }
    auto host = mountspec::host_path_of(plan.mounts, plan.ctx_root, next);
    if (!host) {
      if (!made_by_steps(plan, next)) return fail(Error{ENOENT, next + ": ENOENT"});
      cur = next;
      continue;
    }
    auto st = sys::stat_at(AT_FDCWD, *host);
    if (!st) return fail(Error{st.error().code, next + " (" + *host + "): " + errno_name(st.error().code)});
    if (!*st && made_by_steps(plan, next)) {  // a mount point the launch makes
      cur = next;
      continue;
    }
    if (!*st) return fail(Error{ENOENT, next + " (" + *host + "): ENOENT"});
    if (S_ISLNK((*st)->mode)) {
      auto to = sys::read_link_at(AT_FDCWD, *host);
      if (!to) return fail(to.error());
      CTX_TRY(follow(*to));
      continue;
    }
    if (!todo.empty() && !S_ISDIR((*st)->mode)) return fail(Error{ENOTDIR, next + " (" + *host + "): ENOTDIR"});
    cur = next;
  }
  return Resolved{cur, mountspec::host_path_of(plan.mounts, plan.ctx_root, cur)};
}

std::string env_path_of(const std::vector<std::string>& env) {
  for (const auto& kv : env)
    if (kv.rfind("PATH=", 0) == 0) return kv.substr(5);
  return "";
}

// The directories of a PATH value, empty entries left out.
std::vector<std::string> path_dirs(const std::string& path) {
  std::vector<std::string> out;
  for (std::size_t start = 0; start <= path.size();) {
    std::size_t colon = path.find(':', start);
    std::string dir = path.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    if (!dir.empty()) out.push_back(dir);
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  return out;
}

// Where `name` is: itself when it holds a '/', else the first directory
// of `path` that has it, by `exists`.
std::optional<std::string> find_program(const std::string& name, const std::string& path,
                                        const std::function<bool(const std::string&)>& exists) {
  if (name.find('/') != std::string::npos) return exists(name) ? std::optional(name) : std::nullopt;
  for (const auto& d : path_dirs(path))
    if (exists(d + "/" + name)) return d + "/" + name;
  return std::nullopt;
}

std::string merged_usr_hint(const std::string& root) {
  return "the root " + root + " needs the merged-/usr links (ln -s usr/bin " + root +
         "/bin, and likewise sbin, lib, lib64) and a mount of /usr, or a mount that shows it";
}

void check_runtime(const LaunchPlan& plan, std::vector<Error>& out) {
  if (plan.argv.empty()) return;
  std::string prog = plan.argv[0];
  if (prog.find('/') == std::string::npos) {
    // Found through PATH at exec, as the sandbox's execvpe would.
    auto found = find_program(prog, env_path_of(plan.env), [&](const std::string& p) {
      auto r = resolve(plan, p);
      if (!r) return false;
      if (!r->host) return true;  // made by the launcher
      auto st = sys::stat_at(AT_FDCWD, *r->host);
      return st && *st;
    });
    if (!found) {
      auto hint = runtime_host_hint(plan);
      out.push_back(Error{ENOENT, "runtime " + prog + ": execve: ENOENT: in none of the sandbox's PATH directories (" +
                                      env_path_of(plan.env) + ")" + (hint ? "; " + *hint : "")});
      return;
    }
    prog = *found;
  }
  auto r = resolve(plan, prog);
  if (!r) {
    out.push_back(Error{r.error().code, "runtime " + prog + ": execve " + prog + ": " + errno_name(r.error().code) +
                                            " (" + r.error().msg + ": not in the planned sandbox)"});
    return;
  }
  if (!r->host) return;  // made by the launcher
  auto fd = sys::open(sys::at_cwd, *r->host, sys::Open::no_follow | sys::Open::nonblock);
  auto st = fd ? sys::stat_fd(fd->get()) : Result<sys::FileStat>(fail(fd.error()));
  if (!st || !S_ISREG(st->mode) || !sys::access_fd(fd->get(), X_OK)) {
    out.push_back(Error{EACCES, "runtime " + prog + ": execve " + prog + ": EACCES (" + *r->host +
                                    " is not an executable file for the agent; chmod +x it)"});
    return;
  }
  std::string head(4096, '\0');
  auto n = sys::read_at(fd->get(), head.data(), head.size(), 0);
  if (!n) return;
  head.resize(*n);
  RuntimeLookup look{[&](const std::string& p) { return resolve(plan, p).has_value(); },
                     [](const std::string& p) {
                       auto there = sys::stat_at(AT_FDCWD, p);
                       return there && *there;
                     },
                     env_path_of(plan.env)};
  if (auto e = runtime_issue(prog, *r->host, head, plan.root, look))
    out.push_back(*e);
}

void check_sources(const LaunchPlan& plan, std::vector<Error>& out) {
  std::optional<std::vector<sys::MountEntry>> host_mounts;
  if (plan.ids.privileged)
    if (auto m = sys::mount_table()) host_mounts = std::move(*m);
  const std::vector<sys::MountEntry>* seen_in = host_mounts ? &*host_mounts : nullptr;
  for (const auto& s : plan.mounts) {
    if (const auto* root = std::get_if<RootStep>(&s); root != nullptr && !root->fresh)
      if (auto r = open_root_source(*root, seen_in); !r) out.push_back(r.error().with_context(plan.name + ".d/root"));
    if (const auto* b = std::get_if<BindStep>(&s))
      if (auto r = open_bind_source(*b, seen_in); !r)
        out.push_back(r.error().with_context(mount_line_context(plan, *b)));
  }
}

}  // namespace

std::string elf_interpreter(std::string_view h) {
  auto byte = [&](std::size_t o) { return static_cast<std::uint64_t>(static_cast<unsigned char>(h[o])); };
  auto le = [&](std::size_t o, int n) {
    std::uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = v << 8 | byte(o + static_cast<std::size_t>(i));
    return v;
  };
  if (h.size() < 64 || h.substr(0, 4) != "\177ELF" || byte(4) != 2 || byte(5) != 1) return "";  // ELF64 LE
  const std::uint64_t phoff = le(32, 8), phentsize = le(54, 2), phnum = le(56, 2);
  if (phentsize < 56) return "";
  for (std::uint64_t i = 0; i < phnum && i < 256; ++i) {
    const std::uint64_t ph = phoff + i * phentsize;
    if (ph + 56 > h.size()) return "";
    if (le(ph, 4) != 3) continue;  // PT_INTERP
    const std::uint64_t off = le(ph + 8, 8), size = le(ph + 32, 8);
    if (size == 0 || off + size > h.size()) return "";
    std::string s(h.substr(off, size));
    return s.substr(0, s.find('\0'));
  }
  return "";
}

namespace {

// The words after a missing interpreter: a mount is missing when the host
// has it, the runtime names nothing when the host does not either.
std::string missing_fix(const std::string& what, const std::string& host_file, const std::string& root,
                        const RuntimeLookup& look, const std::optional<std::string>& on_host) {
  if (!look.on_host) return merged_usr_hint(root);
  if (on_host) return "the host has " + *on_host + ": " + merged_usr_hint(root);
  return "the host has no " + what + " either: install it, or change the #! line of " + host_file;
}

// The program `#!/usr/bin/env [-S] [VAR=value...] NAME` runs: NAME, or ""
// when the line names none.
std::string env_program(std::string_view args) {
  std::size_t at = 0;
  while (at < args.size()) {
    std::size_t b = args.find_first_not_of(" \t", at);
    if (b == std::string_view::npos) return "";
    std::size_t e = args.find_first_of(" \t", b);
    std::string word(args.substr(b, e == std::string_view::npos ? std::string_view::npos : e - b));
    at = e == std::string_view::npos ? args.size() : e;
    if (word[0] == '-' || word.find('=') != std::string::npos) continue;
    return word;
  }
  return "";
}

}  // namespace

std::optional<Error> runtime_issue(const std::string& prog, const std::string& host, std::string_view head,
                                   const std::string& root, const RuntimeLookup& look) {
  const std::string what = "runtime " + prog + ": ";
  std::string loader;
  if (head.substr(0, 2) == "#!") {
    std::string_view line = head.substr(0, head.find('\n'));
    if (!line.empty() && line.back() == '\r')
      return Error{ENOENT, what +
                               "its #! line ends in CR (DOS line ends), so the kernel looks for an interpreter "
                               "whose name ends in CR; convert it: sed -i 's/\\r$//' " +
                               host};
    std::size_t b = line.find_first_not_of(" \t", 2);
    if (b == std::string_view::npos) return std::nullopt;
    std::size_t e = line.find_first_of(" \t", b);
    std::string interp(line.substr(b, e - b));
    if (interp.empty() || interp[0] != '/') return std::nullopt;
    if (!look.in_sandbox(interp)) {
      // Where the host has it, the launch's own words (the sandbox cannot
      // tell): a mount is missing.
      const bool nowhere = look.on_host && !look.on_host(interp);
      return Error{ENOENT, what + "#!" + interp + ": " + interp + " not found in the sandbox; " +
                               (nowhere ? missing_fix(interp, host, root, look, std::nullopt) : merged_usr_hint(root))};
    }
    // #!/usr/bin/env NAME: env finds NAME through the sandbox's PATH.
    if (interp.size() < 4 || interp.compare(interp.size() - 4, 4, "/env") != 0 || e == std::string_view::npos)
      return std::nullopt;
    const std::string name = env_program(line.substr(e));
    if (name.empty() || find_program(name, look.path, look.in_sandbox)) return std::nullopt;
    std::optional<std::string> there;
    if (look.on_host) there = find_program(name, look.path, look.on_host);
    return Error{ENOENT, what + "#!" + interp + " " + name + ": " + name +
                             (name.find('/') != std::string::npos
                                  ? " not found in the sandbox; "
                                  : " is in none of the sandbox's PATH directories (" + look.path + "); ") +
                             missing_fix(name, host, root, look, there)};
  }
  loader = elf_interpreter(head);
  if (loader.empty() || look.in_sandbox(loader)) return std::nullopt;
  return Error{ENOENT, what + "its loader " + loader + " is not found in the sandbox; " + merged_usr_hint(root)};
}

std::optional<std::string> runtime_host_hint(const LaunchPlan& plan) {
  if (plan.argv.empty()) return std::nullopt;
  const std::string& prog = plan.argv[0];
  const std::string path = env_path_of(plan.env);
  auto on_host = [](const std::string& p) {
    auto st = sys::stat_at(AT_FDCWD, p);
    return st && *st && !S_ISDIR((*st)->mode);
  };
  // The sandbox has it after all (then its interpreter failed, which the
  // sandbox said): nothing to add.
  auto shown = [&](const std::string& inner) {
    auto h = mountspec::host_path_of(plan.mounts, plan.ctx_root, inner);
    return h && on_host(*h);
  };
  if (find_program(prog, path, shown)) return std::nullopt;
  auto there = find_program(prog, path, on_host);
  if (!there) return std::nullopt;
  return "the host has " + *there + ", which no line of " + plan.name +
         ".d/mount shows in the sandbox: add one that shows it (its directory, or /usr), or run a program the "
         "mounts show";
}

std::vector<Error> preflight(const LaunchPlan& plan) {
  std::vector<Error> out;
  auto as_owner = AsOwner::enter(plan.ids);
  if (!as_owner) return {as_owner.error()};
  check_sources(plan, out);
  if (!out.empty()) return out;  // what follows would only repeat these
  if (!plan.cwd.empty()) {
    auto c = resolve(plan, plan.cwd);
    int code = c ? 0 : c.error().code;
    if (c && c->host)
      if (auto st = sys::stat_at(AT_FDCWD, *c->host); st && *st && !S_ISDIR((*st)->mode)) code = ENOTDIR;
    if (code != 0)
      out.push_back(Error{code, plan.name + ".d/cwd: chdir " + plan.cwd + ": " + errno_name(code) +
                                    ": no such directory in the sandbox; create it where the mounts show it, or "
                                    "change cwd"});
  }
  check_runtime(plan, out);
  return out;
}

}  // namespace ctx::launcher
