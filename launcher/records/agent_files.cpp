#include "launcher/records/agent_files.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <vector>

#include "agentdir/tier.hpp"
#include "base/names.hpp"
#include "base/path.hpp"
#include "base/text.hpp"
#include "base/timestamp.hpp"
#include "launcher/records/as_owner.hpp"
#include "sys/fault.hpp"
#include "sys/resolve.hpp"
#include "sys/socket.hpp"
#include "sys/spare_replace.hpp"

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

namespace {

bool disk_full(int code) { return code == ENOSPC || code == EDQUOT; }

// "ENOSPC: no space left on device" (EDQUOT: "disk quota exceeded").
std::string disk_full_words(int code) {
  return errno_name(code) + (code == EDQUOT ? ": disk quota exceeded" : ": no space left on device");
}

}  // namespace

Result<void> AgentFiles::start(pid_t supervisor) {
  const std::pair<const char*, std::string> records[] = {{"status", std::string(to_string(AgentState::start)) + "\n"},
                                                         {"pid", std::to_string(supervisor) + "\n"}};
  // The previous run's mark would make this one look exec'd already.
  if (auto r = sys::retire_to_spare(idir_, "exec", idir_, spare("exec")); !r)
    return fail(refusal(r.error(), instance_path("exec"), ""));
  for (const auto& [file, content] : records) {
    if (auto r = sys::replace_via_spare(idir_, file, content, idir_, spare(file)); !r)
      return fail(refusal(r.error(), instance_path(file), ""));
    if (!primary_) continue;
    if (auto r = sys::replace_via_spare(ddir_, file, content, idir_, spare(std::string("d-") + file)); !r)
      return fail(refusal(r.error(), ddir_path(file), ""));
  }
  return {};
}

std::string AgentFiles::spare(const std::string& record) { return ".spare." + record; }

Error AgentFiles::refusal(const Error& e, const std::string& path, const std::string& why) {
  // Said here, in the launch's error; the warning would repeat it.
  warned_.insert({path, e.code});
  if (disk_full(e.code))
    return Error{e.code, path + ": " + disk_full_words(e.code) +
                             "; free space on its file system and launch again (the agent was not started)"};
  Error out = e.with_context(path);
  out.msg += why;
  return out;
}

Result<void> AgentFiles::session_file(const std::string& name, const std::string& content, Write how) {
  switch (how) {
    case Write::new_file: return sys::atomic_replace(session_.get(), name, content, 0644, false, rights());
    case Write::spare:
      // The spare beside the record: the session's directory may be
      // writable by the agent (or by others in a shared space), and what
      // they leave at the record's name must stay there, never be moved
      // into the owner's .d by the exchange.
      return sys::replace_via_spare(session_.get(), name, content, session_.get(), spare(name), 0644, rights());
  }
  return sys::atomic_replace(session_.get(), name, content, 0644, false, rights());
}

namespace {

// A record whose content rarely changes (a session's cwd and meta.json,
// a by-cwd entry) is replaced only when it differs: on ext4 each replace
// of an existing file costs a forced write-back (about 0.13 ms measured),
// which every launch would otherwise pay.
Result<void> replace_if_changed(int dirfd, const std::string& name, const std::string& content, const sys::MakeAs& as) {
  // Read with the same rights: a file the owner may not read decides nothing.
  CTX_TRY_ASSIGN(sys::FsIdScope scope, sys::FsIdScope::enter(as));
  if (auto old = sys::read_small_file(dirfd, name, content.size() + 1); old && *old && (*old)->data == content)
    return {};
  return sys::atomic_replace(dirfd, name, content, 0644, false, as);
}

}  // namespace

Error AgentFiles::session_refusal(const Error& e, const std::string& path) {
  if (e.code == EACCES)
    return refusal(e, path,
                   " (the session's files are made with the rights of the agent's owner, uid " +
                       std::to_string(plan_.owner) + ", who may not write there; the agent was not started)");
  return refusal(e, path, " (the session's files could not be made; the agent was not started)");
}

