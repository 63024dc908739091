// ctx: the ABI helper for /ctx/bin. Subcommands:
//   ctx check [--ctx-root DIR] (NAME | --all)      validate control files
//   ctx tool NAME [JSON]                           a tool call, from inside a sandbox
//   ctx explain [--ctx-root DIR] NAME CLASS:OBJECT PERMISSION
//   ctx ps [--ctx-root DIR]                        running agents as a tree
//   ctx status [--ctx-root DIR]                    the root's status
//   ctx agent create [--replace]|start|stop|wait|delete [REQUEST] [-- CMD...]
//                                                  owned children, from inside a sandbox
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "agentdir/child.hpp"
#include "agentdir/load.hpp"
#include "base/text.hpp"
#include "ctx/agent.hpp"
#include "ctx/check.hpp"
#include "ctx/env_probe.hpp"
#include "ctx/explain.hpp"
#include "ctx/init.hpp"
#include "ctx/model.hpp"
#include "ctx/ps.hpp"
#include "ctx/tool.hpp"
#include "ctx/view.hpp"
#include "policy/policy.hpp"
#include "sys/process.hpp"
#include "access/fs_tree.hpp"

namespace {

std::string env_or(const char* key, const char* dflt) {
  const char* v = std::getenv(key);
  return v != nullptr && *v != '\0' ? v : dflt;
}

// --json: one document with the same findings.
// Text from files agents or owners write (status, pid), line by line,
// escaped for the terminal.
void print_lines(const std::string& text) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    std::string line = text.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    std::printf("%s\n", ctx::printable(line).c_str());
    pos = nl == std::string::npos ? text.size() : nl + 1;
  }
}

int print_json(const std::vector<std::pair<std::string, std::vector<ctx::helper::Finding>>>& reports) {
  nlohmann::json doc{{"agents", nlohmann::json::array()}, {"env", nlohmann::json::array()}};
  int errors = 0, warnings = 0;
  for (const auto& [n, findings] : reports) {
    nlohmann::json a{{"name", n},
                     {"errors", nlohmann::json::array()},
                     {"warnings", nlohmann::json::array()},
                     {"risk", nlohmann::json::array()}};
    for (const auto& f : findings) {
      if (f.facility)
        a["facilities"].push_back({{"facility", f.facility->facility},
                                   {"state", f.facility->state},
                                   {"since", f.facility->since},
                                   {"detail", f.facility->detail},
                                   {"remedy", f.facility->remedy}});
      switch (f.level) {
        case ctx::helper::Finding::Level::error:
          a["errors"].push_back(f.text);
          ++errors;
          break;
        case ctx::helper::Finding::Level::warning:
          a["warnings"].push_back(f.text);
          ++warnings;
          break;
        case ctx::helper::Finding::Level::note:
          if (!f.tier.empty())
            a["risk"].push_back({{"tier", f.tier}, {"grant", f.what}, {"where", f.where}});
          else
            a["ok"].push_back(f.text);
          break;
      }
    }
    if (n.empty()) {
      doc["env"] = a;
    } else {
      a["ok"] = a["errors"].empty();
      doc["agents"].push_back(a);
    }
  }
  doc["errors"] = errors;
  doc["warnings"] = warnings;
  std::printf("%s\n", doc.dump(2, ' ', true).c_str());
  return errors > 0 ? 1 : 0;
}

