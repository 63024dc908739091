// docs/security.md, "Mount sources of a root launch": a root launch takes
// its mount sources only from file systems of plain files. The file
// systems under test are mounted fresh in a private mount namespace of the
// forked child that runs the launcher (never on the host), so the cases do
// not depend on what this machine has mounted.
#include <catch2/catch.hpp>

#include <grp.h>
#include <sched.h>
#include <sys/mount.h>
#include <unistd.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "test/support/launch.hpp"
#include "test/support/tempdir.hpp"

using ctx::test::CtxTree;
using ctx::test::probe;
using ctx::test::run_probe;
using ctx::test::RunResult;

namespace {

using Mode = ctx::test::LaunchMode;
constexpr auto mode = ctx::test::launch_mode;

const std::string kWhy =
    ", which is not a file system of plain files: a root launch takes mount sources only from those "
    "(docs/security.md, \"Mount sources of a root launch\")";

// A fresh file system of `type` at each host path, made in the child's own
// mount namespace just before it execs.
struct FreshMount {
  std::string type, path, options;
};

// Then, for another user than root, takes that user's ids.
bool mount_fresh(const std::vector<FreshMount>& mounts, const ctx::test::TestUser& as) {
  if (::unshare(CLONE_NEWNS) < 0 || ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) < 0) return false;
  for (const auto& m : mounts)
    if (::mount(m.type.c_str(), m.path.c_str(), m.type.c_str(), MS_NOSUID | MS_NODEV,
                m.options.empty() ? nullptr : m.options.c_str()) < 0)
      return false;
  if (as.uid == 0) return true;
  return ::setgroups(0, nullptr) == 0 && ::setgid(as.gid) == 0 && ::setuid(as.uid) == 0;
}

// `program` ("launcher/ctx-agent-run", or "ctx/ctx" with its subcommand
// first in args) --ctx-root <tree> args..., run by `as` in a mount
// namespace that also holds `mounts`.
RunResult run_with(const std::string& program, const CtxTree& t, std::vector<std::string> args,
                   const ctx::test::TestUser& as, const std::vector<FreshMount>& mounts) {
  std::vector<std::string> argv{ctx::test::built(program)};
  if (program == "ctx/ctx") argv.push_back(args[0]), args.erase(args.begin());
  argv.insert(argv.end(), {"--ctx-root", t.root()});
  argv.insert(argv.end(), args.begin(), args.end());
  // Mounted as root, before the ids of `as` are taken.
  return ctx::test::run_command(argv, ctx::test::TestUser{0, 0, "root"}, 60, {},
                                [&] { return mount_fresh(mounts, as); });
}

}  // namespace

TEST_CASE("a root launch refuses a mount source off the allow-list of file systems", "[root]") {
  auto m = ctx::test::launch_mode();
  CtxTree t(m.owner);
  for (const char* d : {"mq", "dev", "srv/mq", "files"}) t.mkdir(d);
  const std::string dir = t.dir().path();
  const std::vector<FreshMount> fresh{{"mqueue", dir + "/mq", ""},
                                      {"devtmpfs", dir + "/dev", ""},
                                      {"mqueue", dir + "/srv/mq", ""},
                                      {"tmpfs", dir + "/files", "mode=0755"}};
  auto launch = [&](const std::string& line, const std::string& cmd) {
    t.agent("coder", {{"mount", t.base_mounts() + line}});
    return run_with("launcher/ctx-agent-run", t, {"coder", "--", "/bin/sh", "-c", cmd}, m.as, fresh);
  };
  const std::string fix = "; bind a directory of a disk, memory or network file system instead, or remove the line\n";
  RunResult mq = launch(dir + "/mq\t/mq\tro\tbind\n", "echo ran");
  CHECK(mq.exit_code == 125);
  CHECK(mq.out.empty());
  CHECK(mq.err == "ctx-agent-run: coder.d/mount:3: " + dir + "/mq -> /mq: source " + dir +
                      "/mq: EACCES: lies on mqueue" + kWhy + fix);
  RunResult dev = launch(dir + "/dev\t/d\tro\tbind\n", "echo ran");
  CHECK(dev.exit_code == 125);
  CHECK(dev.err == "ctx-agent-run: coder.d/mount:3: " + dir + "/dev -> /d: source " + dir +
                       "/dev: EACCES: lies on devtmpfs" + kWhy + fix);
  // A recursive bind carries its submounts along: one off the list refuses it.
  RunResult rec = launch(dir + "/srv\t/srv\tro\trbind\n", "echo ran");
  CHECK(rec.exit_code == 125);
  CHECK(rec.err == "ctx-agent-run: coder.d/mount:3: " + dir + "/srv -> /srv: source " + dir + "/srv: EACCES: holds " +
                       dir + "/srv/mq (mqueue)" + kWhy +
                       "; use bind instead of rbind, or bind only the directories the agent needs\n");
  // Without its submounts the same directory is bound (it lies on the
  // test tree's file system), and so is a fresh tmpfs.
  RunResult plain = launch(dir + "/srv\t/srv\tro\tbind\n", "ls -a /srv/mq | wc -l");
  INFO(plain.err);
  CHECK(plain.exit_code == 0);
  CHECK(plain.out == "2\n");
  RunResult files = launch(dir + "/files\t/files\tro\tbind\n", "grep -c ' /files ' /proc/self/mountinfo");
  INFO(files.err);
  CHECK(files.exit_code == 0);
  CHECK(files.out == "1\n");
}

