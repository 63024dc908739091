#include <catch2/catch.hpp>
#include "policy/policy.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "agentdir/json_syntax.hpp"
#include "agentdir/load.hpp"
#include "test/support/launch.hpp"
#include "test/support/tempdir.hpp"

using namespace ctx::agentdir;

namespace {

ControlFiles base_files() {
  return {
      {"owner", "1000\n"},
      {"gid", "1000\n"},
      {"label", "user_u:agent_r:coder_t:s0\n"},
      {"iso", "userns\n"},
      {"root", "/ctx/home/1000/agent/coder/root\n"},
      {"cwd", "/work\n"},
      {"env", "LANG=C.UTF-8\n"},
      {"path", "/ctx/tool\n"},
      {"model", "debug/echo\n"},
      {"mount", "/usr\t/usr\tro\trbind\n"},
      {"policy", "allow coder_t tool:fs.read execute\n"},
      {"meta.json", "{\"purpose\": \"x\"}\n"},
  };
}

// Makes agent `name` of a base_files() tree under t/ctx launchable, so
// that ctx check (which runs the launch's preflight) finds nothing to
// refuse: a root in its home with the merged-/usr links, a runtime, a cwd
// the /usr mount shows, the CTX tree at /ctx (where the runtime is).
void make_launchable(const ctx::test::TempDir& t, const std::string& name) {
  const std::string root = "ctx/home/1000/agent/" + name + "/root";
  t.mkdir(root);
  for (const char* l : {"bin", "lib", "lib64", "sbin"})
    REQUIRE(::symlink((std::string("usr/") + l).c_str(), (t / (root + "/" + l)).c_str()) == 0);
  t.write("ctx/agent/" + name, "#!/bin/sh\n", 0755);
  t.write("ctx/agent/" + name + ".d/root", t / root + "\n");
  t.write("ctx/agent/" + name + ".d/cwd", "/usr\n");
  t.write("ctx/agent/" + name + ".d/mount", "/usr\t/usr\tro\trbind\n" + t / "ctx" + "\t/ctx\tro\trbind\n");
  // The mount rules of that table, for the agent's type.
  std::string label = ctx::test::read_file(t / ("ctx/agent/" + name + ".d/label"));
  std::string type = label.substr(0, label.size() - 1);
  if (auto c = type.find(':'); c != std::string::npos) type = type.substr(type.find(':', c + 1) + 1);
  type = type.substr(0, type.find(':'));
  t.write("ctx/agent/" + name + ".d/policy", ctx::test::read_file(t / ("ctx/agent/" + name + ".d/policy")) + "allow " +
                                                 type + " mount:/usr read\nallow " + type + " mount:/ctx read\n");
}

std::optional<std::uint32_t> gid_1000(std::uint32_t) { return 1000; }
std::optional<std::uint32_t> no_gid(std::uint32_t) { return std::nullopt; }

ctx::Result<AgentSpec> build(const ControlFiles& f, PrimaryGidLookup lookup = gid_1000,
                             std::vector<ctx::Error>* all = nullptr) {
  return build_spec("coder", "/ctx", f, lookup, all);
}

}  // namespace

TEST_CASE("agentdir corpus: every bad control file fails with its exact message", "[unit]") {
  std::string dir = ctx::test::data_dir() + "/agentdir/bad/";
  int n = 0;
  for (const auto& c : ctx::test::names_in(dir)) {
    if (c.size() > 4 && c.substr(c.size() - 4) == ".err") continue;
    INFO(c);
    ControlFiles f = base_files();
    for (const auto& file : ctx::test::names_in(dir + c)) {
      if (file.size() > 7 && file.substr(file.size() - 7) == ".remove") {
        f.erase(file.substr(0, file.size() - 7));
      } else {
        f[file] = ctx::test::read_file(dir + c + "/" + file);
      }
    }
    std::string want = ctx::test::read_file(dir + c + ".err");
    want.pop_back();
    auto r = build(f);
    REQUIRE_FALSE(r);
    CHECK(r.error().msg == want);
    ++n;
  }
  CHECK(n >= 35);
}

