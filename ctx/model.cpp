#include "ctx/model.hpp"

#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "base/text.hpp"
#include "ctx/supervisor_client.hpp"
#include "sys/process.hpp"

namespace ctx::helper {

namespace {

using nlohmann::json;

int refuse(const std::string& name, int code, const std::string& reason, const std::string& sentence) {
  return refuse_call("model", name, code, reason, sentence);
}

// Requests up to a pipe's capacity go as the argument; longer ones on stdin.
constexpr std::size_t kMaxArgRequest = 60 * 1024;

}  // namespace

int call_model(const std::string& name, const std::optional<std::string>& request) {
  int in = 0;
  UniqueFd pipe_read;
  if (request) {
    if (request->size() > kMaxArgRequest)
      return refuse(name, E2BIG, "invalid_request", "E2BIG: a request this long goes on stdin, not as an argument");
    auto p = sys::make_pipe();
    if (!p) return refuse(name, p.error().code, "", p.error().msg);
    if (auto w = sys::write_all(p->second.get(), request->data(), request->size()); !w)
      return refuse(name, w.error().code, "", w.error().msg);
    p->second.reset();
    pipe_read = std::move(p->first);
    in = pipe_read.get();
  }
  auto got = ask_supervisor({{"op", "model"}, {"name", name}}, {in, 1, 2});
  if (!got) return refuse(name, got.error().code, got.error().reason, got.error().msg);
  const json& a = got->answer;
  if (auto code = refused("model", name, a)) return *code;
  return a.value("exit_status", 1);
}

}  // namespace ctx::helper
