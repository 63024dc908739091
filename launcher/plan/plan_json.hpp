// The plan as JSON, for `ctx-agent-run --dry-run`.
#pragma once

#include <nlohmann/json.hpp>

#include "launcher/plan/plan.hpp"

namespace ctx::launcher {

/// Every decision of the plan, in a stable shape (documented in
/// docs/launcher.md).
nlohmann::json plan_to_json(const LaunchPlan& plan);

}  // namespace ctx::launcher
