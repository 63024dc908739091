// `meson install` (issue 13): the programs (stripped when the build says
// so, as the project's default does), the man pages, the completion, the
// systemd unit and the AppArmor profile naming the installed launcher.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "test/support/launch.hpp"
#include "test/support/tempdir.hpp"

TEST_CASE("meson install puts the programs, man pages, completion, unit and profile in place", "[fs]") {
  const char* build = std::getenv("CTX_BUILD_ROOT");
  REQUIRE(build != nullptr);
  ctx::test::TempDir d;
  auto r = ctx::test::run_command(
      {"/usr/bin/env", "meson", "install", "-C", build, "--no-rebuild", "--quiet", "--destdir", d.path()}, std::nullopt,
      120);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  std::string prefix, apparmor_dir, libexecdir;
  bool strip = false;
  for (const auto& o :
       nlohmann::json::parse(ctx::test::read_file(std::string(build) + "/meson-info/intro-buildoptions.json"))) {
    if (o["name"] == "prefix") prefix = o["value"];
    if (o["name"] == "apparmor_dir") apparmor_dir = o["value"];
    if (o["name"] == "libexecdir") libexecdir = o["value"];
    if (o["name"] == "strip") strip = o["value"];
  }
  REQUIRE(!prefix.empty());
  // Where AppArmor loads profiles from, whatever the prefix (and where
  // docs/install.md tells a person to load it from).
  CHECK(apparmor_dir == "/etc/apparmor.d");
  const std::string root = d.path() + prefix;
  for (const std::string f : {"/bin/ctx-agent-run", "/bin/ctx"}) {
    INFO(f);
    struct stat st {};
    REQUIRE(::stat((root + f).c_str(), &st) == 0);
    CHECK((st.st_mode & 0111) != 0);
    CHECK((st.st_mode & (S_ISUID | S_ISGID)) == 0);  // setuid-free
    auto v = ctx::test::run_command({root + f, "--version"});
    CHECK(v.exit_code == 0);
    CHECK(v.out.find("0.1.0") != std::string::npos);
    // Stripped: no debug sections left (the build tree keeps them).
    if (strip) CHECK(ctx::test::read_file(root + f).find(".debug_info") == std::string::npos);
  }
  // The forwarding model driver that model entries exec (docs/agents.md),
  // and the small program `ctx init` installs as a tree's bin/ctx.
  for (const std::string f : {"ctx-model-forward", "ctx-call"}) {
    struct stat st {};
    const std::string path = root + "/" + libexecdir + "/ctx-agent-run/" + f;
    INFO(path);
    REQUIRE(::stat(path.c_str(), &st) == 0);
    CHECK((st.st_mode & 0111) != 0);
    CHECK((st.st_mode & (S_ISUID | S_ISGID)) == 0);
  }
  // The example tree and its installer, for the demo.
  CHECK(std::filesystem::is_symlink(root + "/share/ctx-agent-run/examples/ctx/model/main"));
  CHECK(::access((root + "/share/ctx-agent-run/examples/ctx/agent/coder").c_str(), X_OK) == 0);
  CHECK(::access((root + "/share/ctx-agent-run/install-example").c_str(), X_OK) == 0);
  for (const std::string f :
       {"/share/man/man1/ctx-agent-run.1", "/share/man/man1/ctx.1", "/share/bash-completion/completions/ctx-agent-run",
        "/share/bash-completion/completions/ctx", "/share/doc/ctx-agent-run/quickstart.md",
        "/share/ctx-agent-run/apparmor/ctx-agent-run-container", "/share/ctx-agent-run/seccomp/ctx-agent-run.json"})
    CHECK(std::filesystem::is_regular_file(root + f));
  const std::string unit = ctx::test::read_file(root + "/lib/systemd/system/agent@.service");
  CHECK(unit.find("\nExecStart=" + prefix + "/bin/ctx-agent-run %i\n") != std::string::npos);
  const std::string profile = ctx::test::read_file(d.path() + apparmor_dir + "/ctx-agent-run");
  CHECK(ctx::test::read_file(std::string(std::getenv("CTX_SOURCE_ROOT")) + "/docs/install.md")
            .find("apparmor_parser -r " + apparmor_dir + "/ctx-agent-run") != std::string::npos);
  CHECK(profile.find("\nprofile ctx-agent-run " + prefix + "/bin/ctx-agent-run ") != std::string::npos);
  CHECK(ctx::test::read_file(root + "/share/man/man1/ctx.1").find(".TH CTX 1") == 0);
  // The man pages name the directory the documents went to.
  for (const std::string page : {"ctx.1", "ctx-agent-run.1"}) {
    INFO(page);
    CHECK(ctx::test::read_file(root + "/share/man/man1/" + page)
              .find("The documents in \\fI" + prefix + "/share/doc/ctx-agent-run/\\fR") != std::string::npos);
  }
  CHECK(std::filesystem::is_regular_file(root + "/share/doc/ctx-agent-run/security.md"));
}
