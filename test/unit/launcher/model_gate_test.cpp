// The model gate's pure decisions (launcher/control/model_gate.hpp): what
// a model's .d/env and .d/cap give it, and what a model.call record names;
// and the anchor directory its models' roots are mounted over.
#include <catch2/catch.hpp>
#include <string>
#include <utility>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

#include "launcher/control/model_gate.hpp"
#include "test/support/tempdir.hpp"

using Env = std::vector<std::pair<std::string, std::string>>;

TEST_CASE("model gate: .d/env is KEY=VALUE lines, anything else left out", "[unit]") {
  CHECK(ctx::launcher::parse_model_env("API_KEY=sk-1\n# a comment\n\nBASE=http://x/?a=b\n=nokey\nnoequals\nLAST=") ==
        Env{{"API_KEY", "sk-1"}, {"BASE", "http://x/?a=b"}, {"LAST", ""}});
  CHECK(ctx::launcher::parse_model_env("").empty());
  CHECK(ctx::launcher::parse_model_env("K=v\r\n") == Env{{"K", "v\r"}});  // bytes as written
}

TEST_CASE("model gate: .d/cap grants the network only by a line `network`", "[unit]") {
  CHECK(ctx::launcher::cap_grants_network("network\n"));
  CHECK(ctx::launcher::cap_grants_network("gpu\nnetwork"));
  CHECK_FALSE(ctx::launcher::cap_grants_network(""));
  CHECK_FALSE(ctx::launcher::cap_grants_network("networking\n"));
  CHECK_FALSE(ctx::launcher::cap_grants_network(" network\n"));
  CHECK_FALSE(ctx::launcher::cap_grants_network("# network\n"));
}

TEST_CASE("model gate: a record names the model after its alias, a valid name, or only `model`", "[unit]") {
  CHECK(ctx::launcher::model_call_object("main", "debug/echo") == "model/debug/echo");
  CHECK(ctx::launcher::model_call_object("debug/echo", "") == "model/debug/echo");
  CHECK(ctx::launcher::model_call_object("main", "") == "model/main");
  CHECK(ctx::launcher::model_call_object("", "") == "model");
  CHECK(ctx::launcher::model_call_object("../../etc/passwd", "") == "model");
  CHECK(ctx::launcher::model_call_object(std::string(300, 'a'), "") == "model");  // no longer than a valid name
}

namespace {

// lstat's file type and permission bits; 0 when the path names nothing.
mode_t mode_at(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 ? st.st_mode : 0;
}

}  // namespace

TEST_CASE("model gate: the owner's shared anchor is made if missing, kept, made again when removed, never removed",
          "[fs]") {
  ctx::test::TempDir t;
  const std::string shared = t / "shared";
  {
    ctx::launcher::ModelAnchor a(shared, t / "own.", ::geteuid(), std::nullopt);
    CHECK(a.get().value() == shared);
    CHECK(mode_at(shared) == (S_IFDIR | 0700));
    CHECK(a.get().value() == shared);
    REQUIRE(::rmdir(shared.c_str()) == 0);
    CHECK(a.get().value() == shared);
    CHECK(mode_at(shared) == (S_IFDIR | 0700));
  }
  // Other supervisors of the owner share it: it stays.
  CHECK(mode_at(shared) == (S_IFDIR | 0700));
  ctx::launcher::ModelAnchor b(shared, t / "own.", ::geteuid(), std::nullopt);
  CHECK(b.get().value() == shared);
}

TEST_CASE("model gate: a shared anchor name that is not the owner's 0700 directory gives a supervisor its own, "
          "made again when removed or replaced, removed at the end",
          "[fs]") {
  ctx::test::TempDir t;
  const std::string prefix = t / "own.";
  // Taken first: by another uid, with another mode, as a symlink.
  t.mkdir("other-mode", 0755);
  t.symlink(t.path(), "link");
  for (auto [shared, owner] : {std::pair{t / "other-uid", ::geteuid() + 1}, std::pair{t / "other-mode", ::geteuid()},
                               std::pair{t / "link", ::geteuid()}}) {
    INFO(shared);
    std::string removed, replaced, last;
    {
      ctx::launcher::ModelAnchor a(shared, prefix, owner, std::nullopt);
      auto first = a.get();
      REQUIRE(first);
      CHECK(first->rfind(prefix, 0) == 0);
      CHECK(mode_at(*first) == (S_IFDIR | 0700));
      CHECK(a.get().value() == *first);
      removed = *first;
      REQUIRE(::rmdir(removed.c_str()) == 0);
      auto second = a.get();
      REQUIRE(second);
      CHECK(second->rfind(prefix, 0) == 0);
      CHECK(*second != removed);
      // Replaced on the host (moved away, a symlink in its place): another
      // is made, and neither the symlink nor the directory moved is removed.
      replaced = *second;
      REQUIRE(::rename(replaced.c_str(), (t / "moved").c_str()) == 0);
      REQUIRE(::symlink(t.path().c_str(), replaced.c_str()) == 0);
      auto third = a.get();
      REQUIRE(third);
      CHECK(*third != replaced);
      last = *third;
    }
    CHECK(mode_at(last) == 0);
    CHECK(S_ISLNK(mode_at(replaced)));
    CHECK(mode_at(t / "moved") == (S_IFDIR | 0700));
    REQUIRE(::rmdir((t / "moved").c_str()) == 0);
  }
  // What was there first is left as it was.
  CHECK(mode_at(t / "other-mode") == (S_IFDIR | 0755));
  CHECK(S_ISLNK(mode_at(t / "link")));
}

TEST_CASE("model gate: an anchor that cannot be made is an error, and nothing is made", "[fs]") {
  ctx::test::TempDir t;
  ctx::launcher::ModelAnchor a(t / "missing/shared", t / "missing/anchor.", ::geteuid(), std::nullopt);
  auto r = a.get();
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ENOENT);
  // mkdtemp(3) has filled in the X's of the name it tried.
  const std::string head = "mkdtemp " + (t / "missing/anchor.");
  CHECK(r.error().msg.size() == head.size() + 6 + std::string(": ENOENT").size());
  CHECK(r.error().msg.rfind(head, 0) == 0);
  CHECK(r.error().msg.substr(head.size() + 6) == ": ENOENT");
  CHECK(mode_at(t / "missing") == 0);
}
