// One model call of the HTTP endpoint: the same request as `ctx model`
// sent to the agent's supervisor (/run/ctx/supervisor) with the request's
// HTTP metadata and three pipes as the model's stdin, stdout and stderr
// (launcher/control/model_gate.hpp). Blocking, for one connection's
// thread; every wait also watches the client's socket, so a client that
// goes away ends the call (the supervisor ends the model when this
// connection closes).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <variant>

#include "base/result.hpp"
#include "base/unique_fd.hpp"
#include "launcher/control/http_meta.hpp"
#include "launcher/endpoint/cgi_head.hpp"

namespace ctx::endpoint {

/// The supervisor's refusal of a call (its answer, ok false).
struct Refused {
  nlohmann::json answer;
};

class Call {
 public:
  /// Sends the request; `client` is the HTTP client's socket (watched for
  /// its hang-up only).
  static Result<Call> start(const std::string& name, const launcher::HttpMeta& meta, int client);

  /// Streams request body bytes into the model's stdin. A model that no
  /// longer reads gets no more (the rest is dropped); false when the
  /// client went away.
  bool feed(std::string_view data);

  /// Ends the body, then waits for the model's header block: the head, or
  /// the supervisor's refusal, or EPROTO (no valid block: 502), ECONNRESET
  /// when the client went away.
  Result<std::variant<CgiHead, Refused>> head();

  /// Up to `max` bytes of the body as they arrive: "" at its end, nullopt
  /// when the client went away.
  std::optional<std::string> body(std::size_t max);

  /// What the model wrote on stderr (at most kMaxStderr bytes kept).
  const std::string& stderr_text() const { return err_text_; }

  /// The bytes of stderr kept per call; the rest is read and dropped.
  static constexpr std::size_t kMaxStderr = 4096;

 private:
  Call() = default;
  struct Ready {
    bool in = false, out = false, ctl = false, hangup = false;
  };
  /// One poll of stdin (want_in), stdout (want_out), stderr, the
  /// supervisor and the client; stderr and the supervisor's answer are
  /// read here.
  Ready wait(bool want_in, bool want_out, int timeout_ms);
  void read_answer();
  bool read_out();

  UniqueFd ctl_, in_, out_, err_;
  int client_ = -1;
  std::string ctl_buf_;
  std::optional<nlohmann::json> answer_;
  std::string out_buf_;  ///< stdout read and not yet passed on
  bool out_eof_ = false;
  std::string err_text_;
};

}  // namespace ctx::endpoint
