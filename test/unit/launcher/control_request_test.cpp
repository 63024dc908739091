// The control socket's one request decoder (launcher/control/request.hpp),
// without a supervisor: every op's typed request, every refusal with its
// exact answer.
#include <catch2/catch.hpp>

#include "launcher/control/request.hpp"

using ctx::Error;
using ctx::Result;
using ctx::launcher::ControlDecode;
using ctx::launcher::CreateRequest;
using ctx::launcher::DeleteRequest;
using ctx::launcher::ModelRequest;
using ctx::launcher::StartRequest;
using ctx::launcher::StopRequest;
using ctx::launcher::ToolRequest;
using ctx::launcher::WaitRequest;

namespace {

struct Policy {
  std::vector<std::string> asked;  ///< "perm name", in order
  /// Refuses every name beginning with "no".
  ctx::launcher::ControlAuthorize fn() {
    return [this](const std::string& name, std::string_view perm) -> Result<void> {
      asked.push_back(std::string(perm) + " " + name);
      if (name.rfind("no", 0) == 0) return ctx::fail(Error{EACCES, name + ": EACCES: refused", "agent_policy"});
      return {};
    };
  }
};

ControlDecode decode(std::string_view line) {
  Policy p;
  return ctx::launcher::decode_control_request(line, p.fn());
}

/// The refusal of `line`: its op, code, reason and message.
std::string refusal(std::string_view line) {
  ControlDecode d = decode(line);
  REQUIRE_FALSE(d.request);
  const Error& e = d.request.error();
  return d.op + "|" + ctx::errno_name(e.code) + "|" + e.reason + "|" + e.msg;
}

}  // namespace

TEST_CASE("control request: each op decodes to its typed request", "[unit]") {
  Policy p;
  auto d =
      ctx::launcher::decode_control_request(R"({"op":"start","name":"rev-1","command":["/probe","sleep:5"]})", p.fn());
  REQUIRE(d.request);
  CHECK(d.op == "start");
  CHECK(ctx::launcher::op_of(*d.request) == "start");
  auto* start = std::get_if<StartRequest>(&*d.request);
  REQUIRE(start != nullptr);
  CHECK(start->name == "rev-1");
  CHECK(start->command == std::vector<std::string>{"/probe", "sleep:5"});
  CHECK(p.asked == std::vector<std::string>{"start rev-1"});

  d = decode(R"({"op":"start","name":"rev-1","command":"/bin/true"})");
  REQUIRE(d.request);
  CHECK(std::get<StartRequest>(*d.request).command == std::vector<std::string>{"/bin/true"});
  d = decode(R"({"op":"start","name":"rev-1"})");
  REQUIRE(d.request);
  CHECK(std::get<StartRequest>(*d.request).command.empty());

  Policy stop;
  d = ctx::launcher::decode_control_request(R"({"op":"stop","name":"rev-1","extra":1})", stop.fn());
  REQUIRE(d.request);  // stop and wait ignore other keys, as before
  CHECK(std::get<StopRequest>(*d.request).name == "rev-1");
  CHECK(ctx::launcher::op_of(*d.request) == "stop");
  CHECK(stop.asked == std::vector<std::string>{"stop rev-1"});

  Policy wait;
  d = ctx::launcher::decode_control_request(R"({"op":"wait","name":"no-policy-needed"})", wait.fn());
  REQUIRE(d.request);
  CHECK(std::get<WaitRequest>(*d.request).name == "no-policy-needed");
  CHECK(ctx::launcher::op_of(*d.request) == "wait");
  CHECK(wait.asked.empty());

  Policy del;
  d = ctx::launcher::decode_control_request(R"({"op":"delete","name":"rev-1"})", del.fn());
  REQUIRE(d.request);
  CHECK(std::get<DeleteRequest>(*d.request).name == "rev-1");
  CHECK(ctx::launcher::op_of(*d.request) == "delete");
  CHECK(del.asked == std::vector<std::string>{"create rev-1"});  // what made a child may unmake it

  d = decode(R"({"op":"create","request":{"name":"rev","tools":"fs.read"}})");
  REQUIRE(d.request);
  CHECK(ctx::launcher::op_of(*d.request) == "create");
  CHECK(std::get<CreateRequest>(*d.request).child.name == "rev");
  CHECK(std::get<CreateRequest>(*d.request).child.tools == std::vector<std::string>{"fs.read"});
  CHECK_FALSE(std::get<CreateRequest>(*d.request).replace);
  d = decode(R"({"op":"create","replace":true,"request":{"name":"rev"}})");
  REQUIRE(d.request);
  CHECK(std::get<CreateRequest>(*d.request).replace);

  d = decode(R"({"op":"model","name":"debug/echo"})");
  REQUIRE(d.request);
  CHECK(ctx::launcher::op_of(*d.request) == "model");
  CHECK(std::get<ModelRequest>(*d.request).name == "debug/echo");
  d = decode(R"({"op":"model","name":"../x"})");  // the name is the gate's to judge (and record)
  REQUIRE(d.request);
  CHECK(std::get<ModelRequest>(*d.request).name == "../x");

  d = decode(R"({"op":"tool","name":"fs.read"})");
  REQUIRE(d.request);
  CHECK(ctx::launcher::op_of(*d.request) == "tool");
  auto* tool = std::get_if<ToolRequest>(&*d.request);
  REQUIRE(tool != nullptr);
  CHECK(tool->name == "fs.read");
  CHECK_FALSE(tool->direct);
  CHECK(tool->dir.empty());
  d = decode(R"({"op":"tool","name":"fs.read","dir":"/ctx/tool"})");
  REQUIRE(d.request);
  CHECK(std::get<ToolRequest>(*d.request).direct);
  CHECK(std::get<ToolRequest>(*d.request).dir == "/ctx/tool");
  d = decode(R"({"op":"tool","name":"fs.read","dir":7})");  // a direct call naming no tier: the gate's ENOENT
  REQUIRE(d.request);
  CHECK(std::get<ToolRequest>(*d.request).direct);
  CHECK(std::get<ToolRequest>(*d.request).dir.empty());
}

