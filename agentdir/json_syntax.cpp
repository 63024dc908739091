#include "agentdir/json_syntax.hpp"

#include <string>

#include "base/text.hpp"

namespace ctx::agentdir {

namespace {

class Checker {
 public:
  Checker(std::string_view file, std::string_view s) : file_(file), s_(s) {}

  Result<void> run() {
    ws();
    CTX_TRY(value(0));
    ws();
    if (i_ != s_.size()) return bad("unexpected text after the JSON value");
    return {};
  }

 private:
  Unexpected<Error> bad(const std::string& what) const {
    int line = 1, col = 1;
    for (std::size_t k = 0; k < i_ && k < s_.size(); ++k) {
      if (s_[k] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    return fail(located(file_, line, col, EINVAL, "invalid JSON: " + what));
  }
  bool at_end() const { return i_ >= s_.size(); }
  char peek() const { return at_end() ? '\0' : s_[i_]; }
  void ws() {
    while (!at_end() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  Result<void> literal(std::string_view word) {
    if (s_.substr(i_, word.size()) != word) return bad("unknown literal");
    i_ += word.size();
    return {};
  }
  static bool digit(char c) { return c >= '0' && c <= '9'; }

  Result<void> number() {
    if (peek() == '-') ++i_;
    if (peek() == '0') {
      ++i_;
    } else if (digit(peek())) {
      while (digit(peek())) ++i_;
    } else {
      return bad("expected a digit");
    }
    if (peek() == '.') {
      ++i_;
      if (!digit(peek())) return bad("expected a digit after '.'");
      while (digit(peek())) ++i_;
    }
    if (peek() == 'e' || peek() == 'E') {
      ++i_;
      if (peek() == '+' || peek() == '-') ++i_;
      if (!digit(peek())) return bad("expected a digit in the exponent");
      while (digit(peek())) ++i_;
    }
    return {};
  }

  Result<void> string() {
    ++i_;  // opening quote
    while (true) {
      if (at_end()) return bad("unterminated string");
      auto c = static_cast<unsigned char>(s_[i_]);
      if (c == '"') {
        ++i_;
        return {};
      }
      if (c < 0x20) return bad("control character in string");
      if (c == '\\') {
        ++i_;
        char e = peek();
        if (e == 'u') {
          for (int k = 1; k <= 4; ++k) {
            char h = i_ + static_cast<std::size_t>(k) < s_.size() ? s_[i_ + static_cast<std::size_t>(k)] : '\0';
            if (!digit(h) && !((h >= 'a' && h <= 'f') || (h >= 'A' && h <= 'F'))) return bad("bad \\u escape");
          }
          i_ += 5;
          continue;
        }
        if (std::string_view("\"\\/bfnrt").find(e) == std::string_view::npos || e == '\0') return bad("bad escape");
        ++i_;
        continue;
      }
      ++i_;
    }
  }

  // The members of an object ('}': "key": value pairs) or an array (']'),
  // after the opening bracket.
  Result<void> members(char close, int depth) {
    ++i_;
    ws();
    if (peek() == close) {
      ++i_;
      return {};
    }
    while (true) {
      ws();
      if (close == '}') {
        if (peek() != '"') return bad("expected a string key");
        CTX_TRY(string());
        ws();
        if (peek() != ':') return bad("expected ':'");
        ++i_;
        ws();
      }
      CTX_TRY(value(depth + 1));
      ws();
      if (peek() == ',') {
        ++i_;
        continue;
      }
      if (peek() == close) {
        ++i_;
        return {};
      }
      return bad(std::string("expected ',' or '") + close + "'");
    }
  }

  Result<void> value(int depth) {
    if (depth > 64) return bad("nested deeper than 64 levels");
    char c = peek();
    switch (c) {
      case '{': return members('}', depth);
      case '[': return members(']', depth);
      case '"': return string();
      case 't': return literal("true");
      case 'f': return literal("false");
      case 'n': return literal("null");
      default:
        if (c == '-' || digit(c)) return number();
        return bad(at_end() ? "unexpected end of file" : "unexpected character");
    }
  }

  std::string_view file_;
  std::string_view s_;
  std::size_t i_ = 0;
};

}  // namespace

Result<void> check_json(std::string_view file, std::string_view text) { return Checker(file, text).run(); }

}  // namespace ctx::agentdir
