#include "ctx/tool.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>

#include "base/names.hpp"
#include "base/text.hpp"
#include "ctx/supervisor_client.hpp"
#include "sys/process.hpp"

extern char** environ;

namespace ctx::helper {

namespace {

using nlohmann::json;

int refuse(const std::string& name, int code, const std::string& reason, const std::string& sentence) {
  return refuse_call("tool", name, code, reason, sentence);
}

}  // namespace

int call_tool(const std::string& name, const std::vector<std::string>& args, const std::string& tier) {
  // The name is the supervisor's to check, like everything else: its
  // refusal names the agent it serves.
  json req{{"op", "tool"}, {"name", name}};
  if (!tier.empty()) req["dir"] = tier;
  auto got = ask_supervisor(req);
  if (!got) return refuse(name, got.error().code, got.error().reason, got.error().msg);
  const json& a = got->answer;
  if (auto code = refused("tool", name, a)) return *code;
  if (got->fds.size() != 1 || !a.contains("path") || !a["path"].is_string())
    return refuse(name, EIO, "", "EIO: the supervisor allowed the call but sent no tool");
  // Run it: stdin and stdout pass through untouched, and the tool's exit
  // status and signals reach the caller (the call costs one process).
  std::vector<std::string> argv{a["path"].get<std::string>()};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  Error e = sys::exec_fd(got->fds[0].get(), argv, env);
  std::fprintf(stderr, "ctx tool: %s\n", printable(e.msg).c_str());
  return e.code == ENOENT ? 127 : 126;
}

std::optional<std::pair<std::string, std::vector<std::string>>> plain_call(int argc, char** argv, const char* verb) {
  if (argc < 3 || argc > 4 || std::strcmp(argv[1], verb) != 0) return std::nullopt;
  for (int i = 2; i < argc; ++i)
    if (argv[i][0] == '-' || argv[i][0] == '[') return std::nullopt;
  return std::pair<std::string, std::vector<std::string>>(argv[2], std::vector<std::string>(argv + 3, argv + argc));
}

std::optional<std::pair<std::string, std::string>> direct_call(const char* run_as) {
  std::string a = run_as == nullptr ? "" : run_as;
  // The path as the sandbox resolves it: a relative name (./fs.read,
  // ../tool/fs.read), a link to the tool, "." and ".." all name the tier
  // the tool is in. (The name in a tier is a mount, which realpath keeps.)
  if (auto real = sys::real_path(a)) a = *real;
  auto slash = a.rfind('/');
  if (slash == std::string::npos) return std::nullopt;
  std::string dir = slash == 0 ? "/" : a.substr(0, slash);
  std::string name = a.substr(slash + 1);
  if (name == "ctx" || name == kFullHelperName || tool_name_issue(name)) return std::nullopt;
  return std::pair<std::string, std::string>(dir, name);
}

}  // namespace ctx::helper
