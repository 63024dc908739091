#include <catch2/catch.hpp>

#include "base/similar.hpp"

using ctx::closest;
using ctx::edit_distance;

TEST_CASE("edit_distance counts insertions, deletions, substitutions and adjacent swaps", "[unit]") {
  CHECK(edit_distance("", "") == 0);
  CHECK(edit_distance("", "abc") == 3);
  CHECK(edit_distance("abc", "") == 3);
  CHECK(edit_distance("tol", "tool") == 1);
  CHECK(edit_distance("fs.raed", "fs.read") == 1);  // one swap, not two substitutions
  CHECK(edit_distance("exec", "execute") == 3);
  CHECK(edit_distance("kitten", "sitting") == 3);
  CHECK(edit_distance("ca", "abc") == 3);     // optimal string alignment: no edit of a swapped pair
  CHECK(edit_distance("Tool", "tool") == 1);  // case counts here; closest ignores it
}

TEST_CASE("closest suggests the one clearly close candidate", "[unit]") {
  const std::vector<std::string> tools{"shell.exec", "fs.read", "fs.write"};
  CHECK(closest("fs.raed", tools) == "fs.read");
  CHECK(closest("fs.red", tools) == "fs.read");
  CHECK(closest("fs.wirte", tools) == "fs.write");
  CHECK(closest("fs.read", tools) == "fs.read");  // present: itself
  const std::vector<std::string_view> classes{"tool", "model", "shared", "session", "mount", "agent", "network"};
  CHECK(closest("tol", classes) == "tool");
  CHECK(closest("sesion", classes) == "session");
  CHECK(closest("netwrok", classes) == "network");
  // Case only: distance 0 with case ignored.
  CHECK(closest("Tool", classes) == "tool");
  CHECK(closest("NETWORK", classes) == "network");
  CHECK(closest("Tol", classes) == "tool");
  // A prefix of at least 3 bytes.
  CHECK(closest("exec", std::vector<std::string_view>{"execute"}) == "execute");
  CHECK(closest("net", classes) == "network");
  CHECK(closest("sess", classes) == "session");
}

TEST_CASE("closest stays silent for garbage, far words and ties", "[unit]") {
  const std::vector<std::string_view> classes{"tool", "model", "shared", "session", "mount", "agent", "network"};
  for (const char* w : {"zzz", "file", "x", "", "qwertyuiop", "a", "xe", "\x01\xff"}) {
    INFO(w);
    CHECK(closest(w, classes).empty());
  }
  CHECK(closest("zzz", std::vector<std::string>{"fs.read"}).empty());
  CHECK(closest("anything", std::vector<std::string>{}).empty());
  // Up to 5 bytes one edit is the budget, from 6 bytes two.
  CHECK(closest("tuul", classes).empty());
  CHECK(closest("shraeed", classes) == "shared");
  CHECK(closest("fs.rxxd", std::vector<std::string>{"fs.read"}) == "fs.read");
  CHECK(closest("fs.xxxd", std::vector<std::string>{"fs.read"}).empty());
  // Two equally close candidates: no suggestion, and no fall-back to a prefix.
  CHECK(closest("stap", std::vector<std::string_view>{"stop", "step"}).empty());
  CHECK(closest("fs.rea", std::vector<std::string>{"fs.read", "fs.real"}).empty());
  CHECK(closest("sta", std::vector<std::string_view>{"start", "status"}).empty());
  CHECK(closest("TOOL", std::vector<std::string_view>{"tool", "Tool"}).empty());
  // A prefix shorter than 3 bytes is not enough.
  CHECK(closest("ex", std::vector<std::string_view>{"execute"}).empty());
  // A single closer candidate wins over farther ones.
  CHECK(closest("stopp", std::vector<std::string_view>{"stop", "start"}) == "stop");
}
