// ctx-model-endpoint: the HTTP model endpoint (docs/models.md, "The HTTP
// endpoint"), and in a sandbox without network its HTTP proxy, which
// refuses every request with the reason ("Without network"). Started by
// the sandbox's init at the first connection to its socket
// (launcher/sandbox/endpoint_start.hpp), with that listening socket at fd
// 3, the launch's token in CTX_MODEL_TOKEN when a model is granted and the
// proxy's answer in CTX_NETWORK_REFUSAL. It has the agent's authority and
// no more: every model call is `ctx model` over the control socket
// (call.hpp), which the model gate decides and records. HTTP is
// libmicrohttpd's, one thread per connection.
#include <microhttpd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "base/text.hpp"
#include "launcher/control/http_meta.hpp"
#include "launcher/endpoint/call.hpp"
#include "sys/process.hpp"

namespace {

using ctx::endpoint::Call;
using nlohmann::json;

std::string g_token;    ///< empty: no model is granted
std::string g_refusal;  ///< without network: the proxy's answer

constexpr unsigned kMaxConnections = 64;
constexpr unsigned kIdleSeconds = 600;
constexpr std::size_t kThreadStack = 256 * 1024;

// The state of one request, from its first call to its completion.
struct Request {
  bool answered = false;  ///< a response was queued at the first call
  bool root = false;      ///< GET or HEAD of /: answered once read
  std::optional<Call> call;
  std::string model;
};

// Constant time: how much of the token a guess got right is not timed.
bool same_token(std::string_view got) {
  if (got.size() != g_token.size()) return false;
  unsigned char diff = 0;
  for (std::size_t i = 0; i < got.size(); ++i) diff |= static_cast<unsigned char>(got[i] ^ g_token[i]);
  return diff == 0;
}

bool authorized(MHD_Connection* c) {
  if (const char* key = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "x-api-key"); key && same_token(key))
    return true;
  const char* auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "authorization");
  return auth != nullptr && std::strncmp(auth, "Bearer ", 7) == 0 && same_token(auth + 7);
}

MHD_Result send(MHD_Connection* c, unsigned status, const std::string& body, const char* type) {
  MHD_Response* r = MHD_create_response_from_buffer(body.size(), const_cast<char*>(body.data()), MHD_RESPMEM_MUST_COPY);
  if (r == nullptr) return MHD_NO;
  if (type != nullptr) MHD_add_response_header(r, "Content-Type", type);
  MHD_Result ok = MHD_queue_response(c, status, r);
  MHD_destroy_response(r);
  return ok;
}

// An error the client's SDK can read: the shape Anthropic's and OpenAI's
// APIs share (error.type, error.message), and the gate's facts beside it
// (the model as the gate named it, when it answered).
MHD_Result error(MHD_Connection* c, unsigned status, const json& facts) {
  const char* type = status == 400   ? "invalid_request_error"
                     : status == 401 ? "authentication_error"
                     : status == 403 ? "permission_error"
                     : status == 404 ? "not_found_error"
                     : status == 429 ? "rate_limit_error"
                                     : "api_error";
  json j{{"type", "error"},
         {"error", {{"type", type}, {"message", facts.value("message", "")}}},
         {"code", facts.value("code", "")},
         {"reason", facts.value("reason", "")},
         {"agent", facts.value("agent", "")}};
  if (facts.contains("name")) j["model"] = facts["name"];
  return send(c, status, j.dump() + "\n", "application/json");
}

unsigned status_of(const std::string& code) {
  if (code == "EACCES") return 403;
  if (code == "ENOENT") return 404;
  if (code == "EINVAL") return 400;
  if (code == "EAGAIN") return 429;
  return 502;
}

// The request's metadata for the gate; headers of one name (any case)
// joined with ", " as HTTP allows.
struct Collect {
  ctx::launcher::HttpMeta meta;
  std::string query;
  bool bad_length = false;
};

MHD_Result add_header(void* cls, MHD_ValueKind, const char* key, const char* value) {
  auto* c = static_cast<Collect*>(cls);
  const std::string v = value != nullptr ? value : "";
  if (strcasecmp(key, "content-type") == 0) {
    c->meta.content_type = v;
  } else if (strcasecmp(key, "content-length") == 0) {
    // Digits only, and once: a second length (or "+5", " 5") could make
    // the body this endpoint reads and the length the model is told differ.
    const bool digits = !v.empty() && v.size() <= 19 && v.find_first_not_of("0123456789") == std::string::npos;
    c->bad_length = c->bad_length || c->meta.content_length.has_value() || !digits;
    if (digits) c->meta.content_length = std::strtoull(v.c_str(), nullptr, 10);
  } else if (!ctx::launcher::http_withheld(key)) {
    for (auto& [n, old] : c->meta.headers)
      if (strcasecmp(n.c_str(), key) == 0) {
        old += ", " + v;
        return MHD_YES;
      }
    c->meta.headers.emplace_back(key, v);
  }
  return MHD_YES;
}

