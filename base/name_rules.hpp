// The rules of the project's names, header-only and free of the C and C++
// libraries so that a program built without them (ctx/call_bare.cpp) applies
// exactly these; base/names.cpp words the broken rule as a message.
#pragma once

#include <cstddef>

namespace ctx::names {

/// The first rule a name breaks.
enum class Broken { none, empty, too_long, first_char, char_set, dot_dot, last_char };

constexpr bool is_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }

/// Length (1..max), a letter or digit first, then only letters, digits and
/// the punctuation in `extra` (NUL-terminated).
constexpr Broken simple_rule(const char* s, std::size_t n, std::size_t max, const char* extra) {
  if (n == 0) return Broken::empty;
  if (n > max) return Broken::too_long;
  if (!is_alnum(s[0])) return Broken::first_char;
  for (std::size_t i = 0; i < n; ++i) {
    bool ok = is_alnum(s[i]);
    for (const char* e = extra; !ok && *e != '\0'; ++e) ok = s[i] == *e;
    if (!ok) return Broken::char_set;
  }
  return Broken::none;
}

/// A tool's name (docs/abi.md): simple_rule with '_', '.' and '-', at most
/// 128 bytes, no "..", not ending in '.' or ".d".
constexpr Broken tool_name_rule(const char* s, std::size_t n) {
  if (Broken b = simple_rule(s, n, 128, "_.-"); b != Broken::none) return b;
  for (std::size_t i = 0; i + 1 < n; ++i)
    if (s[i] == '.' && s[i + 1] == '.') return Broken::dot_dot;
  if (s[n - 1] == '.' || (n >= 2 && s[n - 2] == '.' && s[n - 1] == 'd')) return Broken::last_char;
  return Broken::none;
}

}  // namespace ctx::names
