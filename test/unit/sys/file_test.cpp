#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sys/file.hpp"
#include "sys/socket.hpp"
#include "test/support/tempdir.hpp"

using ctx::test::TempDir;

TEST_CASE("read_small_file reads regular files and refuses the rest", "[fs]") {
  TempDir t;
  t.write("ok", "hello\n");
  t.write("big", std::string(100, 'x'));
  t.symlink("ok", "link");
  t.mkdir("dir");
  REQUIRE(::mkfifo((t / "fifo").c_str(), 0644) == 0);
  auto dir = ctx::sys::open(ctx::sys::at_cwd, t.path(), ctx::sys::Open::directory);
  REQUIRE(dir);

  auto ok = ctx::sys::read_small_file(dir->get(), "ok", 64);
  REQUIRE(ok);
  REQUIRE(ok->has_value());
  CHECK((*ok)->data == "hello\n");
  CHECK((*ok)->st.size == 6);

  auto missing = ctx::sys::read_small_file(dir->get(), "nope", 64);
  REQUIRE(missing);
  CHECK_FALSE(missing->has_value());

  auto link = ctx::sys::read_small_file(dir->get(), "link", 64);
  REQUIRE_FALSE(link);
  CHECK(link.error().code == ELOOP);
  CHECK(link.error().msg == "is a symbolic link; control files must be regular files");

  auto big = ctx::sys::read_small_file(dir->get(), "big", 64);
  REQUIRE_FALSE(big);
  CHECK(big.error().msg == "is larger than 64 bytes");
  CHECK(big.error().code == EFBIG);

  for (auto name : {"dir", "fifo"}) {
    auto r = ctx::sys::read_small_file(dir->get(), name, 64);
    REQUIRE_FALSE(r);
    CHECK(r.error().msg == "is not a regular file");
  }
}

TEST_CASE("atomic_replace leaves either the old or the new content", "[fs]") {
  TempDir t;
  t.write("status", "start\n");
  auto dir = ctx::sys::open(ctx::sys::at_cwd, t.path(), ctx::sys::Open::directory);
  REQUIRE(dir);
  REQUIRE(ctx::sys::atomic_replace(dir->get(), "status", "ready\n", 0640));
  CHECK(t.read("status") == "ready\n");
  struct stat st {};
  REQUIRE(::stat((t / "status").c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0640);
  auto names = ctx::sys::list_dir(dir->get());
  REQUIRE(names);
  CHECK(*names == std::vector<std::string>{"status"});  // no temporary left

  // A failing rename (target is a non-empty directory) keeps nothing behind.
  t.write("busy/x", "");
  auto r = ctx::sys::atomic_replace(dir->get(), "busy", "x\n");
  REQUIRE_FALSE(r);
  CHECK(r.error().code == EISDIR);
  CHECK(*ctx::sys::list_dir(dir->get()) == std::vector<std::string>{"busy", "status"});
  CHECK(::access((t / "busy/x").c_str(), F_OK) == 0);  // the directory stays as it was

  // A new name (nothing to exchange with), and the durable path.
  REQUIRE(ctx::sys::atomic_replace(dir->get(), "pid", "42\n"));
  CHECK(t.read("pid") == "42\n");
  REQUIRE(ctx::sys::atomic_replace(dir->get(), "pid", "43\n", 0644, true));
  CHECK(t.read("pid") == "43\n");
  CHECK(*ctx::sys::list_dir(dir->get()) == std::vector<std::string>{"busy", "pid", "status"});
}

TEST_CASE("append_file appends whole lines", "[fs]") {
  TempDir t;
  auto dir = ctx::sys::open(ctx::sys::at_cwd, t.path(), ctx::sys::Open::directory);
  REQUIRE(dir);
  REQUIRE(ctx::sys::append_file(dir->get(), "log", "a\n"));
  REQUIRE(ctx::sys::append_file(dir->get(), "log", "b\n"));
  CHECK(t.read("log") == "a\nb\n");
  t.symlink("log", "log2");
  auto r = ctx::sys::append_file(dir->get(), "log2", "c\n");
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ELOOP);
}

TEST_CASE("append_existing and overwrite_existing never create a file nor follow a symlink", "[fs]") {
  TempDir t;
  auto dir = ctx::sys::open(ctx::sys::at_cwd, t.path(), ctx::sys::Open::directory);
  REQUIRE(dir);
  auto absent = ctx::sys::append_existing(dir->get(), "log", "a\n", 100);
  REQUIRE_FALSE(absent);
  CHECK(absent.error().code == ENOENT);
  auto absent2 = ctx::sys::overwrite_existing(dir->get(), "status", "a\n");
  REQUIRE_FALSE(absent2);
  CHECK(absent2.error().code == ENOENT);
  CHECK(ctx::sys::list_dir(dir->get())->empty());

  t.write("log", "");
  t.write("status", "old content, longer\n");
  REQUIRE(ctx::sys::append_existing(dir->get(), "log", "a\n", 5));
  REQUIRE(ctx::sys::append_existing(dir->get(), "log", "b\n", 5));
  CHECK(t.read("log") == "a\nb\n");
  // Past the cap the file starts over with the new line.
  REQUIRE(ctx::sys::append_existing(dir->get(), "log", "c\n", 5));
  CHECK(t.read("log") == "c\n");
  REQUIRE(ctx::sys::overwrite_existing(dir->get(), "status", "new\n"));
  CHECK(t.read("status") == "new\n");

  t.write("target", "");
  t.symlink("target", "log2");
  t.symlink("target", "status2");
  auto l = ctx::sys::append_existing(dir->get(), "log2", "x\n", 100);
  REQUIRE_FALSE(l);
  CHECK(l.error().code == ELOOP);
  auto s = ctx::sys::overwrite_existing(dir->get(), "status2", "x\n");
  REQUIRE_FALSE(s);
  CHECK(s.error().code == ELOOP);
  CHECK(t.read("target").empty());
}

