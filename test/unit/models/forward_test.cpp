// ctx-model-forward's decisions (models/forward/request.hpp,
// response.hpp): what is sent upstream and what is written back.
#include <catch2/catch.hpp>

#include "models/forward/request.hpp"
#include "models/forward/response.hpp"

using ctx::forward::Env;
using ctx::forward::ResponseHead;
using ctx::forward::Upstream;

namespace {

Env config() { return {{"CTX_UPSTREAM_URL", "https://api.example.com/v1/"}, {"CTX_UPSTREAM_KEY_HEADER", "X-Api-Key"}}; }

std::string upstream_error(Env env) {
  auto up = ctx::forward::upstream_from(env);
  REQUIRE_FALSE(up);
  return up.error().msg;
}

std::string request_error(const Env& extra) {
  Env env = extra;
  env.emplace("REQUEST_METHOD", "POST");
  auto r = ctx::forward::cgi_request(*ctx::forward::upstream_from(config()), env);
  REQUIRE_FALSE(r);
  return r.error().msg;
}

}  // namespace

TEST_CASE("forward: the upstream's configuration is read and checked, each refusal naming its variable", "[unit]") {
  auto up = ctx::forward::upstream_from(config());
  REQUIRE(up);
  CHECK(up->url == "https://api.example.com/v1");
  CHECK(up->key_header == "x-api-key");
  Env e = config();
  e["CTX_UPSTREAM_URL"] = "ftp://api.example.com";
  CHECK(upstream_error(e) == "CTX_UPSTREAM_URL ftp://api.example.com is not an https:// URL");
  e["CTX_UPSTREAM_URL"] = "https://user:pw@api.example.com";
  CHECK(upstream_error(e) == "CTX_UPSTREAM_URL holds user information: put the credential in CTX_UPSTREAM_KEY");
  e["CTX_UPSTREAM_URL"] = "https://api.example.com/v1?x=1";
  CHECK(upstream_error(e) ==
        "CTX_UPSTREAM_URL has a query or a fragment: give the base URL only (a key goes in CTX_UPSTREAM_KEY)");
  // A key in the URL is never repeated in a refusal (the agent reads it):
  // not in a query, nor beside another refusal, nor in user information.
  for (const char* leaky : {"ftp://api.example.com/v1?key=sk-in-url", "http://192.0.2.1/v1?key=sk-in-url",
                            "http://u:sk-in-url@192.0.2.1/v1"}) {
    e["CTX_UPSTREAM_URL"] = leaky;
    CHECK(upstream_error(e).find("sk-in-url") == std::string::npos);
  }
  e["CTX_UPSTREAM_URL"] = "http://127.attacker.example";
  CHECK(upstream_error(e) ==
        "CTX_UPSTREAM_URL http://127.attacker.example: plain http is allowed only to a loopback host (127.0.0.1, "
        "::1, localhost); use https");
  for (const char* ok : {"http://localhost:8080", "http://127.0.0.2:1", "http://[::1]:80"}) {
    e["CTX_UPSTREAM_URL"] = ok;
    CHECK(ctx::forward::upstream_from(e));
  }
  e = config();
  e.erase("CTX_UPSTREAM_KEY_HEADER");
  CHECK(upstream_error(e) ==
        "CTX_UPSTREAM_KEY_HEADER is not set: name the header that carries the key in the model's .d/env "
        "(CTX_UPSTREAM_KEY_HEADER=x-api-key or Authorization)");
  e = config();
  e["CTX_UPSTREAM_KEY_PREFIX"] = "Bearer\r\nX-Evil: 1 ";
  CHECK(upstream_error(e) == "CTX_UPSTREAM_KEY_PREFIX holds a control character");
  e = config();
  e["CTX_UPSTREAM_DEFAULT_PATH"] = "v1/messages";
  CHECK(upstream_error(e) == "CTX_UPSTREAM_DEFAULT_PATH must start with '/'");
  CHECK(ctx::forward::check_key(std::nullopt).error().msg ==
        "CTX_UPSTREAM_KEY is not set: put the API key in the model's .d/env (CTX_UPSTREAM_KEY=...)");
  CHECK(ctx::forward::check_key(std::string("sk-1\n")).error().msg ==
        "CTX_UPSTREAM_KEY holds a control character or a blank at an end: check the line in .d/env");
  CHECK(ctx::forward::check_key(std::string("sk-1")));
}

