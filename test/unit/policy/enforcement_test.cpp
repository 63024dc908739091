// Where each class's verdict takes effect: one note per permission, the
// table of docs/abi-policy.md ("What each class gates").
#include <catch2/catch.hpp>
#include <string>

#include "policy/policy.hpp"

using ctx::policy::Class;
using ctx::policy::enforcement_note;
using ctx::policy::permissions_of;

TEST_CASE("every permission of every class has an enforcement note", "[unit]") {
  for (Class c :
       {Class::tool, Class::model, Class::shared, Class::session, Class::mount, Class::agent, Class::network}) {
    for (auto perm : permissions_of(c)) {
      INFO(std::string(to_string(c)) + " " + std::string(perm));
      CHECK_FALSE(enforcement_note(c, perm).empty());
    }
    // A permission the class does not have has no note.
    CHECK(enforcement_note(c, "fly").empty());
  }
  CHECK(enforcement_note(Class::tool, "read").empty());
}

TEST_CASE("enforcement notes name the enforcing layer or say there is none", "[unit]") {
  auto has = [](std::string_view note, std::string_view what) { return note.find(what) != std::string_view::npos; };
  CHECK(has(enforcement_note(Class::mount, "read"), "launcher at plan time"));
  CHECK(has(enforcement_note(Class::session, "write"), "launcher at launch"));
  CHECK(has(enforcement_note(Class::session, "read"), "masked"));
  CHECK(has(enforcement_note(Class::mount, "write"), "reason mount_policy"));
  CHECK(has(enforcement_note(Class::agent, "read"), "agent view"));
  CHECK(has(enforcement_note(Class::agent, "create"), "supervisor"));
  CHECK(has(enforcement_note(Class::agent, "write"), "no enforcement point in v0: "));
  CHECK(has(enforcement_note(Class::network, "connect"), "launcher at plan time"));
  CHECK(has(enforcement_note(Class::tool, "execute"), "supervisor"));
  // Only agent write lacks one (session rows belong to the session work).
  for (Class c : {Class::tool, Class::model, Class::shared, Class::mount, Class::network})
    for (auto perm : permissions_of(c)) CHECK_FALSE(has(enforcement_note(c, perm), "no enforcement point"));
}
