#include <string>

#include "base/errno_symbol.hpp"
#include "base/result.hpp"

namespace ctx {

std::string errno_name(int code) {
  if (const char* name = errno_symbol(code)) return name;
  return "E" + std::to_string(code);
}

}  // namespace ctx
