#include "launcher/control/request.hpp"

#include "base/names.hpp"
#include "launcher/control/child_request.hpp"

namespace ctx::launcher {

namespace {

using nlohmann::json;

// The child named by "name", valid and, with a perm, allowed.
Result<std::string> child_name(const json& req, const char* perm, const ControlAuthorize& authorize) {
  if (!req.contains("name") || !req["name"].is_string()) return fail(bad_request("\"name\" is required"));
  std::string name = req["name"].get<std::string>();
  if (auto issue = agent_name_issue(name)) return fail(Error{EACCES, name + ": EACCES: " + *issue, "invalid_name"});
  if (perm != nullptr) CTX_TRY(authorize(name, perm));
  return name;
}

Result<ControlRequest> start(const json& req, const ControlAuthorize& authorize) {
  ControlRequest r;
  r.op = ControlOp::start;
  CTX_TRY_ASSIGN(r.name, child_name(req, "start", authorize));
  if (req.contains("command")) {
    CTX_TRY_ASSIGN(r.command, string_list(req["command"], "command"));
  }
  for (const auto& [k, v] : req.items())
    if (k != "op" && k != "name" && k != "command") return fail(bad_request("unknown key '" + k + "' in start"));
  return r;
}

}  // namespace

std::string_view to_string(ControlOp op) {
  switch (op) {
    case ControlOp::create: return "create";
    case ControlOp::start: return "start";
    case ControlOp::stop: return "stop";
    case ControlOp::wait: return "wait";
    case ControlOp::remove: return "delete";
    case ControlOp::model: return "model";
    case ControlOp::tool: return "tool";
  }
  return "?";
}

ControlDecode decode_control_request(std::string_view line, const ControlAuthorize& authorize) {
  json j = json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("op") || !j["op"].is_string())
    return {"", fail(bad_request("a request is one JSON object with \"op\" (create, start, stop, wait, delete)"))};
  std::string op = j["op"].get<std::string>();
  auto decoded = [&]() -> Result<ControlRequest> {
    if (op == "create") {
      if (!j.contains("request")) return fail(bad_request("create needs \"request\""));
      ControlRequest r;
      r.op = ControlOp::create;
      if (j.contains("replace")) {
        if (!j["replace"].is_boolean()) return fail(bad_request("\"replace\" is true or false"));
        r.replace = j["replace"].get<bool>();
      }
      CTX_TRY_ASSIGN(r.child, decode_child_request(j["request"]));
      return r;
    }
    if (op == "start") return start(j, authorize);
    if (op == "stop" || op == "wait") {
      const bool stop = op == "stop";
      ControlRequest r;
      r.op = stop ? ControlOp::stop : ControlOp::wait;
      CTX_TRY_ASSIGN(r.name, child_name(j, stop ? "stop" : nullptr, authorize));
      return r;
    }
    if (op == "delete") {
      ControlRequest r;
      r.op = ControlOp::remove;
      CTX_TRY_ASSIGN(r.name, child_name(j, "create", authorize));
      return r;
    }
    if (op == "model" || op == "tool") {
      ControlRequest r;
      r.op = op == "model" ? ControlOp::model : ControlOp::tool;
      r.body = j;
      return r;
    }
    return fail(bad_request("unknown op '" + op + "' (create, start, stop, wait, delete, model, tool)"));
  };
  return {op, decoded()};
}

}  // namespace ctx::launcher
