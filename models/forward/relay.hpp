// The one transfer of ctx-model-forward, through libcurl: the request's
// body streamed from stdin, the answer streamed to stdout as it arrives
// (each piece written at once: a server-sent event stream is never held
// back), TLS verified against the system's CAs or CTX_UPSTREAM_CAINFO, no
// redirect followed, http and https only.
#pragma once

#include <string>

#include "base/result.hpp"
#include "models/forward/request.hpp"

namespace ctx::forward {

/// How the answer is written.
enum class Output {
  cgi,        ///< a CGI response: header block, empty line, body
  body_only,  ///< the body alone (`ctx model`)
};

/// What the transfer did.
struct Relayed {
  int status = 0;          ///< the upstream's final status (0: none came)
  bool wrote_any = false;  ///< something reached stdout (an error can no longer replace it)
};

/// Sends `req` with `credential` ("name: value", the one header that holds
/// the key) added, and relays the answer to stdout. An error (no
/// connection, TLS, a write to stdout that failed) names the method, the
/// URL and libcurl's words, never a header; `relayed` tells the caller
/// whether a CGI error response can still be written.
Result<void> relay(const Upstream& up, const ForwardRequest& req, const std::string& credential, Output out,
                   Relayed& relayed);

}  // namespace ctx::forward
