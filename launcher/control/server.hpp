// The supervisor's owned children (seed 003): the control socket that
// `ctx agent create|start|stop|wait|delete` talks to from inside the sandbox
// (and `ctx tool`, whose requests go to a ToolGate: launcher/control/tool_gate.hpp).
// The requests are decoded by control_request (and child_request), the children kept in a
// ChildRegistry, started and ended by child_spawn.
//
// Protocol: one JSON object per line in each direction.
//   {"op":"create"[,"replace":true],"request":{...agent.create shape...}}
//   {"op":"start","name":"rev-1"[,"command":["/probe","sleep:5"]]}
//   {"op":"stop","name":"rev-1"}
//   {"op":"wait","name":"rev-1"}
//   {"op":"delete","name":"rev-1"}   (a stopped child; needs agent:<name> create)
// Answers: {"ok":true,"op":...,"name":...[,"pid":N][,"exit_status":N]} or
// {"ok":false,"code":"EACCES","reason":"agent_policy","agent":"coder",
// "message":"..."}: a refusal names the agent this supervisor serves
// (never what the caller's environment says).
//
// Limits (docs/launcher.md, "The control socket's limits"): every request
// line, and every notify datagram (admit), takes a token of one rate
// limit (launcher/control/rate_limit.hpp) before it is decoded; beyond it the
// answer is {"ok":false,"code":"EAGAIN","reason":"rate_limited",...},
// unrecorded, and the count goes to <name>.d/log in one agent.limit
// record. At most kMaxConns connections; one that waits for no answer
// and sends no complete request for kIdleTimeoutMs is closed.
#pragma once

#include <poll.h>
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "agentdir/agent_spec.hpp"
#include "base/result.hpp"
#include "base/unique_fd.hpp"
#include "launcher/control/child_registry.hpp"
#include "launcher/control/child_spawn.hpp"
#include "launcher/control/request.hpp"
#include "launcher/records/event.hpp"
#include "launcher/sandbox/start.hpp"
#include "launcher/control/rate_limit.hpp"
#include "launcher/control/tool_gate.hpp"

namespace ctx::launcher {

/// What the control socket needs from its supervisor.
struct ChildrenConfig {
  const agentdir::AgentSpec* parent = nullptr;
  std::string session;
  std::string run;
  SpawnConfig spawn;  ///< how child supervisors are started
  /// Appends an event to the parent's session events.jsonl.
  std::function<void(const Event&)> event;
  /// Whether a connection's peer may use the control socket (a process of
  /// the agent's sandbox); a refused connection is closed unanswered.
  std::function<bool(int conn)> peer_allowed;
  /// Decides a `tool` request (ToolGate::call); unset: refused.
  std::function<ToolAnswer(const nlohmann::json&)> tool;
  /// Decides and starts a `model` request with the caller's stdio
  /// (ModelGate::call): an answer now, or a running model whose exit
  /// answers it.
  std::function<std::variant<nlohmann::json, ModelRun>(const nlohmann::json&, std::vector<UniqueFd>)> model;
  /// Where the parent's sandbox shows a host path (inner_path_of over its
  /// plan), so that answers name paths the parent can use; unset or
  /// nullopt: the host path.
  std::function<std::optional<std::string>(const std::string&)> inner_path;
  /// Told when a model started by `model` has exited, once it is answered.
  std::function<void(const ModelRun&, int exit_status)> model_exit;
  /// Appends a record to the agent's <name>.d/log (the count of
  /// rate-limited requests).
  std::function<void(const Event&)> log;
};

/// Connections served at once.
inline constexpr std::size_t kMaxConns = 32;
/// A connection that waits for no answer (a `start`, `wait` or `stop`
/// of a child, a running model) and has sent no complete request for this
/// long is closed.
inline constexpr int kIdleTimeoutMs = 5000;

/// The control socket's server: reads requests, checks them, answers, and
/// keeps the owned children in a ChildRegistry. Single-threaded: the
/// supervisor's poll loop drives it.
class Children {
 public:
  Children(ChildrenConfig cfg, UniqueFd control_listen);

  /// Appends the fds to watch (listen socket, connections, child pidfds
  /// and status pipes); handle() takes the same vector back after poll.
  void add_poll_fds(std::vector<struct pollfd>& fds) const;
  void handle(const std::vector<struct pollfd>& fds);
  /// How long the poll may wait before handle() has work without an fd
  /// (an idle connection to close, a count of dropped requests to
  /// record), in ms; -1: no such work.
  int poll_timeout_ms() const;

  /// Whether a request arriving now (a notify datagram; the control
  /// socket's own requests are admitted inside) is within the agent's
  /// one rate limit; a refused one is counted.
  bool admit();
  /// Writes the count of refused requests to the log when it is due
  /// (RateLimiter::due_report), or with `final` whatever is pending.
  void report_dropped(bool final);

  /// Stops accepting requests and answers pending ones with ECANCELED.
  void close_control();
  /// Sends parent_dead_signal() to every running child supervisor.
  void cancel_all();
  /// Number of child supervisors still running.
  std::size_t running() const;
  /// Waits (polling only the children) until none runs or timeout_ms has
  /// passed; then, with kill_left, SIGKILLs and reaps those left.
  void wait_all(int timeout_ms, bool kill_left);

 private:
  std::string shown(const std::string& host) const;
  struct Conn {
    UniqueFd fd;
    std::string buf;
    std::vector<UniqueFd> fds;    ///< descriptors that came with the request (ctx model's stdio)
    std::uint64_t active_us = 0;  ///< accepted, or its last complete request or answer
  };

  void accept_all();
  void close_idle();
  bool waits(int id) const;
  void read_conn(int id);
  /// Sends one answer line (with `fds`, SCM_RIGHTS); a refusal gets
  /// "agent".
  void answer(int id, const nlohmann::json& j, const std::vector<int>& fds = {});
  void deny(int id, const std::string& op, const Error& e);
  void request(int id, const std::string& line);
  /// With `replace`, a stopped child of that name is deleted first.
  Result<nlohmann::json> create(const agentdir::ChildRequest& r, bool replace);
  /// `ctx agent delete`: an owned child that runs nowhere, its files and
  /// home removed (agentdir::remove_child), recorded.
  Result<void> remove(const std::string& name);
  /// An error as the parent's sandbox would name its paths.
  Error shown(Error e) const;
  Result<std::string> start(int id, const ControlRequest& req);
  /// Whether the parent's policy lets it `perm` the agent `name` (ControlAuthorize).
  Result<void> authorize(const std::string& name, std::string_view perm) const;
  void stop_or_wait(int id, const std::string& op, const std::string& name);
  void read_status(OwnedChild& c, const std::string& name);
  void exited(const std::string& name, int status);

  ChildrenConfig cfg_;
  UniqueFd listen_;
  std::map<int, Conn> conns_;
  int next_conn_ = 0;
  ChildRegistry children_;
  std::map<int, ModelRun> models_;  ///< running models, by the connection their exit answers
  RateLimiter limiter_{kRequestBurst, kRequestsPerMinute};
};

}  // namespace ctx::launcher