TEST_CASE("a root launch refuses a root off the allow-list of file systems", "[root]") {
  auto m = ctx::test::launch_mode();
  CtxTree t(m.owner);
  t.mkdir("rootdev");
  const std::string dir = t.dir().path();
  t.agent("coder", {{"root", dir + "/rootdev\n"}});
  RunResult r =
      run_with("launcher/ctx-agent-run", t, {"coder", "--", "/bin/true"}, m.as, {{"devtmpfs", dir + "/rootdev", ""}});
  CHECK(r.exit_code == 125);
  CHECK(r.err == "ctx-agent-run: coder.d/root: root " + dir + "/rootdev: EACCES: lies on devtmpfs" + kWhy +
                     "; make the root a directory of a disk or memory file system\n");
}

// docs/security.md: an unprivileged launch binds with the owner's own
// authority in a user namespace; the allow-list is not applied there.
TEST_CASE("an unprivileged launch may bind a source a root launch refuses", "[userns]") {
  auto m = ctx::test::launch_mode();
  CtxTree t(m.owner);
  t.agent("coder", {{"mount", t.base_mounts() + "/sys/kernel\t/k\tro\trbind\n"}});
  RunResult r = t.launch({"coder", "--", "/bin/sh", "-c", "test -e /k/uevent_seqnum && echo seen"}, m.as);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out == "seen\n");
}

TEST_CASE("ctx check names each mount source's file system and what a root launch refuses", "[root]") {
  auto m = ctx::test::launch_mode();
  CtxTree t(m.owner);
  t.mkdir("mq");
  t.mkdir("work");
  const std::string dir = t.dir().path();
  t.agent("coder", {{"mount", t.base_mounts() + dir + "/mq\t/mq\tro\tbind\n" + dir + "/work\t/work\trw\tbind\n"}});
  const std::vector<FreshMount> fresh{{"mqueue", dir + "/mq", ""}};
  const std::string refused = "ro mount " + dir +
                              "/mq -> /mq on mqueue (not a file system of plain files: a root "
                              "launch refuses it)";
  for (const auto& who : {m.as, m.owner}) {
    INFO("ctx check run by uid " << who.uid);
    RunResult c = run_with("ctx/ctx", t, {"check", "coder"}, who, fresh);
    INFO(c.out << c.err);
    // The risk lines: the refused source is high whoever runs the check.
    CHECK(c.out.find("risk high   " + refused) != std::string::npos);
    CHECK(c.out.find("risk medium rw mount " + dir + "/work -> /work on ") != std::string::npos);
    // Run as root, the check refuses what a root launch refuses.
    const bool as_root = who.uid == 0;
    CHECK((c.out.find("coder.d/mount:3: " + dir + "/mq -> /mq: source " + dir + "/mq: EACCES: lies on mqueue" + kWhy) !=
           std::string::npos) == as_root);
  }
}

// Through a bound /proc an agent reaches the owner's processes' files
// (/proc/<pid>/root) and writes into them as the owner: a root launch
// takes sources only from file systems of plain files, and refuses an
// rbind that holds another (the cases above have the rest).
TEST_CASE("a root launch refuses pseudo file systems as mount sources", "[root]") {
  Mode m = mode();
  CtxTree t(m.owner);
  t.agent("coder", {{"mount", t.base_mounts() + "/proc\t/hostproc\tro\tbind\n"}});
  RunResult p = run_probe(t, m, "coder", {"ids"});
  CHECK(p.exit_code == 125);
  CHECK(p.err ==
        "ctx-agent-run: coder.d/mount:3: /proc -> /hostproc: source /proc: EACCES: lies on proc, which is not a file "
        "system of plain files: a root launch takes mount sources only from those (docs/security.md, \"Mount sources "
        "of a root launch\"); bind a directory of a disk, memory or network file system instead, or remove the "
        "line\n");
  t.agent("coder", {{"mount", t.base_mounts() + "/sys/kernel\t/k\tro\tbind\n"}});
  CHECK(run_probe(t, m, "coder", {"ids"}).err.find("source /sys/kernel: EACCES: lies on sysfs,") != std::string::npos);
  t.agent("coder", {{"mount", t.base_mounts() + "/\t/host\tro\trbind\n"}});
  RunResult all = run_probe(t, m, "coder", {"ids"});
  CHECK(all.exit_code == 125);
  CHECK(all.err.find("source /: EACCES: holds ") != std::string::npos);
  CHECK(all.err.find("use bind instead of rbind") != std::string::npos);
  // A plain bind of / brings no submount: allowed.
  t.agent("coder", {{"mount", t.base_mounts() + "/\t/host\tro\tbind\n"}});
  probe(run_probe(t, m, "coder", {"ids"}));
}