TEST_CASE("control request: every refusal says why", "[unit]") {
  const std::string no_op =
      "|EINVAL|invalid_request|EINVAL: a request is one JSON object with \"op\" (create, start, stop, wait, delete, "
      "model, tool)";
  CHECK(refusal("") == no_op);
  CHECK(refusal("{") == no_op);
  CHECK(refusal("[1]") == no_op);
  CHECK(refusal(R"({"name":"rev"})") == no_op);
  CHECK(refusal(R"({"op":1})") == no_op);
  CHECK(refusal(R"({"op":"fly"})") ==
        "fly|EINVAL|invalid_request|EINVAL: unknown op 'fly' (create, start, stop, wait, delete, model, tool)");
  CHECK(refusal(R"({"op":"create"})") == "create|EINVAL|invalid_request|EINVAL: create needs \"request\"");
  CHECK(refusal(R"({"op":"create","request":{"name":"r","colour":1}})")
            .rfind("create|EINVAL|invalid_request|EINVAL: unknown key 'colour'", 0) == 0);
  CHECK(refusal(R"({"op":"create","request":[]})") ==
        "create|EINVAL|invalid_request|EINVAL: the request must be a JSON object");
  for (const char* op : {"start", "stop", "wait"}) {
    const std::string o(op);
    CHECK(refusal(R"({"op":")" + o + R"("})") == o + "|EINVAL|invalid_request|EINVAL: \"name\" is required");
    CHECK(refusal(R"({"op":")" + o + R"(","name":7})") == o + "|EINVAL|invalid_request|EINVAL: \"name\" is required");
    CHECK(refusal(R"({"op":")" + o + R"(","name":"a.b"})").rfind(o + "|EACCES|invalid_name|a.b: EACCES: ", 0) == 0);
  }
  CHECK(refusal(R"({"op":"start","name":"nope"})") == "start|EACCES|agent_policy|nope: EACCES: refused");
  CHECK(refusal(R"({"op":"stop","name":"nope"})") == "stop|EACCES|agent_policy|nope: EACCES: refused");
  CHECK(refusal(R"({"op":"start","name":"rev","command":[1]})") ==
        "start|EINVAL|invalid_request|EINVAL: command must be a string or an array of strings");
  CHECK(refusal(R"({"op":"start","name":"rev","cmd":"x"})") ==
        "start|EINVAL|invalid_request|EINVAL: unknown key 'cmd' in start");
  CHECK(refusal(R"({"op":"create","replace":1,"request":{"name":"r"}})") ==
        "create|EINVAL|invalid_request|EINVAL: \"replace\" is true or false");
  CHECK(refusal(R"({"op":"delete"})") == "delete|EINVAL|invalid_request|EINVAL: \"name\" is required");
  CHECK(refusal(R"({"op":"delete","name":"a.b"})").rfind("delete|EACCES|invalid_name|a.b: EACCES: ", 0) == 0);
  CHECK(refusal(R"({"op":"delete","name":"nope"})") == "delete|EACCES|agent_policy|nope: EACCES: refused");
  // tool and model: worded as their gates, which record and answer them.
  CHECK(refusal(R"({"op":"tool"})") == "tool|EINVAL|invalid_request|tool needs \"name\", a string");
  CHECK(refusal(R"({"op":"tool","name":["fs.read"]})") == "tool|EINVAL|invalid_request|tool needs \"name\", a string");
  CHECK(refusal(R"({"op":"tool","name":"fs.read","args":"x"})") ==
        "tool|EINVAL|invalid_request|unknown key 'args' in tool");
  CHECK(refusal(R"({"op":"tool","tool":"fs.read"})") == "tool|EINVAL|invalid_request|unknown key 'tool' in tool");
  CHECK(refusal(R"({"op":"model"})") == "model|EINVAL|invalid_request|model needs \"name\", a string");
  CHECK(refusal(R"({"op":"model","name":null})") == "model|EINVAL|invalid_request|model needs \"name\", a string");
  CHECK(refusal(R"({"op":"model","name":"debug/echo","dir":"/x"})") ==
        "model|EINVAL|invalid_request|unknown key 'dir' in model");
  CHECK(refusal(R"({"op":"model","model":"debug/echo"})") ==
        "model|EINVAL|invalid_request|unknown key 'model' in model");
  CHECK(refusal(R"({"op":"Tool","name":"fs.read"})") ==
        "Tool|EINVAL|invalid_request|EINVAL: unknown op 'Tool' (create, start, stop, wait, delete, model, tool)");
}

TEST_CASE("control request: start asks the policy before reading its other keys", "[unit]") {
  // As the supervisor always answered: a refused name is refused as such,
  // whatever else the request holds.
  CHECK(refusal(R"({"op":"start","name":"nope","cmd":"x"})") == "start|EACCES|agent_policy|nope: EACCES: refused");
  Policy p;
  auto d = ctx::launcher::decode_control_request(R"({"op":"start","name":"a.b"})", p.fn());
  REQUIRE_FALSE(d.request);
  CHECK(p.asked.empty());  // an invalid name is not asked about
}
