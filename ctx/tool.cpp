#include "ctx/tool.hpp"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "agentdir/load.hpp"
#include "base/names.hpp"
#include "base/path.hpp"
#include "base/text.hpp"
#include "base/timestamp.hpp"
#include "policy/policy.hpp"
#include "sys/file.hpp"
#include "sys/process.hpp"
#include "sys/resolve.hpp"

extern char** environ;

namespace ctx::helper {

namespace {

using nlohmann::json;

std::string env_or(const char* k, const std::string& d) {
  const char* v = std::getenv(k);
  return v != nullptr && *v != '\0' ? std::string(v) : d;
}

// One tool.call event in the session's events.jsonl; facts only, never the
// request or the output. A failure to record is said, not fatal.
void record(const ToolCaller& c, const std::string& tool, const std::string& status, const std::string& reason) {
  if (c.home.empty() || c.agent.empty()) return;
  json e{{"ts", timestamp_now()}, {"type", "tool.call"},      {"agent", c.agent},
         {"session", c.session},  {"object", "tool/" + tool}, {"status", status}};
  if (!reason.empty()) e["reason"] = reason;
  // The session directory usually exists: one open, and the walk that
  // creates it (never through a symlink) only when it does not.
  std::string rel = "agent/" + c.agent + "/session/" + c.session;
  auto home = sys::open_dir(c.home);
  Result<void> r = home ? Result<void>() : fail(home.error());
  if (home) {
    auto dir = sys::open_dir_beneath(home->get(), rel);
    if (!dir) dir = sys::open_or_make_dirs(home->get(), rel, 0755);
    r = dir ? sys::append_file(dir->get(), "events.jsonl", e.dump(-1, ' ', true) + "\n", 0644) : fail(dir.error());
  }
  if (!r) std::fprintf(stderr, "ctx tool: warning: events.jsonl not written: %s\n", printable(r.error().msg).c_str());
}

// The error protocol: one JSON line, then one sentence for people.
int refuse(const ToolCaller& c, const std::string& tool, int code, const std::string& reason,
           const std::string& sentence, const char* status) {
  json j{{"type", "error"}, {"code", errno_name(code)}, {"reason", reason},
         {"tool", tool},    {"agent", c.agent},         {"message", sentence}};
  std::fprintf(stderr, "%s\nctx tool: %s: %s: %s\n", j.dump(-1, ' ', true).c_str(), printable(tool).c_str(),
               errno_name(code).c_str(), printable(sentence).c_str());
  record(c, tool, status, reason);
  return code;
}

struct Hit {
  std::string dir;  ///< the CTX_PATH entry that held it
  UniqueFd dirfd;
};

// Strictly CTX_PATH, left to right: the first regular file with an execute
// bit; a symlink is never followed and never a hit.
std::optional<Hit> lookup(const ToolCaller& c, const std::string& name) {
  for (const auto& dir : c.ctx_path) {
    auto d = sys::open_dir(dir);
    if (!d) continue;
    auto st = sys::stat_at(d->get(), name);
    if (!st || !*st) continue;
    if (!S_ISREG((*st)->mode) || ((*st)->mode & 0111) == 0) continue;
    return Hit{dir, std::move(*d)};
  }
  return std::nullopt;
}

}  // namespace

ToolCaller caller_from_env() {
  ToolCaller c;
  c.ctx_root = env_or("CTX_ROOT", "/ctx");
  c.home = env_or("CTX_HOME", "");
  c.agent = env_or("CTX_AGENT", "");
  c.session = env_or("CTX_SESSION", "default");
  std::string path = env_or("CTX_PATH", c.ctx_root + "/tool" + (c.home.empty() ? "" : ":" + c.home + "/tool"));
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t colon = path.find(':', start);
    std::string d = path.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    if (!d.empty()) c.ctx_path.push_back(d);
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  return c;
}

namespace {

// Layer 3: the agent's own policy, read from its control files. Only the
// label and the policy decide here; the rest of the agent's files are the
// launcher's business. A refusal as (reason, sentence); nullopt allows.
std::optional<std::pair<std::string, std::string>> agent_policy_refuses(const ToolCaller& c, const std::string& name,
                                                                        std::string& subject) {
  auto spec = agentdir::load_subject_policy(c.ctx_root, c.agent);
  if (!spec)
    return std::pair<std::string, std::string>("agent_policy",
                                               "cannot read the agent's control files: " + spec.error().msg);
  subject = spec->subject();
  if (subject.empty())
    return std::pair<std::string, std::string>("agent_policy",
                                               c.agent + " has no label, so policy v0 denies everything");
  if (!spec->policy.allows(subject, policy::Class::tool, name, "execute"))
    return std::pair<std::string, std::string>(
        "agent_policy",
        "the policy of " + c.agent + " has no " + policy::missing_rule(subject, policy::Class::tool, name, "execute"));
  return std::nullopt;
}

// Layer 4: the tool's own policy, when it has one, in the .d in dirfd.
std::optional<std::pair<std::string, std::string>> tool_policy_refuses(int dirfd, const std::string& name,
                                                                       const std::string& subject) {
  auto td = sys::open_dir_at(dirfd, name + ".d");
  if (!td) return std::nullopt;
  auto pf = sys::read_small_file(td->get(), "policy", kMaxControlFileSize);
  if (!pf) return std::pair<std::string, std::string>("tool_policy", name + ".d/policy: " + pf.error().msg);
  if (!*pf) return std::nullopt;
  auto tp = policy::Policy::parse(name + ".d/policy", (*pf)->data);
  if (!tp) return std::pair<std::string, std::string>("tool_policy", tp.error().msg);
  if (!tp->allows(subject, policy::Class::tool, name, "execute"))
    return std::pair<std::string, std::string>(
        "tool_policy",
        "the tool's own policy has no " + policy::missing_rule(subject, policy::Class::tool, name, "execute"));
  return std::nullopt;
}

}  // namespace

int call_tool(const ToolCaller& c, const std::string& name, const std::vector<std::string>& args,
              const std::string& tier) {
  if (auto issue = tool_name_issue(name)) return refuse(c, name, EINVAL, "invalid_name", *issue, "error");
  if (c.agent.empty() || agent_name_issue(c.agent))
    return refuse(c, name, EINVAL, "no_agent",
                  "CTX_AGENT does not name an agent; call tools from inside an agent's sandbox", "error");
  // 3 first: without 'allow <type> tool:<name> execute' the answer is
  // EACCES whether or not such a tool exists (seed 000), and inside a
  // sandbox the tiers are projections that show only allowed tools
  // (launcher/tool_view.hpp).
  std::string subject;
  if (auto no = agent_policy_refuses(c, name, subject)) return refuse(c, name, EACCES, no->first, no->second, "denied");
  std::optional<Hit> hit;
  if (tier.empty()) {
    hit = lookup(c, name);
  } else if (auto d = sys::open_dir(tier)) {
    hit = Hit{tier, std::move(*d)};
  }
  if (!hit) {
    // A tool its own policy refuses is not projected either; its .d/ is.
    for (const auto& dir : c.ctx_path)
      if (auto d = sys::open_dir(dir); d && sys::stat_at(d->get(), name + ".d").value_or(std::nullopt)) {
        if (auto no = tool_policy_refuses(d->get(), name, subject))
          return refuse(c, name, EACCES, no->first, no->second, "denied");
        break;
      }
    bool view = false;
    for (const auto& dir : c.ctx_path)
      if (auto d = sys::open_dir(dir); d && sys::on_fuse(d->get())) view = true;
    return refuse(c, name, ENOENT, "not_found",
                  "no executable " + name + " in CTX_PATH" +
                      (view ? std::string(" (the agent view shows only tools that its policy, their own policy and "
                                          "their mode bits allow; on the host, ctx explain " +
                                          c.agent + " tool:" + name + " execute names the layer)")
                            : std::string()),
                  "error");
  }
  // In a projected tier the name is this helper and the tool itself, with
  // its .d/, waits in .ctx-real/ (launcher/tool_view.hpp).
  if (auto real = sys::open_dir_at(hit->dirfd.get(), ".ctx-real");
      real && sys::stat_at(real->get(), name).value_or(std::nullopt)) {
    hit->dir += "/.ctx-real";
    hit->dirfd = std::move(*real);
  }

  // 1-2: a mount that allows exec, and the mode bits for the agent's ids.
  // The mount is asked first: on a noexec mount access(X_OK) fails too,
  // and the reason must name the layer that really refused.
  auto file = sys::open_path_at(hit->dirfd.get(), name);
  auto noexec = file ? sys::on_noexec_mount(file->get()) : Result<bool>(fail(file.error()));
  if (!noexec) return refuse(c, name, noexec.error().code, "error", noexec.error().msg, "error");
  if (*noexec)
    return refuse(c, name, EACCES, "noexec_mount", hit->dir + " is on a noexec mount in this sandbox", "denied");
  if (!sys::executable_at(hit->dirfd.get(), name))
    return refuse(c, name, EACCES, "mode",
                  hit->dir + "/" + name + " is not executable for uid " + std::to_string(::geteuid()), "denied");
  if (auto no = tool_policy_refuses(hit->dirfd.get(), name, subject))
    return refuse(c, name, EACCES, no->first, no->second, "denied");

  // Run it: stdin and stdout pass through untouched.
  std::vector<std::string> argv{hit->dir + "/" + name};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  // The call is allowed: record it and become the tool, so that a call
  // costs one process, not two, and the tool's exit status and signals
  // reach the caller untouched. "ok" records that the call was allowed and
  // started; the tool's own result is the caller's to see.
  // In the agent view the exec itself is recorded, by the view (once).
  bool view_records = sys::on_fuse(hit->dirfd.get()) && path_basename(hit->dir) == "tool";
  if (!view_records) record(c, name, "ok", "");
  Error e = sys::exec(argv[0], argv, env);
  record(c, name, "error", "exec");
  std::fprintf(stderr, "ctx tool: %s\n", printable(e.msg).c_str());
  return e.code == ENOENT ? 127 : 126;
}

std::optional<std::pair<std::string, std::string>> direct_call(const char* argv0) {
  std::string a = argv0 == nullptr ? "" : argv0;
  auto slash = a.rfind('/');
  if (slash == std::string::npos) return std::nullopt;
  std::string dir = slash == 0 ? "/" : a.substr(0, slash);
  std::string name = a.substr(slash + 1);
  if (name == "ctx" || tool_name_issue(name)) return std::nullopt;
  auto d = sys::open_dir(dir);
  if (!d) return std::nullopt;
  auto real = sys::open_dir_at(d->get(), ".ctx-real");
  if (!real || !sys::stat_at(real->get(), name).value_or(std::nullopt)) return std::nullopt;
  return std::pair<std::string, std::string>(dir, name);
}

}  // namespace ctx::helper
