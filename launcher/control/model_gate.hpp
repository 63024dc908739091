// `ctx model NAME` decided and run by the supervisor (issue 12): the
// lookup and layers of access::model_call against the CTX tree (the
// sandbox's read-only clone, read as the owner), then the model started
// in a sandbox of its own (launcher/plan/model_plan.hpp, model_run.hpp) with
// the caller's stdin, stdout and stderr. Protocol (control socket, with 3
// descriptors): {"op":"model","name":"debug/echo"} (from the HTTP model
// endpoint also "http", launcher/control/http_meta.hpp: the model's name
// is completed from its path, and the request becomes the model's CGI
// environment); answers
// {"ok":true,"op":"model","exit_status":N} when the model exits, or
// {"ok":false,"op":"model","code":"EACCES","reason":"agent_policy",...}.
// Records: one `model.call` event (the session's events.jsonl) and agent
// log line per call, when it is refused or when the model has exited; a
// line in the model's own <m>.d/log for every call that reached the model
// (run, or refused by its mode or its own policy). Facts only: never the
// request or the answer, which the supervisor does not see.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <variant>
#include <vector>

#include "base/unique_fd.hpp"
#include "launcher/control/http_meta.hpp"
#include "launcher/records/event.hpp"
#include "launcher/plan/model_plan.hpp"
#include "launcher/sandbox/model_run.hpp"
#include "launcher/plan/plan.hpp"
#include "access/fs_tree.hpp"

namespace ctx::launcher {

class ModelGate {
 public:
  /// tree: the sandbox's read-only clone of the CTX root (borrowed).
  ModelGate(const LaunchPlan& plan, int tree, std::function<void(const Event&)> event,
            std::function<void(const Event&)> log);

  std::variant<nlohmann::json, ModelRun> call(const nlohmann::json& req, std::vector<UniqueFd> stdio);

  /// Records a model started by call() that has exited.
  void finished(const ModelRun& run, int exit_status);

 private:
  struct Refusal {
    Error error;
    EventStatus status;  ///< denied or error
    std::string rel;     ///< the model file when the call reached it, else ""
    std::string model;   ///< provider/model when known, after any alias
    std::string alias;   ///< the alias followed ("" none)
  };
  std::variant<ModelEntry, Refusal> decide(const std::string& name);
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
  std::function<void(const Event&)> event_;
  std::function<void(const Event&)> log_;
  access::LiveViewer live_;
  /// The host directories of the base system a model sees (/usr, and of
  /// /etc/alternatives, /etc/ssl, /etc/ca-certificates those that exist),
  /// found at the first call.
  std::optional<std::vector<std::string>> base_;
};

}  // namespace ctx::launcher
