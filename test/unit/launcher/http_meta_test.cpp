// The HTTP metadata of a model call (launcher/control/http_meta.hpp) and a
// model's CGI header block (launcher/endpoint/cgi_head.hpp): the rules the
// endpoint answers 400 and 502 with, and the gate refuses with. Pure.
#include <catch2/catch.hpp>

#include "launcher/control/http_meta.hpp"
#include "launcher/endpoint/cgi_head.hpp"

using ctx::launcher::HttpMeta;
using nlohmann::json;

namespace {

HttpMeta meta() {
  HttpMeta m;
  m.protocol = "HTTP/1.1";
  m.method = "POST";
  m.path = "/v1/messages";
  m.query = "beta=true";
  m.content_type = "application/json";
  m.content_length = 7;
  m.headers = {{"Anthropic-Version", "2023-06-01"}, {"User-Agent", "claude-cli/2.1 (café)"}};
  return m;
}

}  // namespace

TEST_CASE("http metadata becomes the model's CGI environment", "[unit]") {
  auto env = ctx::launcher::cgi_env(meta());
  CHECK(env == std::vector<std::pair<std::string, std::string>>{{"GATEWAY_INTERFACE", "CGI/1.1"},
                                                                {"SERVER_PROTOCOL", "HTTP/1.1"},
                                                                {"REQUEST_METHOD", "POST"},
                                                                {"PATH_INFO", "/v1/messages"},
                                                                {"QUERY_STRING", "beta=true"},
                                                                {"CONTENT_TYPE", "application/json"},
                                                                {"CONTENT_LENGTH", "7"},
                                                                {"HTTP_ANTHROPIC_VERSION", "2023-06-01"},
                                                                {"HTTP_USER_AGENT", "claude-cli/2.1 (café)"}});
  auto back = ctx::launcher::decode_http_meta(ctx::launcher::to_json(meta()));
  REQUIRE(back);
  CHECK(ctx::launcher::cgi_env(*back) == env);
}

TEST_CASE("the gate refuses http metadata the endpoint would never send", "[unit]") {
  auto issue = [](const std::function<void(HttpMeta&)>& change) {
    HttpMeta m = meta();
    change(m);
    auto r = ctx::launcher::decode_http_meta(ctx::launcher::to_json(m));
    REQUIRE(!r);
    CHECK(r.error().code == EINVAL);
    CHECK(r.error().reason == "invalid_request");
    return r.error().msg;
  };
  CHECK(issue([](HttpMeta& m) {
          m.headers.push_back({"Authorization", "Bearer t"});
        }) == "http: header 'Authorization' is never passed to a model");
  CHECK(issue([](HttpMeta& m) {
          m.headers.push_back({"x-API-key", "t"});
        }) == "http: header 'x-API-key' is never passed to a model");
  // Proxy would become HTTP_PROXY, a proxy setting to many clients.
  CHECK(issue([](HttpMeta& m) {
          m.headers.push_back({"Proxy", "http://127.0.0.1:1"});
        }) == "http: header 'Proxy' is never passed to a model");
  CHECK(issue([](HttpMeta& m) {
          m.headers.push_back({"X_Under", "1"});
        }) == "http: header name 'X_Under' is not 1 to 256 of A-Z a-z 0-9 -");
  CHECK(issue([](HttpMeta& m) {
          m.headers.push_back({"X-Ctl", "a\nb"});
        }) == "http: the value of header 'X-Ctl' is not printable ASCII or UTF-8 without control characters");
  CHECK(issue([](HttpMeta& m) {
          m.headers.push_back({"X-Bad", "\xc3"});
        }) == "http: the value of header 'X-Bad' is not printable ASCII or UTF-8 without control characters");
  CHECK(issue([](HttpMeta& m) {
          m.headers.push_back({"user-agent", "again"});
        }) == "http: header 'user-agent' appears twice");
  CHECK(issue([](HttpMeta& m) {
          for (int i = 0; i < 63; ++i) m.headers.push_back({"X-" + std::to_string(i), "v"});
        }) == "http: \"headers\" must be an array of at most 64 [name, value] pairs");
  CHECK(issue([](HttpMeta& m) {
          m.headers.push_back({"X-Big", std::string(33000, 'a')});
        }) == "http: headers longer than 32 KiB in all");
  CHECK(issue([](HttpMeta& m) { m.path = "/a b"; }) ==
        "http: path must be empty or start with '/', at most 8 KiB of printable ASCII without space");
  CHECK(issue([](HttpMeta& m) { m.method = "post"; }) == "http: method must be 1 to 32 of A-Z");
  CHECK(issue([](HttpMeta& m) { m.protocol = "HTTP/2"; }) == "http: protocol must be HTTP/1.0 or HTTP/1.1");
  json j = ctx::launcher::to_json(meta());
  j["env"] = "PATH=/x";
  auto r = ctx::launcher::decode_http_meta(j);
  REQUIRE(!r);
  CHECK(r.error().msg == "http: unknown key 'env'");
}

TEST_CASE("a model's CGI header block: Status, headers, the body's start", "[unit]") {
  using ctx::endpoint::cgi_head_end;
  using ctx::endpoint::parse_cgi_head;
  CHECK(!cgi_head_end("Content-Type: text/plain\r\n"));
  CHECK(cgi_head_end("Content-Type: text/plain\r\n\r\nbody") == 28);
  CHECK(cgi_head_end("A: b\n\nbody") == 6);
  auto h = parse_cgi_head(
      "Status: 404 Not Found\r\nContent-Type: application/json\r\nConnection: close\r\n"
      "Content-Length: 12\r\nX-Request-Id: r1\r\n\r\n");
  REQUIRE(h);
  CHECK(h->status == 404);
  CHECK(h->content_length == 12u);
  CHECK(h->headers ==
        std::vector<std::pair<std::string, std::string>>{{"Content-Type", "application/json"}, {"X-Request-Id", "r1"}});
  auto bad = [](std::string_view head) {
    auto r = parse_cgi_head(head);
    REQUIRE(!r);
    CHECK(r.error().code == EPROTO);
    return r.error().msg;
  };
  CHECK(bad("\n") == "the model's CGI header block: no header line before the body");
  CHECK(bad("{\"json\" 1}\n\n") ==
        "the model's CGI header block: a line without ':' (the block ends with an empty line)");
  CHECK(bad("Status: 99\n\n") == "the model's CGI header block: Status must start with a code from 100 to 599");
  CHECK(bad("X_Y: 1\n\n") == "the model's CGI header block: header name 'X_Y' is not 1 to 256 of A-Z a-z 0-9 -");
}