MHD_Result add_argument(void* cls, MHD_ValueKind, const char* key, const char* value) {
  auto* c = static_cast<Collect*>(cls);
  if (!c->query.empty()) c->query += '&';
  c->query += key;
  if (value != nullptr) c->query += std::string("=") + value;
  return MHD_YES;
}

// Raw, as sent: the model gets the path and query the client wrote.
size_t unescape_none(void*, MHD_Connection*, char* s) { return std::strlen(s); }

ssize_t read_body(void* cls, uint64_t, char* buf, size_t max) {
  auto* req = static_cast<Request*>(cls);
  auto chunk = req->call->body(max);
  if (!chunk) return MHD_CONTENT_READER_END_WITH_ERROR;
  if (chunk->empty()) return MHD_CONTENT_READER_END_OF_STREAM;
  std::memcpy(buf, chunk->data(), chunk->size());
  return static_cast<ssize_t>(chunk->size());
}

// A request for the proxy (HTTP_PROXY, HTTPS_PROXY): CONNECT, or a target
// in absolute form (http://host/...). Every other request of the endpoint's
// starts with '/'.
bool for_proxy(std::string_view url, const char* method) {
  return std::strcmp(method, "CONNECT") == 0 || (!url.empty() && url.front() != '/');
}

// What a sandbox without network answers its proxy requests: 403, its
// cause and the fix as plain text (what curl prints of a plain-HTTP
// request) and in a header (what `curl -v` shows of a CONNECT's answer).
MHD_Result refuse_proxy(MHD_Connection* c) {
  const std::string body = g_refusal.empty() ? "ctx-agent-run: EACCES: this endpoint is not a proxy\n" : g_refusal + "\n";
  MHD_Response* r = MHD_create_response_from_buffer(body.size(), const_cast<char*>(body.data()), MHD_RESPMEM_MUST_COPY);
  if (r == nullptr) return MHD_NO;
  MHD_add_response_header(r, "Content-Type", "text/plain; charset=utf-8");
  if (!g_refusal.empty()) MHD_add_response_header(r, "X-Ctx-Refused", g_refusal.c_str());
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
  MHD_Result ok = MHD_queue_response(c, 403, r);
  MHD_destroy_response(r);
  return ok;
}

// The first call of a request: its headers. Answers what needs no model
// (the proxy's refusal, /, 401, 403 without a model grant, 400) or starts
// the call.
MHD_Result begin(MHD_Connection* c, Request& req, std::string_view url, const char* method, const char* version) {
  if (for_proxy(url, method)) {
    req.answered = true;
    return refuse_proxy(c);
  }
  if (url == "/" || url.empty()) {
    req.root = true;
    return MHD_YES;
  }
  if (g_token.empty()) {
    req.answered = true;
    return error(c, 403,
                 {{"code", "EACCES"},
                  {"reason", "no_model"},
                  {"message", "EACCES: this agent's policy grants no model (no 'allow <label> model:<name> use')"}});
  }
  if (!authorized(c)) {
    req.answered = true;
    return error(c, 401,
                 {{"code", "EACCES"},
                  {"reason", "token"},
                  {"message",
                   "EACCES: this endpoint needs the launch's token (CTX_MODEL_TOKEN) as x-api-key or "
                   "Authorization: Bearer"}});
  }
  const std::size_t slash = url.find('/', 1);
  req.model = std::string(url.substr(1, slash == std::string_view::npos ? std::string_view::npos : slash - 1));
  Collect col;
  col.meta.protocol = version;
  col.meta.method = method;
  col.meta.path = slash == std::string_view::npos ? "" : std::string(url.substr(slash));
  MHD_get_connection_values(c, MHD_HEADER_KIND, add_header, &col);
  MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, add_argument, &col);
  col.meta.query = col.query;
  std::optional<std::string> issue = ctx::launcher::http_meta_issue(col.meta);
  if (col.bad_length) issue = "Content-Length must be one number of bytes";
  if (req.model.empty()) issue = "the path names no model: /<provider>/<model>/... or /<alias>/...";
  if (issue) {
    req.answered = true;
    return error(c, 400, {{"code", "EINVAL"}, {"reason", "invalid_request"}, {"message", "EINVAL: http: " + *issue}});
  }
  const MHD_ConnectionInfo* info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
  auto call = Call::start(req.model, col.meta, info != nullptr ? info->connect_fd : -1);
  if (!call) {
    req.answered = true;
    return error(c, 502, {{"code", ctx::errno_name(call.error().code)}, {"message", call.error().msg}});
  }
  req.call.emplace(std::move(*call));
  return MHD_YES;
}

