// The supervisor's sockets: never named on the host, serving only peers
// inside the sandbox, and no runtime directory another user can plant.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "test/support/launch.hpp"
#include "test/support/tempdir.hpp"

using ctx::test::CtxTree;
using ctx::test::init_pid_of;
using ctx::test::probe;
using ctx::test::RunResult;
using ctx::test::TestUser;
using nlohmann::json;

namespace {

using Mode = ctx::test::LaunchMode;
constexpr auto mode = ctx::test::launch_mode;

// The unix sockets a process holds, as "path" (empty for unnamed) by
// inode, from its own network namespace's /proc/<pid>/net/unix.
std::vector<std::string> named_sockets_of(int pid) {
  std::set<std::string> inodes;
  for (const auto& fd : ctx::test::names_in("/proc/" + std::to_string(pid) + "/fd")) {
    char buf[64];
    ssize_t n = ::readlink(("/proc/" + std::to_string(pid) + "/fd/" + fd).c_str(), buf, sizeof buf - 1);
    if (n <= 0) continue;
    std::string l(buf, static_cast<std::size_t>(n));
    if (l.rfind("socket:[", 0) == 0) inodes.insert(l.substr(8, l.size() - 9));
  }
  std::vector<std::string> out;
  std::istringstream in(ctx::test::read_file("/proc/" + std::to_string(pid) + "/net/unix"));
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string num, refs, proto, flags, type, st, inode, path;
    f >> num >> refs >> proto >> flags >> type >> st >> inode >> path;
    if (inodes.count(inode) != 0 && !path.empty()) out.push_back(path);
  }
  return out;
}

int supervisor_pid(const CtxTree& t) { return std::stoi(ctx::test::read_file(t.root() + "/agent/coder.d/pid")); }

}  // namespace

// The supervisor's notify and control sockets are bound inside the
// sandbox and handed over: no name of theirs ever exists on the host,
// where another agent of the same uid could connect in the launch window.
TEST_CASE("the supervisor's sockets never have a host name", "[root][userns]") {
  Mode m = mode();
  CtxTree t(m.owner);
  t.agent("coder");
  std::string token = "sleep:28." + std::to_string(::getpid());
  auto sp = t.spawn({"coder", "--", "/probe", "notify:READY=1", "exists:/run/ctx/supervisor", token}, m.as);
  REQUIRE(ctx::test::wait_for_file(t.root() + "/agent/coder.d/status", "ready\n"));
  // The supervisor holds no named socket (the agent socket went to the
  // sandbox as fd 3).
  CHECK(named_sockets_of(supervisor_pid(t)).empty());
  // Nothing under the places a runtime directory used to be.
  CHECK_FALSE(std::filesystem::exists("/tmp/ctx-agent-run-" + std::to_string(m.as.uid) + "/" + "coder"));
  ::kill(sp.pid, SIGTERM);
  RunResult r = ctx::test::wait_command(sp, 30);
  CHECK(r.exit_code == 128 + SIGTERM);
}

// Root can still reach a sandbox's sockets through /proc/<pid>/root: the
// supervisor answers only peers in the sandbox.
TEST_CASE("a peer outside the sandbox is not served by the supervisor", "[root]") {
  auto u = ctx::test::test_user();
  REQUIRE(u);
  for (const TestUser& as : {TestUser{0, 0, "root"}, *u}) {
    INFO("launched by " << as.name);
    CtxTree t(*u);
    t.agent("coder", {{"policy", "allow coder_t agent:x create\n"}});
    auto sp = ctx::test::spawn_command({ctx::test::built("launcher/ctx-agent-run"), "--ctx-root", t.root(),
                                        "--json-status-fd", "1", "coder", "--", "/probe", "sleep:30"},
                                       as);
    int init = init_pid_of(sp);
    std::string run_ctx = "/proc/" + std::to_string(init) + "/root/run/ctx/";
    // The control socket: connected, then closed unanswered.
    int s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(s >= 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::string path = run_ctx + "supervisor";
    REQUIRE(path.size() < sizeof a.sun_path);
    std::memcpy(a.sun_path, path.c_str(), path.size());
    REQUIRE(::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    std::string req = "{\"op\":\"create\",\"name\":\"x\"}\n";
    (void)::send(s, req.data(), req.size(), MSG_NOSIGNAL);
    timeval tv{5, 0};
    ::setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char buf[256];
    ssize_t got = ::read(s, buf, sizeof buf);
    int err = errno;
    INFO("read " << got << " errno " << err << " " << std::string(buf, got > 0 ? static_cast<std::size_t>(got) : 0));
    // Closed unanswered: EOF, or ECONNRESET when the request was still
    // unread in the supervisor's queue as it closed.
    CHECK((got == 0 || (got < 0 && err == ECONNRESET)));
    ::close(s);
    CHECK_FALSE(std::filesystem::exists(t.root() + "/agent/x.d"));
    // NOTIFY_SOCKET: READY=1 from outside changes nothing.
    int d = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    path = run_ctx + "notify";
    std::memset(a.sun_path, 0, sizeof a.sun_path);
    std::memcpy(a.sun_path, path.c_str(), path.size());
    CHECK(::sendto(d, "READY=1", 7, 0, reinterpret_cast<sockaddr*>(&a), sizeof a) == 7);
    ::close(d);
    ::usleep(300000);
    CHECK(t.dir().read("ctx/agent/coder.d/status") == "start\n");
    ::kill(sp.pid, SIGTERM);
    ctx::test::wait_command(sp, 30);
  }
}

// A runtime directory another user planted (the old /tmp location, or an
// XDG_RUNTIME_DIR that is not the caller's) neither blocks nor is used.
TEST_CASE("a planted runtime directory does not block a launch", "[root]") {
  auto u = ctx::test::test_user();
  REQUIRE(u);
  ctx::test::TempDir planted;
  REQUIRE(::chmod(planted.path().c_str(), 0777) == 0);
  std::string tmp = "/tmp/ctx-agent-run-" + std::to_string(u->uid);
  bool made = ::mkdir(tmp.c_str(), 0777) == 0;
  if (made) ::chmod(tmp.c_str(), 0777);
  // Removed on every way out (a failed REQUIRE throws).
  struct Remove {
    std::string path;
    ~Remove() {
      if (!path.empty()) ::rmdir(path.c_str());
    }
  } remove{made ? tmp : std::string()};
  CtxTree t(*u);
  t.agent("coder");
  RunResult r = ctx::test::run_command(
      {ctx::test::built("launcher/ctx-agent-run"), "--ctx-root", t.root(), "coder", "--", "/probe", "ids"}, *u, 60,
      {"XDG_RUNTIME_DIR=" + planted.path()});
  CHECK(r.exit_code == 0);
  CHECK(ctx::test::names_in(planted.path()).empty());
}
