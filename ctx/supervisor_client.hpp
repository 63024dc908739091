// One request to the agent's supervisor over its control socket, from
// inside the sandbox (launcher/children.hpp has the protocol): a JSON line
// out, a JSON line back, with the descriptors the answer carries.
#pragma once

#include <nlohmann/json.hpp>
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

/// The errno an answer's "code" names (EIO for one not known here).
int answer_errno(const nlohmann::json& a);

}  // namespace ctx::helper
