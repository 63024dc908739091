// Control files a root launch does not trust, refused by the launch and
// by ctx check with the same sentence.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "test/support/launch.hpp"

using ctx::test::CtxTree;
using ctx::test::run_probe;
using ctx::test::RunResult;

namespace {

using Mode = ctx::test::LaunchMode;
constexpr auto mode = ctx::test::launch_mode;

}  // namespace

TEST_CASE("a privileged launch refuses untrusted control files", "[root]") {
  Mode m = mode();
  CtxTree t(m.owner);
  t.agent("coder");
  ::chmod((t.root() + "/agent/coder.d/mount").c_str(), 0666);
  RunResult r = run_probe(t, m, "coder", {"ids"});
  CHECK(r.exit_code == 125);
  CHECK(r.err == "ctx-agent-run: coder.d/mount: EPERM: writable by group or other (mode 0666); chmod go-w it\n");
  ::chmod((t.root() + "/agent/coder.d/mount").c_str(), 0644);
  REQUIRE(::chown((t.root() + "/agent/coder.d/mount").c_str(), m.owner.uid + 1, m.owner.gid) == 0);
  RunResult other = run_probe(t, m, "coder", {"ids"});
  CHECK(other.exit_code == 125);
  CHECK(other.err.find("not by root or the owner " + std::to_string(m.owner.uid) + "; chown it") != std::string::npos);
  // Symlinked control files are refused in every launch.
  ::chown((t.root() + "/agent/coder.d/mount").c_str(), m.owner.uid, m.owner.gid);
  ::unlink((t.root() + "/agent/coder.d/mount").c_str());
  REQUIRE(::symlink("/etc/fstab", (t.root() + "/agent/coder.d/mount").c_str()) == 0);
  RunResult link = run_probe(t, m, "coder", {"ids"});
  CHECK(link.exit_code == 125);
  CHECK(link.err == "ctx-agent-run: coder.d/mount: ELOOP: is a symbolic link; control files must be regular files\n");
}

TEST_CASE("ctx check run as root reports what a root launch refuses", "[root]") {
  Mode m = mode();
  CtxTree t(m.owner);
  // A tree a launch with no command accepts: its runtime at /ctx/agent/coder.
  t.agent("coder", {{"groups", "0\n"}, {"mount", t.base_mounts() + t.root() + "\t/ctx\tro\trbind,nosuid,nodev\n"}});
  t.write("ctx/agent/coder", "#!/bin/sh\n", 0755);
  RunResult c = ctx::test::run_command({ctx::test::built("ctx/ctx"), "check", "--ctx-root", t.root(), "coder"});
  CHECK(c.exit_code != 0);
  CHECK(c.out.find("coder.d/groups: EPERM: gid 0 is not the owner's primary group") != std::string::npos);
  // The launch refuses it with the same sentence.
  RunResult l = run_probe(t, m, "coder", {"ids"});
  CHECK(l.exit_code == 125);
  CHECK(l.err.find("coder.d/groups: EPERM: gid 0 is not the owner's primary group") != std::string::npos);
  REQUIRE(::chown((t.root() + "/agent/coder.d/groups").c_str(), 0, 0) == 0);
  RunResult ok = ctx::test::run_command({ctx::test::built("ctx/ctx"), "check", "--ctx-root", t.root(), "coder"});
  INFO(ok.out << ok.err);
  CHECK(ok.exit_code == 0);
  ::chmod((t.root() + "/agent/coder.d/mount").c_str(), 0666);
  RunResult trust = ctx::test::run_command({ctx::test::built("ctx/ctx"), "check", "--ctx-root", t.root(), "coder"});
  CHECK(trust.exit_code != 0);
  CHECK(trust.out.find("coder.d/mount: EPERM: writable by group or other (mode 0666); chmod go-w it") !=
        std::string::npos);
}
