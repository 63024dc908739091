#include "ctx/agent.hpp"

#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "base/result.hpp"
#include "base/text.hpp"
#include "ctx/supervisor_client.hpp"
#include "sys/process.hpp"
#include "sys/socket.hpp"

namespace ctx::helper {

namespace {

using nlohmann::json;

int refuse(const std::string& op, int code, const std::string& reason, const std::string& sentence) {
  json j{{"type", "error"}, {"code", errno_name(code)}, {"op", op}, {"message", sentence}};
  if (!reason.empty()) j["reason"] = reason;
  std::fprintf(stderr, "%s\nctx agent %s: %s\n", j.dump(-1, ' ', true).c_str(), op.c_str(),
               printable(sentence).c_str());
  return code;
}

}  // namespace

int agent_request(const std::string& op, const std::optional<std::string>& arg,
                  const std::vector<std::string>& command, bool replace) {
  std::string text;
  if (arg) {
    text = *arg;
  } else {
    auto in = sys::read_to_eof(0, 1 << 16);
    if (!in) return refuse(op, in.error().code, "", "reading the request from stdin: " + in.error().msg);
    text = *in;
  }
  json req{{"op", op}};
  std::size_t first = text.find_first_not_of(" \t\r\n");
  bool is_json = first != std::string::npos && text[first] == '{';
  if (op == "create" || is_json) {
    json body = json::parse(text, nullptr, false);
    if (body.is_discarded() || !body.is_object())
      return refuse(op, EINVAL, "invalid_request", "EINVAL: the request is not one JSON object");
    if (op == "create") {
      req["request"] = body;
      if (replace) req["replace"] = true;
    } else {
      for (auto& [k, v] : body.items()) req[k] = v;
    }
  } else {
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
    req["name"] = text;
  }
  if (!command.empty()) {
    if (op != "start") return refuse(op, EINVAL, "invalid_request", "EINVAL: only start takes a command after '--'");
    req["command"] = command;
  }

  auto got = ask_supervisor(req);
  if (!got) return refuse(op, got.error().code, got.error().reason, got.error().msg);
  const json& a = got->answer;
  if (a.value("ok", false)) {
    std::printf("%s\n", a.dump().c_str());
    return 0;
  }
  int errnum = answer_errno(a);
  std::string code = a.value("code", "EIO");
  // Exit statuses above 124 mean "could not run" to shells and to the
  // launcher (125-127); an errno there (ECANCELED) becomes 1.
  return refuse(op, errnum, a.value("reason", ""), a.value("message", code)) > 124 ? 1 : errnum;
}

}  // namespace ctx::helper
