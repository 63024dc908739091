// The agent's files on the host that its supervisor keeps: <name>.d/status,
// pid and log, the session's events.jsonl and state, and an owned child's
// coordination status in its parent's session. Replaced files (status,
// pid, state) change by atomic rename and appended ones (log, events.jsonl)
// take whole lines or nothing, so a full disk never leaves a truncated
// value or a partial line. Writes are best effort once a launch is under
// way: a full disk must not kill a running agent, but each file's failure
// is said on stderr, once (docs/launcher.md, "Full disks").
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "base/result.hpp"
#include "base/unique_fd.hpp"
#include "launcher/records/event.hpp"
#include "launcher/plan/plan.hpp"
#include "sys/file.hpp"

namespace ctx::launcher {

/// The cap of <name>.d/log (and of log.1, the previous one).
inline constexpr std::uint64_t kMaxLogBytes = 1 << 20;

/// A log size not known yet (append_capped_log stats the file).
inline constexpr std::uint64_t kUnknownLogSize = ~std::uint64_t{0};

/// Appends `line` to dirfd/log. Once the line would take the log past
/// kMaxLogBytes, the log becomes log.1 (replacing the older one) and a new
/// log begins, so the newest lines are always kept and the two never hold
/// more than twice the cap. `size`: the log's size as the caller knows it
/// (kUnknownLogSize: read it), kept up to date.
Result<void> append_capped_log(int dirfd, const std::string& line, std::uint64_t& size);

/// The lifecycle of seed 000 ("start ready busy idle stopping dead"),
/// as the supervisor writes it to <name>.d/status.
enum class AgentState { start, ready, busy, idle, stopping, dead };

/// The word written to `status`.
std::string_view to_string(AgentState s);

/// The state a status word names (apply_notify's words); nullopt for others.
std::optional<AgentState> agent_state_of(std::string_view word);

class AgentFiles : public RecordSink {
 public:
  /// ddir: <ctx>/agent/<name>.d, open for the files' lifetime. idir: the
  /// instance's directory <name>.d/instance/<session> (docs/abi.md,
  /// "Instances"), open as long; primary: this instance holds the agent's
  /// lock and so owns <name>.d/status and pid too.
  AgentFiles(const LaunchPlan& plan, int ddir, int idir, bool primary)
      : plan_(plan), ddir_(ddir), idir_(idir), primary_(primary) {}

  /// The start records a launch cannot go without: status `start` and
  /// pid (the supervisor's) in the instance's directory and, for the
  /// primary instance, in <name>.d, each replaced atomically. The first failure,
  /// naming the file (with what to do for ENOSPC and EDQUOT), for the
  /// launch to refuse with; the files keep their previous content then.
  Result<void> start(pid_t supervisor);

  /// The session's directories (docs/abi.md, "Sessions"), before the
  /// sandbox exists (a bind of the agent's home shows them from its
  /// start): the agent home's data/, cache/ and log/, session/index/by-cwd
  /// and the session directory with context/, made when missing, never
  /// through a symlink. The first failure, naming the directory, for the
  /// launch to refuse with.
  Result<void> open_session_tree();

  /// The session's start files, after open_session_tree and before any
  /// start record, in this order: created_at (a new session only), cwd,
  /// meta.json, the by-cwd index entry, updated_at and last state
  /// `running` (the sign that the session began), each replaced
  /// atomically, never through a symlink. The first failure, naming the
  /// file (with what to do for ENOSPC and EDQUOT), for the launch to
  /// refuse with; written while the sandbox sets itself up, before its
  /// runtime may start.
  Result<void> begin_session();

  /// The session's start files are written (begin_session, here or in
  /// the supervisor whose watchdog this is): end_session writes from now on.
  void session_begun() { session_begun_ = true; }

  /// Whether the session's `state` says `running`, read with the owner's
  /// rights and never through a symlink: the watchdog's sign that its
  /// supervisor began the session (a `running` left by a machine that
  /// stopped is no longer true either). A runtime may write its own
  /// session's files: one that replaced `state` keeps what it wrote.
  bool session_running();

