#include "launcher/records/event.hpp"

#include <algorithm>
#include <iterator>

namespace ctx::launcher {

std::string_view to_string(EventStatus s) {
  switch (s) {
    case EventStatus::ok: return "ok";
    case EventStatus::error: return "error";
    case EventStatus::failed: return "failed";
    case EventStatus::denied: return "denied";
    case EventStatus::dropped: return "dropped";
    case EventStatus::unavailable: return "unavailable";
    case EventStatus::stopped: return "stopped";
    case EventStatus::cancelled: return "cancelled";
    case EventStatus::dead: return "dead";
  }
  return "error";
}

std::optional<EventStatus> event_status_of(std::string_view word) {
  for (EventStatus s :
       {EventStatus::ok, EventStatus::error, EventStatus::failed, EventStatus::denied, EventStatus::dropped,
        EventStatus::unavailable, EventStatus::stopped, EventStatus::cancelled, EventStatus::dead})
    if (to_string(s) == word) return s;
  return std::nullopt;
}

nlohmann::json stamp_event(const Event& e, const EventStamp& s) {
  nlohmann::json out = nlohmann::json::object();
  if (e.facts.is_object())
    for (const auto& [k, v] : e.facts.items())
      if (std::find(std::begin(kEventKeys), std::end(kEventKeys), k) == std::end(kEventKeys)) out[k] = v;
  out["ts"] = s.ts;
  out["type"] = e.type.empty() ? "unknown" : e.type;
  out["agent"] = s.agent;
  out["session"] = s.session;
  out["object"] = e.object.empty() ? "agent/" + s.agent : e.object;
  out["status"] = to_string(e.status);
  return out;
}

}  // namespace ctx::launcher
