// libFuzzer target: the sd_notify messages a runtime sends its supervisor
// (apply_notify) and the supervisor's rate limit (RateLimiter, which they
// pass like every control request). Invariants:
//  - the status after a message is the one before it or a lifecycle word,
//    whatever the status before was;
//  - a message is its lines applied in order: applying them one by one
//    gives the same status, and ready is set iff some line before the
//    status became stopping is READY=1;
//  - stopping is final: from it no message moves the status or sets ready;
//  - a message without a recognised line leaves any status alone;
//  - the limiter, fed the input as 16-bit gaps between messages (in
//    microseconds, time never going back), takes at most `burst` plus
//    `per_minute` for each minute passed, takes the first `burst`
//    messages, and reports exactly the messages it drops, never before
//    kDropReportUs after the first of them unless at the end.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "launcher/supervisor/notify.hpp"
#include "launcher/control/rate_limit.hpp"

namespace {

using ctx::launcher::apply_notify;

void check(bool ok) {
  if (!ok) std::abort();
}

bool lifecycle(std::string_view s) { return s == "ready" || s == "busy" || s == "idle" || s == "stopping"; }

void message(std::string_view in) {
  for (std::string_view current : {"start", "ready", "stopping", ""}) {
    auto e = apply_notify(in, current);
    check(e.state == current || lifecycle(e.state));
    std::string state(current);
    bool ready = false, recognised = false;
    for (std::size_t pos = 0; pos <= in.size();) {
      std::size_t nl = in.find('\n', pos);
      std::string_view line = in.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
      auto one = apply_notify(line, state);
      if (apply_notify(line, "x").state != "x") recognised = true;
      check(one.ready == (line == "READY=1" && state != "stopping"));
      if (state == "stopping") check(one.state == "stopping");
      state = one.state;
      ready = ready || one.ready;
      if (nl == std::string_view::npos) break;
      pos = nl + 1;
    }
    check(e.state == state && e.ready == ready);
    if (!recognised) check(e.state == current && !e.ready);
  }
}

void limiter(std::string_view in) {
  const unsigned burst = ctx::launcher::kRequestBurst, rate = ctx::launcher::kRequestsPerMinute;
  ctx::launcher::RateLimiter l(burst, rate);
  std::uint64_t now = 1, taken = 0, dropped = 0, n = 0, first_unreported = 0;
  for (std::size_t i = 0; i + 1 < in.size(); i += 2) {
    now += static_cast<std::uint8_t>(in[i]) | (static_cast<std::uint64_t>(static_cast<std::uint8_t>(in[i + 1])) << 8);
    const bool took = l.take(now);
    ++n;
    if (n <= burst) check(took);
    taken += took ? 1 : 0;
    if (!took && first_unreported == 0) first_unreported = now;
    if (auto d = l.due_report(now, false)) {
      check(first_unreported != 0 && now >= first_unreported + ctx::launcher::kDropReportUs);
      dropped += *d;
      first_unreported = 0;
    }
    check(static_cast<double>(taken) <= burst + static_cast<double>(now - 1) * rate / 60e6 + 1e-6);
  }
  dropped += l.due_report(now, true).value_or(0);
  check(taken + dropped == n);
  check(!l.due_report(now, true));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  message(in);
  limiter(in);
  return 0;
}
