// The request of `ctx agent create` as JSON (seed 000's agent.create
// example) decoded strictly into an agentdir::ChildRequest: unknown keys,
// wrong types and malformed mount entries are errors. Pure.
#pragma once

#include <nlohmann/json.hpp>

#include "agentdir/child.hpp"
#include "base/result.hpp"

namespace ctx::launcher {

/// EINVAL, reason invalid_request, naming the key: for the control
/// socket's answers.
Error bad_request(const std::string& msg);

/// A string, or an array of strings, as a list; EINVAL naming key.
Result<std::vector<std::string>> string_list(const nlohmann::json& v, const std::string& key);

/// Decodes one request object. Mount options go through the mount file's
/// own parser (mountspec::parse_options).
Result<agentdir::ChildRequest> decode_child_request(const nlohmann::json& j);

}  // namespace ctx::launcher