int run_check(const std::string& ctx_root, const std::string& name, bool all, bool env, bool as_json,
              std::optional<std::uint32_t> user = {}) {
  std::vector<std::string> names;
  if (env && name.empty() && !all) {
    // --env alone: the machine only.
  } else if (all) {
    names = ctx::helper::agent_names(ctx_root);
    if (names.empty()) {
      std::fprintf(stderr, "ctx check: no agents in %s/agent\n", ctx::printable(ctx_root).c_str());
      return 1;
    }
  } else {
    names = {name};
  }
  int errors = 0, warnings = 0;
  std::vector<std::pair<std::string, std::vector<ctx::helper::Finding>>> reports;
  if (env) reports.emplace_back("", ctx::helper::probe_environment());
  for (const auto& n : names) reports.emplace_back(n, ctx::helper::check_agent(ctx_root, n, user));
  if (as_json) return print_json(reports);
  for (const auto& [n, findings] : reports) {
    int e = 0, low = 0;
    for (const auto& f : findings) {
      switch (f.level) {
        case ctx::helper::Finding::Level::error:
          std::printf("%s\n", ctx::printable(f.text).c_str());
          ++e;
          break;
        case ctx::helper::Finding::Level::warning:
          std::printf("warning: %s\n", ctx::printable(f.text).c_str());
          ++warnings;
          break;
        case ctx::helper::Finding::Level::note:
          // Low-risk grants are counted, not listed (--json lists them).
          if (f.tier == "low") {
            ++low;
          } else {
            std::printf("%s\n", ctx::printable(f.text).c_str());
          }
          break;
      }
    }
    if (low > 0) std::printf("risk low    %d more grant%s\n", low, low == 1 ? "" : "s");
    errors += e;
    if (e == 0 && !n.empty()) std::printf("%s: ok\n", n.c_str());
  }
  if (errors > 0 || warnings > 0)
    std::printf("%d error%s, %d warning%s\n", errors, errors == 1 ? "" : "s", warnings, warnings == 1 ? "" : "s");
  return errors > 0 ? 1 : 0;
}

int run_explain(const std::string& ctx_root, const std::string& agent, const std::string& class_object,
                const std::string& perm) {
  auto req = ctx::policy::parse_request(class_object, perm);
  if (!req) {
    std::fprintf(stderr, "ctx explain: %s\n", ctx::printable(req.error().msg).c_str());
    return 2;
  }
  auto spec = ctx::agentdir::load(ctx_root, agent);
  if (!spec) {
    std::fprintf(stderr, "ctx explain: %s\n", ctx::printable(spec.error().msg).c_str());
    return 2;
  }
  spec->ancestor_types =
      ctx::agentdir::ancestor_types(*spec, [&](const std::string& n) { return ctx::agentdir::load(ctx_root, n); });
  auto layers = ctx::helper::explain_layers(*spec, *req);
  bool allowed = std::all_of(layers.begin(), layers.end(), [](const auto& l) { return l.allows; });
  std::printf("%s %s %s: %s\n", ctx::printable(agent).c_str(), ctx::printable(class_object).c_str(),
              ctx::printable(perm).c_str(), allowed ? "allowed" : "denied");
  for (const auto& l : layers) std::printf("  %s: %s\n", l.name.c_str(), ctx::printable(l.text).c_str());
  std::printf("  enforced: %s\n", std::string(ctx::policy::enforcement_note(req->cls, req->permission)).c_str());
  return allowed ? 0 : 1;
}

int run_view(const std::string& ctx_root, const std::string& agent, bool as_json) {
  auto spec = ctx::agentdir::load(ctx_root, agent);
  if (!spec) {
    std::fprintf(stderr, "ctx view: %s\n", ctx::printable(spec.error().msg).c_str());
    return 2;
  }
  auto root = ctx::sys::open(ctx::sys::at_cwd, ctx_root, ctx::sys::Open::directory | ctx::sys::Open::no_follow);
  if (!root) {
    std::fprintf(stderr, "ctx view: %s\n", ctx::printable(root.error().msg).c_str());
    return 2;
  }
  ctx::access::FsTree tree(root->get());
  spec->ancestor_types =
      ctx::agentdir::ancestor_types(*spec, [&](const std::string& n) { return ctx::agentdir::load(ctx_root, n); });
  auto j = ctx::helper::view_tree(ctx::access::viewer_for(*spec), tree);
  if (as_json) {
    std::cout << j.dump(2, ' ', true) << "\n";
    return 0;
  }
  std::printf("%s's view of %s:\n", ctx::printable(agent).c_str(), ctx::printable(ctx_root).c_str());
  for (const auto& l : ctx::helper::format_view(j)) std::printf("%s\n", l.c_str());
  return 0;
}