Result<void> AgentFiles::open_session_tree() {
  const bool shared = !plan_.session_space.empty();
  const auto [base_rel, agent_rel] = session_tree();
  const std::string base_path = plan_.ctx_root + "/" + base_rel;
  const std::string agent_path = base_path + "/" + agent_rel;
  auto refuse = [&](const Error& e, const std::string& path) -> Result<void> { return fail(session_refusal(e, path)); };
  auto base = sys::open(sys::at_cwd, base_path, sys::Open::directory | sys::Open::no_follow);
  if (!base) return refuse(base.error(), base_path);
  if (shared) {
    // The space itself is `ctx init --shared`'s: never made here, never
    // reached through a symlink, and written only if the owner may.
    const std::string space_path = base_path + "/" + plan_.session_space;
    auto space =
        sys::open(base->get(), plan_.session_space, sys::Open::directory | sys::Open::beneath | sys::Open::no_symlinks);
    if (!space && space.error().code == EACCES) return fail(space_refusal(space_path));
    if (!space) return refuse(space.error(), space_path);
    if (!sys::access_fd(space->get(), W_OK | X_OK, rights())) return fail(space_refusal(space_path));
  }
  // A shared space holds sessions only: data/, cache/ and log/ are the home's.
  const std::string by_cwd = "session/index/by-cwd";
  std::vector<std::string> dirs{by_cwd};
  if (!shared) dirs.insert(dirs.begin(), {"data", "cache", "log"});
  for (const auto& d : dirs) {
    auto r = sys::open_or_make_dirs(base->get(), agent_rel + "/" + d, 0755, rights());
    if (!r) return refuse(r.error(), agent_path + "/" + d);
    if (d == by_cwd) by_cwd_ = std::move(*r);  // for the by-cwd entry (begin_session)
  }
  // A shared session's launch that shows the home's session/ lists the
  // sessions there over it (plan.cpp, AgentSessions): a home without one
  // gets it, so that the agent cannot make one and fill it for a later
  // launch.
  if (shared && lists_home_sessions(plan_)) {
    const std::string home_sessions = plan_.ctx_root + "/home/" + sessions_rel(plan_.owner, plan_.name);
    auto homes = sys::open(sys::at_cwd, plan_.ctx_root + "/home", sys::Open::directory | sys::Open::no_follow);
    if (!homes) return refuse(homes.error(), plan_.ctx_root + "/home");
    if (auto r = sys::open_or_make_dirs(homes->get(), sessions_rel(plan_.owner, plan_.name), 0755, rights()); !r)
      return refuse(r.error(), home_sessions);
  }
  auto dir = sys::open_or_make_dirs(base->get(), agent_rel + "/session/" + plan_.session, 0755, rights());
  const std::string sdir = agent_path + "/session/" + plan_.session;
  if (!dir) return refuse(dir.error(), sdir);
  session_ = std::move(*dir);
  if (auto r = sys::fault_at("supervisor.session"); !r) return refuse(r.error(), sdir);
  if (auto c = sys::open_or_make_dirs(session_.get(), "context", 0755, rights()); !c)
    return refuse(c.error(), sdir + "/context");
  return {};
}

Result<void> AgentFiles::begin_session() {
  const bool shared = !plan_.session_space.empty();
  const std::string sdir = own_session_path();
  auto refuse = [&](const Error& e, const std::string& path) -> Result<void> { return fail(session_refusal(e, path)); };
  if (!session_.valid() || !by_cwd_.valid())
    return fail(Error{EINVAL, sdir + ": EINVAL: the session's directories were not opened"});
  const std::string now = timestamp_now() + "\n";
  auto created = sys::stat_at(session_.get(), "created_at");
  if (!created) return refuse(created.error(), sdir + "/created_at");
  json meta{{"agent", plan_.name},
            {"session", plan_.session},
            {"owner", plan_.owner},
            {"space", shared ? "shared:" + plan_.session_space : std::string("home")},
            {"written_by", "ctx-agent-run"}};
  if (!*created)
    if (auto r = session_file("created_at", now, Write::new_file); !r) return refuse(r.error(), sdir + "/created_at");
  const std::pair<const char*, std::string> steady[] = {{"cwd", plan_.cwd + "\n"},
                                                        {"meta.json", meta.dump(-1, ' ', true) + "\n"}};
  for (const auto& [name, content] : steady)
    if (auto r = replace_if_changed(session_.get(), name, content, rights()); !r)
      return refuse(r.error(), sdir + "/" + name);
  // The by-cwd index: the session last launched in this cwd.
  if (auto entry = cwd_index_name(plan_.cwd)) {
    const auto [base_rel, agent_rel] = session_tree();
    const std::string idir = plan_.ctx_root + "/" + base_rel + "/" + agent_rel + "/session/index/by-cwd";
    if (auto r = replace_if_changed(by_cwd_.get(), *entry, plan_.session + "\n", rights()); !r)
      return refuse(r.error(), idir + "/" + *entry);
  }
  by_cwd_.reset();
  // `state` last: a launch refused before it leaves the session's state
  // as it was, and its watchdog takes `running` as the sign that the
  // session began (session_running).
  for (const auto& [name, content] : {std::pair<const char*, std::string>{"updated_at", now}, {"state", "running\n"}})
    if (auto r = session_file(name, content, Write::new_file); !r) return refuse(r.error(), sdir + "/" + name);
  return {};
}