TEST_CASE("a complete agent reads into a plain spec", "[unit]") {
  ControlFiles f = base_files();
  f["uid"] = "0\n";
  f["groups"] = "27\n100\n";
  f["parent"] = "agent:coder session:default run:01H-x\n";
  f["env"] = "LANG=C.UTF-8\nGREETING=hello $USER; `id`\nEMPTY=\n";
  f["label"] = "user_u:agent_r:coder_t:s0:c0.c1023\n";
  f["limits"] = "memory.max=1G\npids.max=max\ncpu.max=50000 100000\nshm.max=256M\nnproc.max=500\n";
  auto s = build(f);
  REQUIRE(s);
  CHECK(s->name == "coder");
  CHECK(s->owner == 1000);
  CHECK(s->uid == 0);
  CHECK(s->gid == 1000);
  CHECK(s->groups == std::vector<std::uint32_t>{27, 100});
  REQUIRE(s->label);
  CHECK(*s->label == Label{"user_u", "agent_r", "coder_t", "s0:c0.c1023"});
  CHECK(s->subject() == "coder_t");
  CHECK(s->iso == Iso::userns);
  CHECK(*s->parent == Parent{"coder", "default", "01H-x"});
  CHECK(s->env == std::vector<std::pair<std::string, std::string>>{
                      {"LANG", "C.UTF-8"}, {"GREETING", "hello $USER; `id`"}, {"EMPTY", ""}});
  CHECK(s->path == std::vector<std::string>{"/ctx/tool"});
  CHECK(s->path_set);
  CHECK(s->models == std::vector<std::string>{"debug/echo"});
  CHECK(s->mounts.size() == 1);
  CHECK(s->policy.rules().size() == 1);
  CHECK(*s->limits == ctx::cgroup::Limits{"1G", "max", "50000 100000", "256M", "500"});
}

TEST_CASE("defaults: uid is the owner, gid the owner's primary group, root in the home tier", "[unit]") {
  ControlFiles f{{"owner", "1000\n"}};
  auto s = build(f, [](std::uint32_t uid) -> std::optional<std::uint32_t> { return uid + 7; });
  REQUIRE(s);
  CHECK(s->uid == 1000);
  CHECK(s->gid == 1007);
  CHECK(s->root == "/ctx/home/1000/agent/coder/root");
  CHECK(s->cwd == "/");
  CHECK(s->iso == Iso::userns);
  CHECK(s->life == Life::owned);
  CHECK_FALSE(s->label);
  CHECK(s->subject().empty());
  CHECK_FALSE(s->path_set);
  auto nogid = build(f, no_gid);
  REQUIRE_FALSE(nogid);
  CHECK(nogid.error().msg ==
        "coder.d/gid: ENOENT: missing, and owner 1000 has no passwd entry to take the primary gid from; write the gid");
}

TEST_CASE("path: one colon-separated line is accepted for compatibility", "[unit]") {
  ControlFiles f = base_files();
  f["path"] = "/ctx/tool:/ctx/home/1000/tool\n";
  auto s = build(f);
  REQUIRE(s);
  CHECK(s->path == std::vector<std::string>{"/ctx/tool", "/ctx/home/1000/tool"});
}

TEST_CASE("every error of every file is reported when asked", "[unit]") {
  ControlFiles f = base_files();
  f["uid"] = "x\n";
  f["iso"] = "jail\n";
  f["mount"] = "/a\tb\tro\tbind\n/c\t/d\tzz\t-\n";
  f["env"] = "CTX_HOME=/x\n";
  std::vector<ctx::Error> all;
  auto s = build(f, gid_1000, &all);
  REQUIRE_FALSE(s);
  std::vector<std::string> msgs;
  for (const auto& e : all) msgs.push_back(e.msg);
  CHECK(msgs ==
        std::vector<std::string>{
            "coder.d/uid:1:1: EINVAL: uid must be a decimal number from 0 to 4294967294, without sign or leading zeros",
            "coder.d/iso:1:1: EINVAL: iso must be shared, uid or userns, not 'jail'",
            "coder.d/env:1:1: EINVAL: CTX_HOME is reserved: the launcher sets CTX_* itself",
            "coder.d/mount:1:4: EINVAL: target must be an absolute path",
            "coder.d/mount:2:7: EINVAL: mode must be ro or rw, not 'zz'",
        });
}

TEST_CASE("meta.json is validated but changes no decision", "[unit]") {
  ControlFiles a = base_files();
  ControlFiles b = base_files();
  b["meta.json"] =
      "{\"purpose\": \"root everything\", \"iso\": \"shared\", \"policy\": [\"allow coder_t network:default connect\"]}\n";
  ControlFiles c = base_files();
  c.erase("meta.json");
  auto sa = build(a), sb = build(b), sc = build(c);
  REQUIRE(sa);
  REQUIRE(sb);
  REQUIRE(sc);
  CHECK(*sa == *sb);
  CHECK(*sa == *sc);
  CHECK(ctx::agentdir::check_json("m", "[1, -2.5e3, true, null, \"\\u00e9\\n\", {\"a\": {}}]"));
  CHECK(ctx::agentdir::check_json("m", "").error().msg == "m:1:1: EINVAL: invalid JSON: unexpected end of file");
  CHECK(ctx::agentdir::check_json("m", "{\"a\" 1}").error().msg == "m:1:6: EINVAL: invalid JSON: expected ':'");
  CHECK(ctx::agentdir::check_json("m", std::string(100, '[')).error().msg ==
        "m:1:66: EINVAL: invalid JSON: nested deeper than 64 levels");
}

