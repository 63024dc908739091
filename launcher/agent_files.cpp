#include "launcher/agent_files.hpp"

#include <cstdio>

#include "base/names.hpp"
#include "base/path.hpp"
#include "base/text.hpp"
#include "base/timestamp.hpp"
#include "sys/resolve.hpp"

namespace ctx::launcher {

using nlohmann::json;

std::string_view to_string(AgentState s) {
  switch (s) {
    case AgentState::start: return "start";
    case AgentState::ready: return "ready";
    case AgentState::busy: return "busy";
    case AgentState::idle: return "idle";
    case AgentState::stopping: return "stopping";
    case AgentState::dead: return "dead";
  }
  return "dead";
}

std::optional<AgentState> agent_state_of(std::string_view word) {
  for (AgentState s : {AgentState::start, AgentState::ready, AgentState::busy, AgentState::idle, AgentState::stopping,
                       AgentState::dead})
    if (to_string(s) == word) return s;
  return std::nullopt;
}

void AgentFiles::status(AgentState s) {
  warn(sys::atomic_replace(ddir_, "status", std::string(to_string(s)) + "\n"), "status");
}

void AgentFiles::pid(pid_t p) { warn(sys::atomic_replace(ddir_, "pid", std::to_string(p) + "\n"), "pid"); }

Result<void> append_capped_log(int dirfd, const std::string& line, std::uint64_t& size) {
  if (size == kUnknownLogSize) {
    auto st = sys::stat_at(dirfd, "log");
    size = st && *st ? (*st)->size : 0;
  }
  if (size + line.size() > kMaxLogBytes && size > 0) {
    CTX_TRY(sys::rename_at(dirfd, "log", dirfd, "log.1"));
    size = 0;
  }
  auto r = sys::append_file(dirfd, "log", line, 0644);
  if (r) size += line.size();
  return r;
}

void AgentFiles::log(json j) {
  j["ts"] = timestamp_now();
  j["agent"] = plan_.name;
  warn(append_capped_log(ddir_, j.dump(-1, ' ', true) + "\n", log_size_), "log");
}

void AgentFiles::event(const json& j) {
  if (!open_session()) return;
  json out;
  out["ts"] = timestamp_now();
  for (auto& [k, v] : j.items()) out[k] = v;
  out["agent"] = plan_.name;
  out["session"] = plan_.session;
  warn(sys::append_file(session_.get(), "events.jsonl", out.dump(-1, ' ', true) + "\n", 0644, owner()), "events.jsonl");
}

void AgentFiles::session_state(const std::string& s) {
  if (open_session()) warn(sys::atomic_replace(session_.get(), "state", s + "\n"), "state");
}

void AgentFiles::event_of(const std::string& agent, const std::string& session, const json& j) {
  auto home = sys::open_dir(plan_.ctx_root + "/home", true);
  if (!home) return;
  // Never through a symlink: the parent's agent may have planted one in
  // its own home, and this supervisor may be root.
  auto dir = sys::open_dir_beneath(home->get(), session_rel(plan_.owner, agent, session));
  if (!dir) return warn(fail(dir.error()), "the parent's events.jsonl");
  json out;
  out["ts"] = timestamp_now();
  for (auto& [k, v] : j.items()) out[k] = v;
  out["agent"] = agent;
  out["session"] = session;
  warn(sys::append_file(dir->get(), "events.jsonl", out.dump(-1, ' ', true) + "\n", 0644, owner()),
       "the parent's events.jsonl");
}

void AgentFiles::context_status(const std::string& dir, const std::string& s) {
  if (dir.empty() || !path_is_at_or_under(dir, plan_.ctx_root)) return;
  auto root = sys::open_dir(plan_.ctx_root);
  if (!root) return;
  auto d = sys::open_dir_beneath(root->get(), std::string(path_suffix(dir, plan_.ctx_root)));
  if (!d) return warn(fail(d.error()), "context status");
  warn(sys::atomic_replace(d->get(), "status", s + "\n"), "context status");
}

bool AgentFiles::open_session() {
  if (session_.valid()) return true;
  auto home = sys::open_dir(plan_.ctx_root + "/home", true);
  if (!home) return warn(fail(home.error()), "events.jsonl"), false;
  std::string rel = session_rel(plan_.owner, plan_.name, plan_.session);
  auto dir = sys::open_or_make_dirs(home->get(), rel, 0755, owner());
  if (!dir) return warn(fail(dir.error()), "events.jsonl"), false;
  session_ = std::move(*dir);
  return true;
}

// A root supervisor gives what it creates in the owner's home tier to the
// agent's host ids, so the agent's own tools can append events.
std::optional<sys::Ownership> AgentFiles::owner() const {
  if (!plan_.ids.privileged) return std::nullopt;
  return sys::Ownership{plan_.ids.host_uid, plan_.ids.host_gid};
}

void AgentFiles::warn(const Result<void>& r, const char* what) {
  if (!r)
    std::fprintf(stderr, "ctx-agent-run: warning: %s.d/%s: %s\n", plan_.name.c_str(), what,
                 printable(r.error().msg).c_str());
}

}  // namespace ctx::launcher
