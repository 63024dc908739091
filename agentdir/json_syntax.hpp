// A strict JSON (RFC 8259) syntax check, for meta.json: the core may not
// use nlohmann/json, and meta.json only needs to be valid, never read.
#pragma once

#include <string_view>

#include "base/result.hpp"

namespace ctx::agentdir {

/// Checks that `text` is one JSON value (any type) with nothing but
/// whitespace around it, nesting at most 64 deep. The error says
/// "<file>:<line>:<col>: EINVAL: <what>".
Result<void> check_json(std::string_view file, std::string_view text);

}  // namespace ctx::agentdir
