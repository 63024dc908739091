// A JSON reader for a program built without a C or C++ library
// (ctx/call_bare.cpp, which reads the supervisor's one-line answers):
// header-only, no allocation. It accepts exactly the texts
// nlohmann::json::parse accepts (RFC 8259, strict UTF-8, surrogate pairs
// whole), nested at most kMaxDepth deep, and finds an object's members by
// name, the last of a repeated name winning as with nlohmann::json.
// test/unit/base/json_scan_test.cpp holds it to nlohmann::json.
#pragma once

#include <cstddef>

#include "base/text_core.hpp"

namespace ctx::json_scan {

inline constexpr int kMaxDepth = 128;

enum class Kind { absent, null, boolean, number, string, object, array };

/// A value's kind and its text (a string's with its quotes).
struct Value {
  Kind kind = Kind::absent;
  const char* p = nullptr;
  std::size_t n = 0;
};

namespace detail {

struct Reader {
  const char* s;
  std::size_t n;
  std::size_t i = 0;

  constexpr bool at_end() const { return i >= n; }
  constexpr char c() const { return i < n ? s[i] : '\0'; }
  constexpr void blank() {
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) ++i;
  }
  constexpr bool word(const char* w) {
    for (; *w != '\0'; ++w, ++i)
      if (i >= n || s[i] != *w) return false;
    return true;
  }
  static constexpr int hex(char h) {
    return h >= '0' && h <= '9'   ? h - '0'
           : h >= 'a' && h <= 'f' ? h - 'a' + 10
           : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                  : -1;
  }
  constexpr long unit() {  // the 4 hex digits after "\u"
    long v = 0;
    for (int k = 0; k < 4; ++k, ++i) {
      int h = i < n ? hex(s[i]) : -1;
      if (h < 0) return -1;
      v = v * 16 + h;
    }
    return v;
  }
  // A string from its opening quote; with `out`, its decoded bytes too.
  template <class Put>
  constexpr bool string(Put&& put) {
    if (c() != '"') return false;
    ++i;
    while (true) {
      if (at_end()) return false;
      auto u = static_cast<unsigned char>(s[i]);
      if (u == '"') {
        ++i;
        return true;
      }
      if (u < 0x20) return false;
      if (u == '\\') {
        ++i;
        char e = c();
        ++i;
        const char* plain = e == '"'    ? "\""
                            : e == '\\' ? "\\"
                            : e == '/'  ? "/"
                            : e == 'b'  ? "\b"
                            : e == 'f'  ? "\f"
                            : e == 'n'  ? "\n"
                            : e == 'r'  ? "\r"
                            : e == 't'  ? "\t"
                                        : nullptr;
        if (plain != nullptr) {
          put(plain, 1);
          continue;
        }
        if (e != 'u') return false;
        long cp = unit();
        if (cp < 0 || (cp >= 0xdc00 && cp <= 0xdfff)) return false;
        if (cp >= 0xd800 && cp <= 0xdbff) {
          if (!word("\\u")) return false;
          long lo = unit();
          if (lo < 0xdc00 || lo > 0xdfff) return false;
          cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
        }
        char b[4] = {};
        std::size_t k = 0;
        if (cp < 0x80) {
          b[k++] = static_cast<char>(cp);
        } else if (cp < 0x800) {
          b[k++] = static_cast<char>(0xc0 | (cp >> 6));
          b[k++] = static_cast<char>(0x80 | (cp & 0x3f));
        } else if (cp < 0x10000) {
          b[k++] = static_cast<char>(0xe0 | (cp >> 12));
          b[k++] = static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
          b[k++] = static_cast<char>(0x80 | (cp & 0x3f));
        } else {
          b[k++] = static_cast<char>(0xf0 | (cp >> 18));
          b[k++] = static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
          b[k++] = static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
          b[k++] = static_cast<char>(0x80 | (cp & 0x3f));
        }
        put(b, k);
        continue;
      }
      char32_t cp = 0;
      std::size_t len = u < 0x80 ? 1 : text::utf8_at(s, n, i, cp);
      if (len == 0) return false;
      put(s + i, len);
      i += len;
    }
  }
  constexpr bool digits() {
    std::size_t from = i;
    while (i < n && s[i] >= '0' && s[i] <= '9') ++i;
    return i > from;
  }
  constexpr bool number() {
    const std::size_t from = i;
    if (!number_text()) return false;
    return finite(s + from, i - from);
  }
  // Whether a number's text rounds to a finite double: nlohmann::json
  // refuses the others ("number overflow"). Its value is 0.DIGITS x 10^x;
  // it overflows when x > 309, or x == 309 and DIGITS reach those of
  // 2^1024 - 2^970, the first value that rounds to infinity.
  static constexpr bool finite(const char* p, std::size_t n) {
    std::size_t k = p[0] == '-' ? 1 : 0;
    long long x = 0;
    bool fraction = false;
    const char* first = nullptr;  // the first digit other than 0
    for (; k < n && p[k] != 'e' && p[k] != 'E'; ++k) {
      if (p[k] == '.') {
        fraction = true;
        continue;
      }
      if (first == nullptr && p[k] != '0') first = p + k;
      if (first != nullptr && !fraction) ++x;  // an integer digit
      if (first == nullptr && fraction) --x;   // a zero right of the point
    }
    if (first == nullptr) return true;  // zero
    const char* digits_end = p + k;
    long long exp = 0;
    if (k < n) {
      ++k;
      const bool neg = p[k] == '-';
      if (p[k] == '-' || p[k] == '+') ++k;
      for (; k < n; ++k)
        if (exp < 1000000) exp = exp * 10 + (p[k] - '0');
      if (neg) exp = -exp;
    }
    x += exp;
    if (x != 309) return x < 309;
    const char* t =
        "179769313486231580793728971405303415079934132710037826936173778980444968292764750946649017977587207096330286416692887910946555547851940402630657488671505820681908902000708383676273854845817711531764475730270069855571366959622842914819860834936475292719074168444365510704342711559699508093042880177904174497792";
    for (const char* d = first;;) {
      while (d < digits_end && *d == '.') ++d;
      const bool more_d = d < digits_end, more_t = *t != '\0';
      if (!more_d && !more_t) return false;  // equal: rounds to infinity
      const char dd = more_d ? *d : '0', tt = more_t ? *t : '0';
      if (dd != tt) return dd < tt;
      if (more_d) ++d;
      if (more_t) ++t;
    }
  }
  constexpr bool number_text() {
    if (c() == '-') ++i;
    if (c() == '0') {
      ++i;
    } else if (!digits()) {
      return false;
    }
    if (c() == '.') {
      ++i;
      if (!digits()) return false;
    }
    if (c() == 'e' || c() == 'E') {
      ++i;
      if (c() == '+' || c() == '-') ++i;
      if (!digits()) return false;
    }
    return true;
  }
  // One value, blanks around it; its kind and text into `v`.
  constexpr bool value(Value& v, int depth) {
    auto none = [](const char*, std::size_t) {};
    blank();
    std::size_t from = i;
    char first = c();
    if (first == '{' || first == '[') {
      if (depth >= kMaxDepth) return false;
      const char close = first == '{' ? '}' : ']';
      ++i;
      blank();
      if (c() == close) {
        ++i;
      } else {
        while (true) {
          if (first == '{') {
            blank();
            if (!string(none)) return false;
            blank();
            if (c() != ':') return false;
            ++i;
          }
          Value inner;
          if (!value(inner, depth + 1)) return false;
          if (c() == ',') {
            ++i;
            continue;
          }
          if (c() != close) return false;
          ++i;
          break;
        }
      }
      v.kind = first == '{' ? Kind::object : Kind::array;
    } else if (first == '"') {
      if (!string(none)) return false;
      v.kind = Kind::string;
    } else if (first == 't' || first == 'f') {
      if (!word(first == 't' ? "true" : "false")) return false;
      v.kind = Kind::boolean;
    } else if (first == 'n') {
      if (!word("null")) return false;
      v.kind = Kind::null;
    } else {
      if (!number()) return false;
      v.kind = Kind::number;
    }
    v.p = s + from;
    v.n = i - from;
    blank();
    return true;
  }
};

}  // namespace detail

