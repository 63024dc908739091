// ctx-call: the helper a sandbox runs most. `ctx init` installs it as a CTX
// tree's bin/ctx, so that it is /ctx/bin/ctx inside a sandbox and what the
// agent view shows at an allowed tool's name; the full helper lies beside
// it as bin/ctx-helper (kFullHelperName).
//
// It makes the calls an agent makes all the time itself: a direct tool call
// (the path it was run by names a tool), `ctx tool NAME [JSON]` and
// `ctx model NAME [REQUEST]`, with the full helper's code for them
// (ctx/tool.hpp, ctx/model.hpp). Every other command line runs the full
// helper with the same arguments. It is linked statically and not position
// independent: its start costs no dynamic loading and no relocation, which
// were most of a tool call's overhead (docs/performance.md, "Tool calls").
// (Position independence protects a program from the input it parses; this
// one runs as the agent, inside the agent's sandbox, and parses the
// supervisor's answer: nothing it could be made to do is more than the
// agent can do already.)
#include <cerrno>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "base/path.hpp"
#include "base/text.hpp"
#include "ctx/model.hpp"
#include "ctx/tool.hpp"
#include "sys/process.hpp"

extern char** environ;

int main(int argc, char** argv) {
  // The kernel's AT_EXECFN names the path run (argv[0] is the caller's
  // choice; a shell that found the program through PATH passes its bare
  // name).
  const std::string run_as = ctx::sys::exec_path();
  const std::string self = run_as.empty() ? std::string(argc > 0 ? argv[0] : "") : run_as;
  if (argc > 0) {
    if (auto direct = ctx::helper::direct_call(self.c_str()))
      return ctx::helper::call_tool(direct->second, std::vector<std::string>(argv + 1, argv + argc), direct->first);
    if (auto tool = ctx::helper::plain_call(argc, argv, "tool"))
      return ctx::helper::call_tool(tool->first, tool->second);
    if (auto model = ctx::helper::plain_call(argc, argv, "model"))
      return ctx::helper::call_model(
          model->first, model->second.empty() ? std::nullopt : std::optional<std::string>(model->second[0]));
  }
  // Everything else: the full helper, beside this program.
  const auto slash = self.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : self.substr(0, slash);
  // By its path, so that the helper sees that name as the path it was run
  // by (never one of a tool).
  const std::string full = dir + "/" + ctx::helper::kFullHelperName;
  std::vector<std::string> args(argv, argv + argc);
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  ctx::Error e = ctx::sys::exec(full, args, env);
  std::fprintf(stderr,
               "ctx: %s: %s; this program makes tool and model calls only, the rest is the full helper's "
               "(ctx init installs both in the CTX tree's bin/)\n",
               ctx::printable(full).c_str(), ctx::printable(e.msg).c_str());
  return e.code == ENOENT ? 127 : 126;
}