bool AgentFiles::session_running() {
  // Opened as open_session does, but never made: a missing one did not begin.
  const auto [base_rel, agent_rel] = session_tree();
  auto scope = sys::FsIdScope::enter(rights());
  if (!scope) return false;
  auto base = sys::open(sys::at_cwd, plan_.ctx_root + "/" + base_rel, sys::Open::directory | sys::Open::no_follow);
  if (!base) return false;
  auto dir = sys::open(base->get(), agent_rel + "/session/" + plan_.session,
                       sys::Open::directory | sys::Open::beneath | sys::Open::no_symlinks);
  if (!dir) return false;
  auto state = sys::read_small_file(dir->get(), "state", 64);
  return state && *state && (*state)->data == "running\n";
}

void AgentFiles::end_session(const std::string& state) {
  if (!session_begun_ || !open_session()) return;
  const std::string sdir = own_session_path();
  warn(session_file("state", state + "\n", Write::spare), sdir + "/state", Kind::replaced);
  warn(session_file("updated_at", timestamp_now() + "\n", Write::spare), sdir + "/updated_at", Kind::replaced);
}

void AgentFiles::status(AgentState s) {
  const std::string word = std::string(to_string(s)) + "\n";
  warn(sys::replace_via_spare(idir_, "status", word, idir_, spare("status")), instance_path("status"), Kind::replaced);
  if (primary_)
    warn(sys::replace_via_spare(ddir_, "status", word, idir_, spare("d-status")), ddir_path("status"), Kind::replaced);
}

void AgentFiles::exec() {
  warn(sys::replace_via_spare(idir_, "exec", timestamp_now() + "\n", idir_, spare("exec")), instance_path("exec"),
       Kind::replaced);
}

