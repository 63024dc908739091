// libFuzzer target: one line of the supervisor's control socket, through
// its one decoder (decode_control_request), with an authorizer that
// refuses every name holding an 'x'. Invariants:
//  - a refusal has an errno of the protocol, a reason and a message, names
//    the op only when the line had a string "op", and its answer is
//    JSON that dumps (valid UTF-8);
//  - an accepted request's op is the line's; start/stop/wait carry a
//    valid agent name that start and stop asked the authorizer about and
//    it allowed; start held no key but op, name and command; create held
//    a "request" that decode_child_request accepts alone; delete carries
//    a valid name asked about with "create"; tool held only op, name and
//    dir, model only op and name, neither asked the authorizer;
//  - start, stop and wait, written back as a canonical line, decode to
//    the same request.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <variant>

#include "base/names.hpp"
#include "launcher/control/child_request.hpp"
#include "launcher/control/request.hpp"

namespace {

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

// Each typed request checked against the line it came from.
struct Accepted {
  const json& j;
  const std::string& op;
  const Asked& asked;

  void operator()(const ctx::launcher::CreateRequest& r) const {
    check(j.contains("request") && static_cast<bool>(ctx::launcher::decode_child_request(j["request"])));
    check(!r.child.name.empty() && r.child.name == j["request"]["name"].get<std::string>());
    check(r.replace == (j.contains("replace") && j["replace"].get<bool>()));
    check(asked.times == 0);
  }
  void operator()(const ctx::launcher::StartRequest& r) const {
    named(r.name, "start");
    for (const auto& [k, v] : j.items()) check(k == "op" || k == "name" || k == "command");
    json canon{{"op", "start"}, {"name", r.name}};
    if (!r.command.empty()) canon["command"] = r.command;
    Asked again_asked;
    auto again = decode(canon.dump(), again_asked);
    check(again.op == op && static_cast<bool>(again.request));
    const auto* back = std::get_if<ctx::launcher::StartRequest>(&*again.request);
    check(back != nullptr && back->name == r.name && back->command == r.command);
  }
  void operator()(const ctx::launcher::StopRequest& r) const {
    named(r.name, "stop");
    same_name<ctx::launcher::StopRequest>(r.name);
  }
  void operator()(const ctx::launcher::WaitRequest& r) const {
    named(r.name, nullptr);
    same_name<ctx::launcher::WaitRequest>(r.name);
  }
  void operator()(const ctx::launcher::DeleteRequest& r) const { named(r.name, "create"); }
  void operator()(const ctx::launcher::ToolRequest& r) const {
    check(asked.times == 0 && r.name == j["name"].get<std::string>());
    for (const auto& [k, v] : j.items()) check(k == "op" || k == "name" || k == "dir");
    check(r.direct == j.contains("dir"));
    check(r.dir == (r.direct && j["dir"].is_string() ? j["dir"].get<std::string>() : std::string()));
  }
  void operator()(const ctx::launcher::ModelRequest& r) const {
    check(asked.times == 0 && r.name == j["name"].get<std::string>());
    for (const auto& [k, v] : j.items()) check(k == "op" || k == "name");
  }

  // A valid agent name, the line's, asked about once with perm (nullptr:
  // never asked) and allowed.
  void named(const std::string& name, const char* perm) const {
    check(!ctx::agent_name_issue(name) && name == j["name"].get<std::string>());
    if (perm == nullptr) {
      check(asked.times == 0);
      return;
    }
    check(asked.times == 1 && asked.name == name && asked.perm == perm);
    check(name.find('x') == std::string::npos);
  }
  // Written back as a canonical line, it decodes to the same request.
  template <typename R>
  void same_name(const std::string& name) const {
    Asked again_asked;
    auto again = decode(json{{"op", op}, {"name", name}}.dump(), again_asked);
    check(again.op == op && static_cast<bool>(again.request));
    const auto* back = std::get_if<R>(&*again.request);
    check(back != nullptr && back->name == name);
  }
};

void accepted(const json& j, const ctx::launcher::ControlDecode& d, const Asked& asked) {
  check(j.is_object() && j["op"].get<std::string>() == d.op && ctx::launcher::op_of(*d.request) == d.op);
  std::visit(Accepted{j, d.op, asked}, *d.request);
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
