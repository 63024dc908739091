// ctx: the ABI helper for /ctx/bin. Subcommands:
//   ctx check [--ctx-root DIR] (NAME | --all)   validate control files
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "ctx/check.hpp"

namespace {

std::string env_or(const char* key, const char* dflt) {
  const char* v = std::getenv(key);
  return v != nullptr && *v != '\0' ? v : dflt;
}

int run_check(const std::string& ctx_root, const std::string& name, bool all) {
  std::vector<std::string> names;
  if (all) {
    names = ctx::helper::agent_names(ctx_root);
    if (names.empty()) {
      std::fprintf(stderr, "ctx check: no agents in %s/agent\n", ctx_root.c_str());
      return 1;
    }
  } else {
    names = {name};
  }
  int errors = 0, warnings = 0;
  for (const auto& n : names) {
    auto findings = ctx::helper::check_agent(ctx_root, n);
    int e = 0;
    for (const auto& f : findings) {
      bool is_error = f.level == ctx::helper::Finding::Level::error;
      std::printf("%s%s\n", is_error ? "" : "warning: ", f.text.c_str());
      (is_error ? e : warnings) += 1;
    }
    errors += e;
    if (e == 0) std::printf("%s: ok\n", n.c_str());
  }
  if (errors > 0 || warnings > 0) std::printf("%d error%s, %d warning%s\n", errors, errors == 1 ? "" : "s", warnings,
                                              warnings == 1 ? "" : "s");
  return errors > 0 ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ctx: the CortexFS ABI helper"};
  app.require_subcommand(1);
  std::string ctx_root = env_or("CTX_ROOT", "/ctx");
  app.add_option("--ctx-root", ctx_root, "the CTX root (default $CTX_ROOT or /ctx)");

  auto* check = app.add_subcommand("check", "validate an agent's control files; report every error");
  std::string name;
  bool all = false;
  check->add_option("--ctx-root", ctx_root, "the CTX root (default $CTX_ROOT or /ctx)");
  auto* name_opt = check->add_option("NAME", name, "the agent");
  auto* all_opt = check->add_flag("--all", all, "check every agent");
  name_opt->excludes(all_opt);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (check->parsed()) {
    if (name.empty() && !all) {
      std::fprintf(stderr, "ctx check: name an agent or give --all\n");
      return 2;
    }
    return run_check(ctx_root, name, all);
  }
  return 2;
}