TEST_CASE("load reads the .d directory strictly from disk", "[fs]") {
  ctx::test::TempDir t;
  for (const auto& [k, v] : base_files()) t.write("agent/coder.d/" + k, v);
  auto s = load(t.path(), "coder");
  REQUIRE(s);
  CHECK(s->ctx_root == t.path());
  // Who wrote the identity files: uid and groups are absent (the defaults
  // are the owner's own), gid is the runner's.
  CHECK(s->id_source.uid_by_root);
  CHECK(s->id_source.groups_by_root);
  CHECK(s->id_source.gid_by_root == (::geteuid() == 0));
  AgentSpec want = *build_spec("coder", t.path(), base_files(), gid_1000);
  CHECK_FALSE(want.id_source.gid_by_root);  // build_spec cannot know
  want.id_source = s->id_source;
  CHECK(*s == want);

  SECTION("a symlinked control file is refused") {
    t.write("elsewhere", "1000\n");
    ::unlink((t / "agent/coder.d/owner").c_str());
    t.symlink(t / "elsewhere", "agent/coder.d/owner");
    CHECK(load(t.path(), "coder").error().msg ==
          "coder.d/owner: ELOOP: is a symbolic link; control files must be regular files");
  }
  SECTION("a file over 64 KiB is refused") {
    t.write("agent/coder.d/env", std::string(65537, 'A'));
    CHECK(load(t.path(), "coder").error().msg == "coder.d/env: EFBIG: is larger than 65536 bytes");
  }
  SECTION("a FIFO is refused without blocking") {
    ::unlink((t / "agent/coder.d/env").c_str());
    REQUIRE(::mkfifo((t / "agent/coder.d/env").c_str(), 0644) == 0);
    CHECK(load(t.path(), "coder").error().msg == "coder.d/env: EINVAL: is not a regular file");
  }
  SECTION("a symlinked .d is refused") {
    t.mkdir("real.d");
    t.symlink(t / "real.d", "agent/rev.d");
    CHECK(load(t.path(), "rev").error().msg == "rev.d: ENOTDIR: not a directory (a symlinked .d is refused)");
  }
  SECTION("a missing agent and an invalid name") {
    CHECK(load(t.path(), "nobody").error().msg == "nobody.d: ENOENT: no such agent in " + t.path() + "/agent");
    CHECK(load(t.path(), "../x").error().msg == "../x: EINVAL: agent name must begin with a letter or digit");
  }
  SECTION("unknown files are listed, not read") {
    t.write("agent/coder.d/tools", "fs.read\n");
    auto d = read_control_files(t.path(), "coder");
    REQUIRE(d);
    CHECK(d->unknown == std::vector<std::string>{"tools"});
  }
  SECTION("the launcher's instance/ directory is its output, not an unknown file") {
    t.mkdir("agent/coder.d/instance/default");
    auto d = read_control_files(t.path(), "coder");
    REQUIRE(d);
    CHECK(d->unknown.empty());
  }
  SECTION("a privileged launch refuses group/other-writable control files") {
    // The runner owns the files: make it the owner, so only the mode is wrong.
    t.write("agent/coder.d/owner", std::to_string(::getuid()) + "\n");
    ::chmod((t / "agent/coder.d/policy").c_str(), 0664);
    CHECK(load(t.path(), "coder"));
    LoadOptions strict;
    strict.require_trusted_files = true;
    auto r = load(t.path(), "coder", strict);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == EPERM);
    CHECK(r.error().msg == "coder.d/policy: EPERM: writable by group or other (mode 0664); chmod go-w it");
  }
}

TEST_CASE("a privileged launch refuses control files owned by another user", "[root]") {
  ctx::test::TempDir t;
  for (const auto& [k, v] : base_files()) t.write("agent/coder.d/" + k, v);
  for (const auto& [k, v] : base_files()) REQUIRE(::chown((t / ("agent/coder.d/" + k)).c_str(), 1000, 1000) == 0);
  LoadOptions strict;
  strict.require_trusted_files = true;
  CHECK(load(t.path(), "coder", strict));  // root-owned dir, owner-owned files
  REQUIRE(::chown((t / "agent/coder.d/mount").c_str(), 1001, 1001) == 0);
  auto r = load(t.path(), "coder", strict);
  REQUIRE_FALSE(r);
  CHECK(r.error().msg == "coder.d/mount: EPERM: owned by uid 1001, not by root or the owner 1000; chown it");
  REQUIRE(::chown((t / "agent/coder.d").c_str(), 1002, 1002) == 0);
  r = load(t.path(), "coder", strict);
  CHECK(r.error().msg == "coder.d: EPERM: owned by uid 1002, not by root or the owner 1000; chown it");
}