/// Whether s[0..n) is one JSON value, blanks around it allowed.
constexpr bool valid(const char* s, std::size_t n, Value* whole = nullptr) {
  detail::Reader r{s, n};
  Value v;
  if (!r.value(v, 0) || !r.at_end()) return false;
  if (whole != nullptr) *whole = v;
  return true;
}

/// The member `key` (NUL-terminated, no escapes needed to write it) of the
/// object `obj`, a value valid() accepted; the last of several; absent if
/// none.
constexpr Value member(const Value& obj, const char* key) {
  Value found;
  if (obj.kind != Kind::object) return found;
  detail::Reader r{obj.p, obj.n};
  ++r.i;  // '{'
  r.blank();
  if (r.c() == '}') return found;
  while (true) {
    r.blank();
    std::size_t k = 0;
    bool same = true;
    bool ok = r.string([&](const char* p, std::size_t len) {
      for (std::size_t j = 0; j < len; ++j) {
        if (same && key[k] != '\0' && key[k] == p[j])
          ++k;
        else
          same = false;
      }
    });
    same = ok && same && key[k] == '\0';
    r.blank();
    ++r.i;  // ':'
    Value v;
    r.value(v, 1);
    if (same) found = v;
    if (r.c() != ',') return found;
    ++r.i;
  }
}

/// A string value decoded, through `put`.
template <class Put>
constexpr bool string_to(const Value& v, Put&& put) {
  if (v.kind != Kind::string) return false;
  detail::Reader r{v.p, v.n};
  return r.string(put);
}

/// A number value as nlohmann::json's get<int>() gives an integer that
/// fits in 64 bits; false for any other value (a fraction, an exponent).
constexpr bool integer(const Value& v, long long& out) {
  if (v.kind != Kind::number) return false;
  std::size_t i = 0;
  bool neg = v.p[0] == '-';
  if (neg) ++i;
  unsigned long long m = 0;
  for (; i < v.n; ++i) {
    char d = v.p[i];
    if (d < '0' || d > '9') return false;
    const unsigned digit = static_cast<unsigned>(d - '0');
    if (m > (~0ULL - digit) / 10) return false;
    m = m * 10 + digit;
  }
  out = neg ? static_cast<long long>(0ULL - m) : static_cast<long long>(m);
  return true;
}

}  // namespace ctx::json_scan
