// ctx new --template (issue 25): the files of an agent that runs a real
// coding-agent CLI, exactly; the CLI found where npm put it; what a
// refusal leaves (nothing).
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "ctx/templates.hpp"
#include "test/support/launch.hpp"
#include "test/support/tempdir.hpp"

namespace {

ctx::test::RunResult ctx_cmd(const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
  std::vector<std::string> argv{ctx::test::built("ctx/ctx")};
  argv.insert(argv.end(), args.begin(), args.end());
  return ctx::test::run_command(argv, std::nullopt, 60, env);
}

// A CTX tree and a fake npm install of both CLIs (the layout npm makes:
// node_modules/.bin/<cli> a link to the package's program).
struct Fixture {
  ctx::test::TempDir t;
  std::string root = t / "ctx";
  std::string uid = std::to_string(::getuid());
  std::string modules = t / "agents/node_modules";
  std::vector<std::string> env{"CTX_AGENTS_DIR=" + (t / "agents")};
  Fixture() {
    t.write("agents/node_modules/@anthropic-ai/claude-code/bin/claude.exe", "#!/bin/sh\n", 0755);
    t.write("agents/node_modules/@openai/codex/bin/codex.js", "#!/usr/bin/env node\n", 0755);
    t.mkdir("agents/node_modules/.bin");
    t.symlink("../@anthropic-ai/claude-code/bin/claude.exe", "agents/node_modules/.bin/claude");
    t.symlink("../@openai/codex/bin/codex.js", "agents/node_modules/.bin/codex");
    REQUIRE(ctx_cmd({"init", "--ctx-root", root}).exit_code == 0);
  }
  std::string home(const std::string& name) const { return root + "/home/" + uid + "/agent/" + name; }
  unsigned mode(const std::string& rel) const {
    struct stat st {};
    REQUIRE(::stat((root + "/" + rel).c_str(), &st) == 0);
    return st.st_mode & 07777;
  }
};

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

TEST_CASE("ctx new --template claude-code writes an agent that runs Claude Code with the endpoint preset", "[fs]") {
  Fixture f;
  auto r = ctx_cmd({"new", "coder", "--template", "claude-code", "--ctx-root", f.root}, f.env);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("its model anthropic/api: put your API key after CTX_UPSTREAM_KEY= in " + f.root +
                   "/model/anthropic/api.d/env\n") != std::string::npos);
  CHECK(r.out.find("coder: ok\n") != std::string::npos);
  CHECK(r.out.find("warning") == std::string::npos);
  const std::string cli = f.modules + "/@anthropic-ai/claude-code/bin/claude.exe";
  CHECK(f.t.read("ctx/agent/coder") ==
        "#!/bin/sh\n"
        "# coder's runtime (ctx new --template claude-code): Claude Code, in the sandbox\n"
        "# that coder.d describes. Headless: ctx-agent-run coder -- /ctx/agent/coder -p \"TASK\"\n"
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
            cli + " --dangerously-skip-permissions \"$@\"\n");
  CHECK(f.mode("agent/coder") == 0755);
  CHECK(f.t.read("ctx/agent/coder.d/env") ==
        "# The model endpoint in the sandbox (docs/agents.md): the supervisor sets\n"
        "# CTX_MODEL_URL and a per-launch CTX_MODEL_TOKEN (the runtime makes\n"
        "# ANTHROPIC_BASE_URL of the one and hands the other over by\n"
        "# apiKeyHelper); the model anthropic/api holds the key.\n"
        "# No telemetry, error reports, update checks or other traffic of its own.\n"
        "DISABLE_TELEMETRY=1\n"
        "DISABLE_ERROR_REPORTING=1\n"
        "DISABLE_AUTOUPDATER=1\n"
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1\n"
        "CLAUDE_CODE_TMPDIR=/tmp\n"
        "# It is in a sandbox: as uid 0 Claude Code skips its prompts only with this.\n"
        "IS_SANDBOX=1\n");
  CHECK(f.t.read("ctx/agent/coder.d/cwd") == "/work\n");
  CHECK(f.t.read("ctx/agent/coder.d/model") == "anthropic/api\n");
  const std::string mount = f.t.read("ctx/agent/coder.d/mount");
  INFO(mount);
  CHECK(ends_with(mount, f.home("coder") + "\t/ctx/home/" + f.uid + "/agent/coder\trw\tbind,nosuid,nodev\n" +
                             f.modules + "\t" + f.modules + "\tro\trbind,nosuid,nodev\n" + f.home("coder") +
                             "/tmp\t/tmp\trw\tbind,nosuid,nodev\n" + f.home("coder") +
                             "/work\t/work\trw\tbind,nosuid,nodev\n"));
  CHECK(mount.find("/usr\t/usr\tro\trbind,nodev\n") != std::string::npos);
  const std::string policy = f.t.read("ctx/agent/coder.d/policy");
  INFO(policy);
  CHECK(ends_with(policy, "allow coder_t mount:/ctx/home/" + f.uid + "/agent/coder write\n" +
                              "allow coder_t mount:" + f.modules + " read\n" +
                              "allow coder_t mount:/tmp read\n"
                              "allow coder_t mount:/tmp write\n"
                              "allow coder_t mount:/work read\n"
                              "allow coder_t mount:/work write\n"
                              "# Its model, through the model endpoint ($CTX_MODEL_URL/anthropic/api) (no network "
                              "of its own):\n"
                              "allow coder_t model:anthropic/api use\n"));
  CHECK(policy.find("network:") == std::string::npos);  // no network grant
  for (const char* d : {"tmp", "work"}) CHECK(std::filesystem::is_directory(f.home("coder") + "/" + d));
  CHECK(ctx::test::read_file(f.home("coder") + "/.claude.json") ==
        "{\"hasCompletedOnboarding\": true, \"projects\": {\"/work\": {\"hasTrustDialogAccepted\": true}}}\n");
  CHECK(f.mode("home/" + f.uid + "/agent/coder/.claude.json") == 0600);
  CHECK(ctx::test::read_file(f.home("coder") + "/.claude/settings.json") ==
        "{\"skipDangerousModePermissionPrompt\": true, \"apiKeyHelper\": \"printf %s \\\"$CTX_MODEL_TOKEN\\\"\"}\n");
  CHECK(f.t.read("ctx/model/anthropic/api") ==
        "#!/bin/sh\n# anthropic/api: forwards each call to https://api.anthropic.com with the key of "
        "anthropic/api.d/env.\nexec " +
            ctx::helper::forward_path() + "\n");
  CHECK(f.mode("model/anthropic/api") == 0755);
  CHECK(f.t.read("ctx/model/anthropic/api.d/env") ==
        "# anthropic/api: the forwarder's configuration (docs/agents.md). Put your API key after\n"
        "# CTX_UPSTREAM_KEY=. The model runs in a sandbox of its own; the agent never\n"
        "# sees this file, the key, or the network.\n"
        "CTX_UPSTREAM_URL=https://api.anthropic.com\n"
        "CTX_UPSTREAM_KEY_HEADER=x-api-key\n"
        "CTX_UPSTREAM_KEY_PREFIX=\n"
        "CTX_UPSTREAM_KEY=\n");
  CHECK(f.mode("model/anthropic/api.d/env") == 0600);
  CHECK(f.t.read("ctx/model/anthropic/api.d/cap") == "network\n");
}

