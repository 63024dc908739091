// A model's sandbox started by the agent's supervisor (issue 12): the plan
// of launcher/model_plan.hpp applied by the same sandbox code as an
// agent's, with the caller's stdin, stdout and stderr.
#pragma once

#include <array>
#include <string>

#include "base/result.hpp"
#include "base/unique_fd.hpp"
#include "launcher/plan.hpp"
#include "sys/process.hpp"

namespace ctx::launcher {

/// A running model.
struct ModelRun {
  sys::Child child;   ///< the sandbox's init; its exit status is the model's
  UniqueFd lifeline;  ///< open while the supervisor wants the model alive
};

/// Clones the model's sandbox, writes its id maps, releases it and waits
/// for its setup: the model's exec, or the error that ended it.
Result<ModelRun> start_model(const LaunchPlan& plan, const std::array<int, 3>& stdio);

}  // namespace ctx::launcher