// procfs reports size 0 and a sysctl read at an offset other than 0 is
// EOF: the whole value must come in the first read.
TEST_CASE("a sysctl is read whole", "[unit]") {
  std::string direct;
  {
    std::FILE* f = std::fopen("/proc/sys/kernel/pid_max", "r");
    REQUIRE(f != nullptr);
    char buf[64] = {};
    REQUIRE(std::fgets(buf, sizeof buf, f) != nullptr);
    std::fclose(f);
    direct = buf;
  }
  REQUIRE(direct.size() > 2);
  CHECK(ctx::sys::read_or_empty("/proc/sys/kernel", "pid_max") == direct);
}

// The agent view's server keeps nothing per directory handle: it reads
// from the position the kernel hands back, through a new descriptor each
// time (view/server.cpp, readdir).
TEST_CASE("read_dir_from resumes at a position through another descriptor", "[fs]") {
  TempDir t;
  std::vector<std::string> made;
  for (int i = 0; i < 300; ++i) {
    made.push_back(std::to_string(i) + std::string(100, 'x'));
    t.write("d/" + made.back(), "");
  }
  std::vector<std::string> seen;
  std::uint64_t from = 0;
  while (true) {
    // A buffer of about eight entries: many reads, each on a new open.
    auto dir = ctx::sys::open(ctx::sys::at_cwd, t.path() + "/d", ctx::sys::Open::directory);
    REQUIRE(dir);
    auto batch = ctx::sys::read_dir_from(dir->get(), from, 1024);
    REQUIRE(batch);
    if (batch->empty()) break;
    CHECK(batch->size() < 20);
    for (const auto& e : *batch) {
      if (e.name != "." && e.name != "..") seen.push_back(e.name);
      from = e.next;
    }
  }
  std::sort(seen.begin(), seen.end());
  std::sort(made.begin(), made.end());
  CHECK(seen == made);

  auto dir = ctx::sys::open(ctx::sys::at_cwd, t.path() + "/d", ctx::sys::Open::directory);
  REQUIRE(dir);
  auto beyond = ctx::sys::read_dir_from(dir->get(), std::uint64_t{1} << 63, 1024);
  REQUIRE_FALSE(beyond);
  CHECK(beyond.error().code == EINVAL);
  CHECK(beyond.error().msg == "lseek: EINVAL: directory position 9223372036854775808 is out of range");
}

TEST_CASE("list_dir lists every name, sorted, over several reads of the directory", "[fs]") {
  TempDir t;
  // More names than one 8 KiB read of the directory holds.
  std::vector<std::string> want;
  for (int i = 0; i < 600; ++i) {
    std::string n = "entry-with-a-longish-name-" + std::to_string(i);
    want.push_back(n);
    FILE* f = std::fopen((t.path() + "/" + n).c_str(), "w");
    REQUIRE(f != nullptr);
    std::fclose(f);
  }
  std::sort(want.begin(), want.end());
  auto d = ctx::sys::open(ctx::sys::at_cwd, t.path(), ctx::sys::Open::directory);
  REQUIRE(d);
  auto got = ctx::sys::list_dir(d->get());
  REQUIRE(got);
  CHECK(*got == want);
  // Its own position: a second listing through the same descriptor is whole.
  auto again = ctx::sys::list_dir(d->get());
  REQUIRE(again);
  CHECK(*again == want);
}

TEST_CASE("a socket is bound at its name in the directory given, short names and long ones alike", "[fs]") {
  TempDir t;
  auto d = ctx::sys::open(ctx::sys::at_cwd, t.path(), ctx::sys::Open::directory);
  REQUIRE(d);
  // Short: bound through /proc/self/fd/<dir>/<name>; long (past sun_path
  // that way): bound from inside the directory. Both end up there.
  for (const std::string& name : {std::string("a.sock"), std::string(96, 'n') + ".sock"}) {
    INFO(name.size());
    auto s = ctx::sys::listen_unix_at(d->get(), name, t.path() + "/" + name);
    REQUIRE(s);
    struct stat st {};
    REQUIRE(::fstatat(d->get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0);
    CHECK(S_ISSOCK(st.st_mode));
  }
  // The working directory is where it was.
  char cwd[4096];
  REQUIRE(::getcwd(cwd, sizeof cwd) != nullptr);
  CHECK(std::string(cwd) != t.path());
}