TEST_CASE("ctx new --template --project keeps the project's .git/config and hooks read-only", "[fs]") {
  // A hook or core.fsmonitor the agent wrote would run on the host, as the
  // owner, at the owner's next `git status`.
  Fixture f;
  f.t.mkdir("repo/.git/hooks");
  f.t.write("repo/.git/config", "[core]\n", 0644);
  f.t.mkdir("bare/.git");
  auto r = ctx_cmd({"new", "g1", "--template", "codex", "--project", f.t / "repo", "--ctx-root", f.root}, f.env);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(ends_with(f.t.read("ctx/agent/g1.d/mount"),
                  f.t / "repo\t/work\trw\tbind,nosuid,nodev\n" + f.t / "repo/.git/config" +
                      "\t/work/.git/config\tro\tbind,nosuid,nodev\n" + f.t / "repo/.git/hooks" +
                      "\t/work/.git/hooks\tro\tbind,nosuid,nodev\n"));
  const std::string policy = f.t.read("ctx/agent/g1.d/policy");
  CHECK(policy.find("allow g1_t mount:/work/.git/config read\n") != std::string::npos);
  CHECK(policy.find("mount:/work/.git/config write") == std::string::npos);
  CHECK(policy.find("mount:/work/.git/hooks write") == std::string::npos);
  // No hooks directory to cover: all of .git read-only.
  auto b = ctx_cmd({"new", "g2", "--template", "codex", "--project", f.t / "bare", "--ctx-root", f.root}, f.env);
  INFO(b.out << b.err);
  REQUIRE(b.exit_code == 0);
  CHECK(ends_with(f.t.read("ctx/agent/g2.d/mount"),
                  f.t / "bare\t/work\trw\tbind,nosuid,nodev\n" + f.t / "bare/.git" + "\t/work/.git\tro\tbind,nosuid,nodev\n"));
}

