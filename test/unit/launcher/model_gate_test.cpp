// The model gate's pure decisions (launcher/control/model_gate.hpp): what
// a model's .d/env and .d/cap give it, and what a model.call record names.
#include <catch2/catch.hpp>
#include <string>
#include <utility>
#include <vector>

#include "launcher/control/model_gate.hpp"

using Env = std::vector<std::pair<std::string, std::string>>;

TEST_CASE("model gate: .d/env is KEY=VALUE lines, anything else left out", "[unit]") {
  CHECK(ctx::launcher::parse_model_env("API_KEY=sk-1\n# a comment\n\nBASE=http://x/?a=b\n=nokey\nnoequals\nLAST=") ==
        Env{{"API_KEY", "sk-1"}, {"BASE", "http://x/?a=b"}, {"LAST", ""}});
  CHECK(ctx::launcher::parse_model_env("").empty());
  CHECK(ctx::launcher::parse_model_env("K=v\r\n") == Env{{"K", "v\r"}});  // bytes as written
}

TEST_CASE("model gate: .d/cap grants the network only by a line `network`", "[unit]") {
  CHECK(ctx::launcher::cap_grants_network("network\n"));
  CHECK(ctx::launcher::cap_grants_network("gpu\nnetwork"));
  CHECK_FALSE(ctx::launcher::cap_grants_network(""));
  CHECK_FALSE(ctx::launcher::cap_grants_network("networking\n"));
  CHECK_FALSE(ctx::launcher::cap_grants_network(" network\n"));
  CHECK_FALSE(ctx::launcher::cap_grants_network("# network\n"));
}

TEST_CASE("model gate: a record names the model after its alias, a valid name, or only `model`", "[unit]") {
  CHECK(ctx::launcher::model_call_object("main", "debug/echo") == "model/debug/echo");
  CHECK(ctx::launcher::model_call_object("debug/echo", "") == "model/debug/echo");
  CHECK(ctx::launcher::model_call_object("main", "") == "model/main");
  CHECK(ctx::launcher::model_call_object("", "") == "model");
  CHECK(ctx::launcher::model_call_object("../../etc/passwd", "") == "model");
  CHECK(ctx::launcher::model_call_object(std::string(300, 'a'), "") == "model");  // no longer than a valid name
}