Result<void> append_capped_log(int dirfd, const std::string& line, std::uint64_t& size) {
  // The first append of a run counts the log as it finds it: opened,
  // then its size from the descriptor (no stat of the name before).
  if (size == kUnknownLogSize) {
    CTX_TRY_ASSIGN(auto opened, sys::open_append_sized(dirfd, "log", 0644));
    size = opened.second;
    if (size + line.size() <= kMaxLogBytes || size == 0) {
      CTX_TRY(sys::append_whole(opened.first.get(), line));
      size += line.size();
      return {};
    }
  }
  if (size + line.size() > kMaxLogBytes && size > 0) {
    // Several instances append to one log: another may have rotated it
    // since our count, and a second rotation would drop its log.1.
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

namespace {

std::string line_of(const Event& e, const std::string& agent, const std::string& session) {
  return stamp_event(e, {timestamp_now(), agent, session}).dump(-1, ' ', true) + "\n";
}

}  // namespace

void AgentFiles::log(const Event& e) {
  warn(append_capped_log(ddir_, line_of(e, plan_.name, plan_.session), log_size_), ddir_path("log"), Kind::appended);
}

void AgentFiles::event(const Event& e) {
  // A session that did not begin is left as it was: the event is in the log.
  if (!session_begun_ || !open_session()) return;
  const std::string path = own_session_path() + "/events.jsonl";
  // Opened once: one write(2) per event afterwards (nothing else renames
  // or replaces a session's events.jsonl).
  if (!events_.valid()) {
    auto fd = sys::open_append(session_.get(), "events.jsonl", 0644, rights());
    if (!fd) return warn(fail(fd.error()), path, Kind::appended);
    events_ = std::move(*fd);
  }
  warn(sys::append_whole(events_.get(), line_of(e, plan_.name, plan_.session)), path, Kind::appended);
}

void AgentFiles::event_of(const std::string& agent, const std::string& session, const Event& e) {
  auto home = sys::open(sys::at_cwd, plan_.ctx_root + "/home", sys::Open::directory | sys::Open::no_follow);
  if (!home) return;
  // Never through a symlink: the parent's agent may have planted one in
  // its own home, and this supervisor may be root.
  const std::string path = session_path(agent, session, "events.jsonl");
  auto dir = sys::open(home->get(), session_rel(plan_.owner, agent, session),
                       sys::Open::directory | sys::Open::beneath | sys::Open::no_symlinks);
  if (!dir) return warn(fail(dir.error()), path, Kind::appended);
  warn(sys::append_file(dir->get(), "events.jsonl", line_of(e, agent, session), 0644, rights()), path, Kind::appended);
}

void AgentFiles::context_status(const std::string& dir, const std::string& s) {
  if (dir.empty() || !path_is_at_or_under(dir, plan_.ctx_root)) return;
  auto root = sys::open(sys::at_cwd, plan_.ctx_root, sys::Open::directory);
  if (!root) return;
  auto d = sys::open(root->get(), std::string(path_suffix(dir, plan_.ctx_root)),
                     sys::Open::directory | sys::Open::beneath | sys::Open::no_symlinks);
  if (!d) return warn(fail(d.error()), dir + "/status", Kind::replaced);
  warn(sys::atomic_replace(d->get(), "status", s + "\n", 0644, false, rights()), dir + "/status", Kind::replaced);
}

bool AgentFiles::open_session() {
  if (session_.valid()) return true;
  const std::string path = own_session_path() + "/events.jsonl";
  const auto [base_rel, agent_rel] = session_tree();
  auto base = sys::open(sys::at_cwd, plan_.ctx_root + "/" + base_rel, sys::Open::directory | sys::Open::no_follow);
  if (!base) return warn(fail(base.error()), path, Kind::appended), false;
  // Never through a symlink, in the home or in a shared space.
  auto dir = sys::open_or_make_dirs(base->get(), agent_rel + "/session/" + plan_.session, 0755, rights());
  if (!dir) return warn(fail(dir.error()), path, Kind::appended), false;
  session_ = std::move(*dir);
  return true;
}

std::pair<std::string, std::string> AgentFiles::session_tree() const {
  if (plan_.session_space.empty()) return {"home", std::to_string(plan_.owner) + "/agent/" + plan_.name};
  return {"shared", plan_.session_space + "/agent/" + plan_.name};
}

std::string AgentFiles::own_session_path() const {
  const auto [base_rel, agent_rel] = session_tree();
  return plan_.ctx_root + "/" + base_rel + "/" + agent_rel + "/session/" + plan_.session;
}

sys::MakeAs AgentFiles::rights() const { return owner_rights(plan_.ids); }

Error AgentFiles::space_refusal(const std::string& path) const {
  const std::string uid = std::to_string(plan_.owner);
  return Error{EACCES, "--session-space " + plan_.session_space + ": " + path + ": EACCES: the agent's owner (uid " +
                           uid +
                           ") may not write this shared space, and a launch writes only where its owner may; "
                           "have the space's owner give uid " +
                           uid + " write access (mode or group), or choose another space (the agent was not started)"};
}

std::string AgentFiles::ddir_path(const std::string& file) const {
  return path_join(plan_.ctx_root, agentdir::agents_rel(plan_.tier_user)) + "/" + plan_.name + ".d/" + file;
}

std::string AgentFiles::instance_path(const std::string& file) const {
  return ddir_path("instance/" + plan_.session + "/" + file);
}

std::string AgentFiles::session_path(const std::string& agent, const std::string& session,
                                     const std::string& file) const {
  return plan_.ctx_root + "/home/" + session_rel(plan_.owner, agent, session) + "/" + file;
}

// Once per file and errno: on a full disk every line of a long run would
// fail alike.
void AgentFiles::warn(const Result<void>& r, const std::string& path, Kind kind) {
  if (r || !warned_.insert({path, r.error().code}).second) return;
  const int code = r.error().code;
  std::string why = printable(r.error().msg);
  if (disk_full(code)) {
    const char* kept = "";
    switch (kind) {
      case Kind::replaced: kept = "it keeps its previous content"; break;
      case Kind::appended: kept = "its new lines are dropped (the lines in it stay whole)"; break;
    }
    why = disk_full_words(code) + "; free space on its file system: until then " + kept +
          " and the agent keeps running (said once)";
  }
  std::fprintf(stderr, "ctx-agent-run: warning: %s: %s\n", printable(path).c_str(), why.c_str());
}

}  // namespace ctx::launcher
