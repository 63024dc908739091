#include <cstring>
#include <string>

#include "base/result.hpp"

namespace ctx {

std::string errno_name(int code) {
  // strerrorname_np (glibc >= 2.32) names every errno glibc knows and
  // returns nullptr for the rest.
  const char* name = ::strerrorname_np(code);
  if (name != nullptr) return name;
  return "E" + std::to_string(code);
}

}  // namespace ctx
