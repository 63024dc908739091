#include "agentdir/load.hpp"

#include <sys/stat.h>

#include <charconv>
#include <cstdio>
#include <set>

#include "agentdir/json_syntax.hpp"
#include "agentdir/tier.hpp"
#include "base/names.hpp"
#include "base/path.hpp"
#include "base/text.hpp"
#include "cgroup/limits.hpp"
#include "sys/file.hpp"
#include "sys/identity.hpp"
#include "sys/resolve.hpp"

namespace ctx::agentdir {

std::string_view to_string(Iso i) {
  switch (i) {
    case Iso::shared: return "shared";
    case Iso::uid: return "uid";
    case Iso::userns: return "userns";
  }
  return "?";
}

std::string_view to_string(Life l) {
  switch (l) {
    case Life::owned: return "owned";
  }
  return "?";
}

const std::vector<std::string_view>& known_control_files() {
  static const std::vector<std::string_view> files{
      "owner", "uid",  "gid",   "groups", "label",  "iso",    "parent", "life", "root",      "cwd",
      "env",   "path", "mount", "model",  "policy", "status", "pid",    "log",  "meta.json", "limits",
      "log.1",  // the launcher's previous log, once `log` reached its cap
      "entry",     // a user agent's executable (never read; unknown in the system tier)
      "instance",  // the launcher's per-session status and pid (docs/abi.md, "Instances")
  };
  return files;
}

namespace {

constexpr std::uint32_t kMaxId = 4294967294u;  // (uid_t)-1 is "no change" in setresuid

// Collects errors; every parser below reports through it and goes on.
class Diag {
 public:
  explicit Diag(std::string_view name) : prefix_(std::string(name) + ".d/") {}
  std::string file(std::string_view f) const { return prefix_ + std::string(f); }
  void add(Error e) { errors_.push_back(std::move(e)); }
  void at(std::string_view f, int line, int col, int code, const std::string& what) {
    add(located(file(f), line, col, code, what));
  }
  bool ok() const { return errors_.empty(); }
  std::vector<Error>& errors() { return errors_; }

 private:
  std::string prefix_;
  std::vector<Error> errors_;
};

std::optional<std::uint32_t> parse_id(std::string_view s) {
  if (s.empty() || s.size() > 10 || (s.size() > 1 && s[0] == '0')) return std::nullopt;
  std::uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<std::uint64_t>(c - '0');
  }
  if (v > kMaxId) return std::nullopt;
  return static_cast<std::uint32_t>(v);
}

const std::string* find(const ControlFiles& files, std::string_view name) {
  auto it = files.find(name);
  return it == files.end() ? nullptr : &it->second;
}

// The one value of a single-value file, or nullopt (error recorded).
std::optional<Line> single(Diag& d, std::string_view f, const std::string& content) {
  auto v = single_value(d.file(f), content);
  if (!v) {
    d.add(v.error());
    return std::nullopt;
  }
  return *v;
}

std::optional<std::vector<Line>> items(Diag& d, std::string_view f, const std::string& content) {
  auto lines = split_lines(d.file(f), content);
  if (!lines) {
    d.add(lines.error());
    return std::nullopt;
  }
  return list_items(*lines);
}

std::optional<std::uint32_t> id_file(Diag& d, std::string_view f, const std::string& content) {
  auto v = single(d, f, content);
  if (!v) return std::nullopt;
  auto id = parse_id(v->text);
  if (!id)
    d.at(f, v->number, 1, EINVAL,
         std::string(f) + " must be a decimal number from 0 to 4294967294, without sign or leading zeros");
  return id;
}

std::optional<std::string> abs_file(Diag& d, std::string_view f, const std::string& content) {
  auto v = single(d, f, content);
  if (!v) return std::nullopt;
  if (auto issue = abs_path_issue(v->text)) {
    std::string what = issue->what == "path must be absolute (start with '/')"
                           ? std::string(f) + " must be an absolute path"
                           : std::string(f) + ": " + issue->what;
    d.at(f, v->number, static_cast<int>(issue->offset) + 1, EINVAL, what);
    return std::nullopt;
  }
  return std::string(v->text);
}

bool valid_env_key(std::string_view k) {
  if (k.empty()) return false;
  if (!((k[0] >= 'A' && k[0] <= 'Z') || (k[0] >= 'a' && k[0] <= 'z') || k[0] == '_')) return false;
  for (char c : k)
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  return true;
}

bool level_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         std::string_view("_.,:-").find(c) != std::string_view::npos;
}