TEST_CASE("ctx new --template codex writes Codex's config.toml with the endpoint as its provider", "[fs]") {
  Fixture f;
  f.t.mkdir("project");
  auto r = ctx_cmd({"new", "cx", "--template", "codex", "--project", f.t / "project", "--ctx-root", f.root}, f.env);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("cx: ok\n") != std::string::npos);
  CHECK(f.t.read("ctx/agent/cx") ==
        "#!/bin/sh\n"
        "# cx's runtime (ctx new --template codex): Codex, in the sandbox that\n"
        "# cx.d describes; its configuration is $CODEX_HOME/config.toml.\n"
        "# Headless: ctx-agent-run cx -- /ctx/agent/cx exec --skip-git-repo-check \"TASK\"\n"
        "# The endpoint's address is the launch's (a fixed port only in the\n"
        "# sandbox's own network; with the host's network another is picked).\n"
        "exec " +
            f.modules +
            "/@openai/codex/bin/codex.js -c \"model_providers.ctx.base_url=\\\"${CTX_MODEL_URL:?no model endpoint: "
            "grant a model in the policy}/openai/api\\\"\" \"$@\"\n");
  CHECK(f.t.read("ctx/agent/cx.d/env") ==
        "# Codex's state and configuration, kept in the agent's home.\nCODEX_HOME=/ctx/home/" + f.uid +
            "/agent/cx/.codex\n");
  CHECK(f.t.read("ctx/agent/cx.d/model") == "openai/api\n");
  CHECK(ends_with(f.t.read("ctx/agent/cx.d/mount"), f.t / "project\t/work\trw\tbind,nosuid,nodev\n"));
  CHECK_FALSE(std::filesystem::exists(f.home("cx") + "/work"));  // the project is elsewhere
  CHECK(ends_with(f.t.read("ctx/agent/cx.d/policy"), "allow cx_t model:openai/api use\n"));
  CHECK(ctx::test::read_file(f.home("cx") + "/.codex/config.toml") ==
        "# cx's Codex configuration (ctx new --template codex).\n"
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
        "base_url = \"http://127.0.0.1:7180/openai/api\"\n"
        "wire_api = \"responses\"\n"
        "env_key = \"OPENAI_API_KEY\"\n"
        "\n"
        "# No plugin sync (git ls-remote) and no metrics upload: there is no network,\n"
        "# and each try would only wait for a timeout.\n"
        "[features]\n"
        "plugins = false\n"
        "\n"
        "[analytics]\n"
        "enabled = false\n");
  CHECK(f.t.read("ctx/model/openai/api.d/env") ==
        "# openai/api: the forwarder's configuration (docs/agents.md). Put your API key after\n"
        "# CTX_UPSTREAM_KEY=. The model runs in a sandbox of its own; the agent never\n"
        "# sees this file, the key, or the network.\n"
        "CTX_UPSTREAM_URL=https://api.openai.com/v1\n"
        "CTX_UPSTREAM_KEY_HEADER=Authorization\n"
        "CTX_UPSTREAM_KEY_PREFIX=Bearer \n"
        "CTX_UPSTREAM_KEY=\n");
  CHECK(f.mode("model/openai/api.d/env") == 0600);
}

