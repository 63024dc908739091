// Timestamps of logs and events.
#pragma once

#include <string>

namespace ctx {

/// The current time as RFC 3339 UTC with milliseconds,
/// "2026-11-22T15:04:05.123Z".
std::string timestamp_now();

}  // namespace ctx