void parse_label(Diag& d, const std::string& content, AgentSpec& s) {
  auto v = single(d, "label", content);
  if (!v) return;
  std::string_view t = v->text;
  Label l;
  if (t.find(':') == std::string_view::npos) {
    if (auto e = type_name_issue(t)) return d.at("label", v->number, 1, EINVAL, "label " + *e);
    l.type = std::string(t);
    s.label = l;
    return;
  }
  std::string_view parts[3];
  std::size_t start = 0;
  for (int i = 0; i < 3; ++i) {
    std::size_t c = t.find(':', start);
    if (c == std::string_view::npos)
      return d.at("label", v->number, 1, EINVAL, "label must be a bare type (coder_t) or user:role:type:level");
    parts[i] = t.substr(start, c - start);
    start = c + 1;
  }
  std::string_view level = t.substr(start);
  const char* what[] = {"user", "role", "type"};
  for (int i = 0; i < 3; ++i)
    if (auto e = type_name_issue(parts[i]))
      return d.at("label", v->number, column_of(t, parts[i]), EINVAL, std::string("label ") + what[i] + ": " + *e);
  if (level.empty()) return d.at("label", v->number, static_cast<int>(start) + 1, EINVAL, "label level is empty");
  for (std::size_t i = 0; i < level.size(); ++i)
    if (!level_char(level[i]))
      return d.at("label", v->number, static_cast<int>(start + i) + 1, EINVAL,
                  "label level may contain only letters, digits and '_.,:-'");
  l.user = std::string(parts[0]);
  l.role = std::string(parts[1]);
  l.type = std::string(parts[2]);
  l.level = std::string(level);
  s.label = l;
}

void parse_parent(Diag& d, const std::string& content, AgentSpec& s) {
  auto v = single(d, "parent", content);
  if (!v) return;
  std::string_view t = v->text;
  Parent p;
  std::size_t start = 0;
  int field = 0;
  const char* keys[] = {"agent:", "session:", "run:"};
  while (start <= t.size()) {
    std::size_t sp = t.find(' ', start);
    std::string_view tok = t.substr(start, sp == std::string_view::npos ? std::string_view::npos : sp - start);
    int col = static_cast<int>(start) + 1;
    int k = -1;
    for (int i = field; i < 3; ++i)
      if (tok.substr(0, std::string_view(keys[i]).size()) == keys[i]) k = i;
    if (k < 0)
      return d.at("parent", v->number, col, EINVAL,
                  field == 0 ? "parent must begin with agent:<name>"
                             : "expected session:<name> then run:<id> after agent:<name>, in that order, once each");
    if (field == 0 && k != 0) return d.at("parent", v->number, col, EINVAL, "parent must begin with agent:<name>");
    std::string_view val = tok.substr(std::string_view(keys[k]).size());
    std::optional<std::string> issue;
    if (k == 0) issue = agent_name_issue(val);
    if (k == 1) issue = space_name_issue(val);
    if (k == 2) {
      issue = val.empty() ? std::optional<std::string>("run id is empty") : std::nullopt;
      for (char c : val)
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
          issue = "run id may contain only letters, digits and '_-'";
    }
    if (issue)
      return d.at("parent", v->number, col + static_cast<int>(std::string_view(keys[k]).size()), EINVAL, *issue);
    (k == 0 ? p.agent : k == 1 ? p.session : p.run) = std::string(val);
    field = k + 1;
    if (sp == std::string_view::npos) break;
    start = sp + 1;
  }
  s.parent = p;
}

void parse_env(Diag& d, const std::string& content, AgentSpec& s) {
  auto list = items(d, "env", content);
  if (!list) return;
  std::set<std::string, std::less<>> seen;
  for (const Line& l : *list) {
    auto eq = l.text.find('=');
    if (eq == std::string_view::npos) {
      d.at("env", l.number, 1, EINVAL, "expected KEY=VALUE");
      continue;
    }
    std::string_view key = l.text.substr(0, eq);
    if (!valid_env_key(key)) {
      d.at("env", l.number, 1, EINVAL,
           "invalid variable name '" + std::string(key) + "' (letters, digits, '_'; not starting with a digit)");
      continue;
    }
    if (key.substr(0, 4) == "CTX_") {
      d.at("env", l.number, 1, EINVAL, std::string(key) + " is reserved: the launcher sets CTX_* itself");
      continue;
    }
    if (!seen.insert(std::string(key)).second) {
      d.at("env", l.number, 1, EINVAL, std::string(key) + " is set twice");
      continue;
    }
    s.env.emplace_back(std::string(key), std::string(l.text.substr(eq + 1)));
  }
}