namespace {

// The file system type a path lies on, as findmnt(8) names it: what ctx
// check adds to a mount's risk line.
std::string fs_type_of(const std::string& path) {
  auto r = ctx::test::run_command({"/usr/bin/findmnt", "-n", "-o", "FSTYPE", "--target", path});
  REQUIRE(r.exit_code == 0);
  return r.out.substr(0, r.out.find('\n'));
}

}  // namespace

TEST_CASE("ctx check reports every error, compiler style, and its exit status", "[fs]") {
  ctx::test::TempDir t;
  for (const auto& [k, v] : base_files()) t.write("ctx/agent/coder.d/" + k, v);
  for (const auto& [k, v] : base_files()) t.write("ctx/agent/rev.d/" + k, v);
  t.write("ctx/agent/rev.d/label", "rev_t\n");
  t.write("ctx/tool/fs.read", "#!/bin/sh\n", 0755);
  make_launchable(t, "coder");
  make_launchable(t, "rev");
  std::string ctx = ctx::test::built("ctx/ctx");
  auto ok = ctx::test::run_command({ctx, "check", "--ctx-root", t / "ctx", "coder"});
  CHECK(ok.exit_code == 0);
  CHECK(ok.out == "risk low    5 more grants\ncoder: ok\n");
  // rev's policy names coder_t: inert, a warning.
  auto warn = ctx::test::run_command({ctx, "check", "--ctx-root", t / "ctx", "rev"});
  CHECK(warn.exit_code == 0);
  CHECK(warn.out ==
        "warning: rev.d/policy:1: inert: names subject coder_t, but the agent's label type is rev_t\n"
        "risk low    4 more grants\nrev: ok\n0 errors, 1 warning\n");
  t.write("ctx/agent/coder.d/iso", "jail\n");
  t.write("ctx/agent/coder.d/mount", "/a\tb\tro\tbind\n");
  t.write("ctx/agent/coder.d/notes", "x\n");
  auto bad = ctx::test::run_command({ctx, "check", "--ctx-root", t / "ctx", "coder"});
  CHECK(bad.exit_code == 1);
  CHECK(bad.out ==
        "warning: coder.d/notes: not a control file of the ABI; it is ignored (remove or rename it)\n"
        "coder.d/iso:1:1: EINVAL: iso must be shared, uid or userns, not 'jail'\n"
        "coder.d/mount:1:4: EINVAL: target must be an absolute path\n"
        "2 errors, 1 warning\n");
  auto all = ctx::test::run_command({ctx, "check", "--ctx-root", t / "ctx", "--all"});
  CHECK(all.exit_code == 1);
  CHECK(all.out.find("rev: ok\n") != std::string::npos);
  auto env = ctx::test::run_command({ctx, "check", "rev"}, std::nullopt, 30, {"CTX_ROOT=" + t / "ctx"});
  CHECK(env.exit_code == 0);
  CHECK(ctx::test::run_command({ctx, "check"}).exit_code == 2);
  CHECK(ctx::test::run_command({ctx, "frobnicate"}).exit_code == 2);
  auto not_root = ctx::test::run_command({ctx, "check", "--ctx-root", t.path(), "coder"});
  CHECK(not_root.exit_code == 1);
  CHECK(not_root.out == t.path() + "/agent: ENOENT: " + t.path() +
                            " is not a CTX root (it has no agent/ directory); name yours with --ctx-root DIR or "
                            "CTX_ROOT=DIR\n1 error, 0 warnings\n");
  auto missing = ctx::test::run_command({ctx, "check", "--ctx-root", t / "ctx", "ghost"});
  CHECK(missing.exit_code == 1);
  CHECK(missing.out == "ghost.d: ENOENT: no such agent in " + t / "ctx" + "/agent\n1 error, 0 warnings\n");
}

