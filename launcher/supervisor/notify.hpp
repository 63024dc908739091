// The sd_notify messages a runtime sends to NOTIFY_SOCKET, read by the
// supervisor (pure: parsing; the socket is the supervisor's, and the rate
// limit the control server's, launcher/control/rate_limit.hpp).
#pragma once

#include <string>
#include <string_view>

namespace ctx::launcher {

/// What one message asks for.
struct NotifyEffect {
  std::string state;   ///< the agent status after it ("ready", "busy", ...)
  bool ready = false;  ///< READY=1 was among its lines (forwarded under systemd)
};

/// Applies one message (newline-separated assignments) to the current
/// status: READY=1 and CTX_STATE=ready -> ready, STOPPING=1 -> stopping,
/// CTX_STATE=busy or BUSY=1 -> busy, CTX_STATE=idle or IDLE=1 -> idle; the
/// last such line wins; anything else is ignored. `stopping` is final: from
/// it (current, or a line before) no line moves the status, and a later
/// READY=1 is not `ready` (not forwarded): an agent being stopped cannot
/// claim to be ready again.
NotifyEffect apply_notify(std::string_view message, std::string_view current);

}  // namespace ctx::launcher