void parse_path(Diag& d, const std::string& content, AgentSpec& s) {
  auto list = items(d, "path", content);
  if (!list) return;
  s.path_set = true;
  auto check = [&](std::string_view dir, const Line& l) {
    if (auto issue = abs_path_issue(dir)) {
      d.at("path", l.number, column_of(l.text, dir) + static_cast<int>(issue->offset), EINVAL,
           issue->what == "path must be absolute (start with '/')" ? "tool directory must be an absolute path"
                                                                   : "tool directory: " + issue->what);
      return;
    }
    s.path.emplace_back(dir);
  };
  // One colon-separated line is accepted for compatibility with the
  // CTX_PATH form.
  if (list->size() == 1 && list->front().text.find(':') != std::string_view::npos) {
    std::string_view t = list->front().text;
    std::size_t start = 0;
    while (true) {
      std::size_t c = t.find(':', start);
      check(t.substr(start, c == std::string_view::npos ? std::string_view::npos : c - start), list->front());
      if (c == std::string_view::npos) break;
      start = c + 1;
    }
    return;
  }
  for (const Line& l : *list) check(l.text, l);
}

}  // namespace

Result<AgentSpec> build_spec(std::string_view name, std::string_view ctx_root, const ControlFiles& files,
                             const PrimaryGidLookup& primary_gid, std::vector<Error>* all) {
  Diag d(name);
  AgentSpec s;
  s.name = std::string(name);
  s.ctx_root = std::string(ctx_root);
  if (auto e = agent_name_issue(name)) d.add(Error{EINVAL, std::string(name) + ": EINVAL: " + *e});
  if (auto e = abs_path_issue(ctx_root))
    d.add(Error{EINVAL, "ctx root " + std::string(ctx_root) + ": EINVAL: " + e->what});

  std::optional<std::uint32_t> owner;
  if (auto* c = find(files, "owner")) {
    owner = id_file(d, "owner", *c);
  } else {
    d.at("owner", 0, 0, ENOENT, "missing; write the owning user's uid (one decimal number)");
  }
  if (owner) s.owner = *owner;
  s.uid = s.owner;
  if (auto* c = find(files, "uid"))
    if (auto v = id_file(d, "uid", *c)) s.uid = *v;
  if (auto* c = find(files, "gid")) {
    if (auto v = id_file(d, "gid", *c)) s.gid = *v;
  } else if (owner) {
    auto g = primary_gid ? primary_gid(*owner) : std::nullopt;
    if (g) {
      s.gid = *g;
    } else {
      d.at("gid", 0, 0, ENOENT,
           "missing, and owner " + std::to_string(*owner) +
               " has no passwd entry to take the primary gid from; write the gid");
    }
  }
  if (auto* c = find(files, "groups"))
    if (auto list = items(d, "groups", *c)) {
      std::set<std::uint32_t> seen;
      for (const Line& l : *list) {
        auto g = parse_id(l.text);
        if (!g) {
          d.at("groups", l.number, 1, EINVAL, "group must be a decimal gid from 0 to 4294967294");
        } else if (!seen.insert(*g).second) {
          d.at("groups", l.number, 1, EINVAL, "group " + std::to_string(*g) + " listed twice");
        } else {
          s.groups.push_back(*g);
        }
      }
    }
  if (auto* c = find(files, "label")) parse_label(d, *c, s);
  if (auto* c = find(files, "iso"))
    if (auto v = single(d, "iso", *c)) {
      if (v->text == "shared") {
        s.iso = Iso::shared;
      } else if (v->text == "uid") {
        s.iso = Iso::uid;
      } else if (v->text == "userns") {
        s.iso = Iso::userns;
      } else {
        d.at("iso", v->number, 1, EINVAL, "iso must be shared, uid or userns, not '" + std::string(v->text) + "'");
      }
    }
  if (auto* c = find(files, "parent")) parse_parent(d, *c, s);
  if (auto* c = find(files, "life"))
    if (auto v = single(d, "life", *c)) {
      if (v->text == "detached") {
        d.at("life", v->number, 1, EINVAL,
             "detached is reserved by the spec for a future explicit policy grant; v1 supports only owned");
      } else if (v->text != "owned") {
        d.at("life", v->number, 1, EINVAL, "life must be owned, not '" + std::string(v->text) + "'");
      }
    }
  s.root = path_join(ctx_root, "home/" + std::to_string(s.owner) + "/agent/" + std::string(name) + "/root");
  if (auto* c = find(files, "root"))
    if (auto v = abs_file(d, "root", *c)) s.root = *v;
  s.cwd = "/";
  if (auto* c = find(files, "cwd"))
    if (auto v = abs_file(d, "cwd", *c)) s.cwd = *v;
  if (auto* c = find(files, "env")) parse_env(d, *c, s);
  if (auto* c = find(files, "path")) parse_path(d, *c, s);
  if (auto* c = find(files, "mount")) {
    auto t = mountspec::parse(d.file("mount"), *c, &d.errors());
    if (t) s.mounts = std::move(*t);
  }
  if (auto* c = find(files, "model"))
    if (auto list = items(d, "model", *c)) {
      std::set<std::string, std::less<>> seen;
      for (const Line& l : *list) {
        if (auto e = model_name_issue(l.text)) {
          d.at("model", l.number, 1, EINVAL, *e);
        } else if (!seen.insert(std::string(l.text)).second) {
          d.at("model", l.number, 1, EINVAL, "model " + std::string(l.text) + " listed twice");
        } else {
          s.models.emplace_back(l.text);
        }
      }
    }
  if (auto* c = find(files, "policy")) {
    auto p = policy::Policy::parse(d.file("policy"), *c, &d.errors());
    if (p) s.policy = std::move(*p);
  }
  if (auto* c = find(files, "limits")) {
    auto l = cgroup::parse_limits(d.file("limits"), *c, &d.errors());
    if (l) s.limits = std::move(*l);
  }
  // meta.json: validated, never stored, so no decision can depend on it.
  if (auto* c = find(files, "meta.json")) {
    auto lines = split_lines(d.file("meta.json"), *c);
    if (!lines) {
      d.add(lines.error());
    } else if (auto r = check_json(d.file("meta.json"), *c); !r) {
      d.add(r.error());
    }
  }
  if (!d.ok()) {
    if (all != nullptr) all->insert(all->end(), d.errors().begin(), d.errors().end());
    return fail(d.errors().front());
  }
  return s;
}

