#include "launcher/control/request.hpp"

#include "base/names.hpp"
#include "launcher/control/child_request.hpp"

namespace ctx::launcher {

namespace {

using nlohmann::json;

// The refusals of tool and model requests are worded as their gates
// always worded them: without the errno's name first.
Error bad_call(const std::string& msg) { return Error{EINVAL, msg, "invalid_request"}; }

// The child named by "name", valid and, with a perm, allowed.
Result<std::string> child_name(const json& req, const char* perm, const ControlAuthorize& authorize) {
  if (!req.contains("name") || !req["name"].is_string()) return fail(bad_request("\"name\" is required"));
  std::string name = req["name"].get<std::string>();
  if (auto issue = agent_name_issue(name)) return fail(Error{EACCES, name + ": EACCES: " + *issue, "invalid_name"});
  if (perm != nullptr) CTX_TRY(authorize(name, perm));
  return name;
}

Result<ControlRequest> create(const json& j) {
  if (!j.contains("request")) return fail(bad_request("create needs \"request\""));
  CreateRequest r;
  if (j.contains("replace")) {
    if (!j["replace"].is_boolean()) return fail(bad_request("\"replace\" is true or false"));
    r.replace = j["replace"].get<bool>();
  }
  CTX_TRY_ASSIGN(r.child, decode_child_request(j["request"]));
  return ControlRequest(std::move(r));
}

Result<ControlRequest> start(const json& j, const ControlAuthorize& authorize) {
  StartRequest r;
  CTX_TRY_ASSIGN(r.name, child_name(j, "start", authorize));
  if (j.contains("command")) {
    CTX_TRY_ASSIGN(r.command, string_list(j["command"], "command"));
  }
  for (const auto& [k, v] : j.items())
    if (k != "op" && k != "name" && k != "command") return fail(bad_request("unknown key '" + k + "' in start"));
  return ControlRequest(std::move(r));
}

Result<ControlRequest> tool(const json& j) {
  for (const auto& [k, v] : j.items())
    if (k != "op" && k != "name" && k != "dir") return fail(bad_call("unknown key '" + k + "' in tool"));
  if (!j.contains("name") || !j["name"].is_string()) return fail(bad_call("tool needs \"name\", a string"));
  ToolRequest r;
  r.name = j["name"].get<std::string>();
  r.direct = j.contains("dir");
  if (r.direct && j["dir"].is_string()) r.dir = j["dir"].get<std::string>();
  return ControlRequest(std::move(r));
}

// Each key a model request may carry, decoded in turn: a new key (the
// HTTP endpoint's metadata) is one more branch here and one more field.
Result<ControlRequest> model(const json& j) {
  for (const auto& [k, v] : j.items())
    if (k != "op" && k != "name" && k != "http") return fail(bad_call("unknown key '" + k + "' in model"));
  if (!j.contains("name") || !j["name"].is_string()) return fail(bad_call("model needs \"name\", a string"));
  ModelRequest r;
  r.name = j["name"].get<std::string>();
  if (j.contains("http")) r.http = decode_http_meta(j["http"]);
  return ControlRequest(std::move(r));
}

Result<ControlRequest> decode_op(const std::string& op, const json& j, const ControlAuthorize& authorize) {
  if (op == "create") return create(j);
  if (op == "start") return start(j, authorize);
  if (op == "stop") {
    CTX_TRY_ASSIGN(std::string name, child_name(j, "stop", authorize));
    return ControlRequest(StopRequest{std::move(name)});
  }
  if (op == "wait") {
    CTX_TRY_ASSIGN(std::string name, child_name(j, nullptr, authorize));
    return ControlRequest(WaitRequest{std::move(name)});
  }
  if (op == "delete") {
    CTX_TRY_ASSIGN(std::string name, child_name(j, "create", authorize));
    return ControlRequest(DeleteRequest{std::move(name)});
  }
  if (op == "tool") return tool(j);
  if (op == "model") return model(j);
  return fail(bad_request("unknown op '" + op + "' (create, start, stop, wait, delete, model, tool)"));
}

}  // namespace

std::string_view op_of(const ControlRequest& r) {
  struct Word {
    std::string_view operator()(const CreateRequest&) const { return "create"; }
    std::string_view operator()(const StartRequest&) const { return "start"; }
    std::string_view operator()(const StopRequest&) const { return "stop"; }
    std::string_view operator()(const WaitRequest&) const { return "wait"; }
    std::string_view operator()(const DeleteRequest&) const { return "delete"; }
    std::string_view operator()(const ToolRequest&) const { return "tool"; }
    std::string_view operator()(const ModelRequest&) const { return "model"; }
  };
  return std::visit(Word{}, r);
}

ControlDecode decode_control_request(std::string_view line, const ControlAuthorize& authorize) {
  json j = json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("op") || !j["op"].is_string())
    return {"", fail(bad_request("a request is one JSON object with \"op\" (create, start, stop, wait, delete, "
                                 "model, tool)"))};
  std::string op = j["op"].get<std::string>();
  return {op, decode_op(op, j, authorize)};
}

}  // namespace ctx::launcher
