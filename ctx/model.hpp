// `ctx model NAME [REQUEST]`: a model call from inside an agent's sandbox
// (issue 12). The supervisor decides it (access::model_call: the user tier,
// then the system tier; an alias as the model it names; the agent's
// model:<name> use, the execute bit, the model's own policy), records it,
// and runs the model in a sandbox of its own with this helper's stdin,
// stdout and stderr: the request on stdin or as the argument, the answer
// on stdout, the model's exit status as this one's.
#pragma once

#include <optional>
#include <string>

namespace ctx::helper {

int call_model(const std::string& name, const std::optional<std::string>& request);

}  // namespace ctx::helper
