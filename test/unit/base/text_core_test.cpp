// The header-only text code that bin/ctx's small program (ctx/call_bare.cpp)
// shares with the rest, held to what the rest uses: nlohmann::json's parser
// and writer, and the C library's errno names.
#include <catch2/catch.hpp>
#include <cstring>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "base/errno_symbol.hpp"
#include "base/json_scan.hpp"
#include "base/text_core.hpp"

namespace {

using nlohmann::json;

std::string quote(const std::string& s, bool ascii, bool* ok = nullptr) {
  std::string out;
  bool r = ctx::text::json_quote_to(s.data(), s.size(), ascii, [&](const char* p, std::size_t n) { out.append(p, n); });
  if (ok != nullptr) *ok = r;
  return out;
}

// Random text of code points from every UTF-8 length and of bytes that are
// not UTF-8.
std::string random_text(std::mt19937& rng, bool broken) {
  static const std::vector<std::string> pieces = {"a",
                                                  "Z",
                                                  "0",
                                                  " ",
                                                  "\"",
                                                  "\\",
                                                  "/",
                                                  "\b",
                                                  "\f",
                                                  "\n",
                                                  "\r",
                                                  "\t",
                                                  "\x01",
                                                  "\x1f",
                                                  "\x7f",
                                                  "\xc2\x80",
                                                  "\xc2\x9f",
                                                  "\xc3\xa9",
                                                  "\xdf\xbf",
                                                  "\xe0\xa0\x80",
                                                  "\xe2\x80\xae",
                                                  "\xef\xbf\xbf",
                                                  "\xed\x9f\xbf",
                                                  "\xf0\x90\x80\x80",
                                                  "\xf0\x9f\x98\x80",
                                                  "\xf4\x8f\xbf\xbf"};
  static const std::vector<std::string> bad = {"\x80",     "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80",
                                               "\xe2\x80", "\xff"};
  std::string s;
  const int n = static_cast<int>(rng() % 12);
  for (int i = 0; i < n; ++i) s += pieces[rng() % pieces.size()];
  if (broken) s.insert(rng() % (s.size() + 1), bad[rng() % bad.size()]);
  return s;
}

// A random JSON document, some of it mutated into text that is not one.
std::string random_json(std::mt19937& rng, int depth) {
  switch (depth > 4 ? rng() % 4 : rng() % 7) {
    case 0: return json(random_text(rng, false)).dump(-1, ' ', rng() % 2 == 0);
    case 1: {
      static const char* nums[] = {"0",
                                   "-0",
                                   "12",
                                   "-7",
                                   "3.25",
                                   "1e9",
                                   "2E-3",
                                   "-0.5e+2",
                                   "9223372036854775807",
                                   "18446744073709551615",
                                   "123456789012345678901234"};
      return nums[rng() % 11];
    }
    case 2: return rng() % 2 ? "true" : "false";
    case 3: return "null";
    case 4:
    case 5: {
      std::string s = "{";
      const int n = static_cast<int>(rng() % 4);
      for (int i = 0; i < n; ++i) {
        if (i > 0) s += rng() % 3 == 0 ? " , " : ",";
        s += json(rng() % 3 ? std::string(1, static_cast<char>('a' + rng() % 3)) : random_text(rng, false)).dump();
        s += rng() % 3 == 0 ? " :\n" : ":";
        s += random_json(rng, depth + 1);
      }
      return s + (rng() % 3 == 0 ? "\t}" : "}");
    }
    default: {
      std::string s = "[";
      const int n = static_cast<int>(rng() % 4);
      for (int i = 0; i < n; ++i) s += (i > 0 ? "," : "") + random_json(rng, depth + 1);
      return s + "]";
    }
  }
}

std::string mutate(std::mt19937& rng, std::string s) {
  static const std::string alphabet = "{}[]\":,\\ u0aeE+-.tfn\x01\x80\xc3";
  const int edits = 1 + static_cast<int>(rng() % 3);
  for (int i = 0; i < edits; ++i) {
    const std::size_t at = s.empty() ? 0 : rng() % s.size();
    switch (rng() % 3) {
      case 0: s.insert(s.begin() + static_cast<long>(at), alphabet[rng() % alphabet.size()]); break;
      case 1:
        if (!s.empty()) s.erase(at, 1);
        break;
      default:
        if (!s.empty()) s[at] = alphabet[rng() % alphabet.size()];
    }
  }
  return s;
}

std::string decoded(const ctx::json_scan::Value& v) {
  std::string out;
  ctx::json_scan::string_to(v, [&](const char* p, std::size_t n) { out.append(p, n); });
  return out;
}

}  // namespace

TEST_CASE("json_quote_to writes strings as nlohmann::json dumps them, and refuses where dump throws", "[unit]") {
  std::mt19937 rng(26);
  for (int i = 0; i < 20000; ++i) {
    const bool broken = i % 4 == 0;
    const std::string s = random_text(rng, broken);
    for (bool ascii : {false, true}) {
      bool ok = false;
      const std::string mine = quote(s, ascii, &ok);
      std::string theirs;
      bool threw = false;
      try {
        theirs = json(s).dump(-1, ' ', ascii);
      } catch (const json::exception&) {
        threw = true;
      }
      INFO(json(s).dump(-1, ' ', true, json::error_handler_t::replace));
      CHECK(ok == !threw);
      if (!threw) CHECK(mine == theirs);
    }
  }
}

TEST_CASE("errno_symbol names errno values as the C library does", "[unit]") {
  for (int e = -1; e < 200; ++e) {
    const char* mine = ctx::errno_symbol(e);
    const char* libc = e < 0 ? nullptr : ::strerrorname_np(e);
    INFO(e);
    CHECK((mine == nullptr) == (libc == nullptr));
    if (mine != nullptr && libc != nullptr) CHECK(std::string(mine) == libc);
  }
}