TEST_CASE("the installed example tree passes ctx check", "[fs]") {
  const char* src = std::getenv("CTX_SOURCE_ROOT");
  REQUIRE(src != nullptr);
  ctx::test::TempDir d;
  auto inst = ctx::test::run_command({std::string(src) + "/scripts/install-example", d.path(),
                                      std::to_string(::getuid()), std::to_string(::getgid())});
  REQUIRE(inst.exit_code == 0);
  auto r = ctx::test::run_command({ctx::test::built("ctx/ctx"), "check", "--ctx-root", d / "ctx", "--all"});
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("warning:") == std::string::npos);
  CHECK(r.out.find("risk high   tool:shell.exec execute") != std::string::npos);
  CHECK(r.out.find("coder: ok\n") != std::string::npos);
  CHECK(r.out.substr(r.out.size() - 13) == "reviewer: ok\n");
}

TEST_CASE("ctx check as a doctor: objects, suggestions, mounts, risk tiers", "[fs]") {
  ctx::test::TempDir t;
  for (const auto& [k, v] : base_files()) t.write("ctx/agent/coder.d/" + k, v);
  make_launchable(t, "coder");
  t.write("ctx/tool/fs.read", "#!/bin/sh\n", 0755);
  t.write("ctx/tool/shell.exec", "#!/bin/sh\n", 0755);
  t.write("ctx/model/debug/echo", "#!/bin/sh\n", 0755);
  t.mkdir("ctx/shared/project-a");
  t.mkdir("ro");
  t.write("ctx/agent/coder.d/path", "/ctx/tool\n");
  t.write("ctx/agent/coder.d/policy",
          "allow coder_t tool:fs.raed execute\n"
          "allow coder_t model:debug/ecko use\n"
          "allow coder_t shared:project-b read\n"
          "allow coder_t tool:shell.exec execute\n"
          "allow coder_t network:default connect\n"
          "allow coder_t tool:zzz execute\n");
  t.write("ctx/agent/coder.d/mount", t / "ro" + "\t/ro\tro\tbind\n" + t / "ctx" + "\t/ro/inner\trw\tbind\n" +
                                         "/nonexistent\t/n\tro\tbind\n/run/docker.sock\t/docker.sock\tro\tbind\n");
  auto r = ctx::test::run_command({ctx::test::built("ctx/ctx"), "check", "--ctx-root", t / "ctx", "coder"});
  CHECK(r.exit_code == 1);  // the missing sources: a launch would refuse them
  // The socket is flagged whether or not this machine runs a container engine.
  const bool docker = ::access("/run/docker.sock", F_OK) == 0;
  std::string docker_error =
      docker ? "" : "coder.d/mount:4: /run/docker.sock -> /docker.sock: open /run/docker.sock: ENOENT\n";
  char risk[4][200];
  std::snprintf(risk[0], sizeof risk[0], "risk %-6s %-44s %s", "high", "tool:shell.exec execute", "coder.d/policy:4");
  std::snprintf(risk[1], sizeof risk[1], "risk %-6s %-44s %s", "high", "network:default connect", "coder.d/policy:5");
  std::snprintf(risk[2], sizeof risk[2], "risk %-6s %-44s %s", "high",
                ("rw mount " + t / "ctx" + " -> /ro/inner on " + fs_type_of(t / "ctx")).c_str(), "coder.d/mount:2");
  std::snprintf(risk[3], sizeof risk[3], "risk %-6s %-44s %s", "high", "ro mount /run/docker.sock -> /docker.sock",
                "coder.d/mount:4");
  CHECK(r.out ==
        "warning: coder.d/policy:1: tool:fs.raed: no such tool in the agent's CTX_PATH; did you mean fs.read?\n"
        "warning: coder.d/policy:2: model:debug/ecko: no such model in " +
            t / "ctx" + "/home/1000/model or " + t / "ctx" +
            "/model; did you mean debug/echo?\n"
            "warning: coder.d/policy:3: shared:project-b: no such shared space in " +
            t / "ctx" +
            "/shared; did you mean project-a?\n"
            "warning: coder.d/policy:6: tool:zzz: no such tool in the agent's CTX_PATH (the rule is inert)\n"
            "warning: coder.d/mount:2: rw mount /ro/inner lies under the read-only /ro (line 1) and its mount point " +
            t / "ro" + "/inner does not exist; create it there\n" +
            // Its policy has no mount rule: every line is an error (and the
            // rest of the launch is still checked).
            "coder.d/mount:1: EACCES: ro mount " + t / "ro" +
            " -> /ro needs 'allow coder_t mount:/ro read' in coder.d/policy; add the rule or remove the line\n"
            "coder.d/mount:2: EACCES: rw mount " +
            t / "ctx" +
            " -> /ro/inner needs 'allow coder_t mount:/ro/inner read' in coder.d/policy; add the rule or remove the "
            "line\n"
            "coder.d/mount:3: EACCES: ro mount /nonexistent -> /n needs 'allow coder_t mount:/n read' in "
            "coder.d/policy; add the rule or remove the line\n"
            "coder.d/mount:4: EACCES: ro mount /run/docker.sock -> /docker.sock needs 'allow coder_t "
            "mount:/docker.sock read' in coder.d/policy; add the rule or remove the line\n" +
            docker_error + "coder.d/mount:3: /nonexistent -> /n: open /nonexistent: ENOENT\n" + std::string(risk[0]) +
            "\n" + risk[1] + "\n" + risk[2] + "\n" + risk[3] + "\n" + "risk low    6 more grants\n" +
            (docker ? "5 errors" : "6 errors") + ", 5 warnings\n");
}

