#include "ctx/templates.hpp"

#include <fcntl.h>

#include <optional>
#include <string>
#include <vector>

#include "base/path.hpp"
#include "sys/file.hpp"
#include "sys/process.hpp"

#ifndef CTX_FORWARD_PATH
#error "ctx/meson.build defines CTX_FORWARD_PATH"
#endif

namespace ctx::helper {

namespace {

// The endpoint's fixed address in the sandbox's own network namespace
// (the contract of docs/agents.md).
constexpr const char* kEndpoint = "http://127.0.0.1:7180";

// The default install directory of scripts/install-agents.
constexpr const char* kDefaultAgentsDir = "/opt/ctx-test-agents";

struct Cli {
  const char* bin;      // its name in node_modules/.bin
  const char* package;  // what npm installs
};

Cli cli_of(Template t) {
  switch (t) {
    case Template::claude_code:
      return {"claude", "@anthropic-ai/claude-code"};
    case Template::codex:
      return {"codex", "@openai/codex"};
  }
  return {"", ""};
}

// An executable file dir/bin resolved to its real path, with the
// node_modules directory that holds it.
std::optional<CliInstall> installed(const std::string& dir, const char* bin) {
  auto real = sys::real_path(path_join(dir, bin));
  if (!real || !sys::executable_at(AT_FDCWD, *real)) return std::nullopt;
  CliInstall c{*real, ""};
  const std::string marker = "/node_modules/";
  auto at = real->rfind(marker);
  if (at == std::string::npos) return std::nullopt;
  c.modules = real->substr(0, at + marker.size() - 1);
  if (path_is_at_or_under(c.modules, "/usr")) c.modules.clear();
  return c;
}

std::string home_rel(const TemplateInput& in) {
  return "home/" + std::to_string(in.uid) + "/agent/" + in.name;
}

// The inside path of the agent's home: HOME, the launcher's default.
std::string home_inside(const TemplateInput& in) { return "/ctx/" + home_rel(in); }

// The mounts every template adds: the CLI read-only, a writable /tmp in
// the agent's home, the project at /work.
std::string template_mounts(const TemplateInput& in) {
  std::string m;
  if (!in.cli.modules.empty()) m += in.cli.modules + "\t" + in.cli.modules + "\tro\trbind,nosuid,nodev\n";
  m += path_join(in.ctx_root, home_rel(in) + "/tmp") + "\t/tmp\trw\tbind,nosuid,nodev\n";
  m += in.project + "\t/work\trw\tbind,nosuid,nodev\n";
  // Git runs hooks, core.fsmonitor and filters from .git on the host when
  // the owner next types `git status`: none of that may be the agent's.
  const std::string git = in.project + "/.git";
  switch (in.git) {
    case TemplateInput::Git::none: break;
    case TemplateInput::Git::config_hooks:
      m += git + "/config\t/work/.git/config\tro\tbind,nosuid,nodev\n";
      m += git + "/hooks\t/work/.git/hooks\tro\tbind,nosuid,nodev\n";
      break;
    case TemplateInput::Git::whole: m += git + "\t/work/.git\tro\tbind,nosuid,nodev\n"; break;
  }
  return m;
}

// A model entry in the system tier (where `ctx new` writes the agent)
// that execs the forwarder, with its .d/env for the key (0600: only the
// owner reads it) and the network capability the forwarder needs.
std::vector<TemplateFile> forwarder_model(const std::string& model, const std::string& url,
                                          const std::string& header, const std::string& prefix) {
  const std::string rel = "model/" + model;
  return {
      {rel + ".d/env",
       "# " + model +
           ": the forwarder's configuration (docs/agents.md). Put your API key after\n"
           "# CTX_UPSTREAM_KEY=. The model runs in a sandbox of its own; the agent never\n"
           "# sees this file, the key, or the network.\n"
           "CTX_UPSTREAM_URL=" +
           url + "\nCTX_UPSTREAM_KEY_HEADER=" + header + "\nCTX_UPSTREAM_KEY_PREFIX=" + prefix +
           "\nCTX_UPSTREAM_KEY=\n",
       0600},
      {rel + ".d/cap", "network\n", 0644},
      {rel, "#!/bin/sh\n# " + model + ": forwards each call to " + url + " with the key of " + model +
                ".d/env.\nexec " + forward_path() + "\n",
       0755},
  };
}

std::string claude_runtime(const TemplateInput& in) {
  return "#!/bin/sh\n"
         "# " +
         in.name +
         "'s runtime (ctx new --template claude-code): Claude Code, in the sandbox\n"
         "# that " +
         in.name +
         ".d describes. Headless: ctx-agent-run " + in.name + " -- /ctx/agent/" + in.name +
         " -p \"TASK\"\n"
         "# --dangerously-skip-permissions turns Claude Code's own permission prompts\n"
         "# off, only because the sandbox holds: /usr, /etc and the CLI are read-only,\n"
         "# it writes only its home, /tmp and the project at /work, it has no\n"
         "# network, and its model is reached through the endpoint, which holds no key.\n"
         "# ~/.claude.json skips the first run's sign-in (it would try\n"
         "# api.anthropic.com, which the sandbox cannot reach) and trusts /work;\n"
         "# ~/.claude/settings.json skips the warning about that mode and takes the\n"
         "# endpoint's per-launch token from $CTX_MODEL_TOKEN (apiKeyHelper): given\n"
         "# as ANTHROPIC_API_KEY, a key new at each launch, the TUI would ask at every\n"
         "# launch whether to use it.\n"
         "# The endpoint's address is the launch's (a fixed port only in the\n"
         "# sandbox's own network; with the host's network another is picked).\n"
         "unset ANTHROPIC_API_KEY\n"
         "export ANTHROPIC_BASE_URL=\"${CTX_MODEL_URL:?no model endpoint: grant a model in the policy}/anthropic/api\"\n"
         "exec " +
         in.cli.entry + " --dangerously-skip-permissions \"$@\"\n";
}

// ~/.claude/settings.json: the token by apiKeyHelper (a /bin/sh command
// whose output Claude Code sends as its key), no warning about the mode.
std::string claude_settings() {
  return "{\"skipDangerousModePermissionPrompt\": true, \"apiKeyHelper\": \"printf %s \\\"$CTX_MODEL_TOKEN\\\"\"}\n";
}

std::string claude_env() {
  return std::string(
             "# The model endpoint in the sandbox (docs/agents.md): the supervisor sets\n"
             "# CTX_MODEL_URL and a per-launch CTX_MODEL_TOKEN (the runtime makes\n"
             "# ANTHROPIC_BASE_URL of the one and hands the other over by\n"
             "# apiKeyHelper); the model anthropic/api holds the key.\n"
             "# No telemetry, error reports, update checks or other traffic of its own.\n") +
         "DISABLE_TELEMETRY=1\n"
         "DISABLE_ERROR_REPORTING=1\n"
         "DISABLE_AUTOUPDATER=1\n"
         "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1\n"
         "CLAUDE_CODE_TMPDIR=/tmp\n"
         "# It is in a sandbox: as uid 0 Claude Code skips its prompts only with this.\n"
         "IS_SANDBOX=1\n";
}

std::string codex_runtime(const TemplateInput& in) {
  return "#!/bin/sh\n"
         "# " +
         in.name +
         "'s runtime (ctx new --template codex): Codex, in the sandbox that\n"
         "# " +
         in.name + ".d describes; its configuration is $CODEX_HOME/config.toml.\n# Headless: ctx-agent-run " +
         in.name + " -- /ctx/agent/" + in.name +
         " exec --skip-git-repo-check \"TASK\"\n"
         "# The endpoint's address is the launch's (a fixed port only in the\n"
         "# sandbox's own network; with the host's network another is picked).\n"
         "exec " +
         in.cli.entry +
         " -c \"model_providers.ctx.base_url=\\\"${CTX_MODEL_URL:?no model endpoint: grant a model in the "
         "policy}/openai/api\\\"\" \"$@\"\n";
}

std::string codex_config(const TemplateInput& in) {
  return "# " + in.name +
         "'s Codex configuration (ctx new --template codex).\n"
         "# The model endpoint in the sandbox (docs/agents.md): the supervisor sets\n"
         "# OPENAI_API_KEY to a per-launch token; the model openai/api holds the key.\n"
         "model_provider = \"ctx\"\n"
         "# Codex's own approval prompts and sandbox are off only because the sandbox\n"
         "# of ctx-agent-run holds: /usr, /etc and the CLI are read-only, it writes only\n"
         "# its home, /tmp and the project at /work, it has no network, and its model\n"
         "# is reached through the endpoint, which holds no key. (Codex's sandbox could\n"
         "# not start inside it anyway: it needs a user namespace, which the seccomp\n"
         "# filter refuses.)\n"
         "approval_policy = \"never\"\n"
         "sandbox_mode = \"danger-full-access\"\n"
         "\n"
         "[model_providers.ctx]\n"
         "name = \"ctx-agent-run model endpoint\"\n"
         "base_url = \"" +
         kEndpoint +
         "/openai/api\"\n"
         "wire_api = \"responses\"\n"
         "env_key = \"OPENAI_API_KEY\"\n"
         "\n"
         "# No plugin sync (git ls-remote) and no metrics upload: there is no network,\n"
         "# and each try would only wait for a timeout.\n"
         "[features]\n"
         "plugins = false\n"
         "\n"
         "[analytics]\n"
         "enabled = false\n";
}

}  // namespace

std::string template_names() { return "claude-code, codex"; }

Result<Template> parse_template(std::string_view name) {
  if (name == "claude-code") return Template::claude_code;
  if (name == "codex") return Template::codex;
  return fail(Error{EINVAL, "--template " + std::string(name) + ": EINVAL: no such template; the templates are " +
                           template_names()});
}

std::string forward_path() { return CTX_FORWARD_PATH; }

Result<CliInstall> find_cli(Template t, const std::string& agents_dir, const std::string& path) {
  const Cli cli = cli_of(t);
  std::vector<std::string> dirs;
  if (!agents_dir.empty()) {
    dirs.push_back(path_join(agents_dir, "node_modules/.bin"));
  } else {
    for (std::size_t i = 0; i <= path.size();) {
      std::size_t j = path.find(':', i);
      if (j == std::string::npos) j = path.size();
      if (j > i && path[i] == '/') dirs.push_back(path.substr(i, j - i));
      i = j + 1;
    }
    dirs.push_back(std::string(kDefaultAgentsDir) + "/node_modules/.bin");
  }
  for (const auto& d : dirs)
    if (auto c = installed(d, cli.bin)) return *c;
  const std::string where = agents_dir.empty() ? "on PATH or in " + std::string(kDefaultAgentsDir) + "/node_modules/.bin"
                                               : "in " + path_join(agents_dir, "node_modules/.bin") + " (CTX_AGENTS_DIR)";
  return fail(Error{ENOENT, std::string(cli.bin) + ": ENOENT: the CLI is not installed " + where +
                           " (an executable in a node_modules directory); install it: npm install -g " + cli.package +
                           ", or scripts/install-agents"});
}

TemplatePlan plan_template(Template t, const TemplateInput& in) {
  TemplatePlan p;
  p.mount = template_mounts(in);
  p.home_dirs = {home_rel(in) + "/tmp"};
  switch (t) {
    case Template::claude_code:
      p.model_name = "anthropic/api";
      p.env = claude_env();
      p.runtime = claude_runtime(in);
      p.home_files.push_back({home_rel(in) + "/.claude.json",
                              "{\"hasCompletedOnboarding\": true, \"projects\": {\"/work\": "
                              "{\"hasTrustDialogAccepted\": true}}}\n",
                              0600});
      p.home_files.push_back({home_rel(in) + "/.claude/settings.json", claude_settings(), 0644});
      p.models = forwarder_model(p.model_name, "https://api.anthropic.com", "x-api-key", "");
      break;
    case Template::codex:
      p.model_name = "openai/api";
      p.env = "# Codex's state and configuration, kept in the agent's home.\nCODEX_HOME=" + home_inside(in) +
              "/.codex\n";
      p.runtime = codex_runtime(in);
      p.home_dirs.push_back(home_rel(in) + "/.codex");
      p.home_files.push_back({home_rel(in) + "/.codex/config.toml", codex_config(in), 0644});
      p.models = forwarder_model(p.model_name, "https://api.openai.com/v1", "Authorization", "Bearer ");
      break;
  }
  p.model = p.model_name + "\n";
  p.policy = "# Its model, through the model endpoint ($CTX_MODEL_URL/" + p.model_name + ")" +
             " (no network of its own):\nallow " + in.type + " model:" + p.model_name + " use\n";
  return p;
}

}  // namespace ctx::helper
