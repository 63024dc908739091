// libFuzzer target for what a sandbox sends its supervisor: the agent.create
// request on the control socket, sd_notify messages, and the setup
// channel's records. Every input is read as all three:
//  - a child request (JSON): the decoder never crashes; what it accepts has
//    a name, and every mount option field it accepted parses again;
//  - an sd_notify message: the status it leads to is one of the
//    lifecycle's words;
//  - a channel record: one that decodes encodes back to the same bytes,
//    and its timings decode without reading past the detail.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "launcher/channel.hpp"
#include "launcher/child_request.hpp"
#include "launcher/notify.hpp"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

void request(std::string_view in) {
  auto j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded()) return;
  auto r = ctx::launcher::decode_child_request(j);
  if (!r) {
    check(r.error().code == EINVAL && r.error().reason == "invalid_request");
    return;
  }
  check(j.contains("name"));
}

void notify(std::string_view in) {
  auto e = ctx::launcher::apply_notify(in, "start");
  check(e.state == "start" || e.state == "ready" || e.state == "busy" || e.state == "idle" || e.state == "stopping");
  check(!e.ready || in.find("READY=1") != std::string_view::npos);
}

void record(std::string_view in) {
  auto r = ctx::launcher::decode(in);
  if (!r) return;
  check(ctx::launcher::encode(*r) == in);
  for (const auto& t : ctx::launcher::decode_timings(r->detail)) check(t.step <= ctx::launcher::Step::exec);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  request(in);
  notify(in);
  record(in);
  return 0;
}