TEST_CASE("ctx explain names the allowing rule or the missing one", "[fs]") {
  ctx::test::TempDir t;
  for (const auto& [k, v] : base_files()) t.write("ctx/agent/coder.d/" + k, v);
  t.write("ctx/agent/coder.d/policy", "allow coder_t tool:fs.read execute\nallow coder_t model:debug/echo use\n");
  std::string ctx = ctx::test::built("ctx/ctx");
  auto ok = ctx::test::run_command({ctx, "explain", "--ctx-root", t / "ctx", "coder", "model:debug/echo", "use"});
  CHECK(ok.exit_code == 0);
  CHECK(
      ok.out ==
      "coder model:debug/echo use: allowed\n  agent policy: allowed by policy line 2: allow coder_t model:debug/echo use\n"
      "  enforced: " +
          std::string(ctx::policy::enforcement_note(ctx::policy::Class::model, "use")) + "\n");
  auto no = ctx::test::run_command({ctx, "explain", "--ctx-root", t / "ctx", "coder", "network:default", "connect"});
  CHECK(no.exit_code == 1);
  CHECK(no.out ==
        "coder network:default connect: denied\n  agent policy: denied: no rule 'allow coder_t network:default "
        "connect' (policy v0 is default deny)\n  enforced: enforced by the launcher at plan time: without it the "
        "sandbox gets a network namespace of its own with loopback only\n");
  // A tool the policy allows but the sandbox cannot see (no mount of /ctx).
  auto hidden = ctx::test::run_command({ctx, "explain", "--ctx-root", t / "ctx", "coder", "tool:fs.read", "execute"});
  CHECK(hidden.exit_code == 1);
  CHECK(hidden.out ==
        "coder tool:fs.read execute: denied\n  lookup: no executable fs.read in CTX_PATH as the sandbox sees it\n"
        "  agent policy: allowed by policy line 1: allow coder_t tool:fs.read execute\n  enforced: " +
            std::string(ctx::policy::enforcement_note(ctx::policy::Class::tool, "execute")) + "\n");
  auto bad = ctx::test::run_command({ctx, "explain", "--ctx-root", t / "ctx", "coder", "file:x", "read"});
  CHECK(bad.exit_code == 2);
  CHECK(bad.err ==
        "ctx explain: file:x read: EINVAL: unknown class 'file' (classes: tool, model, shared, session, mount, "
        "agent, network)\n");
}

TEST_CASE("ctx explain shows the four layers of a tool", "[fs]") {
  const char* src = std::getenv("CTX_SOURCE_ROOT");
  REQUIRE(src != nullptr);
  ctx::test::TempDir d;
  std::string uid = std::to_string(::getuid()), gid = std::to_string(::getgid());
  REQUIRE(ctx::test::run_command({std::string(src) + "/scripts/install-example", d.path(), uid, gid}).exit_code == 0);
  std::string root = d / "ctx";
  ::chmod((root + "/tool/fs.write").c_str(), 0744);  // executable by its owner only
  std::string ctx = ctx::test::built("ctx/ctx");
  auto r = ctx::test::run_command({ctx, "explain", "--ctx-root", root, "reviewer", "tool:fs.write", "execute"});
  CHECK(r.exit_code == 1);
  CHECK(r.out ==
        "reviewer tool:fs.write execute: denied\n"
        "  lookup: /ctx/tool/fs.write (host " +
            root +
            "/tool/fs.write)\n"
            "  mount: exec allowed: " +
            root +
            " -> /ctx (reviewer.d/mount:2)\n"
            "  mode bits: executable for uid " +
            uid + " (mode 0744, owner " + uid + ":" + gid +
            ")\n"
            "  agent policy: denied: no rule 'allow reviewer_t tool:fs.write execute' (policy v0 is default deny)\n"
            "  tool policy: none (the tool adds no restriction)\n  enforced: " +
            std::string(ctx::policy::enforcement_note(ctx::policy::Class::tool, "execute")) + "\n");
  auto s = ctx::test::run_command({ctx, "explain", "--ctx-root", root, "coder", "tool:shell.exec", "execute"});
  CHECK(s.exit_code == 0);
  CHECK(s.out.find("  tool policy: allowed by shell.exec.d/policy line 1\n") != std::string::npos);
}