TEST_CASE("json_scan accepts exactly what nlohmann::json parses and reads members as it does", "[unit]") {
  std::mt19937 rng(2611);
  int accepted = 0, refused = 0, compared = 0;
  for (int i = 0; i < 30000; ++i) {
    std::string text = random_json(rng, 0);
    if (i % 2 == 1) text = mutate(rng, text);
    ctx::json_scan::Value whole;
    const bool mine = ctx::json_scan::valid(text.data(), text.size(), &whole);
    const json theirs = json::parse(text, nullptr, false);
    INFO(json(text).dump(-1, ' ', true, json::error_handler_t::replace));
    REQUIRE(mine == !theirs.is_discarded());
    (mine ? accepted : refused)++;
    if (!mine || !theirs.is_object()) continue;
    CHECK(whole.kind == ctx::json_scan::Kind::object);
    for (const auto& [key, value] : theirs.items()) {
      if (key.find('\0') != std::string::npos) continue;  // member() takes a C string
      auto v = ctx::json_scan::member(whole, key.c_str());
      ++compared;
      if (value.is_string()) {
        REQUIRE(v.kind == ctx::json_scan::Kind::string);
        CHECK(decoded(v) == value.get<std::string>());
      } else if (value.is_boolean()) {
        REQUIRE(v.kind == ctx::json_scan::Kind::boolean);
        CHECK((v.p[0] == 't') == value.get<bool>());
      } else if (value.is_number_integer()) {
        long long n = 0;
        REQUIRE(ctx::json_scan::integer(v, n));
        CHECK(static_cast<int>(n) == value.get<int>());
      } else if (value.is_null()) {
        CHECK(v.kind == ctx::json_scan::Kind::null);
      } else if (value.is_object()) {
        CHECK(v.kind == ctx::json_scan::Kind::object);
      } else if (value.is_array()) {
        CHECK(v.kind == ctx::json_scan::Kind::array);
      } else {
        CHECK(v.kind == ctx::json_scan::Kind::number);
      }
    }
    CHECK(ctx::json_scan::member(whole, "no such name").kind == ctx::json_scan::Kind::absent);
  }
  // Both kinds seen in quantity: the comparison says something.
  CHECK(accepted > 5000);
  CHECK(refused > 5000);
  CHECK(compared > 5000);
}

TEST_CASE("json_scan: a repeated name is the last one, as in nlohmann::json; depth is bounded", "[unit]") {
  const std::string text = R"( {"ok":false, "path":"/a", "ok" : true, "n":{"ok":false}} )";
  ctx::json_scan::Value whole;
  REQUIRE(ctx::json_scan::valid(text.data(), text.size(), &whole));
  auto ok = ctx::json_scan::member(whole, "ok");
  CHECK(ok.kind == ctx::json_scan::Kind::boolean);
  CHECK(ok.p[0] == 't');
  CHECK(json::parse(text)["ok"] == true);
  CHECK(decoded(ctx::json_scan::member(whole, "path")) == "/a");
  // Deeper than kMaxDepth: refused here (nlohmann::json would recurse on),
  // which only an answer no supervisor sends can reach.
  std::string deep = std::string(ctx::json_scan::kMaxDepth, '[') + std::string(ctx::json_scan::kMaxDepth, ']');
  CHECK(ctx::json_scan::valid(deep.data(), deep.size()));
  deep = "[" + deep + "]";
  CHECK_FALSE(ctx::json_scan::valid(deep.data(), deep.size()));
  // Escapes decode to UTF-8, a surrogate pair to one code point.
  const std::string esc = R"({"s":"a\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00\u0000z"})";
  REQUIRE(ctx::json_scan::valid(esc.data(), esc.size(), &whole));
  CHECK(decoded(ctx::json_scan::member(whole, "s")) == json::parse(esc)["s"].get<std::string>());
  for (const char* bad : {R"("\ud83d")", R"("\ude00")", R"("\ud83dx")", R"("\u12")", "01", "1.", "-", "+1", ".5",
                          "[1,]", "{\"a\"}", "\"\t\"", "tru", "nul", "", " "}) {
    INFO(bad);
    CHECK_FALSE(ctx::json_scan::valid(bad, std::strlen(bad)));
    CHECK(json::parse(bad, nullptr, false).is_discarded());
  }
}

TEST_CASE("json_scan refuses the numbers nlohmann::json refuses as overflowing a double", "[unit]") {
  for (
      const char* n :
      {"1e308", "1e309", "-1e309", "1.7976931348623157e308", "1.7976931348623158e308",
       "1.797693134862315807937289714053e308", "1.7976931348623159e308",
       "179769313486231580793728971405303415079934132710037826936173778980444968292764750946649017977587207096330286416692887910946555547851940402630657488671505820681908902000708383676273854845817711531764475730270069855571366959622842914819860834936475292719074168444365510704342711559699508093042880177904174497792",
       "179769313486231580793728971405303415079934132710037826936173778980444968292764750946649017977587207096330286416692887910946555547851940402630657488671505820681908902000708383676273854845817711531764475730270069855571366959622842914819860834936475292719074168444365510704342711559699508093042880177904174497791.9",
       "0.00001e313", "0.0000e99999", "1e-400", "1e99999999999999999999", "100e307", "10e307"}) {
    INFO(n);
    CHECK(ctx::json_scan::valid(n, std::strlen(n)) == !json::parse(n, nullptr, false).is_discarded());
  }
}
