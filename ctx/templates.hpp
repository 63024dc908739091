// `ctx new NAME --template T` (issue 25): agents that run a real
// coding-agent CLI (Claude Code, Codex) in the sandbox, reaching their
// model only through the supervisor's HTTP endpoint, whose model entry
// (the forwarder) holds the key. What a template adds is decided here by
// pure code; ctx/init.cpp writes it.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

#include "base/result.hpp"

namespace ctx::helper {

enum class Template { claude_code, codex };

/// The templates as `ctx new --help` lists them: "claude-code, codex".
std::string template_names();

/// The template a `--template` value names; EINVAL naming the templates
/// otherwise.
Result<Template> parse_template(std::string_view name);

/// The forwarding model program the templates' model entries exec
/// (<libexecdir>/ctx-agent-run/ctx-model-forward of this build).
std::string forward_path();

/// Where a template's CLI is installed on the host.
struct CliInstall {
  std::string entry;    ///< the CLI's program, its real path (claude.exe, codex.js)
  std::string modules;  ///< the node_modules directory that holds it: mounted read-only
                        ///< at the same path; empty when it lies under /usr (the /usr mount shows it)
};

/// Finds the template's CLI: agents_dir/node_modules/.bin/<cli> when
/// agents_dir (CTX_AGENTS_DIR) is not empty, else the first <cli> on
/// `path` (the caller's PATH), else the default install of
/// scripts/install-agents (/opt/ctx-test-agents). ENOENT naming the npm
/// package to install when none is an executable file.
Result<CliInstall> find_cli(Template t, const std::string& agents_dir, const std::string& path);

/// A file a template writes, relative to the CTX root.
struct TemplateFile {
  std::string rel;
  std::string text;
  mode_t mode = 0644;
};

/// The facts a template is written from.
struct TemplateInput {
  std::string ctx_root;  ///< the host path of the CTX root
  std::string name;      ///< the agent
  std::string type;      ///< its label type
  uid_t uid = 0;         ///< its owner
  CliInstall cli;
  std::string project;  ///< the host directory mounted read-write at /work
  /// The project's git directory, when it has one: what of it stays
  /// read-only, so that nothing the agent writes there runs on the host
  /// when the owner next uses git (a hook, core.fsmonitor, a filter).
  enum class Git {
    none,          ///< no .git directory
    config_hooks,  ///< .git/config and .git/hooks read-only, the rest writable (commits work)
    whole,         ///< no .git/hooks to cover: all of .git read-only
  };
  Git git = Git::none;
};

/// What a template adds to a new agent (pure: no file is read).
struct TemplatePlan {
  std::string mount;     ///< lines after the first agent's mounts
  std::string policy;    ///< rules after the first agent's (the mount rules come with the mount lines)
  std::string env;       ///< the env file
  std::string model;     ///< the model file
  std::string runtime;   ///< the runtime script
  std::vector<std::string> home_dirs;   ///< made in the agent's home (relative to the CTX root)
  std::vector<TemplateFile> home_files; ///< written in the agent's home, replacing nothing
  std::vector<TemplateFile> models;     ///< the model's .d/ files, then its entry last (so a model is
                                        ///< never there half-written); written only when the entry is
                                        ///< missing (a key already filled in stays)
  std::string model_name;               ///< the model the agent uses (provider/model)
};

/// The template's files for `in` (see TemplatePlan).
TemplatePlan plan_template(Template t, const TemplateInput& in);

}  // namespace ctx::helper
