// Which mount lines a launch accepts: the policy's mount and shared rules,
// and, in a root launch, only sources the owner may open. Refused before
// anything is made, with the line and the fix.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include <nlohmann/json.hpp>

#include "test/support/launch.hpp"

using ctx::test::CtxTree;
using ctx::test::probe;
using ctx::test::run_probe;
using ctx::test::RunResult;
using nlohmann::json;

namespace {

using Mode = ctx::test::LaunchMode;
constexpr auto mode = ctx::test::launch_mode;

}  // namespace

TEST_CASE("a mount line needs its mount rule; a rw line needs write", "[root][userns]") {
  // docs/abi-policy.md, "What each class gates": the object is the
  // target. The fixture's automatic rules are off: the test writes them.
  Mode m = mode();
  CtxTree t(m.owner);
  t.mkdir("data");
  const std::string data = t.dir().path() + "/data";
  const std::string base_rules = CtxTree::mount_rules_for("coder_t\n", t.base_mounts());
  // Without the rule for /data: refused before anything is made.
  t.agent("coder", {{"mount", t.base_mounts() + data + "\t/data\tro\tbind\n"}, {"policy", base_rules}}, false);
  RunResult denied = run_probe(t, m, "coder", {"exists:/data"});
  CHECK(denied.exit_code == 125);
  CHECK(denied.err == "ctx-agent-run: coder.d/mount:3: EACCES: ro mount " + data +
                          " -> /data needs 'allow coder_t mount:/data read' in coder.d/policy; add the rule or "
                          "remove the line\n");
  // The source, or a path above the target, allows nothing.
  t.agent("coder",
          {{"mount", t.base_mounts() + data + "\t/data\tro\tbind\n"},
           {"policy", base_rules + "allow coder_t mount:" + data + " read\nallow coder_t mount:/ read\n"}},
          false);
  CHECK(run_probe(t, m, "coder", {"exists:/data"}).exit_code == 125);
  // With the rule it launches.
  t.agent("coder",
          {{"mount", t.base_mounts() + data + "\t/data\tro\tbind\n"},
           {"policy", base_rules + "allow coder_t mount:/data read\n"}},
          false);
  CHECK(probe(run_probe(t, m, "coder", {"exists:/data"}))["exists:/data"] == "yes");
  // rw needs write as well.
  t.agent("coder",
          {{"mount", t.base_mounts() + data + "\t/data\trw\tbind\n"},
           {"policy", base_rules + "allow coder_t mount:/data read\n"}},
          false);
  RunResult rw = run_probe(t, m, "coder", {"exists:/data"});
  CHECK(rw.exit_code == 125);
  CHECK(rw.err == "ctx-agent-run: coder.d/mount:3: EACCES: rw mount " + data +
                      " -> /data needs 'allow coder_t mount:/data write' in coder.d/policy; add the rule or "
                      "remove the line\n");
  t.agent("coder",
          {{"mount", t.base_mounts() + data + "\t/data\trw\tbind\n"},
           {"policy", base_rules + "allow coder_t mount:/data read\nallow coder_t mount:/data write\n"}},
          false);
  CHECK(probe(run_probe(t, m, "coder", {"exists:/data"}))["exists:/data"] == "yes");
  // ctx check names every line the policy lacks, as an error.
  t.agent("coder", {{"mount", t.base_mounts() + data + "\t/data\trw\tbind\n"}, {"policy", ""}}, false);
  RunResult chk = ctx::test::run_command({ctx::test::built("ctx/ctx"), "check", "--ctx-root", t.root(), "coder"});
  CHECK(chk.exit_code == 1);
  CHECK(chk.out.find("coder.d/mount:1: EACCES: ro mount /usr -> /usr needs 'allow coder_t mount:/usr read'") !=
        std::string::npos);
  CHECK(chk.out.find("coder.d/mount:3: EACCES: rw mount " + data + " -> /data needs") != std::string::npos);
}

