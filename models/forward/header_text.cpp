#include "models/forward/header_text.hpp"

#include <algorithm>

namespace ctx::forward {

std::string lower_ascii(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

bool header_value_ok(std::string_view v) {
  return std::none_of(v.begin(), v.end(), [](char c) {
    auto b = static_cast<unsigned char>(c);
    return (b < 0x20 && b != '\t') || b == 0x7f;
  });
}

}  // namespace ctx::forward
