#include "base/timestamp.hpp"

#include <chrono>
#include <cstdio>

namespace ctx {

std::string timestamp_now() {
  // UTC by calendar arithmetic alone: gmtime_r and strftime read the time
  // zone file (/etc/localtime, five system calls) the first time, though
  // neither uses it here.
  using namespace std::chrono;
  const auto now = floor<milliseconds>(system_clock::now());
  const auto day = floor<days>(now);
  const year_month_day ymd{day};
  const hh_mm_ss<milliseconds> t{now - day};
  char out[48];
  std::snprintf(out, sizeof out, "%04d-%02u-%02uT%02d:%02d:%02d.%03dZ", static_cast<int>(ymd.year()),
                static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()),
                static_cast<int>(t.hours().count()), static_cast<int>(t.minutes().count()),
                static_cast<int>(t.seconds().count()), static_cast<int>(t.subseconds().count()));
  return out;
}

}  // namespace ctx
