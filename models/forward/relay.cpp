#include "models/forward/relay.hpp"

#include <curl/curl.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>

#include "models/forward/response.hpp"
#include "sys/process.hpp"
#include "sys/socket.hpp"

namespace ctx::forward {

namespace {

struct EasyFree {
  void operator()(CURL* c) const { curl_easy_cleanup(c); }
};
struct ListFree {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};
using List = std::unique_ptr<curl_slist, ListFree>;

// The state the callbacks share.
struct Transfer {
  Output out;
  Relayed& relayed;
  ResponseHead head;
  bool head_done = false;
  std::optional<Error> io_error;  // stdin or stdout failed: the reason, not libcurl's
  /// Bytes of the body still to send when CONTENT_LENGTH gave its size:
  /// never more (what follows on stdin would reach the upstream as a
  /// second request of the agent's making on the same connection).
  std::optional<std::uint64_t> remaining;
};

bool put(Transfer& t, std::string_view data) {
  if (data.empty()) return true;
  auto w = sys::write_all(1, data.data(), data.size());
  if (!w) {
    t.io_error = w.error().with_context("writing the answer to stdout");
    return false;
  }
  t.relayed.wrote_any = true;
  return true;
}

bool finish_head(Transfer& t) {
  t.head_done = true;
  t.relayed.status = t.head.status();
  switch (t.out) {
    case Output::cgi: return put(t, t.head.cgi_block());
    case Output::body_only: return true;
  }
  return true;
}

// libcurl's header callback: one line at a time; the CGI header block is
// written as soon as the final answer's head is complete, before any of
// its body.
std::size_t on_header(char* p, std::size_t size, std::size_t n, void* ud) {
  auto& t = *static_cast<Transfer*>(ud);
  const std::size_t len = size * n;
  if (t.head_done) return len;  // trailers of a chunked answer
  if (t.head.take(std::string_view(p, len)) && !finish_head(t)) return 0;
  return len;
}

std::size_t on_body(char* p, std::size_t size, std::size_t n, void* ud) {
  auto& t = *static_cast<Transfer*>(ud);
  const std::size_t len = size * n;
  if (!t.head_done && !finish_head(t)) return 0;
  return put(t, std::string_view(p, len)) ? len : 0;
}

std::size_t on_read(char* buf, std::size_t size, std::size_t n, void* ud) {
  auto& t = *static_cast<Transfer*>(ud);
  std::size_t want = size * n;
  if (t.remaining) {
    if (*t.remaining == 0) return 0;
    want = static_cast<std::size_t>(std::min<std::uint64_t>(want, *t.remaining));
  }
  auto got = sys::read_available(0, want);
  if (!got || !*got) {
    t.io_error = got ? Error{EAGAIN, "stdin is non-blocking"} : got.error().with_context("reading the request body");
    return CURL_READFUNC_ABORT;
  }
  std::memcpy(buf, (*got)->data(), (*got)->size());
  if (t.remaining) *t.remaining -= (*got)->size();
  return (*got)->size();
}

Result<List> header_list(const ForwardRequest& req, const std::string& credential) {
  List list;
  auto add = [&list](const std::string& line) {
    curl_slist* next = curl_slist_append(list.get(), line.c_str());
    if (!next) return false;
    (void)list.release();
    list.reset(next);
    return true;
  };
  bool ok = true;
  for (const auto& h : req.headers) ok = ok && add(h);
  ok = ok && add(credential);
  // No "Expect: 100-continue" round trip before a large body.
  ok = ok && add("Expect:");
  if (req.body && !req.content_length) ok = ok && add("Transfer-Encoding: chunked");
  if (!ok) return fail(ENOMEM, "curl_slist_append: out of memory");
  return list;
}

// The method as libcurl sends it: a body makes libcurl's POST, which any
// other method with a body renames; without one GET is its default.
void set_method(CURL* c, const ForwardRequest& req) {
  if (req.body) {
    curl_easy_setopt(c, CURLOPT_POST, 1L);
    if (req.content_length)
      curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(*req.content_length));
  } else if (req.method == "HEAD") {
    curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  }
  const bool libcurls_own = req.body ? req.method == "POST" : req.method == "GET" || req.method == "HEAD";
  if (!libcurls_own) curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, req.method.c_str());
}

}  // namespace

Result<void> relay(const Upstream& up, const ForwardRequest& req, const std::string& credential, Output out,
                   Relayed& relayed) {
  std::unique_ptr<CURL, EasyFree> easy(curl_easy_init());
  if (!easy) return fail(ENOMEM, "curl_easy_init failed");
  CURL* c = easy.get();
  CTX_TRY_ASSIGN(List headers, header_list(req, credential));
  Transfer t{out, relayed, {}, false, std::nullopt, req.content_length};
  char errbuf[CURL_ERROR_SIZE] = {};
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(c, CURLOPT_URL, req.url.c_str());
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
  curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
  if (!up.cainfo.empty()) curl_easy_setopt(c, CURLOPT_CAINFO, up.cainfo.c_str());
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
  curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(c, CURLOPT_SUPPRESS_CONNECT_HEADERS, 1L);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());
  set_method(c, req);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
  curl_easy_setopt(c, CURLOPT_READDATA, &t);
  CURLcode rc = curl_easy_perform(c);
  if (t.io_error) return fail(*t.io_error);
  if (rc != CURLE_OK) {
    std::string detail = errbuf[0] ? std::string(errbuf) : std::string(curl_easy_strerror(rc));
    return fail(EIO, req.method + " " + req.url + ": " + detail);
  }
  if (!t.head_done && !finish_head(t)) return fail(*t.io_error);
  return {};
}

}  // namespace ctx::forward