TEST_CASE("forward: a CGI request passes its headers but never a credential or a hop-by-hop one", "[unit]") {
  Env env = {{"REQUEST_METHOD", "POST"},
             {"PATH_INFO", "/responses"},
             {"QUERY_STRING", "a=1&b=%20"},
             {"CONTENT_TYPE", "application/json"},
             {"CONTENT_LENGTH", "12"},
             {"HTTP_OPENAI_BETA", "responses=v1"},
             {"HTTP_X_API_KEY", "agent"},
             {"HTTP_AUTHORIZATION", "Bearer agent"},
             {"HTTP_PROXY_AUTHORIZATION", "x"},
             {"HTTP_COOKIE", "c=1"},
             {"HTTP_HOST", "127.0.0.1:7180"},
             {"HTTP_CONNECTION", "close"},
             {"HTTP_PROXY", "http://elsewhere:3128"},
             {"HTTP_CONTENT_LENGTH", "99"}};
  Upstream up = *ctx::forward::upstream_from(config());
  up.default_headers = {{"openai-beta", "default"}, {"anthropic-version", "2023-06-01"}};
  auto r = ctx::forward::cgi_request(up, env);
  REQUIRE(r);
  CHECK(r->method == "POST");
  CHECK(r->url == "https://api.example.com/v1/responses?a=1&b=%20");
  CHECK(r->body);
  CHECK(r->content_length == 12u);
  CHECK(r->headers == std::vector<std::string>{"openai-beta: responses=v1", "content-type: application/json",
                                               "anthropic-version: 2023-06-01"});
}

TEST_CASE("forward: a CGI request the forwarder cannot send as given is refused", "[unit]") {
  CHECK(request_error({{"HTTP_X_TITLE", "a\r\nx-api-key: mine"}}) == "the header x-title holds a control character");
  CHECK(request_error({{"CONTENT_LENGTH", "-1"}}) == "CONTENT_LENGTH '-1' is not a number of bytes");
  CHECK(request_error({{"QUERY_STRING", "a=1#frag"}}) ==
        "QUERY_STRING holds a character that is not allowed in a URL query");
  CHECK(request_error({{"PATH_INFO", "/a b"}}) == "PATH_INFO holds a character that is not allowed in a URL path");
  CHECK(request_error({{"PATH_INFO", "/a/./b"}}) ==
        "PATH_INFO has a '.' or '..' segment: the path stays beneath the upstream URL");
  Env bad_method = {{"REQUEST_METHOD", "CONNECT"}};
  CHECK(ctx::forward::cgi_request(*ctx::forward::upstream_from(config()), bad_method).error().msg ==
        "REQUEST_METHOD 'CONNECT' is not one of GET HEAD POST PUT PATCH DELETE OPTIONS");
}

TEST_CASE("forward: the upstream's answer head becomes a CGI header block without hop-by-hop headers or cookies",
          "[unit]") {
  ResponseHead h;
  CHECK_FALSE(h.take("HTTP/1.1 100 Continue\r\n"));
  CHECK_FALSE(h.take("\r\n"));  // an interim answer: the head is not done
  CHECK_FALSE(h.take("HTTP/2 429 \r\n"));
  for (const char* line : {"content-type: application/json\r\n", "set-cookie: s=1\r\n",
                           "Transfer-Encoding: chunked\r\n", "Content-Length: 10\r\n", "Status: 200 OK\r\n",
                           "retry-after: 3\r\n", " folded\r\n", "x-bad: a\x01z\r\n", "bad name: x\r\n"})
    CHECK_FALSE(h.take(line));
  CHECK(h.take("\r\n"));
  CHECK(h.status() == 429);
  CHECK(h.cgi_block() == "Status: 429 Too Many Requests\r\ncontent-type: application/json\r\nretry-after: 3\r\n\r\n");
  ResponseHead ok;
  (void)ok.take("HTTP/1.1 200 Fine Thanks\r\n");
  CHECK(ok.take("\r\n"));
  CHECK(ok.cgi_block() == "Status: 200 Fine Thanks\r\n\r\n");
  CHECK(ctx::forward::cgi_error(502, "api_error", "x") ==
        "Status: 502 Bad Gateway\r\nContent-Type: application/json\r\n\r\n"
        "{\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"ctx-model-forward: x\"}}\n");
}
