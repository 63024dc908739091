#include "launcher/endpoint/call.hpp"

#include <poll.h>

#include <vector>

#include "sys/process.hpp"
#include "sys/socket.hpp"

namespace ctx::endpoint {

namespace {

using nlohmann::json;

// Stdout a model writes before its body is read whole: a model that
// answers before it has read its input gets this much, then no more input.
constexpr std::size_t kMaxEarly = 4 * 1024 * 1024;
// How long a model that closed its stdout has to exit before its call is
// ended (and recorded as killed).
constexpr int kExitGraceMs = 5000;

}  // namespace

Result<Call> Call::start(const std::string& name, const launcher::HttpMeta& meta, int client) {
  Call c;
  c.client_ = client;
  CTX_TRY_ASSIGN(auto in, sys::make_pipe());
  CTX_TRY_ASSIGN(auto out, sys::make_pipe());
  CTX_TRY_ASSIGN(auto err, sys::make_pipe());
  CTX_TRY_ASSIGN(c.ctl_, sys::connect_stream("/run/ctx/supervisor"));
  const json req{{"op", "model"}, {"name", name}, {"http", launcher::to_json(meta)}};
  CTX_TRY(sys::send_message(c.ctl_.get(), req.dump() + "\n", {in.first.get(), out.second.get(), err.second.get()}));
  c.in_ = std::move(in.second);
  c.out_ = std::move(out.first);
  c.err_ = std::move(err.first);
  for (int fd : {c.in_.get(), c.out_.get(), c.err_.get(), c.ctl_.get()}) CTX_TRY(sys::set_nonblocking(fd));
  return c;
}

Call::Ready Call::wait(bool want_in, bool want_out, int timeout_ms) {
  std::vector<struct pollfd> fds{{client_, POLLRDHUP, 0},
                                 {ctl_.valid() && !answer_ ? ctl_.get() : -1, POLLIN, 0},
                                 {err_.valid() ? err_.get() : -1, POLLIN, 0},
                                 {want_in && in_.valid() ? in_.get() : -1, POLLOUT, 0},
                                 {want_out && out_.valid() && !out_eof_ ? out_.get() : -1, POLLIN, 0}};
  Ready r;
  if (!sys::poll_fds(fds, timeout_ms)) {
    r.hangup = true;
    return r;
  }
  r.hangup = fds[0].revents != 0;
  if (fds[1].revents != 0) read_answer();
  if (fds[2].revents != 0) {
    auto got = sys::read_available(err_.get(), 4096);
    if (!got || (*got && (*got)->empty()))
      err_.reset();
    else if (*got && err_text_.size() < kMaxStderr)
      err_text_ += (*got)->substr(0, kMaxStderr - err_text_.size());
  }
  r.ctl = answer_.has_value();
  r.in = fds[3].revents != 0;
  r.out = fds[4].revents != 0;
  return r;
}

void Call::read_answer() {
  auto got = sys::read_available(ctl_.get(), 4096);
  if (got && !*got) return;
  if (!got || (*got)->empty()) {
    answer_ = json{{"ok", false}, {"code", "EIO"}, {"message", "EIO: the supervisor closed the connection"}};
    return;
  }
  ctl_buf_ += **got;
  if (auto nl = ctl_buf_.find('\n'); nl != std::string::npos) {
    json a = json::parse(ctl_buf_.substr(0, nl), nullptr, false);
    answer_ = a.is_object() ? a : json{{"ok", false}, {"code", "EIO"}, {"message", "EIO: an answer not understood"}};
  } else if (ctl_buf_.size() > 65536) {
    answer_ = json{{"ok", false}, {"code", "EIO"}, {"message", "EIO: an answer too long"}};
  }
}

// Reads what stdout has into out_buf_; false at EOF.
bool Call::read_out() {
  auto got = sys::read_available(out_.get(), 65536);
  if (got && !*got) return true;
  if (!got || (*got)->empty()) {
    out_eof_ = true;
    return false;
  }
  out_buf_ += **got;
  return true;
}

bool Call::feed(std::string_view data) {
  while (!data.empty() && in_.valid()) {
    Ready r = wait(true, out_buf_.size() < kMaxEarly, -1);
    if (r.hangup) return false;
    if (r.out) read_out();
    if (r.ctl && !answer_->value("ok", false)) in_.reset();  // refused: nobody reads
    if (!r.in || !in_.valid()) {
      // A model that answers before it reads its input, past kMaxEarly:
      // the rest of the input is dropped rather than wait for ever.
      if (out_buf_.size() >= kMaxEarly) in_.reset();
      continue;
    }
    auto n = sys::write_some(in_.get(), data);
    if (!n) {
      in_.reset();  // EPIPE: the model reads no more
      break;
    }
    data.remove_prefix(*n);
  }
  return true;
}

Result<std::variant<CgiHead, Refused>> Call::head() {
  in_.reset();
  while (true) {
    if (auto end = cgi_head_end(out_buf_)) {
      auto h = parse_cgi_head(std::string_view(out_buf_).substr(0, *end));
      if (!h) return fail(h.error());
      out_buf_.erase(0, *end);
      return std::variant<CgiHead, Refused>(std::move(*h));
    }
    if (out_buf_.size() > kMaxCgiHead)
      return fail(Error{EPROTO, "the model's CGI header block: longer than 32 KiB, or no empty line ends it"});
    if (answer_ && !answer_->value("ok", false)) return std::variant<CgiHead, Refused>(Refused{*answer_});
    if (out_eof_ && answer_) return fail(Error{EPROTO, "the model wrote no CGI header block before it exited"});
    Ready r = wait(false, true, -1);
    if (r.hangup) return fail(Error{ECONNRESET, "the client went away"});
    if (r.out) read_out();
  }
}

std::optional<std::string> Call::body(std::size_t max) {
  while (out_buf_.empty() && !out_eof_) {
    Ready r = wait(false, true, -1);
    if (r.hangup) return std::nullopt;
    if (r.out) read_out();
  }
  if (!out_buf_.empty()) {
    std::string chunk = out_buf_.substr(0, max);
    out_buf_.erase(0, chunk.size());
    return chunk;
  }
  // The end: the model's exit is awaited (briefly) so that closing this
  // connection does not end a model that is exiting anyway.
  for (const std::uint64_t until = sys::now_us() + kExitGraceMs * 1000ULL; !answer_ && sys::now_us() < until;)
    if (wait(false, false, 100).hangup) break;
  return std::string();
}

}  // namespace ctx::endpoint