Result<Parent> parse_parent(std::string_view name, std::string_view content) {
  Diag d(name);
  AgentSpec s;
  parse_parent(d, std::string(content), s);
  if (!d.ok()) return fail(d.errors().front());
  if (!s.parent) return fail(Error{EINVAL, d.file("parent") + ": EINVAL: parent is empty"});
  return *s.parent;
}

PrimaryGidLookup passwd_primary_gid() {
  return [](std::uint32_t uid) -> std::optional<std::uint32_t> {
    auto u = sys::lookup_user(uid);
    if (!u || !*u) return std::nullopt;
    return (*u)->gid;
  };
}

Result<DirListing> read_control_files(std::string_view ctx_root, std::string_view name, std::vector<Error>* all,
                                      std::optional<std::uint32_t> user) {
  std::string dname = std::string(name) + ".d";
  auto report = [&](Error e) -> Unexpected<Error> {
    if (all != nullptr) all->push_back(e);
    return fail(std::move(e));
  };
  if (auto e = agent_name_issue(name)) return report(Error{EINVAL, std::string(name) + ": EINVAL: " + *e});
  const std::string agents_path = path_join(ctx_root, agents_rel(user));
  DirListing out;
  out.user = user;
  Result<UniqueFd> agents = fail(ENOENT, "");
  if (!user) {
    agents = sys::open(sys::at_cwd, agents_path, sys::Open::directory);
    if (!agents && agents.error().code == ENOENT)
      return report(Error{ENOENT, agents_path + ": ENOENT: " + std::string(ctx_root) +
                                      " is not a CTX root (it has no agent/ directory); name yours with --ctx-root "
                                      "DIR or CTX_ROOT=DIR"});
  } else {
    // home, <U>, agent: one name at a time, never through a symlink.
    agents = sys::open(sys::at_cwd, path_join(ctx_root, "home"), sys::Open::directory | sys::Open::no_follow);
    const std::string rel[] = {"home/" + std::to_string(*user), agents_rel(user)};
    for (const std::string& r : rel) {
      if (!agents) break;
      agents = sys::open(agents->get(), std::string(path_basename(r)), sys::Open::directory | sys::Open::no_follow);
      if (!agents) break;
      auto st = sys::stat_fd(agents->get());
      if (!st) return report(st.error().with_context(path_join(ctx_root, r)));
      out.parents.emplace_back(r, *st);
    }
    if (!agents && (agents.error().code == ENOTDIR || agents.error().code == ELOOP))
      return report(Error{agents.error().code, agents_path + ": " + errno_name(agents.error().code) +
                                                   ": not a directory (a symlink on the way to a user agent is "
                                                   "refused)"});
  }
  if (!agents) return report(agents.error().with_context(agents_path));
  auto dir = sys::open(agents->get(), dname, sys::Open::directory | sys::Open::no_follow);
  if (!dir) {
    Error e = dir.error();
    if (e.code == ENOENT) return report(Error{ENOENT, dname + ": ENOENT: no such agent in " + agents_path});
    if (e.code == ENOTDIR || e.code == ELOOP)
      return report(Error{e.code, dname + ": " + errno_name(e.code) + ": not a directory (a symlinked .d is refused)"});
    return report(e.with_context(dname));
  }
  std::vector<Error> errors;
  auto dst = sys::stat_fd(dir->get());
  if (!dst) return report(dst.error().with_context(dname));
  out.dir_stat = *dst;
  // Just opened: its own position is read, no second descriptor.
  auto names = sys::list_open_dir(dir->get());
  if (!names) return report(names.error().with_context(dname));
  const auto& known = known_control_files();
  for (const auto& n : *names) {
    bool is_known = false;
    for (auto k : known) is_known = is_known || k == n;
    if (!is_known || (n == "entry" && !user)) {
      out.unknown.push_back(n);
      continue;
    }
    // A user agent's executable: its owner and mode are trusted like a
    // control file's; it is never read, and never a symlink.
    if (n == "entry") {
      auto st = sys::stat_at(dir->get(), n);
      if (!st) {
        errors.push_back(st.error().with_context(dname + "/entry"));
      } else if (*st && !S_ISREG((*st)->mode)) {
        errors.push_back(Error{EINVAL, dname + "/entry: EINVAL: not a regular file (a symlink is refused)"});
      } else if (*st) {
        out.stats[n] = **st;
      }
      continue;
    }
    // status, pid and log are the launcher's output, not configuration:
    // nothing is decided from them, and the log grows with every launch.
    if (n == "status" || n == "pid" || n == "log" || n == "log.1" || n == "instance") continue;
    auto f = sys::read_small_file(dir->get(), n, kMaxControlFileSize);
    if (!f) {
      errors.push_back(
          Error{f.error().code, dname + "/" + n + ": " + errno_name(f.error().code) + ": " + f.error().msg});
      continue;
    }
    if (!*f) continue;  // vanished between listing and reading
    out.stats[n] = (*f)->st;
    out.files[n] = std::move((*f)->data);
  }
  if (!errors.empty()) {
    if (all != nullptr) all->insert(all->end(), errors.begin(), errors.end());
    return fail(errors.front());
  }
  return out;
}

