#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "sys/file.hpp"
#include "test/support/tempdir.hpp"

using ctx::sys::Open;
using ctx::test::TempDir;

namespace {

ctx::UniqueFd open_top(const TempDir& t) {
  auto dir = ctx::sys::open(ctx::sys::at_cwd, t.path(), Open::directory);
  REQUIRE(dir);
  return std::move(*dir);
}

}  // namespace

TEST_CASE("open: no_symlinks refuses a symlink on the way, no_follow only the last one", "[fs]") {
  TempDir t;
  t.mkdir("real");
  t.write("real/f", "x");
  t.symlink("real", "link");
  auto top = open_top(t);

  auto through = ctx::sys::open(top.get(), "link/f", Open::beneath | Open::no_symlinks);
  REQUIRE_FALSE(through);
  CHECK(through.error().code == ELOOP);
  CHECK(through.error().msg == "openat2 link/f: ELOOP");

  CHECK(ctx::sys::open(top.get(), "link/f", Open::no_follow));
  auto last = ctx::sys::open(top.get(), "link", Open::no_follow);
  REQUIRE_FALSE(last);
  CHECK(last.error().msg == "openat link: ELOOP");

  auto host = ctx::sys::open(ctx::sys::at_cwd, t.path() + "/link/f", Open::path_only | Open::no_symlinks);
  REQUIRE_FALSE(host);
  CHECK(host.error().msg == "open " + t.path() + "/link/f: ELOOP");
}

TEST_CASE("open: beneath refuses `..` and absolute paths, in_root keeps them inside", "[fs]") {
  TempDir t;
  t.mkdir("top");
  t.mkdir("top/etc");
  t.write("outside", "x");
  auto top = ctx::sys::open(ctx::sys::at_cwd, t.path() + "/top", Open::directory);
  REQUIRE(top);

  auto up = ctx::sys::open(top->get(), "../outside", Open::beneath | Open::no_symlinks);
  REQUIRE_FALSE(up);
  CHECK(up.error().code == EXDEV);
  CHECK(up.error().msg == "openat2 ../outside: EXDEV");
  auto abs = ctx::sys::open(top->get(), "/etc", Open::path_only | Open::beneath);
  REQUIRE_FALSE(abs);
  CHECK(abs.error().msg == "openat2 /etc: EXDEV");

  // Without beneath the same name leaves dirfd: the flag is what refuses.
  CHECK(ctx::sys::open(top->get(), "../outside", Open::read));

  // In root, `..` at the top stays at the top and "/etc" is top/etc.
  auto etc = ctx::sys::open(top->get(), "../etc", Open::path_only | Open::in_root | Open::directory);
  REQUIRE(etc);
  struct stat a {}, b {};
  REQUIRE(::fstat(etc->get(), &a) == 0);
  REQUIRE(::stat((t / "top/etc").c_str(), &b) == 0);
  CHECK(a.st_ino == b.st_ino);
  CHECK(ctx::sys::open(top->get(), "/etc", Open::path_only | Open::in_root | Open::no_symlinks));
}

TEST_CASE("open: directory refuses a file, regular refuses a directory and a FIFO", "[fs]") {
  TempDir t;
  t.write("f", "x");
  t.mkdir("d");
  REQUIRE(::mkfifo((t / "fifo").c_str(), 0644) == 0);
  auto top = open_top(t);

  auto file = ctx::sys::open(top.get(), "f", Open::directory);
  REQUIRE_FALSE(file);
  CHECK(file.error().code == ENOTDIR);
  CHECK(file.error().msg == "openat f: ENOTDIR");

  CHECK(ctx::sys::open(top.get(), "f", Open::regular | Open::beneath));
  for (std::string name : {"d", "fifo"}) {
    auto r = ctx::sys::open(top.get(), name, Open::regular | Open::beneath);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == EINVAL);
    CHECK(r.error().msg == name + ": EINVAL: not a regular file");
  }

  auto self = ctx::sys::open(top.get(), "", Open::directory | Open::beneath);
  REQUIRE(self);
}

TEST_CASE("open: path_only gives a handle that cannot be read", "[fs]") {
  TempDir t;
  t.write("f", "hello");
  auto top = open_top(t);

  auto readable = ctx::sys::open(top.get(), "f", Open::read);
  REQUIRE(readable);
  char c = 0;
  CHECK(::read(readable->get(), &c, 1) == 1);

  auto handle = ctx::sys::open(top.get(), "f", Open::path_only);
  REQUIRE(handle);
  CHECK(::read(handle->get(), &c, 1) == -1);
  CHECK(errno == EBADF);
}

TEST_CASE("open: no_xdev refuses a mount crossing", "[fs]") {
  auto top = ctx::sys::open(ctx::sys::at_cwd, "/", Open::path_only | Open::directory);
  REQUIRE(top);
  auto proc = ctx::sys::open(top->get(), "proc", Open::path_only | Open::beneath | Open::no_xdev);
  REQUIRE_FALSE(proc);
  CHECK(proc.error().code == EXDEV);
  CHECK(proc.error().msg == "openat2 proc: EXDEV");
}