  /// The session's end: `state` (done, failed, stopped, cancelled) and
  /// updated_at; best effort like status. Nothing for a session that did
  /// not begin (a launch refused before its session's files): it is left
  /// as it was.
  void end_session(const std::string& state);

  /// Replaces the instance's status (and the primary's <name>.d/status)
  /// atomically.
  void status(AgentState s);

  /// Marks the instance's runtime as exec'd: <name>.d/instance/<s>/exec
  /// (the UTC time), which tells `ctx ps` that a `start` status is a
  /// running runtime that has sent no READY=1.
  void exec();

  /// Appends the event, stamped (stamp_event: this agent and session),
  /// to <name>.d/log, capped (append_capped_log).
  void log(const Event& e) override;

  /// Appends the event, stamped, to the session's events.jsonl, making the
  /// session directory when it is missing; nothing for a session that did
  /// not begin (session_begun), whose events stay in the log only.
  void event(const Event& e) override;

  /// An event in another agent's session stream (the parent's, for
  /// agent.child.cancel), stamped with that agent and session; never
  /// through a symlink.
  void event_of(const std::string& agent, const std::string& session, const Event& e);

  /// `status` of the coordination directory in the parent's session
  /// (only beneath the CTX root, never through a symlink).
  void context_status(const std::string& dir, const std::string& s);

 private:
  /// How a failed write leaves its file, for the warning's words.
  enum class Kind { replaced, appended };

  bool open_session();
  /// How a session file is replaced: into a new file, or through its
  /// spare (sys::replace_via_spare). A spare already has its disk blocks,
  /// so only a new file tells that the disk is full: the session's start
  /// writes new files, so that a full disk refuses a launch before any
  /// record changes (docs/abi.md, "Sessions").
  enum class Write { new_file, spare };
  Result<void> session_file(const std::string& name, const std::string& content, Write how);
  /// What every file of the agent's tree (its home's directories, its
  /// sessions, events.jsonl, a child's coordination status) is made and
  /// written with: the owner's file-system ids in a root launch
  /// (owner_rights). The .d records (status, pid, log) are the caller's.
  sys::MakeAs rights() const;
  /// A session's directory or file that could not be made: the refusal,
  /// with the owner's rights named for EACCES.
  Error session_refusal(const Error& e, const std::string& path);
  /// The refusal of a shared space the owner may not write (with the
  /// rights above), said before anything is made: EACCES, naming the
  /// space, its path and what to do.
  Error space_refusal(const std::string& path) const;
  /// The name of the file kept for the next replace of `record`
  /// (sys::replace_via_spare): in the instance's directory for the
  /// instance's status, pid and exec and the primary's "d-status" and
  /// "d-pid" (all in the owner's .d); beside the record for the session's
  /// state and updated_at (".spare.state" in the session's directory).
  static std::string spare(const std::string& record);
  std::string ddir_path(const std::string& file) const;
  std::string instance_path(const std::string& file) const;
  /// Where this launch's sessions lie: the tree below the CTX root
  /// ("home" or "shared", opened without following a symlink) and the
  /// agent's directory in it (<owner>/agent/<name>, or <space>/agent/<name>
  /// for --session-space).
  std::pair<std::string, std::string> session_tree() const;
  /// This launch's session directory (host path).
  std::string own_session_path() const;
  /// The error a launch refuses with when a record it cannot start without
  /// fails: the path, with what to do for ENOSPC and EDQUOT, else the
  /// error followed by `why`; no warning repeats it.
  Error refusal(const Error& e, const std::string& path, const std::string& why);
  std::string session_path(const std::string& agent, const std::string& session, const std::string& file) const;
  void warn(const Result<void>& r, const std::string& path, Kind kind);

  const LaunchPlan& plan_;
  int ddir_;
  int idir_;
  bool primary_;
  UniqueFd session_;
  UniqueFd by_cwd_;  ///< session/index/by-cwd, from open_session_tree to begin_session
  bool session_begun_ = false;
  UniqueFd events_;  ///< the session's events.jsonl, once an event was written
  std::uint64_t log_size_ = kUnknownLogSize;
  std::set<std::pair<std::string, int>> warned_;  ///< (path, errno) already said
};

}  // namespace ctx::launcher
