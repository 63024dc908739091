// The control socket's one server (ControlServer): it accepts connections
// from the agent's sandbox, applies the agent's one rate limit and the
// connection and idle limits, decodes every request in one place
// (decode_control_request, launcher/control/request.hpp) and dispatches it:
// create, start, stop, wait and delete to the owned children (a
// ChildRegistry, started and ended by child_spawn), tool to the ToolGate
// (launcher/control/tool_gate.hpp), model to the ModelGate
// (launcher/control/model_gate.hpp), which owns the running models and
// their records.
//
// Protocol: one JSON object per line in each direction.
//   {"op":"create"[,"replace":true],"request":{...agent.create shape...}}
//     -> {"ok":true,"op":"create","name":N,"context":DIR}
//   {"op":"start","name":"rev-1"[,"command":["/probe","sleep:5"]]}
//     -> {"ok":true,"op":"start","name":N,"pid":N} once the child's runtime runs
//   {"op":"stop","name":"rev-1"}
//     -> {"ok":true,"op":"stop","name":N,"exit_status":N} once it has exited
//   {"op":"wait","name":"rev-1"}
//     -> {"ok":true,"op":"wait","name":N,"exit_status":N} once it has exited
//   {"op":"delete","name":"rev-1"}   (a stopped child; needs agent:<name> create)
//     -> {"ok":true,"op":"delete","name":N}
//   {"op":"tool","name":"fs.read"[,"dir":"/ctx/tool"]}
//     -> {"ok":true,"op":"tool","name":T,"path":P} with the tool's descriptor
//   {"op":"model","name":"debug/echo"} with the caller's stdin, stdout and
//   stderr (SCM_RIGHTS)
//     -> {"ok":true,"op":"model","exit_status":N} once the model has exited
// A refusal: {"ok":false[,"op":OP][,"name":N],"code":"EACCES",
// "reason":"agent_policy","agent":"coder","message":"..."}; it names the
// agent this supervisor serves (never what the caller's environment says).
// tool and model refusals always carry "name" (the name asked for; "" when
// the request had none).
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
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "agentdir/agent_spec.hpp"
#include "base/result.hpp"
#include "base/unique_fd.hpp"
#include "launcher/control/child_registry.hpp"
#include "launcher/control/child_spawn.hpp"
#include "launcher/control/request.hpp"
#include "launcher/records/event.hpp"
#include "launcher/control/rate_limit.hpp"
#include "launcher/control/model_gate.hpp"
#include "launcher/control/tool_gate.hpp"

namespace ctx::launcher {

/// What the control server asks of its supervisor.
class ControlHost {
 public:
  virtual ~ControlHost() = default;
  /// Whether a connection's peer may use the control socket (a process of
  /// the agent's sandbox); a refused connection is closed unanswered.
  virtual bool peer_allowed(int conn) const = 0;
  /// Where the parent's sandbox shows a host path (inner_path_of over its
  /// plan), so that answers name paths the parent can use; nullopt: the
  /// host path.
  virtual std::optional<std::string> inner_path(const std::string& host) const = 0;
  /// Told once a child's supervisor runs, with its pidfd (the parent's
  /// watchdog keeps a copy, so that it waits for the child when the
  /// parent's supervisor is killed).
  virtual void child_spawned(int pidfd) = 0;
};

/// What the control server serves, all borrowed for its lifetime.
struct ControlServerConfig {
  const agentdir::AgentSpec* parent = nullptr;
  std::string session;
  std::string run;
  SpawnConfig spawn;  ///< how child supervisors are started
  ControlHost* host = nullptr;
  /// The agent's events.jsonl (the children's events) and <name>.d/log
  /// (the count of rate-limited requests).
  RecordSink* records = nullptr;
  ToolGate* tools = nullptr;    ///< decides `tool` requests; null: refused (no tool tier)
  ModelGate* models = nullptr;  ///< decides and runs `model` requests; null: refused (no model tier)
};

/// Connections served at once.
inline constexpr std::size_t kMaxConns = 32;
/// A connection that waits for no answer (a `start`, `wait` or `stop`
/// of a child, a running model) and has sent no complete request for this
/// long is closed.
inline constexpr int kIdleTimeoutMs = 5000;

/// The control socket's server: accepts, limits, decodes and answers
/// requests, dispatching them to the owned children (kept in a
/// ChildRegistry), the ToolGate and the ModelGate. Single-threaded: the
/// supervisor's poll loop drives it.
class ControlServer {
 public:
  ControlServer(ControlServerConfig cfg, UniqueFd control_listen);

  /// Appends the fds to watch (listen socket, connections, running
  /// models, child pidfds and status pipes); handle() takes the same vector back after poll.
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
  /// Dispatches a request that was refused by the decoder.
  void refused(int id, const ControlDecode& d);
  void tool(int id, const ToolRequest& r);
  void model(int id, const ModelRequest& r);
  /// With `replace`, a stopped child of that name is deleted first.
  Result<nlohmann::json> create(const agentdir::ChildRequest& r, bool replace);
  /// `ctx agent delete`: an owned child that runs nowhere, its files and
  /// home removed (agentdir::remove_child), recorded.
  Result<void> remove(const std::string& name);
  /// An error as the parent's sandbox would name its paths.
  Error shown(Error e) const;
  Result<std::string> start(int id, const StartRequest& req);
  /// Whether the parent's policy lets it `perm` the agent `name` (ControlAuthorize).
  Result<void> authorize(const std::string& name, std::string_view perm) const;
  void stop_or_wait(int id, const std::string& op, const std::string& name);
  void answer_models(const std::vector<struct pollfd>& fds);
  void read_status(OwnedChild& c, const std::string& name);
  void exited(const std::string& name, int status);

  ControlServerConfig cfg_;
  UniqueFd listen_;
  std::map<int, Conn> conns_;
  int next_conn_ = 0;
  ChildRegistry children_;
  RateLimiter limiter_{kRequestBurst, kRequestsPerMinute};
};

}  // namespace ctx::launcher
