// `ctx agent create|start|stop|wait`: a parent agent's requests to its
// supervisor, over the control socket the launcher shows in every sandbox
// (/run/ctx/supervisor; $CTX_SUPERVISOR overrides it for tests). The
// protocol is launcher/control/server.hpp's.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace ctx::helper {

/// Runs one request. `op` is create, start, stop, wait or delete; `arg` is the
/// request (create: the JSON of docs/children.md, else a NAME or
/// {"name": ...}), read from stdin when absent; `command` (start only) is
/// the child's runtime command line; `replace` (create only) deletes a
/// stopped child of the same name first. Prints the supervisor's answer on
/// stdout and returns 0, or prints one JSON error line and a sentence on
/// stderr and returns the errno value (13 for a denial).
int agent_request(const std::string& op, const std::optional<std::string>& arg,
                  const std::vector<std::string>& command, bool replace = false);

}  // namespace ctx::helper
