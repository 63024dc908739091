// Integration-test support: a CTX tree in a temporary directory, agents
// written into it, and ctx-agent-run executed for real, either as the
// caller (root) or as the unprivileged test user.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "test/support/tempdir.hpp"

namespace ctx::test {

/// The unprivileged user that tests launch as: $CTX_TEST_USER (default
/// ctx-test) when the runner is root, else the runner itself.
struct TestUser {
  uid_t uid = 0;
  gid_t gid = 0;
  std::string name;
};
/// nullopt when the runner is root and the user does not exist.
std::optional<TestUser> test_user();

/// What a run printed and how it ended.
struct RunResult {
  int exit_code = -1;  ///< 128+signal when killed
  std::string out;
  std::string err;       ///< stderr without the launcher's warning lines
  std::string warnings;  ///< lines "ctx-agent-run: warning: ..." (said once per user and boot)
};

/// Runs argv (argv[0] a path) with a small clean environment, optionally
/// as another user (setgroups to none, then gid, then uid), with stdin
/// from /dev/null and a time limit after which it is SIGKILLed.
/// before_exec runs in the child after the switch of user, just before
/// execve; returning false makes the child exit 123.
RunResult run_command(const std::vector<std::string>& argv, std::optional<TestUser> as = std::nullopt,
                      int timeout_s = 60, const std::vector<std::string>& extra_env = {},
                      const std::function<bool()>& before_exec = {});

/// A command started in the background (its own process group).
struct Spawned {
  pid_t pid = -1;
  int out_fd = -1;
  int err_fd = -1;
};

/// Installs the example tree (scripts/install-example) under dest for
/// `owner`, with the built ctx helper; returns its CTX root (dest/ctx).
/// Throws std::runtime_error when the script fails.
std::string install_example(const std::string& dest, const TestUser& owner);

/// Starts argv like run_command, without waiting.
Spawned spawn_command(const std::vector<std::string>& argv, std::optional<TestUser> as = std::nullopt,
                      const std::vector<std::string>& extra_env = {}, const std::function<bool()>& before_exec = {});

/// Collects the output of a spawned command until it exits (SIGKILL to its
/// process group after timeout_s).
RunResult wait_command(Spawned& s, int timeout_s = 60);

/// Polls a file until its content equals `want` (true) or timeout (false).
bool wait_for_file(const std::string& path, const std::string& want, int timeout_ms = 10000);

/// Path of a built binary, from CTX_BUILD_ROOT ("launcher/ctx-agent-run").
std::string built(const std::string& rel);

/// A CTX tree owned by `owner`, with helpers to write agents.
class CtxTree {
 public:
  explicit CtxTree(TestUser owner);

  const std::string& root() const { return root_; }
  const TestUser& owner() const { return owner_; }
  TempDir& dir() { return dir_; }

  /// Writes <name>.d with sensible defaults (owner, gid, label <name>_t,
  /// iso userns, root <ctx>/home/<uid>/agent/<name>/root, a mount table
  /// giving /usr and the probe at /probe) overridden by `files` (file name
  /// -> content; an empty optional removes the default). With mount_rules
  /// the policy gets the rules its mount table needs (docs/abi-policy.md,
  /// "What each class gates": `allow <type> mount:<target> read`, and
  /// `write` for a rw line) after the lines given; with session_rules it
  /// also allows the sessions `default` and `review` (write and resume),
  /// when there is a label. Tests of those checks pass false and write the
  /// policy themselves.
  void agent(const std::string& name, const std::map<std::string, std::optional<std::string>>& files = {},
             bool mount_rules = true, bool session_rules = true);

  /// Rewrites <name>.d/policy as `text` and, like agent(), the session
  /// rules and the rules its current mount table needs.
  void set_policy(const std::string& name, const std::string& text);

  /// The type of a label (`user:role:type:level`, or a bare type).
  static std::string label_type(const std::string& label);

  /// The rules a mount table needs for a label's type, one line each.
  static std::string mount_rules_for(const std::string& label, const std::string& table);

  /// The default mount lines (/usr ro rbind, probe ro bind).
  std::string base_mounts() const;

  /// Writes a file below the tree (as root: chowned to the owner).
  void write(const std::string& rel, const std::string& content, unsigned mode = 0644);
  void mkdir(const std::string& rel, unsigned mode = 0755);

  /// Runs ctx-agent-run --ctx-root <tree> args... as `as` (default: owner
  /// when the runner is root and the owner is not root).
  RunResult launch(const std::vector<std::string>& args, std::optional<TestUser> as = std::nullopt,
                   int timeout_s = 60) const;
  /// Like launch, in the background.
  Spawned spawn(const std::vector<std::string>& args, std::optional<TestUser> as = std::nullopt) const;

 private:
  void own(const std::string& path) const;

  TempDir dir_;
  TestUser owner_;
  std::string root_;
};

/// The policy lines CtxTree::agent adds for `type`: sessions default and
/// review, write and resume.
std::string session_policy(const std::string& type);

/// Pids (other than the caller's) whose command line contains token.
std::vector<int> processes_mentioning(const std::string& token);

/// Who launches in this facility run: in [root], root launches agents
/// owned by the test user (a privileged launch, as from systemd); in the
/// other tags the test user launches its own.
struct LaunchMode {
  bool privileged = false;
  TestUser as;     ///< who runs ctx-agent-run
  TestUser owner;  ///< who owns the agent
};
LaunchMode launch_mode();

/// Parses the JSON line ctx-probe printed (the last line of out).
std::string probe_json_line(const std::string& out);

/// The report of a run of ctx-probe that must have succeeded (a failed
/// REQUIRE naming its output otherwise).
nlohmann::json probe(const RunResult& r);

/// Launches `agent` as m.as with /probe and `checks` as its command.
RunResult run_probe(const CtxTree& t, const LaunchMode& m, const std::string& agent, std::vector<std::string> checks);

/// The sandbox init's host pid: the first line ("started") that a launch
/// with --json-status-fd 1 prints, read from sp.out_fd.
int init_pid_of(Spawned& sp);

/// The agent's home on the host: <ctx>/home/<owner uid>/agent/<agent>.
std::string home_of(const CtxTree& t, const std::string& agent);

/// The first line of text parsed as JSON (ctx tool's and ctx model's
/// error record on stderr); throws when it is none.
nlohmann::json first_json_line(const std::string& text);

/// How many times `what` occurs in text, overlaps included.
std::size_t count_of(const std::string& text, const std::string& what);

/// Polls until no process (but the caller) mentions token in its command
/// line (true) or timeout_ms passed (false).
bool wait_gone(const std::string& token, int timeout_ms = 15000);

/// Where cgroup2 is mounted; nullopt when it is not.
std::optional<std::string> cgroup2_mount();

/// The cgroup a root launch gives `agent` of t:
/// <cgroup2>/cortexfs/user-<owner uid>/<agent_cgroup_name>; nullopt when
/// cgroup2 is not mounted.
std::optional<std::string> agent_cgroup(const CtxTree& t, const std::string& agent);

}  // namespace ctx::test
