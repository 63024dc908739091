// A model's sandbox started by the agent's supervisor (issue 12): the plan
// of launcher/plan/model_plan.hpp applied by the same sandbox code as an
// agent's, with the caller's stdin, stdout and stderr.
#pragma once

#include <array>
#include <chrono>
#include <string>

#include "base/result.hpp"
#include "base/unique_fd.hpp"
#include "launcher/plan/plan.hpp"
#include "sys/process.hpp"

namespace ctx::launcher {

/// A running model.
struct ModelRun {
  sys::Child child;   ///< the sandbox's init; its exit status is the model's
  UniqueFd lifeline;  ///< open while the supervisor wants the model alive
  // What the gate records when the model exits (ModelGate::finished).
  std::string name;   ///< provider/model, after any alias
  std::string rel;    ///< the model file below the CTX root
  std::string alias;  ///< the alias the caller named, below the CTX root ("" none)
  std::chrono::steady_clock::time_point started{};
};

/// Clones the model's sandbox, writes its id maps, releases it and waits
/// for its setup: the model's exec, or the error that ended it.
Result<ModelRun> start_model(const LaunchPlan& plan, const std::array<int, 3>& stdio);

}  // namespace ctx::launcher
