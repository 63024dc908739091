#include "launcher/records/event.hpp"

#include <catch2/catch.hpp>

using ctx::launcher::Event;
using ctx::launcher::event_status_of;
using ctx::launcher::EventStatus;
using ctx::launcher::kEventKeys;
using ctx::launcher::stamp_event;
using nlohmann::json;

TEST_CASE("stamp_event gives every record the six keys of seed 000", "[unit]") {
  json j = stamp_event({"tool.call", "tool/fs.read", EventStatus::ok, {{"via", "ctx tool"}}},
                       {"2026-06-22T12:00:00.000Z", "coder", "default"});
  CHECK(j == json{{"ts", "2026-06-22T12:00:00.000Z"},
                  {"type", "tool.call"},
                  {"agent", "coder"},
                  {"session", "default"},
                  {"object", "tool/fs.read"},
                  {"status", "ok"},
                  {"via", "ctx tool"}});
}

TEST_CASE("stamp_event: no writer can leave a key out or replace one with a fact", "[unit]") {
  SECTION("an empty object is the agent itself, an empty type says so") {
    json j = stamp_event(Event{}, {"t", "rev", "s1"});
    CHECK(j["object"] == "agent/rev");
    CHECK(j["type"] == "unknown");
    CHECK(j["status"] == "ok");
    for (const char* k : kEventKeys) CHECK(j.contains(k));
  }
  SECTION("facts named like the six keys are dropped") {
    json j = stamp_event({"agent.status",
                          "",
                          EventStatus::ok,
                          {{"status", "ready"}, {"agent", "x"}, {"ts", "0"}, {"object", "o"}, {"state", "ready"}}},
                         {"t", "coder", "default"});
    CHECK(j["status"] == "ok");
    CHECK(j["agent"] == "coder");
    CHECK(j["ts"] == "t");
    CHECK(j["object"] == "agent/coder");
    CHECK(j["state"] == "ready");
  }
  SECTION("facts that are not an object are ignored") {
    json j = stamp_event({"agent.start", "", EventStatus::ok, json::array({1, 2})}, {"t", "coder", "default"});
    CHECK(j.size() == 6);
  }
}

TEST_CASE("event status: the closed vocabulary of docs/launcher.md", "[unit]") {
  const char* words[] = {"ok", "error", "failed", "denied", "dropped", "unavailable", "stopped", "cancelled", "dead"};
  for (const char* w : words) {
    auto s = event_status_of(w);
    REQUIRE(s);
    CHECK(to_string(*s) == w);
  }
  for (const char* w : {"refused", "ready", "running", "", "OK", "done"}) CHECK_FALSE(event_status_of(w));
}