int run_ps(const std::string& ctx_root) {
  auto rows = ctx::helper::running_agents(ctx_root);
  if (!rows) {
    std::fprintf(stderr, "ctx ps: %s\n", ctx::printable(rows.error().msg).c_str());
    return 1;
  }
  print_lines(ctx::helper::format_ps(*rows));
  return 0;
}

int run_status(const std::string& ctx_root) {
  std::string error;
  auto s = ctx::helper::root_status(ctx_root, error);
  if (!s) {
    std::fprintf(stderr, "ctx status: %s\n", ctx::printable(error).c_str());
    return 1;
  }
  print_lines(*s);
  return 0;
}

// `ctx agent create|start|stop|wait|delete [REQUEST]`: the operation and
// its argument land in op and arg, create's --replace in replace.
CLI::App* add_agent_commands(CLI::App& app, std::vector<std::string>& arg, std::string& op, bool& replace) {
  auto* agent = app.add_subcommand("agent", "owned child agents, from inside a parent's sandbox");
  agent->require_subcommand(1);
  for (const char* name : {"create", "start", "stop", "wait", "delete"}) {
    const std::string n = name;
    auto* sub = agent->add_subcommand(
        name, n == "create"   ? "create a child from a JSON request (argument or stdin)"
              : n == "delete" ? "delete a stopped child: its files, its home and its history (NAME)"
                              : n + " a child: NAME or {\"name\": ...} (argument or stdin)");
    sub->add_option("REQUEST", arg, "the request")->expected(0, 1);
    if (n == "create")
      sub->add_flag("--replace", replace, "delete a stopped child of the same name first (a parent run again)");
    sub->callback([&op, name] { op = name; });
  }
  return agent;
}

// Everything after "--" is a child's command line (ctx agent start): taken
// off argv (argc shortened) and returned.
std::vector<std::string> split_command(int& argc, char** argv) {
  std::vector<std::string> command;
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--") {
      for (int j = i + 1; j < argc; ++j) command.emplace_back(argv[j]);
      argc = i;
      break;
    }
  return command;
}

// `ctx init` and `ctx new NAME`: what to run once the line is parsed
// (with ctx_root made absolute by then) lands in `run`.
void add_setup_commands(CLI::App& app, std::string& ctx_root, std::string& name, std::function<int()>& run) {
  auto* init = app.add_subcommand("init", "make a CTX tree for the calling user (what is missing of it)");
  init->add_option("--ctx-root", ctx_root, "the CTX root (default $CTX_ROOT or /ctx)");
  static std::vector<std::string> shared;
  init->add_option("--shared", shared, "also make the shared space NAME (agent/, data/, queue/...); repeatable");
  init->callback([&] { run = [&] { return ctx::helper::run_init(ctx_root, shared); }; });
  auto* new_cmd = app.add_subcommand("new", "write a first agent that launches at once, then check it");
  new_cmd->add_option("--ctx-root", ctx_root, "the CTX root (default $CTX_ROOT or /ctx)");
  new_cmd->add_option("NAME", name, "the agent")->required();
  static std::string tmpl, project;
  auto* tmpl_opt = new_cmd->add_option("--template", tmpl,
                                       "an agent that runs a coding-agent CLI, reaching its model only through the "
                                       "sandbox's endpoint: " +
                                           ctx::helper::template_names());
  new_cmd->add_option("--project", project, "with --template: the directory mounted read-write at /work "
                                            "(default: the agent home's work/)")
      ->needs(tmpl_opt);
  static std::string owner;
  static std::vector<std::string> mounts, tools, models;
  new_cmd->add_option("--owner", owner, "as root: a user agent of user U (name or uid) in U's tier, which U and "
                                        "root both launch (docs/install.md)");
  new_cmd->add_option("--mount", mounts, "SRC:DST[:ro|rw]: a bind mount (ro by default) and its mount rules; "
                                         "repeatable");
  new_cmd->add_option("--tool", tools, "grant the tool NAME (execute); repeatable");
  new_cmd->add_option("--model", models, "grant the model NAME (use); repeatable");
  new_cmd->callback([&] {
    run = [&] {
      ctx::helper::NewOptions opt;
      opt.owner = owner;
      opt.mounts = mounts;
      opt.tools = tools;
      opt.models = models;
      if (!tmpl.empty()) {
        auto t = ctx::helper::parse_template(tmpl);
        if (!t) {
          std::fprintf(stderr, "ctx: %s\n", t.error().msg.c_str());
          return 1;
        }
        opt.tmpl = *t;
        opt.project = project.empty() ? "" : ctx::sys::absolute_path(project);
        opt.agents_dir = env_or("CTX_AGENTS_DIR", "");
        opt.path = env_or("PATH", "");
      }
      if (int code = ctx::helper::run_new(ctx_root, name, opt); code != 0) return code;
      // A user agent (--owner) is checked in its tier.
      std::optional<std::uint32_t> user;
      if (!owner.empty()) user = ctx::helper::owner_uid(owner);
      return run_check(ctx_root, name, false, false, false, user);
    };
  });
}

