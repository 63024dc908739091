// The one rate limit of an agent's supervisor (docs/launcher.md, "The
// control socket's limits"): every request the supervisor reads from the
// agent's sandbox (a control-socket request of any op, decoded or not,
// and a notify datagram) takes one token, before it is decoded, decided
// or recorded. Pure: the caller passes the clock.
//
// Why these numbers: what a flood can push out of <name>.d/log (1 MiB,
// then log.1) is one line per admitted request at most, and a model's
// shared <m>.d/log gets no more from one caller. A sustained flood
// admits kRequestsPerMinute, so a record survives at least
//   kMaxLogBytes / (rate x record size)
// = 1 MiB / (1/s x 163 B) = 1.8 h for the lines of the reviews' attack
// (a refused model call), 44 min for the longest line an agent's request
// can make (a 255-byte model name, about 400 B), 28 min if its owner also
// gave every name its maximum length (630 B); as long again while it is
// in log.1. The rate is not lower because a coding agent's model calls
// (one per turn of its tool loop) come every few seconds for hours; the
// burst lets an agent's normal bursts through untouched (256 requests at
// once, refilled in 4.3 minutes); test/integration/
// flood_test.cpp checks the first figure against a real flood.
#pragma once

#include <cstdint>
#include <optional>

namespace ctx::launcher {

/// Requests taken at once, and per minute on average.
inline constexpr unsigned kRequestBurst = 256;
inline constexpr unsigned kRequestsPerMinute = 60;

/// The dropped requests are reported at most once in this interval.
inline constexpr std::uint64_t kDropReportUs = 60'000'000;

/// A token bucket of `burst` tokens refilled at `per_minute`, which
/// counts the requests it refuses and says when their count is due in a
/// record: once kDropReportUs after the first refusal not yet reported
/// (so a sustained flood is one record a minute, a short one a record
/// within a minute of its start), or at the end.
class RateLimiter {
 public:
  RateLimiter(unsigned burst, unsigned per_minute) : burst_(burst), per_minute_(per_minute), tokens_(burst) {}

  /// Whether a request arriving at now_us is taken; a refused one is
  /// counted.
  bool take(std::uint64_t now_us);

  /// The refused requests not yet reported, when their report is due at
  /// now_us (or `final`, the end of the run: whatever is pending); the
  /// count is then reset. nullopt when nothing is due.
  std::optional<std::uint64_t> due_report(std::uint64_t now_us, bool final);

  /// When the pending count's report falls due; nullopt when none is
  /// pending.
  std::optional<std::uint64_t> report_at() const;

 private:
  unsigned burst_;
  unsigned per_minute_;
  double tokens_;
  std::uint64_t last_us_ = 0;
  std::uint64_t dropped_ = 0;
  std::uint64_t first_drop_us_ = 0;  ///< of the pending count
};

}  // namespace ctx::launcher
