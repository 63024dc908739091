// One line of the supervisor's control socket (launcher/control/server.hpp)
// decoded into a typed request, or the refusal to answer: every op of the
// protocol is decoded here and nowhere else. Pure: whether the child exists
// or runs, and what the model and tool gates decide, is the server's and
// the gates' business; whether the caller's policy allows a name is asked
// of the caller (ControlAuthorize).
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "agentdir/child.hpp"
#include "base/result.hpp"
#include "launcher/control/http_meta.hpp"

namespace ctx::launcher {

/// {"op":"create"[,"replace":true],"request":{...}}
struct CreateRequest {
  agentdir::ChildRequest child;  ///< the decoded "request" (decode_child_request)
  bool replace = false;          ///< a stopped child of that name is deleted first
};

/// {"op":"start","name":N[,"command":C]}
struct StartRequest {
  std::string name;                  ///< a valid agent name the policy lets the caller start
  std::vector<std::string> command;  ///< the runtime's command; empty: the child's own
};

/// {"op":"stop","name":N}
struct StopRequest {
  std::string name;  ///< a valid agent name the policy lets the caller stop
};

/// {"op":"wait","name":N}
struct WaitRequest {
  std::string name;  ///< a valid agent name (no permission: only owned children answer)
};

/// {"op":"delete","name":N}
struct DeleteRequest {
  std::string name;  ///< a valid agent name the policy lets the caller create
};

/// {"op":"tool","name":T[,"dir":D]}
struct ToolRequest {
  std::string name;     ///< as sent; ToolGate checks it (tool_name_issue)
  bool direct = false;  ///< "dir" was sent: a direct call of the tool in that tier
  std::string dir;      ///< "dir" when a string, else ""
};

/// {"op":"model","name":M}, with the caller's stdin, stdout and stderr.
struct ModelRequest {
  std::string name;  ///< as sent; ModelGate looks it up
  /// From the HTTP model endpoint: the request, checked (http_meta.hpp),
  /// or why it was refused; the gate records a refusal under the model's
  /// name, as any other of its refusals.
  std::optional<Result<HttpMeta>> http;
};

/// A request that passed every check that needs no state.
using ControlRequest =
    std::variant<CreateRequest, StartRequest, StopRequest, WaitRequest, DeleteRequest, ToolRequest, ModelRequest>;

/// The op's word on the wire ("create"; DeleteRequest is "delete").
std::string_view op_of(const ControlRequest& r);

/// The outcome of one line: the op the answer names ("" when the line
/// named none, as a string) and the request or the refusal. Every refusal
/// has a reason ("invalid_request", "invalid_name", or the authorizer's).
/// A refused tool or model request is its gate's to record and answer
/// (ToolGate::refuse_request, ModelGate::refuse_request).
struct ControlDecode {
  std::string op;
  Result<ControlRequest> request;
};

/// Whether the caller may use `perm` ("start", "stop") on the agent
/// `name`; asked once the name is valid, before the other keys are read.
/// An error refuses the request with it.
using ControlAuthorize = std::function<Result<void>(const std::string& name, std::string_view perm)>;

/// Decodes one request line (without its newline): a JSON object with a
/// string "op".
/// - create needs "request" (decode_child_request) and may carry
///   "replace", true or false;
/// - start, stop, wait and delete need a valid "name" (agent_name_issue:
///   EACCES, invalid_name); start passes `authorize` with "start", stop
///   with "stop", delete with "create" (policy v0 has no delete: what made
///   a child may unmake it), wait with nothing; start knows only "op",
///   "name" and "command" (a string or an array of strings); stop, wait
///   and delete ignore other keys;
/// - tool knows only "op", "name" (a string) and "dir";
/// - model knows only "op" and "name" (a string).
/// Anything else is refused with EINVAL, reason invalid_request.
ControlDecode decode_control_request(std::string_view line, const ControlAuthorize& authorize);

}  // namespace ctx::launcher
