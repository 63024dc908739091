// sys/recorder: a recorder started from the test process records what it
// is sent (descriptors kept open in its own table) and shares the test's
// memory; the file format round-trips.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <linux/kcmp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "sys/recorder.hpp"
#include "sys/socket.hpp"

namespace {

std::string contents(int fd) {
  std::string out;
  char buf[4096];
  off_t at = 0;
  while (true) {
    ssize_t n = ::pread(fd, buf, sizeof buf, at);
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
    at += n;
  }
  return out;
}

// (bytes, descriptor count) of each record, without taking descriptors
// that are another process's numbers.
std::vector<std::pair<std::string, std::uint32_t>> records(const std::string& all) {
  std::vector<std::pair<std::string, std::uint32_t>> out;
  std::size_t at = 0;
  while (all.size() - at >= 8) {
    std::uint32_t head[2];
    std::memcpy(head, all.data() + at, sizeof head);
    out.emplace_back(all.substr(at + 8, head[0]), head[1]);
    at += 8 + head[0] + 4 * head[1];
  }
  REQUIRE(at == all.size());
  return out;
}

}  // namespace

TEST_CASE("a recorder shares its starter's memory, records each message with its descriptors, and 'c' ends it",
          "[unit]") {
  auto pair = ctx::sys::make_seqpacket_pair();
  REQUIRE(pair);
  auto log = ctx::sys::make_recorder_log("ctx-test-recorder");
  REQUIRE(log);
  REQUIRE(ctx::sys::append_recorded(log->get(), "job", {}));
  ctx::sys::RecorderSetup s;
  s.sock = pair->first.get();
  s.log = log->get();
  s.keep = {2};
  s.argv = {"never-run"};
  auto rec = ctx::sys::start_recorder(s);
  REQUIRE(rec);
  pair->first.reset();
  if (ctx::sys::recorder_shares_memory()) {
    // The same address space: no page table copied, nothing copied on write.
    long same = ::syscall(SYS_kcmp, ::getpid(), rec->pid, KCMP_VM, 0, 0);
    INFO("kcmp: " << same << " errno " << errno);
    CHECK(same == 0);
  }
  int p[2];
  REQUIRE(::pipe2(p, O_CLOEXEC) == 0);
  CHECK(ctx::sys::send_message(pair->second.get(), "p", {p[0]}));
  CHECK(ctx::sys::send_message(pair->second.get(), "hello", {}));
  // Larger than a message it reads: dropped whole, its descriptor closed.
  CHECK(ctx::sys::send_message(pair->second.get(), std::string(9000, 'x'), {p[1]}));
  CHECK(ctx::sys::send_message(pair->second.get(), "c", {}));
  int st = 0;
  REQUIRE(::waitpid(rec->pid, &st, 0) == rec->pid);
  CHECK(WIFEXITED(st));
  CHECK(WEXITSTATUS(st) == 0);
  rec->release();
  // Only the recorder held those copies: with it gone, the pipe's write
  // end is ours alone, and its read end too.
  auto r = records(contents(log->get()));
  REQUIRE(r.size() == 3);
  CHECK(r[0] == std::pair<std::string, std::uint32_t>{"job", 0});
  CHECK(r[1] == std::pair<std::string, std::uint32_t>{"p", 1});
  CHECK(r[2] == std::pair<std::string, std::uint32_t>{"hello", 0});
  ::close(p[0]);
  ::close(p[1]);
}

TEST_CASE("a recorder's file: read back whole records only, descriptors that are not open dropped", "[unit]") {
  auto log = ctx::sys::make_recorder_log("ctx-test-recorder");
  REQUIRE(log);
  int p[2];
  REQUIRE(::pipe2(p, O_CLOEXEC) == 0);
  REQUIRE(ctx::sys::append_recorded(log->get(), "job", {}));
  REQUIRE(ctx::sys::append_recorded(log->get(), "p", {p[0]}));  // read_recorded takes it
  REQUIRE(ctx::sys::append_recorded(log->get(), "g-gone", {4000}));
  // A torn record at the end (a recorder killed mid-write).
  const std::uint32_t torn[2] = {100, 0};
  REQUIRE(::write(log->get(), torn, sizeof torn) == sizeof torn);
  REQUIRE(::write(log->get(), "abc", 3) == 3);
  auto got = ctx::sys::read_recorded(log->get());
  REQUIRE(got);
  REQUIRE(got->size() == 3);
  CHECK((*got)[0].bytes == "job");
  CHECK((*got)[0].fds.empty());
  CHECK((*got)[1].bytes == "p");
  REQUIRE((*got)[1].fds.size() == 1);
  CHECK((*got)[1].fds[0].get() == p[0]);
  CHECK((*got)[2].bytes == "g-gone");
  CHECK((*got)[2].fds.empty());
  got->clear();
  CHECK(::fcntl(p[0], F_GETFD) < 0);  // closed with its record
  ::close(p[1]);
}

TEST_CASE("a recorder cut short by its file's size limit keeps its records whole and goes on", "[unit]") {
  auto pair = ctx::sys::make_seqpacket_pair();
  REQUIRE(pair);
  auto log = ctx::sys::make_recorder_log("ctx-test-recorder");
  REQUIRE(log);
  REQUIRE(ctx::sys::append_recorded(log->get(), "job", {}));  // 11 bytes
  ctx::sys::RecorderSetup s;
  s.sock = pair->first.get();
  s.log = log->get();
  s.keep = {2};
  s.argv = {"never-run"};
  // The recorder takes this process's limits at its start: 64 bytes of file.
  struct rlimit old {};
  REQUIRE(::getrlimit(RLIMIT_FSIZE, &old) == 0);
  struct rlimit small = old;
  small.rlim_cur = 64;
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
  auto rec = ctx::sys::start_recorder(s);
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &old) == 0);
  REQUIRE(rec);
  pair->first.reset();
  CHECK(ctx::sys::send_message(pair->second.get(), "p", {2}));                   // 13 bytes: 24
  CHECK(ctx::sys::send_message(pair->second.get(), std::string(100, 'x'), {}));  // past 64: cut back
  CHECK(ctx::sys::send_message(pair->second.get(), "ok", {}));                   // 10 bytes: 34
  CHECK(ctx::sys::send_message(pair->second.get(), "c", {}));
  int st = 0;
  REQUIRE(::waitpid(rec->pid, &st, 0) == rec->pid);
  INFO("status " << st);
  CHECK(WIFEXITED(st));  // not ended by SIGXFSZ
  rec->release();
  auto r = records(contents(log->get()));
  REQUIRE(r.size() == 3);
  CHECK(r[0].first == "job");
  CHECK(r[1] == std::pair<std::string, std::uint32_t>{"p", 1});
  CHECK(r[2] == std::pair<std::string, std::uint32_t>{"ok", 0});
}
