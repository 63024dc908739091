// launcher/sandbox/preflight.hpp: why a runtime that exists does not run (pure),
// and where the planned sandbox shows an inner path.
#include <catch2/catch.hpp>

#include <optional>
#include <set>
#include <string>

#include "launcher/plan/plan.hpp"
#include "launcher/sandbox/preflight.hpp"
#include "test/support/tempdir.hpp"

using ctx::launcher::elf_interpreter;
using ctx::launcher::runtime_issue;

namespace {

// A sandbox that has `files`; the host's files unknown (as inside the
// sandbox), or `host`.
ctx::launcher::RuntimeLookup has(std::set<std::string> files,
                                 std::optional<std::set<std::string>> host = std::nullopt,
                                 std::string path = "/usr/local/bin:/usr/bin:/bin") {
  ctx::launcher::RuntimeLookup l;
  l.in_sandbox = [files = std::move(files)](const std::string& p) { return files.count(p) > 0; };
  if (host) l.on_host = [h = std::move(*host)](const std::string& p) { return h.count(p) > 0; };
  l.path = std::move(path);
  return l;
}

}  // namespace

TEST_CASE("runtime_issue names a missing #! interpreter, CR line ends and a missing ELF loader", "[unit]") {
  auto crlf = runtime_issue("/ctx/agent/a", "/h/a", "#!/bin/sh\r\necho hi\r\n", "/r", has({"/bin/sh"}));
  REQUIRE(crlf);
  CHECK(crlf->code == ENOENT);
  CHECK(crlf->msg ==
        "runtime /ctx/agent/a: its #! line ends in CR (DOS line ends), so the kernel looks for an interpreter whose "
        "name ends in CR; convert it: sed -i 's/\\r$//' /h/a");
  auto missing = runtime_issue("/ctx/agent/a", "/h/a", "#!/bin/sh -e\necho\n", "/r", has({}));
  REQUIRE(missing);
  CHECK(missing->msg ==
        "runtime /ctx/agent/a: #!/bin/sh: /bin/sh not found in the sandbox; the root /r needs the merged-/usr links "
        "(ln -s usr/bin /r/bin, and likewise sbin, lib, lib64) and a mount of /usr, or a mount that shows it");
  CHECK_FALSE(runtime_issue("/a", "/h/a", "#! /bin/sh\n", "/r", has({"/bin/sh"})));
  CHECK_FALSE(runtime_issue("/a", "/h/a", "#!\n", "/r", has({})));
  CHECK_FALSE(runtime_issue("/a", "/h/a", "echo no interpreter line\n", "/r", has({})));
  // A real ELF executable of this machine names its loader.
  std::string head = ctx::test::read_file("/usr/bin/true").substr(0, 4096);
  std::string loader = elf_interpreter(head);
  CHECK(loader.rfind("/lib", 0) == 0);
  CHECK_FALSE(runtime_issue("/usr/bin/true", "/usr/bin/true", head, "/r", has({loader})));
  auto no_loader = runtime_issue("/usr/bin/true", "/usr/bin/true", head, "/r", has({}));
  REQUIRE(no_loader);
  CHECK(no_loader->msg.find("its loader " + loader + " is not found in the sandbox") != std::string::npos);
  // Cut or foreign headers name nothing.
  CHECK(elf_interpreter(head.substr(0, 40)).empty());
  CHECK(elf_interpreter("\177ELF").empty());
  CHECK(elf_interpreter(std::string(64, '\0')).empty());
}

// Before: a missing interpreter was always blamed on the mounts, even
// when the host had none either, and `#!/usr/bin/env NAME` passed ctx
// check whatever NAME was.
TEST_CASE("runtime_issue: an interpreter the host lacks too, and #!/usr/bin/env NAME looked up in PATH", "[unit]") {
  const std::string usr =
      "the root /r needs the merged-/usr links (ln -s usr/bin /r/bin, and likewise sbin, lib, lib64) and a mount "
      "of /usr, or a mount that shows it";
  auto nowhere = runtime_issue("/a", "/h/a", "#!/usr/bin/python9\n", "/r", has({}, std::set<std::string>{}));
  REQUIRE(nowhere);
  CHECK(nowhere->msg ==
        "runtime /a: #!/usr/bin/python9: /usr/bin/python9 not found in the sandbox; the host has no "
        "/usr/bin/python9 either: install it, or change the #! line of /h/a");
  auto unmounted =
      runtime_issue("/a", "/h/a", "#!/usr/bin/python3\n", "/r", has({}, std::set<std::string>{"/usr/bin/python3"}));
  REQUIRE(unmounted);
  // The host has it: a mount is missing, in the words a launch uses too.
  CHECK(unmounted->msg == "runtime /a: #!/usr/bin/python3: /usr/bin/python3 not found in the sandbox; " + usr);
  // env: NAME through the sandbox's PATH; options and assignments skipped.
  CHECK_FALSE(runtime_issue("/a", "/h/a", "#!/usr/bin/env python3\n", "/r",
                            has({"/usr/bin/env", "/usr/bin/python3"}, std::set<std::string>{})));
  CHECK_FALSE(runtime_issue("/a", "/h/a", "#!/usr/bin/env -S LANG=C python3 -u\n", "/r",
                            has({"/usr/bin/env", "/usr/bin/python3"}, std::set<std::string>{})));
  auto no_name = runtime_issue("/a", "/h/a", "#!/usr/bin/env nosuchinterp\n", "/r",
                               has({"/usr/bin/env"}, std::set<std::string>{"/usr/bin/env"}));
  REQUIRE(no_name);
  CHECK(no_name->code == ENOENT);
  CHECK(no_name->msg ==
        "runtime /a: #!/usr/bin/env nosuchinterp: nosuchinterp is in none of the sandbox's PATH directories "
        "(/usr/local/bin:/usr/bin:/bin); the host has no nosuchinterp either: install it, or change the #! line of "
        "/h/a");
  auto on_host = runtime_issue("/a", "/h/a", "#!/usr/bin/env node\n", "/r",
                               has({"/usr/bin/env"}, std::set<std::string>{"/usr/local/bin/node"}));
  REQUIRE(on_host);
  CHECK(on_host->msg == "runtime /a: #!/usr/bin/env node: node is in none of the sandbox's PATH directories "
                        "(/usr/local/bin:/usr/bin:/bin); the host has /usr/local/bin/node: " + usr);
  // Inside the sandbox (the host unknown): the mounts' words, as before.
  auto inside = runtime_issue("/a", "/h/a", "#!/usr/bin/env node\n", "/r", has({"/usr/bin/env"}));
  REQUIRE(inside);
  CHECK(inside->msg.find("node is in none of the sandbox's PATH directories (/usr/local/bin:/usr/bin:/bin); " + usr) !=
        std::string::npos);
}
