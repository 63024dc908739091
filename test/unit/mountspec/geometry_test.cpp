#include <catch2/catch.hpp>

#include "mountspec/geometry.hpp"

using namespace ctx::mountspec;

namespace {

template <typename Kind>
Kind at(std::string target) {
  Kind k;
  k.target = std::move(target);
  return k;
}

template <typename Kind>
Kind from(std::string source, std::string target) {
  Kind k = at<Kind>(std::move(target));
  k.source = std::move(source);
  return k;
}

const std::string kCtx = "/srv/ctx";

// A root in the agent's home, /usr and a directory bound twice (the later
// bind wins), a view of the whole CTX tree with a tool tier's view below
// it, a nested bind below a bind, a mask, and the fixed /dev and /run/ctx.
MountPlan sample() {
  return {
      from<RootStep>("/srv/ctx/home/1/agent/a/root", "/"),
      from<BindStep>("/usr", "/usr"),
      from<BindStep>("/home/u/one", "/work"),
      from<BindStep>("/home/u/two", "/work"),
      from<BindStep>("/opt/deps", "/work/deps"),
      at<MaskStep>("/work/deps/secret"),
      from<ViewStep>("", "/ctx"),
      from<ViewStep>("shared/p/tool", "/ctx/shared/p/tool"),
      at<FsStep>("/dev"),
      from<DevNodeStep>("/dev/null", "/dev/null"),
      at<SymlinkStep>("/dev/fd"),
      at<FsStep>("/run/ctx"),
      at<SocketStep>("/run/ctx/notify"),
      at<SealStep>("/run/ctx"),
  };
}

}  // namespace

TEST_CASE("geometry: plain_path drops trailing slashes and '.', refuses '..'", "[unit]") {
  CHECK(plain_path("/") == "/");
  CHECK(plain_path("//") == "/");
  CHECK(plain_path("/a/b/") == "/a/b");
  CHECK(plain_path("/a//./b/.") == "/a/b");
  CHECK_FALSE(plain_path("/a/../b"));
  CHECK_FALSE(plain_path("/a/.."));
  CHECK_FALSE(plain_path("a/b"));
  CHECK_FALSE(plain_path(""));
  CHECK_FALSE(plain_path("/a\nb"));
}

TEST_CASE("geometry: covering_step is the deepest target, the later on an equal one", "[unit]") {
  const MountPlan p = sample();
  CHECK(covering_step(p, "/") == &p[0]);
  CHECK(covering_step(p, "/bin/sh") == &p[0]);
  CHECK(covering_step(p, "/usr/bin") == &p[1]);
  CHECK(covering_step(p, "/usrx") == &p[0]);
  // Overlapping binds: the later one is what the sandbox shows.
  CHECK(covering_step(p, "/work/x") == &p[3]);
  // Nested targets: the deeper wins wherever it is in the plan.
  CHECK(covering_step(p, "/work/deps/lib") == &p[4]);
  CHECK(covering_step(p, "/work/deps/secret/key") == &p[5]);
  CHECK(covering_step(p, "/ctx/shared/p/tool/t") == &p[7]);
  CHECK(covering_step(p, "/ctx/shared/p") == &p[6]);
  // A symlink and a seal put nothing at their target of their own.
  CHECK(covering_step(p, "/dev/fd") == &p[8]);
  CHECK(covering_step(p, "/run/ctx") == &p[11]);
  // Trailing slashes are the same place; '..' gets no answer.
  CHECK(covering_step(p, "/work/deps/") == &p[4]);
  CHECK(covering_step(p, "/work/deps/secret/..") == nullptr);
  CHECK(covering_step(p, "/ctx/shared/p/tool/../../../agent") == nullptr);
  // Kinds: what would decide without the others.
  CHECK(covering_step(p, "/work/deps/secret", {StepKind::bind, StepKind::view}) == &p[4]);
  CHECK(covering_step(p, "/bin", {StepKind::bind, StepKind::view}) == nullptr);
  CHECK(covering_step(MountPlan{}, "/x") == nullptr);
}

