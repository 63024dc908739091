// ctx-agent-run with the CTX root on a small tmpfs that fills up
// (docs/launcher.md, "Full disks"): a launch that cannot write its start
// records is refused with ENOSPC and changes nothing; writes that fail
// once the runtime runs are warnings, said once per file; every status and
// pid file holds a whole value and every line of log and events.jsonl is
// whole JSON; once space is freed the next launch succeeds.
//
// The tmpfs lives in a mount namespace of a helper process (the host's
// mounts stay untouched, and the tmpfs goes with the helper however the
// test ends); launches enter that namespace, and the test reaches the
// files through /proc/<helper>/root. Every TEST_CASE runs twice: launched
// by root (a privileged launch) and by the unprivileged test user.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "test/support/launch.hpp"
#include "test/support/namespaces.hpp"
#include "test/support/tempdir.hpp"

using ctx::test::CtxTree;
using ctx::test::RunResult;
using ctx::test::write_file;
using nlohmann::json;

namespace {

constexpr std::size_t kPage = 4096;

// A tmpfs of `size` over the tree's CTX root (its content copied in), in
// the mount namespace of a helper that lives as long as this object; for
// an unprivileged runner, in a user namespace of the helper's own too
// (its ids mapped to themselves), which launches join as well.
class FullDisk {
 public:
  FullDisk(const CtxTree& t, const std::string& size) : ctx_root_(t.root()), own_userns_(::geteuid() != 0) {
    const std::string stage = t.root() + ".stage";
    REQUIRE(ctx::test::run_command({"/bin/cp", "-a", t.root(), stage}).exit_code == 0);
    const std::string opts =
        "size=" + size + ",mode=0755" +
        (own_userns_ ? std::string()
                     : ",uid=" + std::to_string(t.owner().uid) + ",gid=" + std::to_string(t.owner().gid));
    const bool userns = own_userns_;
    const std::string root = t.root();
    const uid_t uid = ::geteuid();
    const gid_t gid = ::getegid();
    // mount(2) itself: mount(8) refuses a caller that is not root by uid.
    auto mount_tmpfs = [=]() {
      if (userns) {
        if (::unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0) return false;
        if (!write_file("/proc/self/setgroups", "deny") ||
            !write_file("/proc/self/uid_map", std::to_string(uid) + " " + std::to_string(uid) + " 1") ||
            !write_file("/proc/self/gid_map", std::to_string(gid) + " " + std::to_string(gid) + " 1"))
          return false;
      } else if (::unshare(CLONE_NEWNS) < 0) {
        return false;
      }
      return ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0 &&
             ::mount("fulldisk", root.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, opts.c_str()) == 0;
    };
    holder_ = ctx::test::spawn_command(
        {"/bin/sh", "-c",
         "set -e; cp -a " + stage + "/. " + root + "/; rm -rf " + stage + "; echo ready; exec sleep 600"},
        std::nullopt, {}, mount_tmpfs);
    std::string line;
    char c;
    while (::read(holder_.out_fd, &c, 1) == 1 && c != '\n') line += c;
    if (line != "ready") {
      RunResult r = ctx::test::wait_command(holder_, 5);
      throw std::runtime_error("the tmpfs could not be mounted (exit " + std::to_string(r.exit_code) + "): " + r.err);
    }
  }
  FullDisk(const FullDisk&) = delete;
  FullDisk& operator=(const FullDisk&) = delete;
  // The namespace, and with it the tmpfs, ends with the helper.
  ~FullDisk() {
    ::kill(-holder_.pid, SIGKILL);
    (void)ctx::test::wait_command(holder_, 10);
  }

  /// rel below the CTX root as the helper's namespace sees it.
  std::string path(const std::string& rel) const {
    return "/proc/" + std::to_string(holder_.pid) + "/root" + ctx_root_ + "/" + rel;
  }

  /// Runs ctx-agent-run as the runner (root: a privileged launch) in the
  /// helper's namespaces.
  RunResult launch(const std::vector<std::string>& args, int timeout_s = 60) const {
    std::vector<std::string> argv{ctx::test::built("launcher/ctx-agent-run"), "--ctx-root", ctx_root_};
    argv.insert(argv.end(), args.begin(), args.end());
    const std::string ns = "/proc/" + std::to_string(holder_.pid) + "/ns/";
    const bool userns = own_userns_;
    return ctx::test::run_command(argv, std::nullopt, timeout_s, {}, [ns, userns]() {
      auto join = [&](const char* name, int type) {
        int fd = ::open((ns + name).c_str(), O_RDONLY | O_CLOEXEC);
        return fd >= 0 && ::setns(fd, type) == 0;
      };
      // The user namespace first: it owns the mount namespace.
      return (!userns || join("user", CLONE_NEWUSER)) && join("mnt", CLONE_NEWNS);
    });
  }