TEST_CASE("a mount of a shared space needs the policy's permission", "[root][userns]") {
  Mode m = mode();
  CtxTree t(m.owner);
  t.mkdir("ctx/shared/project-a/data");
  t.mkdir("ctx/shared/project-b");
  std::string src = t.root() + "/shared/project-a";
  t.agent("coder", {{"mount", t.base_mounts() + src + "\t/p\tro\tbind\n"}});
  RunResult denied = run_probe(t, m, "coder", {"ids"});
  CHECK(denied.exit_code == 125);
  CHECK(denied.err == "ctx-agent-run: coder.d/mount:3: EACCES: source " + src +
                          " is in shared space project-a and the policy lacks 'allow coder_t shared:project-a read'\n");
  t.agent("coder",
          {{"mount", t.base_mounts() + src + "\t/p\tro\tbind\n"}, {"policy", "allow coder_t shared:project-a read\n"}});
  CHECK(probe(run_probe(t, m, "coder", {"exists:/p/data"}))["exists:/p/data"] == "yes");
  t.agent("coder",
          {{"mount", t.base_mounts() + src + "\t/p\trw\tbind\n"}, {"policy", "allow coder_t shared:project-a read\n"}});
  RunResult rw = run_probe(t, m, "coder", {"ids"});
  CHECK(rw.exit_code == 125);
  CHECK(rw.err.find("lacks 'allow coder_t shared:project-a write'") != std::string::npos);
  // A mount of the whole ctx root shows the agent view, which has no space
  // the policy does not let it read (docs/view.md).
  t.agent("coder", {{"mount", t.base_mounts() + t.root() + "\t/ctx\tro\trbind\n"},
                    {"policy", "allow coder_t shared:project-a read\n"}});
  json j = probe(run_probe(
      t, m, "coder",
      {"exists:/ctx/shared/project-a/data", "exists:/ctx/shared/project-b/x", "write:/ctx/shared/project-b/x"}));
  CHECK(j["exists:/ctx/shared/project-a/data"] == "yes");
  CHECK(j["exists:/ctx/shared/project-b/x"] == "ENOENT");
  CHECK(j["write:/ctx/shared/project-b/x"] == "ENOENT");
}

TEST_CASE("a privileged launch opens mount sources as the owner", "[root]") {
  Mode m = mode();
  CtxTree t(m.owner);
  t.mkdir("private", 0700);  // root's, 0700: the owner cannot enter it
  t.write("private/secret", "s\n");
  REQUIRE(::chown((t.dir() / "private").c_str(), 0, 0) == 0);
  REQUIRE(::chown((t.dir() / "private/secret").c_str(), 0, 0) == 0);
  REQUIRE(::chmod((t.dir() / "private").c_str(), 0700) == 0);
  t.agent("coder", {{"mount", t.base_mounts() + "/etc/shadow\t/shadow\tro\tbind\n"}});
  RunResult shadow = run_probe(t, m, "coder", {"ids"});
  CHECK(shadow.exit_code == 125);
  CHECK(
      shadow.err ==
      "ctx-agent-run: coder.d/mount:3: /etc/shadow -> /shadow: source /etc/shadow: EACCES: the owner may not read it\n");
  t.agent("coder", {{"mount", t.base_mounts() + t.dir().path() + "/private\t/p\tro\tbind\n"}});
  RunResult priv = run_probe(t, m, "coder", {"ids"});
  CHECK(priv.exit_code == 125);
  CHECK(priv.err == "ctx-agent-run: coder.d/mount:3: " + t.dir().path() + "/private -> /p: source " + t.dir().path() +
                        "/private: EACCES: the owner may not read it\n");
  // Readable but not writable by the owner: ro works, rw is refused.
  t.mkdir("shared-ro", 0755);
  REQUIRE(::chown((t.dir() / "shared-ro").c_str(), 0, 0) == 0);
  t.agent("coder", {{"mount", t.base_mounts() + t.dir().path() + "/shared-ro\t/s\tro\tbind\n"}});
  probe(run_probe(t, m, "coder", {"ids"}));
  t.agent("coder", {{"mount", t.base_mounts() + t.dir().path() + "/shared-ro\t/s\trw\tbind\n"}});
  RunResult rw = run_probe(t, m, "coder", {"ids"});
  CHECK(rw.exit_code == 125);
  CHECK(rw.err.find("source " + t.dir().path() + "/shared-ro: EACCES: the owner may not read and write it") !=
        std::string::npos);
}