TEST_CASE("geometry: host_path_of through roots, binds, views and device nodes", "[unit]") {
  const MountPlan p = sample();
  CHECK(host_path_of(p, kCtx, "/bin") == "/srv/ctx/home/1/agent/a/root/bin");
  CHECK(host_path_of(p, kCtx, "/") == "/srv/ctx/home/1/agent/a/root");
  CHECK(host_path_of(p, kCtx, "/usr/bin/sh") == "/usr/bin/sh");
  CHECK(host_path_of(p, kCtx, "/work/f") == "/home/u/two/f");
  CHECK(host_path_of(p, kCtx, "/work/deps/lib/") == "/opt/deps/lib");
  // Tier roots: the whole view, and a tier's view below it.
  CHECK(host_path_of(p, kCtx, "/ctx") == "/srv/ctx");
  CHECK(host_path_of(p, kCtx, "/ctx/agent/a") == "/srv/ctx/agent/a");
  CHECK(host_path_of(p, kCtx, "/ctx/shared/p/tool") == "/srv/ctx/shared/p/tool");
  CHECK(host_path_of(p, kCtx, "/ctx/shared/p/tool/t") == "/srv/ctx/shared/p/tool/t");
  CHECK(host_path_of(p, kCtx, "/dev/null") == "/dev/null");
  // Nothing of the host's: a mask, a fresh file system, a socket.
  CHECK_FALSE(host_path_of(p, kCtx, "/work/deps/secret/key"));
  CHECK_FALSE(host_path_of(p, kCtx, "/dev/shm"));
  CHECK_FALSE(host_path_of(p, kCtx, "/run/ctx/notify"));
  CHECK_FALSE(host_path_of(p, kCtx, "/usr/../etc/shadow"));
  // A view's source "." is the CTX root too; a fresh root shows nothing.
  MountPlan q{from<RootStep>("/anchor", "/"), from<ViewStep>(".", "/ctx")};
  std::get<RootStep>(q[0]).fresh = true;
  CHECK_FALSE(host_path_of(q, kCtx, "/etc"));
  CHECK(host_path_of(q, kCtx, "/ctx/tool") == "/srv/ctx/tool");
}

TEST_CASE("geometry: inner_path_of is where the sandbox shows a host path", "[unit]") {
  const MountPlan p = sample();
  CHECK(inner_path_of(p, kCtx, "/usr/lib/x") == "/usr/lib/x");
  CHECK(inner_path_of(p, kCtx, "/opt/deps/lib") == "/work/deps/lib");
  CHECK(inner_path_of(p, kCtx, "/opt/deps/") == "/work/deps");
  CHECK(inner_path_of(p, kCtx, "/srv/ctx/agent/a") == "/ctx/agent/a");
  // The deepest source decides: the tier's own view, not the whole one.
  CHECK(inner_path_of(p, kCtx, "/srv/ctx/shared/p/tool/t") == "/ctx/shared/p/tool/t");
  // The root holds the agent's home: shown at "/" below it.
  CHECK(inner_path_of(p, kCtx, "/srv/ctx/home/1/agent/a/root/etc") == "/etc");
  CHECK(inner_path_of(p, kCtx, "/dev/null") == "/dev/null");
  // Overlapping binds: the earlier one's source is hidden by the later.
  CHECK_FALSE(inner_path_of(p, kCtx, "/home/u/one/f"));
  CHECK(inner_path_of(p, kCtx, "/home/u/two/f") == "/work/f");
  // A mask hides it; a deeper step over the place shows something else.
  CHECK_FALSE(inner_path_of(p, kCtx, "/opt/deps/secret"));
  CHECK_FALSE(inner_path_of(p, kCtx, "/home/u/two/deps"));
  CHECK_FALSE(inner_path_of(p, kCtx, "/etc/passwd"));
  CHECK_FALSE(inner_path_of(p, kCtx, "/usr/../etc"));
  // Every answer goes back to the same host path.
  for (const char* host : {"/usr/lib/x", "/opt/deps/lib", "/srv/ctx/agent/a", "/srv/ctx/shared/p/tool/t", "/dev/null"})
    CHECK(host_path_of(p, kCtx, *inner_path_of(p, kCtx, host)) == host);
}
