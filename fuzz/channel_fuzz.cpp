// libFuzzer target: the setup channel's records, which the sandbox half
// sends its supervisor (launcher/sandbox/channel.hpp). Invariants:
//  - a record that decodes encodes back to the same bytes (up to
//    kMaxRecordSize, beyond which the encoder cuts the detail);
//  - bytes that do not decode are short or name a kind or step that does
//    not exist;
//  - timings decode to known steps only, at most one per 5 bytes of the
//    detail, and encode and decode back to themselves.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "launcher/sandbox/channel.hpp"

namespace {

using ctx::launcher::Record;
using ctx::launcher::Step;

void check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto r = ctx::launcher::decode(in);
  if (!r) {
    check(in.size() < 10 || data[0] > static_cast<std::uint8_t>(Record::Kind::error) ||
          data[1] > static_cast<std::uint8_t>(Step::exec));
    return 0;
  }
  const std::string back = ctx::launcher::encode(*r);
  if (in.size() <= ctx::launcher::kMaxRecordSize)
    check(back == in);
  else
    check(back.size() == ctx::launcher::kMaxRecordSize && in.substr(0, back.size()) == back);
  auto t = ctx::launcher::decode_timings(r->detail);
  check(t.size() <= r->detail.size() / 5);
  for (const auto& s : t) check(s.step <= Step::exec);
  auto again = ctx::launcher::decode_timings(ctx::launcher::encode_timings(t.data(), t.size()));
  check(again.size() == t.size());
  for (std::size_t i = 0; i < t.size(); ++i) check(again[i].step == t[i].step && again[i].usec == t[i].usec);
  return 0;
}
