// The supervisor's owned children (seed 003): the control socket that
// `ctx agent create|start|stop|wait` talks to from inside the sandbox,
// the child supervisors it starts, and their cancellation when the parent
// dies.
//
// Protocol: one JSON object per line in each direction.
//   {"op":"create","request":{...seed 000 agent.create shape...}}
//   {"op":"start","name":"rev-1"[,"command":["/probe","sleep:5"]]}
//   {"op":"stop","name":"rev-1"}
//   {"op":"wait","name":"rev-1"}
// Answers: {"ok":true,"op":...,"name":...[,"pid":N][,"exit_status":N]} or
// {"ok":false,"code":"EACCES","reason":"agent_policy","message":"..."}.
#pragma once

#include <poll.h>
#include <sys/types.h>

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "agentdir/agent_spec.hpp"
#include "base/result.hpp"
#include "base/unique_fd.hpp"
#include "sys/file.hpp"

namespace ctx::launcher {

/// The signal a parent supervisor sends to an owned child's supervisor
/// (and the PR_SET_PDEATHSIG the kernel sends when the parent supervisor
/// dies in any way): run the cancellation sequence. SIGRTMIN+2.
int parent_dead_signal();

/// The signal a parent supervisor sends for `ctx agent stop`: the same
/// sequence (SIGTERM, grace, cgroup.kill) ending in status "stopped".
/// SIGRTMIN+3.
int stop_signal();

/// The default grace between SIGTERM and cgroup.kill when owned children
/// are cancelled (--cancel-grace-ms).
inline constexpr int kDefaultCancelGraceMs = 2000;
/// How long, past the grace period, a parent waits for its children's
/// supervisors to finish their records before it SIGKILLs them.
inline constexpr int kChildRecordsMs = 3000;

/// What the registry needs from its supervisor.
struct ChildrenConfig {
  const agentdir::AgentSpec* parent = nullptr;
  std::string session;
  std::string run;
  std::string self_exe;      ///< ctx-agent-run, to start child supervisors
  std::string agent_cgroup;  ///< the agent's cgroup directory, "" without cgroups
  bool require_cgroup = false;
  int cancel_grace_ms = kDefaultCancelGraceMs;
  std::vector<std::string> env;         ///< the child supervisors' environment
  std::optional<sys::Ownership> owner;  ///< a root caller: files go to the agent's host ids
  /// Runs before the first child supervisor is started (the parent's
  /// watchdog); a failure refuses the start.
  std::function<Result<void>()> before_first_child;
  /// Appends an event to the parent's session events.jsonl.
  std::function<void(nlohmann::json)> event;
  /// Whether a connection's peer may use the control socket (a process of
  /// the agent's sandbox); a refused connection is closed unanswered.
  std::function<bool(int conn)> peer_allowed;
};

/// The registry. Single-threaded: the supervisor's poll loop drives it.
class Children {
 public:
  Children(ChildrenConfig cfg, UniqueFd control_listen);

  /// Appends the fds to watch (listen socket, connections, child pidfds
  /// and status pipes); handle() takes the same vector back after poll.
  void add_poll_fds(std::vector<struct pollfd>& fds) const;
  void handle(const std::vector<struct pollfd>& fds);

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
  struct Conn {
    UniqueFd fd;
    std::string buf;
  };
  struct Child {
    pid_t pid = 0;
    UniqueFd pidfd;
    UniqueFd status;  ///< the child supervisor's --json-status-fd
    std::string status_buf;
    std::optional<int> exit_status;
    std::optional<pid_t> runtime_pid;
    std::vector<int> start_waiters;                         ///< connection ids
    std::vector<std::pair<int, std::string>> exit_waiters;  ///< connection id, op (stop or wait)
  };

  void accept_all();
  void read_conn(int id);
  void answer(int id, const nlohmann::json& j);
  void deny(int id, const std::string& op, const Error& e);
  void request(int id, const std::string& line);
  Result<nlohmann::json> create(const nlohmann::json& req);
  Result<std::string> start(int id, const nlohmann::json& req);
  Result<std::string> own_child(const nlohmann::json& req, const char* perm);
  void read_status(Child& c, const std::string& name);
  void exited(const std::string& name, Child& c, int status);

  ChildrenConfig cfg_;
  UniqueFd listen_;
  std::map<int, Conn> conns_;
  int next_conn_ = 0;
  std::map<std::string, Child> children_;
};

}  // namespace ctx::launcher
