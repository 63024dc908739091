// `ctx model NAME` decided and run by the supervisor (issue 12), which
// owns the running models and their records: the
// lookup and layers of access::model_call against the CTX tree (the
// sandbox's read-only clone, read as the owner), then the model started
// in a sandbox of its own (launcher/plan/model_plan.hpp,
// launcher/sandbox/start.hpp) with the caller's stdin, stdout and stderr.
// Protocol (control socket, with 3 descriptors):
// {"op":"model","name":"debug/echo"} (from the HTTP model endpoint also
// "http", launcher/control/http_meta.hpp: the model's name is completed
// from its path, and the request becomes the model's CGI environment);
// answers
// {"ok":true,"op":"model","exit_status":N} when the model exits, or
// {"ok":false,"op":"model","code":"EACCES","reason":"agent_policy",...}.
// Records: one `model.call` event (the session's events.jsonl) and agent
// log line per call, when it is refused or when the model has exited; a
// line in the model's own <m>.d/log for every call that reached the model
// (run, or refused by its mode or its own policy). Facts only: never the
// request or the answer, which the supervisor does not see.
#pragma once

#include <poll.h>

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "access/fs_tree.hpp"
#include "base/unique_fd.hpp"
#include "launcher/control/http_meta.hpp"
#include "launcher/control/request.hpp"
#include "launcher/plan/model_plan.hpp"
#include "launcher/plan/plan.hpp"
#include "launcher/records/event.hpp"
#include "launcher/sandbox/start.hpp"
#include "sys/file.hpp"
#include "sys/identity.hpp"
#include "sys/process.hpp"

namespace ctx::launcher {

/// A model's .d/env: KEY=VALUE lines, in order; blank lines and # comments
/// skipped, and a line that is neither left out (the model's own file, not
/// the agent's to get wrong). Pure.
std::vector<std::pair<std::string, std::string>> parse_model_env(std::string_view text);

/// Whether a model's .d/cap grants it the network: a line `network`. Pure.
bool cap_grants_network(std::string_view cap);

/// The object a model.call record names: the model after any alias when
/// known, else the name asked for when it is a valid model or alias name,
/// else "model" alone (a request cannot make its record longer than a
/// valid name does: launcher/control/rate_limit.hpp counts on it). Pure.
std::string model_call_object(const std::string& asked, const std::string& model);

/// The empty host directory every model's root is mounted over: each
/// model's sandbox mounts a fresh tmpfs over it in its own mount namespace,
/// so that calls, even at once and of several supervisors, share it and
/// never see what it holds. The owner's shared one (`shared`, made 0700 if
/// missing, never removed: a supervisor killed leaves nothing new); when
/// that name is not a 0700 directory of the owner's (another user made it
/// first), one of this supervisor's own (mkdtemp `prefix`), removed at
/// the end. Either is made again when its path no longer names the
/// directory found: removed, or replaced on the host (the sandbox opens it
/// without following symlinks anyway).
class ModelAnchor {
 public:
  /// owner: the uid the directory must belong to; as: the rights it is
  /// made with (a root supervisor: the owner's, IdPlan::fs), nullopt the
  /// caller's own.
  ModelAnchor(std::string shared, std::string prefix, std::uint32_t owner, sys::MakeAs as);
  /// Removes a directory of this supervisor's own, when its path still
  /// names it.
  ~ModelAnchor();
  ModelAnchor(const ModelAnchor&) = delete;
  ModelAnchor& operator=(const ModelAnchor&) = delete;
  /// The directory's path; an error when none can be made.
  Result<std::string> get();

 private:
  struct Found {
    std::string path;
    sys::FileStat stat;  ///< what stat said of it when found
    bool own = false;    ///< this supervisor's own, removed at the end
  };
  /// Whether the path found still names the directory found.
  bool intact() const;
  /// The shared directory, made if missing; nullopt when it is not the owner's.
  std::optional<sys::FileStat> shared_dir() const;

  std::string shared_;
  std::string prefix_;
  std::uint32_t owner_;
  sys::MakeAs as_;
  std::optional<Found> found_;
};

/// A model started by ModelGate::call that has exited: the connection its
/// exit answers, its exit status, and what the gate records of it.
struct ModelExit {
  int conn = -1;
  int exit_status = 0;
  ModelRun run;
};

class ModelGate {
 public:
  /// tree: the sandbox's read-only clone of the CTX root. Every call goes
  /// to both of `records`; one that reached the model also to its own
  /// <m>.d/log (append_dot_log, DotLogRule::shared). plan, tree and
  /// records are borrowed.
  ModelGate(const LaunchPlan& plan, int tree, RecordSink& records);
  /// Reaps a spare's maker still at work: the supervisor leaves no child.
  ~ModelGate();
  ModelGate(const ModelGate&) = delete;
  ModelGate& operator=(const ModelGate&) = delete;