  /// A filler file takes every free page (written a page at a time, so
  /// its size is whole pages).
  void fill() const {
    int fd = ::open(path("filler").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    REQUIRE(fd >= 0);
    const std::string page(kPage, 'f');
    ssize_t n;
    while ((n = ::write(fd, page.data(), page.size())) == static_cast<ssize_t>(page.size())) {
    }
    int err = errno;
    ::close(fd);
    REQUIRE(n < 0);
    REQUIRE(err == ENOSPC);
  }

  /// Gives `pages` pages back.
  void free_pages(std::size_t pages) const {
    struct stat st {};
    REQUIRE(::stat(path("filler").c_str(), &st) == 0);
    REQUIRE(static_cast<std::size_t>(st.st_size) >= pages * kPage);
    REQUIRE(::truncate(path("filler").c_str(), st.st_size - static_cast<off_t>(pages * kPage)) == 0);
  }

 private:
  std::string ctx_root_;
  bool own_userns_;
  ctx::test::Spawned holder_;
};

// Appends one whole JSON line that leaves the file 16 bytes short of a
// page boundary: the next line a launch appends crosses into a new page,
// which a full disk refuses part-way.
void pad_to_page_end(const std::string& path) {
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  std::size_t size = static_cast<std::size_t>(st.st_size);
  std::size_t target = (size / kPage + 1) * kPage - 16;
  if (target < size + 16) target += kPage;
  const std::size_t fill = target - size - std::string("{\"pad\":\"\"}\n").size();
  std::string line = "{\"pad\":\"" + std::string(fill, 'p') + "\"}\n";
  int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  REQUIRE(fd >= 0);
  REQUIRE(::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()));
  ::close(fd);
}

// Every line of a .jsonl file or log ends with a newline and is a JSON
// object.
void check_whole_lines(const std::string& path) {
  INFO(path);
  std::string text = ctx::test::read_file(path);
  REQUIRE(!text.empty());
  CHECK(text.back() == '\n');
  std::istringstream in(text);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    INFO("line " << ++n << ": " << line);
    CHECK(json::accept(line));
    if (json::accept(line)) CHECK(json::parse(line).is_object());
  }
}

// The start records and the files of a finished run are whole values.
void check_agent_files(const FullDisk& disk, const std::string& events_rel) {
  static const std::set<std::string> kStates{"start\n", "ready\n", "busy\n", "idle\n", "stopping\n", "dead\n"};
  std::string status = ctx::test::read_file(disk.path("agent/coder.d/status"));
  INFO("status: " << status);
  CHECK(kStates.count(status) == 1);
  std::string pid = ctx::test::read_file(disk.path("agent/coder.d/pid"));
  INFO("pid: " << pid);
  CHECK(pid.size() >= 2);
  CHECK(pid.find_first_not_of("0123456789") == pid.size() - 1);
  CHECK(pid.back() == '\n');
  check_whole_lines(disk.path("agent/coder.d/log"));
  check_whole_lines(disk.path(events_rel));
  // No temporary file of an atomic replace is left behind.
  for (const auto& n : ctx::test::names_in(disk.path("agent/coder.d"))) {
    INFO(n);
    CHECK(n.find(".tmp.") == std::string::npos);
  }
}

// No warning line is said twice.
void check_said_once(const RunResult& r) {
  std::istringstream in(r.warnings);
  std::set<std::string> seen;
  for (std::string line; std::getline(in, line);) {
    INFO(line);
    CHECK(seen.insert(line).second);
  }
}

std::string session_rel(const CtxTree& t, const std::string& file) {
  return "home/" + std::to_string(t.owner().uid) + "/agent/coder/session/default/" + file;
}

std::string events_rel(const CtxTree& t) {
  return "home/" + std::to_string(t.owner().uid) + "/agent/coder/session/default/events.jsonl";
}

}  // namespace