// The last call: the body has been fed; the model's header block decides
// the response, whose body is relayed as it comes.
MHD_Result respond(MHD_Connection* c, Request& req) {
  auto h = req.call->head();
  if (!h && h.error().code == ECONNRESET) return MHD_NO;
  if (!h) return error(c, 502, {{"code", "EPROTO"}, {"reason", "cgi"}, {"message", h.error().msg}});
  if (auto* refused = std::get_if<ctx::endpoint::Refused>(&*h)) {
    const std::string code = refused->answer.value("code", "EIO");
    return error(c, status_of(code), refused->answer);
  }
  const auto& head = std::get<ctx::endpoint::CgiHead>(*h);
  MHD_Response* r = MHD_create_response_from_callback(head.content_length.value_or(MHD_SIZE_UNKNOWN), 64 * 1024,
                                                      read_body, &req, nullptr);
  if (r == nullptr) return MHD_NO;
  for (const auto& [n, v] : head.headers) MHD_add_response_header(r, n.c_str(), v.c_str());
  MHD_Result ok = MHD_queue_response(c, head.status, r);
  MHD_destroy_response(r);
  return ok;
}

MHD_Result handle(void*, MHD_Connection* c, const char* url, const char* method, const char* version,
                  const char* upload, size_t* upload_size, void** state) {
  if (*state == nullptr) {
    auto req = std::make_unique<Request>();
    MHD_Result r = begin(c, *req, url, method, version);
    *state = req.release();
    return r;
  }
  auto& req = *static_cast<Request*>(*state);
  if (req.answered || (req.root && *upload_size != 0)) {
    *upload_size = 0;
    return MHD_YES;
  }
  if (req.root) {
    req.answered = true;
    return send(c, 200, "", nullptr);
  }
  if (*upload_size != 0) {
    const bool client_here = req.call->feed(std::string_view(upload, *upload_size));
    *upload_size = 0;
    return client_here ? MHD_YES : MHD_NO;
  }
  req.answered = true;
  return respond(c, req);
}

// The end of a request: its call's descriptors closed (a model still
// running is ended by the supervisor), its stderr said on ours.
void completed(void*, MHD_Connection*, void** state, MHD_RequestTerminationCode) {
  std::unique_ptr<Request> req(static_cast<Request*>(*state));
  *state = nullptr;
  if (req && req->call && !req->call->stderr_text().empty())
    std::fprintf(stderr, "ctx-model-endpoint: %s: model stderr: %s\n", ctx::printable(req->model).c_str(),
                 ctx::printable(req->call->stderr_text()).c_str());
}

}  // namespace

int main() {
  const char* token = std::getenv("CTX_MODEL_TOKEN");
  const char* refusal = std::getenv("CTX_NETWORK_REFUSAL");
  const char* fds = std::getenv("LISTEN_FDS");
  const char* pid = std::getenv("LISTEN_PID");
  if ((token == nullptr && refusal == nullptr) || (token != nullptr && std::strlen(token) != 64) || fds == nullptr ||
      std::strcmp(fds, "1") != 0 || pid == nullptr || std::to_string(::getpid()) != pid) {
    std::fprintf(stderr,
                 "ctx-model-endpoint: EINVAL: started by the sandbox's init only (CTX_MODEL_TOKEN or "
                 "CTX_NETWORK_REFUSAL, LISTEN_FDS)\n");
    return 2;
  }
  if (token != nullptr) g_token = token;
  if (refusal != nullptr) g_refusal = ctx::printable(refusal);
  ::unsetenv("CTX_MODEL_TOKEN");
  ctx::sys::ignore_sigpipe();
  // Blocked before any thread exists: only the wait below takes them.
  auto sigs = ctx::sys::block_into_signalfd({SIGTERM, SIGINT, SIGHUP});
  if (!sigs) {
    std::fprintf(stderr, "ctx-model-endpoint: %s\n", ctx::printable(sigs.error().msg).c_str());
    return 1;
  }
  MHD_Daemon* d = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL_INTERNAL_THREAD, 0, nullptr, nullptr,
                                   handle, nullptr, MHD_OPTION_LISTEN_SOCKET, 3, MHD_OPTION_CONNECTION_LIMIT,
                                   kMaxConnections, MHD_OPTION_CONNECTION_TIMEOUT, kIdleSeconds,
                                   MHD_OPTION_NOTIFY_COMPLETED, completed, nullptr, MHD_OPTION_UNESCAPE_CALLBACK,
                                   unescape_none, nullptr, MHD_OPTION_THREAD_STACK_SIZE, kThreadStack, MHD_OPTION_END);
  if (d == nullptr) {
    std::fprintf(stderr, "ctx-model-endpoint: libmicrohttpd did not start on fd 3\n");
    return 1;
  }
  (void)ctx::sys::read_signalfd(sigs->get());
  MHD_stop_daemon(d);
  return 0;
}