TEST_CASE("a second agent from a template keeps the model entry and the key already in it", "[fs]") {
  Fixture f;
  REQUIRE(ctx_cmd({"new", "one", "--template", "claude-code", "--ctx-root", f.root}, f.env).exit_code == 0);
  const std::string filled = "CTX_UPSTREAM_KEY=sk-mine\n";
  f.t.write("ctx/model/anthropic/api.d/env", filled, 0600);
  auto r = ctx_cmd({"new", "two", "--template", "claude-code", "--ctx-root", f.root}, f.env);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("kept " + f.root + "/model/anthropic/api (it exists)\n") != std::string::npos);
  CHECK(f.t.read("ctx/model/anthropic/api.d/env") == filled);
  CHECK(f.t.read("ctx/agent/two.d/model") == "anthropic/api\n");
}

TEST_CASE("ctx new refuses an unknown template, a missing CLI or project, and makes nothing", "[fs]") {
  Fixture f;
  auto names = [&] {
    return std::vector<std::vector<std::string>>{ctx::test::names_in(f.root + "/agent"),
                                                 ctx::test::names_in(f.root + "/home/" + f.uid + "/agent"),
                                                 ctx::test::names_in(f.root + "/model")};
  };
  const auto before = names();
  auto bad = ctx_cmd({"new", "x", "--template", "aider", "--ctx-root", f.root}, f.env);
  CHECK(bad.exit_code == 1);
  CHECK(bad.err == "ctx: --template aider: EINVAL: no such template; the templates are claude-code, codex\n");
  auto missing = ctx_cmd({"new", "x", "--template", "codex", "--ctx-root", f.root},
                         {"CTX_AGENTS_DIR=" + (f.t / "none")});
  CHECK(missing.exit_code == 1);
  CHECK(missing.err == "ctx: codex: ENOENT: the CLI is not installed in " + (f.t / "none") +
                           "/node_modules/.bin (CTX_AGENTS_DIR) (an executable in a node_modules directory); "
                           "install it: npm install -g @openai/codex, or scripts/install-agents\n");
  auto no_project = ctx_cmd({"new", "x", "--template", "codex", "--project", f.t / "nope", "--ctx-root", f.root},
                            f.env);
  CHECK(no_project.exit_code == 1);
  CHECK(no_project.err == "ctx: --project " + (f.t / "nope") +
                              ": ENOENT: no such directory; name the project's directory\n");
  f.t.write("afile", "x\n");
  auto not_dir = ctx_cmd({"new", "x", "--template", "codex", "--project", f.t / "afile", "--ctx-root", f.root},
                         f.env);
  CHECK(not_dir.exit_code == 1);
  CHECK(not_dir.err == "ctx: --project " + (f.t / "afile") +
                           ": ENOTDIR: not a directory you can open; name the project's directory\n");
  auto alone = ctx_cmd({"new", "x", "--project", f.t / "project", "--ctx-root", f.root}, f.env);
  CHECK(alone.exit_code != 0);
  CHECK(alone.err.find("--project requires --template") != std::string::npos);
  CHECK(names() == before);
}

TEST_CASE("ctx new --help lists the templates", "[fs]") {
  auto r = ctx_cmd({"new", "--help"});
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("reaching its model only through the sandbox's endpoint: claude-code, codex\n") !=
        std::string::npos);
}
