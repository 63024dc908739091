// The sd_notify messages a runtime sends to NOTIFY_SOCKET, read by the
// supervisor (pure: parsing and the rate limit; the socket is the
// supervisor's).
#pragma once

#include <cstdint>
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

/// A token bucket: a runtime may send `burst` messages (notifications,
/// tool calls) at once and `per_second` on average; the rest are dropped,
/// and counted, so that a flood cannot grow the agent's log, its events or
/// the status file's churn without bound, nor keep the supervisor busy.
class RateLimiter {
 public:
  RateLimiter(unsigned burst, unsigned per_second) : burst_(burst), rate_(per_second), tokens_(burst) {}
  /// Whether a message arriving at now_us is taken.
  bool take(std::uint64_t now_us);
  /// Messages dropped since the last call; resets the count.
  std::uint64_t dropped_since_last();

 private:
  unsigned burst_;
  unsigned rate_;
  double tokens_;
  std::uint64_t last_us_ = 0;
  std::uint64_t dropped_ = 0;
};

/// The limits the supervisor uses: 32 at once, 16 per second.
inline constexpr unsigned kNotifyBurst = 32;
inline constexpr unsigned kNotifyPerSecond = 16;

}  // namespace ctx::launcher
