#include "ctx/supervisor_client.hpp"

#include <cstdio>
#include <cstdlib>

#include "base/text.hpp"

#include "sys/process.hpp"
#include "sys/socket.hpp"

namespace ctx::helper {

Result<SupervisorAnswer> ask_supervisor(const nlohmann::json& request, const std::vector<int>& fds) {
  const char* env = std::getenv("CTX_SUPERVISOR");
  std::string path = env != nullptr && *env != '\0' ? env : "/run/ctx/supervisor";
  auto s = sys::connect_stream(path);
  if (!s) {
    Error e = s.error().with_context("no supervisor here; this works inside a sandbox started by ctx-agent-run");
    e.reason = "no_supervisor";
    return fail(e);
  }
  std::string line = request.dump() + "\n";
  CTX_TRY(sys::send_message(s->get(), line, fds));
  SupervisorAnswer out;
  std::string text;
  while (text.find('\n') == std::string::npos && text.size() < (1u << 16)) {
    CTX_TRY_ASSIGN(auto m, sys::recv_message(s->get(), 65536, 1));
    if (!m) break;
    text += m->bytes;
    for (auto& fd : m->fds) out.fds.push_back(std::move(fd));
  }
  out.answer = nlohmann::json::parse(text.substr(0, text.find('\n')), nullptr, false);
  if (out.answer.is_discarded() || !out.answer.is_object())
    return fail(Error{EIO, "EIO: the supervisor closed the connection without an answer (is the agent stopping?)"});
  return out;
}

int refuse_call(const char* what, const std::string& name, int code, const std::string& reason,
                const std::string& sentence, const std::string& agent) {
  nlohmann::json j{{"type", "error"}, {"code", errno_name(code)}, {"reason", reason},
                   {what, name},      {"agent", agent},           {"message", sentence}};
  std::fprintf(stderr, "%s\nctx %s: %s: %s: %s\n", j.dump(-1, ' ', true).c_str(), what, printable(name).c_str(),
               errno_name(code).c_str(), printable(sentence).c_str());
  return code;
}

std::optional<int> refused(const char* what, const std::string& name, const nlohmann::json& a) {
  if (a.value("ok", false)) return std::nullopt;
  int code = answer_errno(a);
  const auto agent = a.contains("agent") && a["agent"].is_string() ? a["agent"].get<std::string>() : std::string();
  refuse_call(what, name, code, a.value("reason", ""), a.value("message", errno_name(code)), agent);
  return code > 124 ? 1 : code;
}

int answer_errno(const nlohmann::json& a) {
  std::string code = a.value("code", "EIO");
  for (int e : {EACCES, EINVAL, ENOENT, ESRCH, EBUSY, EIO, ECANCELED, EPERM, EEXIST, ENOTSUP, EAGAIN})
    if (errno_name(e) == code) return e;
  return EIO;
}

}  // namespace ctx::helper
