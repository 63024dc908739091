#include "launcher/supervisor/notify.hpp"

namespace ctx::launcher {

NotifyEffect apply_notify(std::string_view message, std::string_view current) {
  NotifyEffect e{std::string(current), false};
  for (std::size_t pos = 0; pos < message.size() && e.state != "stopping";) {
    std::size_t nl = message.find('\n', pos);
    std::string_view line = message.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? message.size() : nl + 1;
    if (line == "READY=1") {
      e.state = "ready";
      e.ready = true;
    } else if (line == "STOPPING=1") {
      e.state = "stopping";
    } else if (line == "CTX_STATE=busy" || line == "BUSY=1") {
      e.state = "busy";
    } else if (line == "CTX_STATE=idle" || line == "IDLE=1") {
      e.state = "idle";
    } else if (line == "CTX_STATE=ready") {
      e.state = "ready";
    }
  }
  return e;
}

}  // namespace ctx::launcher
