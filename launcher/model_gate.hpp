// `ctx model NAME` decided and run by the supervisor (issue 12): the
// lookup and layers of view::model_call against the CTX tree (the
// sandbox's read-only clone, read as the owner), then the model started
// in a sandbox of its own (launcher/model_plan.hpp, model_run.hpp) with
// the caller's stdin, stdout and stderr. Protocol (control socket, with 3
// descriptors): {"op":"model","name":"debug/echo"}; answers
// {"ok":true,"op":"model","exit_status":N} when the model exits, or
// {"ok":false,"op":"model","code":"EACCES","reason":"agent_policy",...}.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <variant>
#include <vector>

#include "base/unique_fd.hpp"
#include "launcher/model_run.hpp"
#include "launcher/plan.hpp"
#include "view/fs_tree.hpp"

namespace ctx::launcher {

class ModelGate {
 public:
  /// tree: the sandbox's read-only clone of the CTX root (borrowed).
  ModelGate(const LaunchPlan& plan, int tree, std::function<void(nlohmann::json)> event,
            std::function<void(nlohmann::json)> log);

  std::variant<nlohmann::json, ModelRun> call(const nlohmann::json& req, std::vector<UniqueFd> stdio);

 private:
  nlohmann::json refuse(const std::string& name, const Error& e, const char* status);
  void record(nlohmann::json ev);

  const LaunchPlan& plan_;
  int tree_;
  std::function<void(nlohmann::json)> event_;
  std::function<void(nlohmann::json)> log_;
  view::LiveViewer live_;
};

}  // namespace ctx::launcher
