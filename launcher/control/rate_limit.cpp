#include "launcher/control/rate_limit.hpp"

#include <algorithm>

namespace ctx::launcher {

bool RateLimiter::take(std::uint64_t now_us) {
  if (last_us_ != 0 && now_us > last_us_)
    tokens_ = std::min<double>(burst_, tokens_ + static_cast<double>(now_us - last_us_) * per_minute_ / 60e6);
  if (now_us > last_us_) last_us_ = now_us;
  if (tokens_ >= 1) {
    tokens_ -= 1;
    return true;
  }
  if (dropped_++ == 0) first_drop_us_ = now_us;
  return false;
}

std::optional<std::uint64_t> RateLimiter::due_report(std::uint64_t now_us, bool final) {
  if (dropped_ == 0 || (!final && now_us < first_drop_us_ + kDropReportUs)) return std::nullopt;
  std::uint64_t n = dropped_;
  dropped_ = 0;
  return n;
}

std::optional<std::uint64_t> RateLimiter::report_at() const {
  if (dropped_ == 0) return std::nullopt;
  return first_drop_us_ + kDropReportUs;
}

}  // namespace ctx::launcher
