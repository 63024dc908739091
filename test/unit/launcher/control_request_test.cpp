// The control socket's request decoder (launcher/control/request.hpp),
// without a supervisor: every refusal with its exact answer.
#include <catch2/catch.hpp>

#include "launcher/control/request.hpp"

using ctx::Error;
using ctx::Result;
using ctx::launcher::ControlDecode;
using ctx::launcher::ControlOp;

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
  CHECK(d.request->op == ControlOp::start);
  CHECK(d.request->name == "rev-1");
  CHECK(d.request->command == std::vector<std::string>{"/probe", "sleep:5"});
  CHECK(p.asked == std::vector<std::string>{"start rev-1"});

  d = decode(R"({"op":"start","name":"rev-1","command":"/bin/true"})");
  REQUIRE(d.request);
  CHECK(d.request->command == std::vector<std::string>{"/bin/true"});

  Policy stop;
  d = ctx::launcher::decode_control_request(R"({"op":"stop","name":"rev-1","extra":1})", stop.fn());
  REQUIRE(d.request);  // stop and wait ignore other keys, as before
  CHECK(d.request->op == ControlOp::stop);
  CHECK(stop.asked == std::vector<std::string>{"stop rev-1"});

  Policy wait;
  d = ctx::launcher::decode_control_request(R"({"op":"wait","name":"no-policy-needed"})", wait.fn());
  REQUIRE(d.request);
  CHECK(d.request->op == ControlOp::wait);
  CHECK(d.request->name == "no-policy-needed");
  CHECK(wait.asked.empty());

  d = decode(R"({"op":"create","request":{"name":"rev","tools":"fs.read"}})");
  REQUIRE(d.request);
  CHECK(d.request->op == ControlOp::create);
  CHECK(d.request->child.name == "rev");
  CHECK(d.request->child.tools == std::vector<std::string>{"fs.read"});

  d = decode(R"({"op":"model","model":"debug/echo"})");
  REQUIRE(d.request);
  CHECK(d.request->op == ControlOp::model);
  CHECK(d.request->body == nlohmann::json{{"op", "model"}, {"model", "debug/echo"}});
  d = decode(R"({"op":"tool","tool":"fs.read"})");
  REQUIRE(d.request);
  CHECK(d.request->op == ControlOp::tool);
  CHECK(ctx::launcher::to_string(d.request->op) == "tool");
}

TEST_CASE("control request: every refusal says why", "[unit]") {
  const std::string no_op =
      "|EINVAL|invalid_request|EINVAL: a request is one JSON object with \"op\" (create, start, stop, wait, delete)";
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
