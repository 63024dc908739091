#include "ctx/agent.hpp"

#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "base/result.hpp"
#include "base/text.hpp"
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
                  const std::vector<std::string>& command) {
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

  const char* env = std::getenv("CTX_SUPERVISOR");
  std::string path = env != nullptr && *env != '\0' ? env : "/run/ctx/supervisor";
  auto s = sys::connect_stream(path);
  if (!s)
    return refuse(op, s.error().code, "no_supervisor",
                  s.error().msg + ": no supervisor here; ctx agent works inside a sandbox started by ctx-agent-run");
  std::string line = req.dump() + "\n";
  if (auto w = sys::write_all(s->get(), line.data(), line.size()); !w)
    return refuse(op, w.error().code, "", w.error().msg);
  std::string answer;
  while (answer.find('\n') == std::string::npos) {
    auto got = sys::read_available(s->get(), 65536);
    if (!got) return refuse(op, got.error().code, "", got.error().msg);
    if (!*got || (*got)->empty()) break;
    answer += **got;
  }
  json a = json::parse(answer.substr(0, answer.find('\n')), nullptr, false);
  if (a.is_discarded() || !a.is_object())
    return refuse(op, EIO, "", "EIO: the supervisor closed the connection without an answer (is the parent stopping?)");
  if (a.value("ok", false)) {
    std::printf("%s\n", a.dump().c_str());
    return 0;
  }
  std::string code = a.value("code", "EIO");
  int errnum = EIO;
  for (int e : {EACCES, EINVAL, ENOENT, ESRCH, EBUSY, EIO, ECANCELED, EPERM, EEXIST})
    if (errno_name(e) == code) errnum = e;
  // Exit statuses above 124 mean "could not run" to shells and to the
  // launcher (125-127); an errno there (ECANCELED) becomes 1.
  return refuse(op, errnum, a.value("reason", ""), a.value("message", code)) > 124 ? 1 : errnum;
}

}  // namespace ctx::helper