IdentitySource identity_source(const DirListing& d) {
  // An absent file means the default, which is the owner's own id.
  auto by_root = [&](const char* f) {
    auto it = d.stats.find(f);
    return it == d.stats.end() || it->second.uid == 0;
  };
  return IdentitySource{by_root("uid"), by_root("gid"), by_root("groups")};
}

std::vector<Error> trust_errors(std::string_view name, const DirListing& d, std::uint32_t owner) {
  std::vector<Error> out;
  auto check = [&](const std::string& what, const sys::FileStat& st) {
    if (st.uid != 0 && st.uid != owner)
      out.push_back(Error{EPERM, what + ": EPERM: owned by uid " + std::to_string(st.uid) +
                                     ", not by root or the owner " + std::to_string(owner) + "; chown it"});
    if ((st.mode & 022) != 0) {
      char mode[8];
      std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.mode & 07777));
      out.push_back(Error{EPERM, what + ": EPERM: writable by group or other (mode " + mode + "); chmod go-w it"});
    }
  };
  const std::string where = d.user ? agents_rel(d.user) + "/" : std::string();
  for (const auto& [p, st] : d.parents) check(p, st);
  check(where + std::string(name) + ".d", d.dir_stat);
  for (const auto& [n, st] : d.stats) check(where + std::string(name) + ".d/" + n, st);
  return out;
}

