// libFuzzer target: one line of the supervisor's control socket
// (decode_control_request), with an authorizer that refuses every name
// holding an 'x'. Invariants:
//  - a refusal has an errno of the protocol, a reason and a message, names
//    the op only when the line had a string "op", and its answer is
//    JSON that dumps (valid UTF-8);
//  - an accepted request's op is the line's; start/stop/wait carry a
//    valid agent name that start and stop asked the authorizer about and
//    it allowed; start held no key but op, name and command; create held
//    a "request" that decode_child_request accepts alone; delete carries
//    a valid name asked about with "create";
//  - start, stop and wait, written back as a canonical line, decode to
//    the same request.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "base/names.hpp"
#include "launcher/control/child_request.hpp"
#include "launcher/control/request.hpp"

namespace {

using ctx::launcher::ControlOp;
using nlohmann::json;

void check(bool ok) {
  if (!ok) std::abort();
}

struct Asked {
  int times = 0;
  std::string name;
  std::string perm;
};

ctx::launcher::ControlDecode decode(std::string_view line, Asked& asked) {
  return ctx::launcher::decode_control_request(line, [&](const std::string& name, std::string_view perm) {
    ++asked.times;
    asked.name = name;
    asked.perm = std::string(perm);
    if (name.find('x') != std::string::npos)
      return ctx::Result<void>(ctx::fail(ctx::Error{EACCES, name + ": EACCES: refused", "agent_policy"}));
    return ctx::Result<void>();
  });
}

void refused(const json& j, const ctx::launcher::ControlDecode& d, const Asked& asked) {
  const ctx::Error& e = d.request.error();
  check(e.code == EINVAL || e.code == EACCES);
  check(!e.reason.empty() && !e.msg.empty());
  check(e.reason != "agent_policy" || (asked.times == 1 && asked.name.find('x') != std::string::npos));
  const bool has_op = !j.is_discarded() && j.is_object() && j.contains("op") && j["op"].is_string();
  check(d.op == (has_op ? j["op"].get<std::string>() : ""));
  json answer{{"ok", false}, {"code", ctx::errno_name(e.code)}, {"message", e.msg}, {"reason", e.reason}};
  if (!d.op.empty()) answer["op"] = d.op;
  try {
    (void)answer.dump();
  } catch (const json::exception&) {
    std::abort();  // the supervisor would die answering
  }
}

void accepted(const json& j, const ctx::launcher::ControlDecode& d, const Asked& asked) {
  const ctx::launcher::ControlRequest& r = *d.request;
  check(j.is_object() && j["op"].get<std::string>() == d.op && ctx::launcher::to_string(r.op) == d.op);
  switch (r.op) {
    case ControlOp::create:
      check(j.contains("request") && static_cast<bool>(ctx::launcher::decode_child_request(j["request"])));
      check(!r.child.name.empty() && r.child.name == j["request"]["name"].get<std::string>());
      check(asked.times == 0);
      return;
    case ControlOp::start:
    case ControlOp::stop:
    case ControlOp::wait: {
      check(!ctx::agent_name_issue(r.name) && r.name == j["name"].get<std::string>());
      if (r.op == ControlOp::wait) {
        check(asked.times == 0);
      } else {
        check(asked.times == 1 && asked.name == r.name && asked.perm == d.op);
        check(r.name.find('x') == std::string::npos);
      }
      if (r.op == ControlOp::start) {
        for (const auto& [k, v] : j.items()) check(k == "op" || k == "name" || k == "command");
      } else {
        check(r.command.empty());
      }
      json canon{{"op", d.op}, {"name", r.name}};
      if (!r.command.empty()) canon["command"] = r.command;
      Asked again_asked;
      auto again = decode(canon.dump(), again_asked);
      check(again.op == d.op && static_cast<bool>(again.request));
      check(again.request->op == r.op && again.request->name == r.name && again.request->command == r.command);
      return;
    }
    case ControlOp::remove: {
      // delete: a valid name, asked once with what made the child.
      check(!ctx::agent_name_issue(r.name) && r.name == j["name"].get<std::string>());
      check(asked.times == 1 && asked.name == r.name && asked.perm == "create");
      check(r.name.find('x') == std::string::npos && r.command.empty());
      return;
    }
    case ControlOp::model:
    case ControlOp::tool: check(r.body == j && asked.times == 0); return;
  }
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  Asked asked;
  auto d = decode(in, asked);
  check(asked.times <= 1);
  const json j = json::parse(in, nullptr, false);
  if (d.request)
    accepted(j, d, asked);
  else
    refused(j, d, asked);
  return 0;
}