TEST_CASE("full disk: a launch that cannot write its session or status is refused with ENOSPC and changes nothing",
          "[root][userns]") {
  CtxTree t(ctx::test::launch_mode().owner);
  t.agent("coder");
  FullDisk disk(t, "512k");
  RunResult first = disk.launch({"coder", "--", "/probe", "ids"});
  INFO(first.err << first.warnings);
  REQUIRE(first.exit_code == 0);
  REQUIRE(!first.out.empty());  // the runtime's ids: what a refused launch must not print
  // The next line appended to either file would be cut at a page boundary.
  pad_to_page_end(disk.path("agent/coder.d/log"));
  pad_to_page_end(disk.path(events_rel(t)));
  disk.fill();

  std::map<std::string, std::string> before;
  for (const std::string& f :
       std::vector<std::string>{"agent/coder.d/status", "agent/coder.d/pid", "agent/coder.d/log", events_rel(t),
                                session_rel(t, "state"), session_rel(t, "updated_at")})
    before[f] = ctx::test::read_file(disk.path(f));
  const auto names = ctx::test::names_in(disk.path("agent/coder.d"));
  const auto agent_names = ctx::test::names_in(disk.path("agent"));

  RunResult full = disk.launch({"coder", "--", "/probe", "ids"});
  INFO(full.out << full.err << full.warnings);
  CHECK(full.exit_code == 125);
  // The sandbox was made beside the session's files, but its runtime never ran.
  CHECK(full.out.empty());
  // The session's files come first (docs/launcher.md, "Full disks").
  CHECK(full.err == "ctx-agent-run: " + t.root() + "/" + session_rel(t, "updated_at") +
                        ": ENOSPC: no space left on device; free space on its file system and "
                        "launch again (the agent was not started)\n");
  check_said_once(full);
  for (const auto& [f, content] : before) {
    INFO(f);
    CHECK(ctx::test::read_file(disk.path(f)) == content);
  }
  CHECK(ctx::test::names_in(disk.path("agent/coder.d")) == names);
  CHECK(ctx::test::names_in(disk.path("agent")) == agent_names);
  check_agent_files(disk, events_rel(t));

  // Space freed: the next launch runs and records.
  disk.free_pages(16);
  RunResult again = disk.launch({"coder", "--", "/probe", "ids"});
  INFO(again.err << again.warnings);
  CHECK(again.exit_code == 0);
  CHECK(again.warnings.find("ENOSPC") == std::string::npos);
  CHECK(ctx::test::read_file(disk.path("agent/coder.d/status")) == "dead\n");
  CHECK(ctx::test::read_file(disk.path("agent/coder.d/pid")) != before["agent/coder.d/pid"]);
  check_agent_files(disk, events_rel(t));
}

TEST_CASE("full disk: log and events that fill it mid-run are warned about once; the run ends as usual",
          "[root][userns]") {
  CtxTree t(ctx::test::launch_mode().owner);
  t.agent("coder");
  FullDisk disk(t, "512k");
  REQUIRE(disk.launch({"coder", "--", "/probe", "ids"}).exit_code == 0);
  pad_to_page_end(disk.path("agent/coder.d/log"));
  pad_to_page_end(disk.path(events_rel(t)));
  disk.fill();
  // Room for the start records, not for the run's log: each state change
  // is a status replace and a log line.
  disk.free_pages(2);
  std::vector<std::string> args{"coder", "--", "/probe", "notify:READY=1"};
  for (int i = 0; i < 40; ++i)
    for (const char* s : {"notify:CTX_STATE=busy", "sleep:0.07", "notify:CTX_STATE=idle", "sleep:0.07"})
      args.push_back(s);
  args.push_back("exit:3");
  RunResult r = disk.launch(args, 120);
  INFO(r.out << r.err << r.warnings);
  CHECK(r.exit_code == 3);  // the runtime's own
  CHECK(r.err.empty());
  CHECK(r.warnings.find("ctx-agent-run: warning: " + t.root() +
                        "/agent/coder.d/log: ENOSPC: no space left on device; free space on its file system: until "
                        "then its new lines are dropped (the lines in it stay whole) and the agent keeps running "
                        "(said once)\n") != std::string::npos);
  check_said_once(r);
  check_agent_files(disk, events_rel(t));
  std::string log = ctx::test::read_file(disk.path("agent/coder.d/log"));
  CHECK(log.find("\"type\":\"agent.start\"") != std::string::npos);

  disk.free_pages(64);
  RunResult again = disk.launch({"coder", "--", "/probe", "ids"});
  INFO(again.err << again.warnings);
  CHECK(again.exit_code == 0);
  CHECK(ctx::test::read_file(disk.path("agent/coder.d/status")) == "dead\n");
  check_agent_files(disk, events_rel(t));
  std::string events = ctx::test::read_file(disk.path(events_rel(t)));
  CHECK(events.rfind("\"type\":\"agent.stop\"") != std::string::npos);
}