// A tool call, made before the executable's other constructors run: the
// C++ runtime's (iostream, the locale) and CLI11's globals cost a tool
// call one in eight of the helper's page faults, and it needs none of
// them (docs/performance.md, "Tool calls"). So everything this reaches must work
// without an object of dynamic static initialization: no std::cout, no
// CLI11, no std::locale. glibc passes argc, argv and envp to the
// executable's constructors; priority 101 is the first one not reserved
// (the sanitizers' run before it). A command line that is no tool call
// returns, and main parses it.
__attribute__((constructor(101))) void tool_call_first(int argc, char** argv, char**) {
  // A direct tool call through the static agent view: this binary stands
  // in for the tool and asks the supervisor to run it.
  // The kernel's AT_EXECFN names the path run (argv[0] is the caller's
  // choice; a shell that found the tool through PATH gives its bare name).
  std::string run_as = ctx::sys::exec_path();
  if (auto direct = ctx::helper::direct_call(run_as.empty() ? argv[0] : run_as.c_str()))
    std::exit(ctx::helper::call_tool(direct->second, std::vector<std::string>(argv + 1, argv + argc), direct->first));
  if (auto plain = ctx::helper::plain_call(argc, argv, "tool"))
    std::exit(ctx::helper::call_tool(plain->first, plain->second));
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> command = split_command(argc, argv);
  CLI::App app{"ctx: tools, models and child agents from inside a sandbox; checks and views of a CTX tree from the host"};
  app.set_version_flag("--version", "ctx " CTX_VERSION);
  app.require_subcommand(1);
  std::string ctx_root = env_or("CTX_ROOT", "/ctx");
  app.add_option("--ctx-root", ctx_root, "the CTX root (default $CTX_ROOT or /ctx)");

  auto* check = app.add_subcommand("check", "validate an agent's control files; report every error");
  std::string name;
  bool all = false;
  check->add_option("--ctx-root", ctx_root, "the CTX root (default $CTX_ROOT or /ctx)");
  auto* name_opt = check->add_option("NAME", name, "the agent");
  auto* all_opt = check->add_flag("--all", all, "check every agent");
  bool env = false;
  check->add_flag("--env", env, "probe what this machine allows the calling user, with remedies");
  bool as_json = false;
  check->add_flag("--json", as_json, "one JSON document instead of lines");
  name_opt->excludes(all_opt);
  long long check_user = -1;
  check->add_option("--user", check_user, "check the user agent <ctx>/home/U/agent/NAME.d")
      ->check(CLI::Range(0LL, 4294967294LL))
      ->excludes(all_opt);
  auto* tool = app.add_subcommand("tool", "call a tool through CTX_PATH with the four permission checks");
  std::string tool_name;
  std::vector<std::string> tool_json;
  tool->add_option("NAME", tool_name, "the tool")->required();
  tool->add_option("JSON", tool_json, "the request (else read by the tool from stdin)")->expected(0, 1);
  auto* model = app.add_subcommand("model", "call a model: it runs in a sandbox of its own, decided by the supervisor");
  std::string model_name;
  std::vector<std::string> model_request;
  model->add_option("NAME", model_name, "provider/model, or an alias of the model tiers")->required();
  model->add_option("REQUEST", model_request, "the request (else stdin)")->expected(0, 1);

  auto* explain = app.add_subcommand("explain", "why an agent may or may not do something");
  std::string ex_agent, ex_object, ex_perm;
  explain->add_option("--ctx-root", ctx_root, "the CTX root (default $CTX_ROOT or /ctx)");
  explain->add_option("NAME", ex_agent, "the agent")->required();
  explain->add_option("CLASS:OBJECT", ex_object, "e.g. tool:fs.read")->required();
  explain->add_option("PERMISSION", ex_perm, "e.g. execute")->required();
  auto* view_cmd = app.add_subcommand("view", "what an agent will see at its CTX root mount, as a tree");
  std::string view_agent;
  bool view_json = false;
  view_cmd->add_option("--ctx-root", ctx_root, "the CTX root (default $CTX_ROOT or /ctx)");
  view_cmd->add_option("NAME", view_agent, "the agent")->required();
  view_cmd->add_flag("--json", view_json, "one JSON document instead of lines");
  std::string new_name;
  std::function<int()> run_parsed;
  add_setup_commands(app, ctx_root, new_name, run_parsed);
  auto* ps = app.add_subcommand("ps", "running agents as a tree: status, pid, uptime, cgroup");
  ps->add_option("--ctx-root", ctx_root, "the CTX root (default $CTX_ROOT or /ctx)");
  auto* status = app.add_subcommand("status", "the CTX root's status");
  status->add_option("--ctx-root", ctx_root, "the CTX root (default $CTX_ROOT or /ctx)");
  std::vector<std::string> agent_arg;
  std::string agent_op;
  bool agent_replace = false;
  auto* agent = add_agent_commands(app, agent_arg, agent_op, agent_replace);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  // A relative --ctx-root is taken from the current directory; the
  // readers want strict absolute paths.
  ctx_root = ctx::sys::absolute_path(ctx_root);
  if (tool->parsed()) {
    return ctx::helper::call_tool(tool_name, tool_json);
  }
  if (model->parsed()) {
    return ctx::helper::call_model(model_name,
                                   model_request.empty() ? std::nullopt : std::optional<std::string>(model_request[0]));
  }
  if (agent->parsed()) {
    std::optional<std::string> arg;
    if (!agent_arg.empty()) arg = agent_arg.front();
    return ctx::helper::agent_request(agent_op, arg, command, agent_replace);
  }
  if (explain->parsed()) return run_explain(ctx_root, ex_agent, ex_object, ex_perm);
  if (view_cmd->parsed()) return run_view(ctx_root, view_agent, view_json);
  if (ps->parsed()) return run_ps(ctx_root);
  if (status->parsed()) return run_status(ctx_root);
  if (run_parsed) return run_parsed();
  if (check->parsed()) {
    if (name.empty() && !all && !env) {
      std::fprintf(stderr, "ctx check: name an agent, or give --all or --env\n");
      return 2;
    }
    return run_check(ctx_root, name, all, env, as_json,
                     check_user < 0 ? std::nullopt : std::optional<std::uint32_t>(check_user));
  }
  return 2;
}