TEST_CASE("ctx check finds a model where a call finds it: the owner's user tier and its aliases", "[fs]") {
  ctx::test::TempDir t;
  for (const auto& [k, v] : base_files()) t.write("ctx/agent/coder.d/" + k, v);
  make_launchable(t, "coder");
  const std::string home = "ctx/home/" + std::string("1000") + "/model/";
  t.write(home + "local/llm", "#!/bin/sh\n", 0755);
  REQUIRE(::symlink(("/ctx/home/" + std::string("1000") + "/model/local/llm").c_str(),
                    (t / home + "main").c_str()) == 0);
  t.write("ctx/agent/coder.d/policy",
          "allow coder_t model:local/llm use\n"
          "allow coder_t model:main use\n"
          "allow coder_t model:local/lm use\n");
  auto r = ctx::test::run_command({ctx::test::built("ctx/ctx"), "check", "--ctx-root", t / "ctx", "coder"});
  INFO(r.out << r.err);
  // The user tier's model and its alias are found; a misspelling is still
  // named, with the user tier's name as the suggestion.
  CHECK(r.out.find("model:local/llm:") == std::string::npos);
  CHECK(r.out.find("model:main:") == std::string::npos);
  CHECK(r.out.find("warning: coder.d/policy:3: model:local/lm: no such model in " + t / "ctx" + "/home/" +
                   std::string("1000") + "/model or " + t / "ctx" + "/model; did you mean local/llm?\n") !=
        std::string::npos);
}

TEST_CASE("ctx check --json gives the same findings as one document", "[fs]") {
  ctx::test::TempDir t;
  for (const auto& [k, v] : base_files()) t.write("ctx/agent/coder.d/" + k, v);
  make_launchable(t, "coder");
  // No /ctx mount: the runtime the launch runs is the root's own.
  t.write("ctx/agent/coder.d/mount", "/usr\t/usr\tro\trbind\n");
  t.write("ctx/home/1000/agent/coder/root/ctx/agent/coder", "#!/bin/sh\n", 0755);
  t.write("ctx/agent/coder.d/policy",
          "allow coder_t tool:shell.exec execute\nallow coder_t tool:fs.raed execute\nallow coder_t mount:/usr read\n");
  t.write("ctx/tool/shell.exec", "#!/bin/sh\n", 0755);
  t.write("ctx/tool/fs.read", "#!/bin/sh\n", 0755);
  t.write("ctx/agent/bad.d/owner", "x\n");
  auto r = ctx::test::run_command({ctx::test::built("ctx/ctx"), "check", "--ctx-root", t / "ctx", "--all", "--json"});
  CHECK(r.exit_code == 1);
  auto doc = nlohmann::json::parse(r.out);
  REQUIRE(doc["agents"].size() == 2);
  CHECK(doc["errors"] == 1);
  CHECK(doc["warnings"] == 1);
  const auto& bad = doc["agents"][0];
  CHECK(bad["name"] == "bad");
  CHECK(bad["ok"] == false);
  CHECK(bad["errors"][0] ==
        "bad.d/owner:1:1: EINVAL: owner must be a decimal number from 0 to 4294967294, without sign or leading zeros");
  const auto& coder = doc["agents"][1];
  CHECK(coder["ok"] == true);
  CHECK(coder["warnings"][0] ==
        "coder.d/policy:2: tool:fs.raed: no such tool in the agent's CTX_PATH; did you mean fs.read?");
  REQUIRE(coder["risk"].size() == 4);
  CHECK(coder["risk"][0] ==
        nlohmann::json{{"tier", "high"}, {"grant", "tool:shell.exec execute"}, {"where", "coder.d/policy:1"}});
  CHECK(coder["risk"][1]["tier"] == "low");
  CHECK(coder["risk"][3] == nlohmann::json{{"tier", "low"},
                                           {"grant", "ro mount /usr -> /usr on " + fs_type_of("/usr")},
                                           {"where", "coder.d/mount:1"}});
}