std::vector<Error> user_tier_errors(std::string_view name, std::uint32_t user, std::optional<std::uint32_t> owner,
                                    bool has_parent) {
  std::vector<Error> out;
  const std::string d = agents_rel(user) + "/" + std::string(name) + ".d";
  if (owner && *owner != user)
    out.push_back(Error{EPERM, d + "/owner: EPERM: says " + std::to_string(*owner) + ", but a user agent in home/" +
                                   std::to_string(user) + " is owned by " + std::to_string(user) + "; write " +
                                   std::to_string(user) + " or move the agent to its owner's home"});
  if (has_parent)
    out.push_back(Error{ENOTSUP, d + "/parent: ENOTSUP: a user agent cannot be an owned child (v0: owned children "
                                     "and their parents are system agents); remove the parent file"});
  return out;
}

Result<AgentSpec> load_subject_policy(std::string_view ctx_root, std::string_view name,
                                      std::optional<std::uint32_t> user) {
  if (auto e = agent_name_issue(name)) return fail(EINVAL, std::string(name) + ": EINVAL: " + *e);
  Result<UniqueFd> opened = fail(ENOENT, "");
  if (!user) {
    opened = sys::open(sys::at_cwd, std::string(ctx_root) + "/agent", sys::Open::directory);
  } else {
    auto root = sys::open(sys::at_cwd, std::string(ctx_root), sys::Open::directory);
    opened = root ? sys::open(root->get(), agents_rel(user),
                              sys::Open::directory | sys::Open::beneath | sys::Open::no_symlinks)
                  : std::move(root);
  }
  CTX_TRY_ASSIGN(UniqueFd agents, std::move(opened));
  std::string dname = std::string(name) + ".d";
  auto dir = sys::open(agents.get(), dname, sys::Open::directory | sys::Open::no_follow);
  if (!dir) return fail(dir.error().with_context(dname));
  ControlFiles files;
  for (const char* f : {"owner", "label", "policy"}) {
    auto c = sys::read_small_file(dir->get(), f, kMaxControlFileSize);
    if (!c)
      return fail(Error{c.error().code, dname + "/" + f + ": " + errno_name(c.error().code) + ": " + c.error().msg});
    if (*c) files[f] = std::move((*c)->data);
  }
  // gid is not read, and not asked of passwd either: nothing here uses it.
  return build_spec(
      name, ctx_root, files, [](std::uint32_t) { return std::optional<std::uint32_t>(0); }, nullptr);
}

Result<AgentSpec> load(std::string_view ctx_root, std::string_view name, const LoadOptions& opts,
                       std::vector<Error>* all) {
  CTX_TRY_ASSIGN(DirListing d, read_control_files(ctx_root, name, all, opts.user));
  std::vector<Error> errors;
  auto spec = build_spec(name, ctx_root, d.files, passwd_primary_gid(), &errors);
  if (spec) spec->id_source = identity_source(d);
  if (spec) spec->tier_user = opts.user;
  if (opts.require_trusted_files) {
    std::uint32_t owner = 0;
    if (spec) {
      owner = spec->owner;
    } else if (auto it = d.files.find("owner"); it != d.files.end()) {
      owner = parse_id(std::string_view(it->second).substr(0, it->second.find('\n'))).value_or(0);
    }
    // A user agent's files are trusted when they are U's (or root's),
    // whatever its owner file says.
    auto t = trust_errors(name, d, opts.user.value_or(owner));
    // Trust problems come first: they make every other line suspect.
    errors.insert(errors.begin(), t.begin(), t.end());
  }
  // A user agent's own refusals first: they say which tier is wrong.
  if (opts.user) {
    std::optional<std::uint32_t> owner;
    if (spec) {
      owner = spec->owner;
    } else if (auto it = d.files.find("owner"); it != d.files.end()) {
      owner = parse_id(std::string_view(it->second).substr(0, it->second.find('\n')));
    }
    auto u = user_tier_errors(name, *opts.user, owner, d.files.count("parent") != 0);
    errors.insert(errors.begin(), u.begin(), u.end());
  }
  if (!errors.empty()) {
    if (all != nullptr) all->insert(all->end(), errors.begin(), errors.end());
    return fail(errors.front());
  }
  return spec;
}

}  // namespace ctx::agentdir