  /// Decides a decoded call from the connection `conn`, with the caller's
  /// stdin, stdout and stderr: the answer of a refusal, or nullopt when
  /// the model was started; its exit answers the call (exited()).
  std::optional<nlohmann::json> call(int conn, const ModelRequest& req, std::vector<UniqueFd> stdio);
  /// Records and answers a model request the decoder refused (e: its
  /// EINVAL, invalid_request).
  nlohmann::json refuse_request(const Error& e);

  /// Appends the pidfds of the running models.
  void add_poll_fds(std::vector<struct pollfd>& fds) const;
  /// Whether a model started for the connection `conn` still runs.
  bool waits(int conn) const;
  /// The caller on conn went away (an HTTP client that hung up): its
  /// model's lifeline is closed, so the model's init ends the model's
  /// sandbox, whose exit is then recorded as any other.
  void caller_gone(int conn);
  /// The running models whose pidfd is ready in `fds` (add_poll_fds),
  /// reaped and no longer running: each for the caller to answer, then to
  /// record with finished().
  std::vector<ModelExit> exited(const std::vector<struct pollfd>& fds);
  /// Records a model that has exited (after its answer: the caller waits
  /// for that, not for the record), and makes the spare namespaces for the
  /// next call if it has none.
  void finished(const ModelExit& e);

 private:
  struct Refusal {
    Error error;
    EventStatus status;  ///< denied or error
    std::string rel;     ///< the model file when the call reached it, else ""
    std::string model;   ///< provider/model when known, after any alias
    std::string alias;   ///< the alias followed ("" none)
  };
  std::variant<ModelEntry, Refusal> decide(const std::string& name);
  /// Starts an allowed model with the caller's stdio, its root mounted
  /// over anchor_.
  Result<ModelRun> start(const ModelEntry& m, std::vector<UniqueFd> stdio);
  /// An HTTP call's model name, completed from its path (as the owner).
  void take_model_segment(std::string& name, HttpMeta& h) const;
  /// The answer of a refused call, recorded with the model named (after
  /// an alias) when known, else the name asked for.
  nlohmann::json refuse(const std::string& name, const Error& e, EventStatus status, const std::string& model = "",
                        const std::string& alias = "");
  void record(const Event& ev);
  void log_model(const std::string& rel, const Event& ev);

  const LaunchPlan& plan_;
  int tree_;
  RecordSink& records_;
  access::LiveViewer live_;
  /// The host directories of the base system a model sees (/usr, and of
  /// /etc/alternatives, /etc/ssl, /etc/ca-certificates those that exist),
  /// found at the first call.
  std::optional<std::vector<std::string>> base_;
  /// The host's resolver files a model with the network reads (inside
  /// path, the host file it resolves to), those that exist, found with base_.
  std::vector<std::pair<std::string, std::string>> net_files_;
  /// Why kept, not made and removed per call: an rmdir on this machine's
  /// /tmp (ext4, mounted `discard`) took 2.8-3.8 ms of the single-threaded
  /// supervisor's time, longer than a small model.
  ModelAnchor anchor_;
  std::map<int, ModelRun> runs_;  ///< running models, by the connection their exit answers

  /// A user namespace with a model plan's id maps and a network namespace
  /// it owns, made ahead by a short-lived child of the supervisor
  /// (make_spare) while no call waits, for the next call of a model
  /// without the network to join instead of making its own at the clone
  /// (about 0.4 ms of the call, most of it the network namespace). Each
  /// is used by one call only, so every call still has a network
  /// namespace nothing else was ever in (docs/security.md, "A model
  /// call's network namespace").
  struct Spare {
    UniqueFd user, net;
  };
  /// The id maps every spare is made with: those of the first model plan
  /// whose sandbox maps itself (unprivileged) in a user and a network
  /// namespace of its own; unset until such a call. A call joins a spare
  /// only when its plan's maps are these.
  struct SpareMaps {
    std::vector<sys::IdMapLine> uid_map, gid_map;
    bool deny_setgroups = false;
    bool operator==(const SpareMaps&) const = default;
  };
  void make_spare();
  std::optional<Spare> spare_;
  std::optional<SpareMaps> spare_maps_;
  std::optional<sys::Child> maker_;  ///< making a spare: answers on maker_sock_
  UniqueFd maker_sock_;
};

}  // namespace ctx::launcher
