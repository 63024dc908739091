// The parts of base/text.hpp and of the JSON text the project writes that a
// program built without a C or C++ library needs too (ctx/call_bare.cpp):
// header-only, on plain pointers and lengths, writing through a sink
// `put(const char*, std::size_t)`. base/text.cpp's printable() is built on
// printable_to(); test/unit/base/text_test.cpp holds json_quote_to() to
// nlohmann::json's own output.
#pragma once

#include <cstddef>

namespace ctx::text {

/// The length of the valid UTF-8 sequence at s[i] (of n bytes) and its
/// code point, or 0 when the bytes there are not one (overlong, surrogate,
/// out of range, truncated).
constexpr std::size_t utf8_at(const char* s, std::size_t n, std::size_t i, char32_t& cp) {
  auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[i + k]); };
  unsigned char c = b(0);
  std::size_t len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 0;
  if (len == 0 || c > 0xf4 || i + len > n) return 0;
  cp = c & (0x7f >> len);
  for (std::size_t k = 1; k < len; ++k) {
    if ((b(k) & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (b(k) & 0x3f);
  }
  constexpr char32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return len;
}

/// Code points that reorder or hide text on a terminal: the C1 controls
/// and the bidirectional formatting characters.
constexpr bool hidden_control(char32_t cp) {
  return (cp >= 0x80 && cp <= 0x9f) || cp == 0x061c || cp == 0x200e || cp == 0x200f || (cp >= 0x202a && cp <= 0x202e) ||
         (cp >= 0x2066 && cp <= 0x2069);
}

/// `v` in lowercase hexadecimal, at least `digits` digits, into `out`
/// (room for 8); returns the length.
constexpr std::size_t hex_into(char* out, unsigned v, std::size_t digits) {
  char tmp[8] = {};
  std::size_t n = 0;
  do {
    tmp[n++] = "0123456789abcdef"[v & 0xf];
    v >>= 4;
  } while (v != 0 && n < 8);
  while (n < digits && n < 8) tmp[n++] = '0';
  for (std::size_t i = 0; i < n; ++i) out[i] = tmp[n - 1 - i];
  return n;
}

/// printable() (base/text.hpp) of s[0..n), through `put`.
template <class Put>
constexpr void printable_to(const char* s, std::size_t n, Put&& put) {
  char buf[16] = {};
  for (std::size_t i = 0; i < n;) {
    auto u = static_cast<unsigned char>(s[i]);
    char32_t cp = 0;
    std::size_t len = u < 0x80 ? 1 : utf8_at(s, n, i, cp);
    if ((u < 0x80 && (u < 0x20 || u == 0x7f)) || len == 0) {  // C0, DEL, or a byte that is not UTF-8
      buf[0] = '\\';
      buf[1] = 'x';
      put(buf, 2 + hex_into(buf + 2, u, 2));
      ++i;
    } else if (u >= 0x80 && hidden_control(cp)) {
      buf[0] = '\\';
      buf[1] = 'u';
      buf[2] = '{';
      std::size_t k = 3 + hex_into(buf + 3, static_cast<unsigned>(cp), 1);
      buf[k++] = '}';
      put(buf, k);
      i += len;
    } else {
      put(s + i, len);
      i += len;
    }
  }
}

/// s[0..n) as a JSON string with its quotes, the way nlohmann::json's
/// dump() writes it: '"' and '\\' escaped, \b \t \n \f \r, other C0
/// controls as \u00XX; with `ascii` (dump's ensure_ascii) also every code
/// point from U+007F as \uXXXX, beyond U+FFFF as a surrogate pair. Where
/// s is not UTF-8 (dump throws) it returns false, having written part of
/// it; with `replace`, it writes each byte that is not as U+FFFD instead.
template <class Put>
constexpr bool json_quote_to(const char* s, std::size_t n, bool ascii, Put&& put, bool replace = false) {
  char buf[16] = {};
  put("\"", 1);
  for (std::size_t i = 0; i < n;) {
    auto u = static_cast<unsigned char>(s[i]);
    char32_t cp = u;
    std::size_t len = u < 0x80 ? 1 : utf8_at(s, n, i, cp);
    if (len == 0 && !replace) return false;
    if (len == 0) {
      put(ascii ? "\\ufffd" : "\xef\xbf\xbd", ascii ? 6 : 3);
      ++i;
      continue;
    }
    const char* esc = u == '"'    ? "\\\""
                      : u == '\\' ? "\\\\"
                      : u == '\b' ? "\\b"
                      : u == '\t' ? "\\t"
                      : u == '\n' ? "\\n"
                      : u == '\f' ? "\\f"
                      : u == '\r' ? "\\r"
                                  : nullptr;
    if (esc != nullptr) {
      put(esc, 2);
    } else if (cp < 0x20 || (ascii && cp >= 0x7f)) {
      auto unit = [&](unsigned v) {
        buf[0] = '\\';
        buf[1] = 'u';
        put(buf, 2 + hex_into(buf + 2, v, 4));
      };
      if (cp <= 0xffff) {
        unit(static_cast<unsigned>(cp));
      } else {
        unit(0xd800 + ((static_cast<unsigned>(cp) - 0x10000) >> 10));
        unit(0xdc00 + ((static_cast<unsigned>(cp) - 0x10000) & 0x3ff));
      }
    } else {
      put(s + i, len);
    }
    i += len;
  }
  put("\"", 1);
  return true;
}

}  // namespace ctx::text
