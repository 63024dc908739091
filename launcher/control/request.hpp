// One line of the supervisor's control socket (launcher/control/server.hpp)
// decoded into a typed request, or the refusal to answer. Pure: whether
// the child exists or runs, and what the model and tool gates decide, is
// Children's business; whether the caller's policy allows a name is asked
// of the caller (ControlAuthorize).
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "agentdir/child.hpp"
#include "base/result.hpp"

namespace ctx::launcher {

/// The ops of the protocol.
enum class ControlOp { create, start, stop, wait, remove, model, tool };

/// The op's word on the wire ("create"; remove is "delete").
std::string_view to_string(ControlOp op);

/// A request that passed every check that needs no state.
struct ControlRequest {
  ControlOp op = ControlOp::create;
  /// start, stop, wait, remove: the child, a valid agent name
  /// (agent_name_issue).
  std::string name;
  /// create: "replace": a stopped child of that name is deleted first.
  bool replace = false;
  /// start: the runtime's command ("command"); empty: the child's own.
  std::vector<std::string> command;
  /// create: the decoded "request" (decode_child_request).
  agentdir::ChildRequest child;
  /// model, tool: the whole request object, which their gates decode.
  nlohmann::json body;
};

/// The outcome of one line: the op the answer names ("" when the line
/// named none, as a string) and the request or the refusal. Every refusal
/// has a reason ("invalid_request", "invalid_name", or the authorizer's).
struct ControlDecode {
  std::string op;
  Result<ControlRequest> request;
};

/// Whether the caller may use `perm` ("start", "stop") on the agent
/// `name`; asked once the name is valid, before the other keys are read.
/// An error refuses the request with it.
using ControlAuthorize = std::function<Result<void>(const std::string& name, std::string_view perm)>;

/// Decodes one request line (without its newline): a JSON object with a
/// string "op". create needs "request"; start, stop and wait a valid
/// "name" (start and stop then pass `authorize`); start knows only "op",
/// "name" and "command" (a string or an array of strings). delete needs a
/// valid "name" that passes `authorize` with "create" (policy v0 has no
/// delete: what made a child may unmake it); create may carry "replace":
/// true. Other ops are refused with EINVAL, reason invalid_request.
ControlDecode decode_control_request(std::string_view line, const ControlAuthorize& authorize);

}  // namespace ctx::launcher