// Control-file text with ESC, BEL and U+202E (RIGHT-TO-LEFT OVERRIDE) is
// never echoed raw by ctx check or the launcher. The parsers refuse the
// control characters without quoting them; a bidi override passes them
// and is quoted, escaped.
TEST_CASE("hostile control-file text is escaped in every message", "[fs]") {
  ctx::test::TempDir t;
  for (const auto& [k, v] : base_files()) t.write("ctx/agent/coder.d/" + k, v);
  const std::string rlo = "\xe2\x80\xae";
  auto raw = [&](const std::string& s) {
    return s.find('\x1b') != std::string::npos || s.find('\x07') != std::string::npos ||
           s.find(rlo) != std::string::npos;
  };
  std::string ctx = ctx::test::built("ctx/ctx");
  std::string run = ctx::test::built("launcher/ctx-agent-run");
  // ESC and BEL: refused, never echoed.
  t.write("ctx/agent/coder.d/mount", "/srv/\x1b[2J\x07\t/x\tro\tbind\n");
  t.write("ctx/agent/coder.d/label", "coder_t\x1b[2J\n");
  auto check = ctx::test::run_command({ctx, "check", "--ctx-root", t / "ctx", "coder"});
  INFO(check.out);
  CHECK(check.exit_code == 1);
  CHECK_FALSE(raw(check.out + check.err));
  auto launch = ctx::test::run_command({run, "--ctx-root", t / "ctx", "coder"});
  CHECK(launch.exit_code == 125);
  CHECK_FALSE(raw(launch.out + launch.err));
  // U+202E in a mount source: quoted by the lint and by the launch, escaped.
  t.write("ctx/agent/coder.d/label", "coder_t\n");
  t.write("ctx/agent/coder.d/mount", "/srv/evil" + rlo + "txt.sh\t/x\tro\tbind\n");
  check = ctx::test::run_command({ctx, "check", "--ctx-root", t / "ctx", "coder"});
  INFO(check.out);
  CHECK_FALSE(raw(check.out + check.err));
  CHECK(check.out.find("open /srv/evil\\u{202e}txt.sh: ENOENT") != std::string::npos);
  auto json_out = ctx::test::run_command({ctx, "check", "--json", "--ctx-root", t / "ctx", "coder"});
  CHECK_FALSE(raw(json_out.out + json_out.err));
  CHECK(json_out.out.find("\\u202e") != std::string::npos);
  // The launcher prints every error through the same escaping.
  launch = ctx::test::run_command({run, "--ctx-root", t / "ctx", "--session", "s" + rlo, "coder"});
  INFO(launch.err);
  CHECK(launch.exit_code == 2);
  CHECK_FALSE(raw(launch.out + launch.err));
  CHECK(launch.err.find("--session s\\u{202e}: ") != std::string::npos);
  auto dry = ctx::test::run_command({run, "--dry-run", "--ctx-root", t / "ctx", "coder"});
  CHECK_FALSE(raw(dry.out + dry.err));
}

// What a launch refuses since roots and sources are opened without
// following links, and a root must not show another part of the CTX tree:
// ctx check says it first, with the same fix.
TEST_CASE("ctx check refuses a root or a source reached through a link, and a root in another agent's home", "[fs]") {
  ctx::test::TempDir t;
  for (const auto& [k, v] : base_files()) t.write("ctx/agent/coder.d/" + k, v);
  t.mkdir("real");
  REQUIRE(::symlink((t / "real").c_str(), (t / "link").c_str()) == 0);
  t.write("ctx/agent/coder.d/root", t / "link" + "\n");
  t.write("ctx/agent/coder.d/mount", t / "link" + "\t/data\tro\tbind\n");
  auto r = ctx::test::run_command({ctx::test::built("ctx/ctx"), "check", "--ctx-root", t / "ctx", "coder"});
  INFO(r.out);
  CHECK(r.exit_code != 0);
  // The launch's own messages (launcher/sandbox/preflight.hpp runs its code).
  CHECK(r.out.find("coder.d/mount:1: " + t / "link" + " -> /data: source " + t / "link" +
                   ": ELOOP: reaches through a symbolic link, which a launch never follows") != std::string::npos);
  CHECK(r.out.find("coder.d/root: root " + t / "link" + ": ELOOP: reaches through a symbolic link") !=
        std::string::npos);
  t.mkdir("ctx/home/1000/agent/other/root");
  t.write("ctx/agent/coder.d/root", t / "ctx/home/1000/agent/other/root" + "\n");
  t.write("ctx/agent/coder.d/mount", "/usr\t/usr\tro\trbind\n");
  r = ctx::test::run_command({ctx::test::built("ctx/ctx"), "check", "--ctx-root", t / "ctx", "coder"});
  INFO(r.out);
  CHECK(r.exit_code != 0);
  CHECK(r.out.find("lies in the CTX tree outside the agent's own home") != std::string::npos);
}
