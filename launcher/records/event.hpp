// The one shape of every record the launcher writes to an event stream or
// a log: a session's events.jsonl, <name>.d/log, a tool's and a model's
// .d/log (seed 000, "Logs and Events"). Every writer builds an Event and
// every file gets it through stamp_event, so no line can lack one of the
// six keys ts, type, agent, session, object, status, and no status can be
// a word outside EventStatus. Pure: no clock, no file.
//
// What a record holds: facts and errors, never bodies (arguments, a
// tool's input or output, prompts and replies, environment values,
// handoff text): docs/launcher.md, "Logs, events and what they never hold".
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace ctx::launcher {

/// The closed vocabulary of an event's `status` (docs/launcher.md).
enum class EventStatus { ok, error, failed, denied, dropped, unavailable, stopped, cancelled, dead };

/// The word written for a status.
std::string_view to_string(EventStatus s);

/// The status a word names; nullopt for any word outside the vocabulary.
std::optional<EventStatus> event_status_of(std::string_view word);

/// One record before it is stamped.
struct Event {
  std::string type;    ///< "agent.start", "tool.call", ...
  std::string object;  ///< below the CTX root: "tool/fs.read"; "" = the agent itself
  EventStatus status = EventStatus::ok;
  nlohmann::json facts = nlohmann::json::object();  ///< more keys: facts only, never bodies
};

/// Who and when a record is stamped with.
struct EventStamp {
  std::string ts;  ///< RFC 3339 UTC (base/timestamp.hpp)
  std::string agent;
  std::string session;
};

/// The record as written: the six keys from `e` and `s` (an empty object
/// is "agent/<agent>", an empty type "unknown"), then the facts, except
/// facts under one of the six names, which never replace them.
nlohmann::json stamp_event(const Event& e, const EventStamp& s);

/// Where the supervisor's parts record what they decide (AgentFiles): the
/// session's events.jsonl, which the agent can write, and <name>.d/log,
/// which it cannot. Best effort: a write that fails is said, not returned.
class RecordSink {
 public:
  virtual ~RecordSink() = default;
  /// Appends the event, stamped, to the session's events.jsonl.
  virtual void event(const Event& e) = 0;
  /// Appends the event, stamped, to the agent's <name>.d/log.
  virtual void log(const Event& e) = 0;
};

/// The six keys every record has.
inline constexpr const char* kEventKeys[] = {"ts", "type", "agent", "session", "object", "status"};

}  // namespace ctx::launcher
