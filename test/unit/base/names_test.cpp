#include <catch2/catch.hpp>

#include "base/names.hpp"

TEST_CASE("agent names", "[unit]") {
  for (auto n : {"coder", "rev-123", "worker1", "fix_1", "A"}) CHECK_FALSE(ctx::agent_name_issue(n));
  CHECK(*ctx::agent_name_issue("") == "agent name is empty");
  CHECK(*ctx::agent_name_issue("-x") == "agent name must begin with a letter or digit");
  CHECK(*ctx::agent_name_issue("a.d") == "agent name may contain only letters, digits and '_-'");
  CHECK(*ctx::agent_name_issue("a/b") == "agent name may contain only letters, digits and '_-'");
  CHECK(*ctx::agent_name_issue(std::string(65, 'a')) == "agent name is longer than 64 bytes");
}

TEST_CASE("tool, model, space and type names", "[unit]") {
  CHECK_FALSE(ctx::tool_name_issue("fs.read"));
  CHECK_FALSE(ctx::tool_name_issue("mcp.github.search_issues"));
  CHECK(*ctx::tool_name_issue("a..b") == "tool name must not contain '..'");
  CHECK(*ctx::tool_name_issue("fs.d") == "tool name must not end in '.' or '.d'");
  CHECK(*ctx::tool_name_issue("fs/read") == "tool name may contain only letters, digits and '_.-'");
  CHECK_FALSE(ctx::model_name_issue("openai/gpt-4o"));
  CHECK_FALSE(ctx::model_name_issue("debug/echo"));
  CHECK(*ctx::model_name_issue("debug//echo") == "model name segment is empty");
  CHECK(*ctx::model_name_issue("/debug") == "model name segment is empty");
  CHECK(*ctx::model_name_issue("debug/..") == "model name segment must begin with a letter or digit");
  CHECK_FALSE(ctx::space_name_issue("project-a"));
  CHECK(*ctx::space_name_issue("a..b") == "name must not contain '..'");
  CHECK_FALSE(ctx::type_name_issue("coder_t"));
  CHECK(*ctx::type_name_issue("1x") == "type must begin with a letter");
  CHECK(*ctx::type_name_issue("a-b") == "type may contain only letters, digits and '_'");
}
