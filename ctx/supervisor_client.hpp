// One request to the agent's supervisor over its control socket, from
// inside the sandbox (launcher/control/server.hpp has the protocol): a JSON line
// out, a JSON line back, with the descriptors the answer carries.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "base/result.hpp"
#include "base/unique_fd.hpp"

namespace ctx::helper {

struct SupervisorAnswer {
  nlohmann::json answer;
  std::vector<UniqueFd> fds;
};

/// The socket is $CTX_SUPERVISOR, else /run/ctx/supervisor. Errors:
/// reason "no_supervisor" when there is none to connect to; EIO when it
/// closes without an answer.
/// `fds` go with the request (ctx model passes its stdin, stdout, stderr).
Result<SupervisorAnswer> ask_supervisor(const nlohmann::json& request, const std::vector<int>& fds = {});

/// The error protocol of ctx tool and ctx model: one JSON line (type,
/// code, reason, `what`: name, agent, message) and one sentence for
/// people on stderr; returns code. `agent` is the one the supervisor's
/// answer names ("" when no supervisor answered), never CTX_AGENT: the
/// environment is the runtime's to change.
int refuse_call(const char* what, const std::string& name, int code, const std::string& reason,
                const std::string& sentence, const std::string& agent = "");

/// A refusal in the supervisor's answer, said with refuse_call: the exit
/// status (the errno; 1 for one above 124, which shells read as "could
/// not run"); nullopt when the answer is ok.
std::optional<int> refused(const char* what, const std::string& name, const nlohmann::json& answer);

/// The errno an answer's "code" names (EIO for one not known here;
/// EAGAIN for a rate-limited request).
int answer_errno(const nlohmann::json& a);

}  // namespace ctx::helper
