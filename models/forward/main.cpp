// ctx-model-forward: a model driver that forwards a call to an upstream
// LLM API with the key from the model's .d/env (docs/agents.md, "The
// forwarder"). Run by the model endpoint as a CGI program (REQUEST_METHOD
// set) or by `ctx model` (the request body on stdin, the answer's body on
// stdout). The key never leaves this process but in its one header.
#include <curl/curl.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "models/forward/relay.hpp"
#include "models/forward/request.hpp"
#include "models/forward/response.hpp"
#include "sys/process.hpp"

extern char** environ;

namespace {

using ctx::Error;
using ctx::Result;
using ctx::forward::Output;

// Takes the key out of the environment: copied once, then its bytes in
// the environment block wiped (they are what /proc/<pid>/environ shows)
// and the variable removed, so that nothing this process starts or
// prints can carry it.
std::optional<std::string> take_key() {
  char* raw = std::getenv("CTX_UPSTREAM_KEY");
  if (!raw) return std::nullopt;
  std::string key(raw);
  explicit_bzero(raw, std::strlen(raw));
  ::unsetenv("CTX_UPSTREAM_KEY");
  return key;
}

// The environment, and no HTTP_* left in it after: the request's headers
// are the agent's words, and libcurl must not read one (HTTP_PROXY) as
// its own setting.
ctx::forward::Env take_env() {
  ctx::forward::Env env;
  for (char** e = environ; *e; ++e) {
    std::string_view kv(*e);
    std::size_t eq = kv.find('=');
    if (eq == std::string_view::npos) continue;
    env.emplace(std::string(kv.substr(0, eq)), std::string(kv.substr(eq + 1)));
  }
  for (const auto& [k, v] : env)
    if (k.rfind("HTTP_", 0) == 0) ::unsetenv(k.c_str());
  return env;
}

// The one place an error is told: as the CGI answer when none has begun
// (502 for the forwarder and the upstream, 400 for a request it refuses),
// else on stderr.
int report(Output out, int status, const Error& e, bool answer_begun) {
  const std::string type = status == 400 ? "invalid_request_error" : "api_error";
  if (out == Output::cgi && !answer_begun) {
    std::string r = ctx::forward::cgi_error(status, type, e.msg);
    (void)ctx::sys::write_all(1, r.data(), r.size());
  } else {
    std::fprintf(stderr, "ctx-model-forward: %s\n", e.msg.c_str());
  }
  return 1;
}

int forward(Output out, const ctx::forward::Env& env, const std::optional<std::string>& key) {
  auto up = ctx::forward::upstream_from(env);
  if (!up) return report(out, 502, up.error(), false);
  if (auto ok = ctx::forward::check_key(key); !ok) return report(out, 502, ok.error(), false);
  Result<ctx::forward::ForwardRequest> req =
      out == Output::cgi ? ctx::forward::cgi_request(*up, env) : ctx::forward::plain_request(*up);
  if (!req) return report(out, out == Output::cgi ? 400 : 502, req.error(), false);
  std::string credential = up->key_header + ": " + up->key_prefix + *key;
  ctx::forward::Relayed relayed;
  auto done = ctx::forward::relay(*up, *req, credential, out, relayed);
  explicit_bzero(credential.data(), credential.size());
  if (!done) return report(out, 502, done.error(), relayed.wrote_any);
  if (out == Output::body_only && (relayed.status < 200 || relayed.status > 299)) {
    std::fprintf(stderr, "ctx-model-forward: the upstream answered %d %s\n", relayed.status,
                 ctx::forward::reason_phrase(relayed.status).c_str());
    return 1;
  }
  return 0;
}

}  // namespace

int main() {
  // Nobody but root may read this process's memory or /proc files (its
  // environment held the key), even at the same uid.
  (void)ctx::sys::set_not_dumpable();
  std::optional<std::string> key = take_key();
  const ctx::forward::Env env = take_env();
  const Output out = env.count("REQUEST_METHOD") ? Output::cgi : Output::body_only;
  if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
    return report(out, 502, Error{EIO, "curl_global_init failed"}, false);
  int rc = forward(out, env, key);
  if (key) explicit_bzero(key->data(), key->size());
  curl_global_cleanup();
  return rc;
}
