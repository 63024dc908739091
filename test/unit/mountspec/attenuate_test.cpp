#include <catch2/catch.hpp>

#include <random>

#include "base/path.hpp"
#include "mountspec/attenuate.hpp"

using namespace ctx::mountspec;

namespace {

Table parent_table() {
  return *parse("coder.d/mount",
                "/home/me/project\t/work\trw\trbind,nosuid,nodev\n"
                "/ctx\t/ctx\tro\trbind,nosuid,nodev\n"
                "/srv/a\t/shared/project-a\trw\tbind,nosuid\n"
                "/opt/cache\t/work/cache\tro\tbind,noexec\n");
}

const Attrs kRo{.rdonly = true};
const Attrs kRw{};

ChildMount req(std::string s, std::string t, Attrs a, std::optional<Kind> k = std::nullopt) {
  ChildMount c;
  c.source = std::move(s);
  c.target = std::move(t);
  c.attrs = a;
  c.kind = k;
  return c;
}

}  // namespace

TEST_CASE("attenuate maps parent-visible sources to host paths", "[unit]") {
  auto r = attenuate(parent_table(),
                     {req("/shared/project-a", "/shared/project-a", kRo), req("/ctx/tool", "/ctx/tool", kRo)});
  REQUIRE(r);
  REQUIRE(r->size() == 2);
  CHECK((*r)[0] == Entry{.source = "/srv/a",
                         .target = "/shared/project-a",
                         .attrs = {.rdonly = true, .nosuid = true},
                         .kind = Kind::bind,
                         .line = 0});
  CHECK((*r)[1] == Entry{.source = "/ctx/tool",
                         .target = "/ctx/tool",
                         .attrs = {.rdonly = true, .nosuid = true, .nodev = true},
                         .kind = Kind::rbind,
                         .line = 0});
}

TEST_CASE("attenuate: the deepest parent mount supplies the source", "[unit]") {
  auto r = attenuate(parent_table(), {req("/work/cache/x", "/c", kRo)});
  REQUIRE(r);
  REQUIRE(r->size() == 1);
  CHECK((*r)[0].source == "/opt/cache/x");
  CHECK((*r)[0].attrs.noexec);
}

TEST_CASE("attenuate carries nested parent mounts so nothing hidden appears", "[unit]") {
  // /work in the parent has /work/cache mounted over it; a child of /work
  // must see the parent's /work/cache, not the host's project/cache.
  auto r = attenuate(parent_table(), {req("/work", "/src", kRw)});
  REQUIRE(r);
  REQUIRE(r->size() == 2);
  CHECK((*r)[0] == Entry{.source = "/home/me/project",
                         .target = "/src",
                         .attrs = {.nosuid = true, .nodev = true},
                         .kind = Kind::rbind,
                         .line = 0});
  CHECK((*r)[1] == Entry{.source = "/opt/cache",
                         .target = "/src/cache",
                         .attrs = {.rdonly = true, .nosuid = true, .nodev = true, .noexec = true},
                         .kind = Kind::bind,
                         .line = 0});
  auto ro = attenuate(parent_table(), {req("/work", "/src", kRo)});
  REQUIRE(ro);
  CHECK((*ro)[1].attrs.rdonly);
}

TEST_CASE("attenuate refusals name the entry and the reason", "[unit]") {
  auto deny = [](std::vector<ChildMount> r) {
    auto a = attenuate(parent_table(), r);
    REQUIRE_FALSE(a);
    return a.error();
  };
  auto e = deny({req("/work", "/work", kRo), req("/home/user", "/home", kRo)});
  CHECK(e.code == EACCES);
  CHECK(e.reason == "mount_not_visible");
  CHECK(e.msg == "mount[1] /home/user -> /home: EACCES: not visible to the parent (no parent mount covers /home/user)");
  e = deny({req("/ctx/tool", "/t", kRw)});
  CHECK(e.reason == "mount_widens_access");
  CHECK(e.msg == "mount[0] /ctx/tool -> /t: EACCES: rw requested but the parent sees /ctx read-only");
  e = deny({req("/shared/project-a/x", "/x", kRo, Kind::rbind)});
  CHECK(e.reason == "mount_widens_access");
  CHECK(e.msg ==
        "mount[0] /shared/project-a/x -> /x: EACCES: rbind requested but the parent's mount of "
        "/shared/project-a is bind (its submounts are hidden from the parent)");
  e = deny({req("/etc", "/etc", kRo)});
  CHECK(e.reason == "mount_not_visible");
  e = deny({req("/work/../etc", "/w", kRo)});
  CHECK(e.code == EINVAL);
  CHECK(e.reason == "invalid_mount");
  CHECK(e.msg == "mount[0] /work/../etc -> /w: EINVAL: '..' component in path: /work/../etc");
  e = deny({req("/work", "/w", kRo), req("/ctx", "/w", kRo)});
  CHECK(e.msg == "mount[1] /ctx -> /w: EINVAL: target /w requested twice");
  e = deny({req("/work", "/", kRo)});
  CHECK(e.msg == "mount[0] /work -> /: EINVAL: target must not be /");
}

TEST_CASE("attenuate: under an rbind parent mount a child mount is rbind", "[unit]") {
  // Unset: inherited.
  auto r = attenuate(parent_table(), {req("/work/src", "/s", kRo)});
  REQUIRE(r);
  CHECK((*r)[0].kind == Kind::rbind);
  r = attenuate(parent_table(), {req("/work/src", "/s", kRo, Kind::rbind)});
  REQUIRE(r);
  CHECK((*r)[0].kind == Kind::rbind);
  // bind: a non-recursive clone of the host path would show what the
  // host's submounts below it cover, which the parent never sees.
  r = attenuate(parent_table(), {req("/work", "/w", kRo, Kind::bind)});
  REQUIRE_FALSE(r);
  CHECK(r.error().code == EACCES);
  CHECK(r.error().reason == "mount_widens_access");
  CHECK(r.error().msg ==
        "mount[0] /work -> /w: EACCES: bind requested but the parent sees /work with rbind: a bind "
        "would uncover what the submounts below it cover; leave the kind unset or ask rbind");
  // Under a bind parent mount, bind stays allowed.
  r = attenuate(parent_table(), {req("/shared/project-a", "/p", kRo, Kind::bind)});
  REQUIRE(r);
  CHECK((*r)[0].kind == Kind::bind);
}

TEST_CASE("check_derived: a child entry in host paths against the parent's table", "[unit]") {
  const Table parent = parent_table();
  auto deny = [&](const Entry& e) {
    auto r = check_derived(parent, e);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == EACCES);
    return r.error();
  };
  // What attenuate makes passes, carried mounts included.
  auto r = attenuate(parent, {req("/work", "/src", kRw), req("/shared/project-a/x", "/x", kRo)});
  REQUIRE(r);
  for (const auto& e : *r) CHECK(check_derived(parent, e));
  Entry ok{.source = "/home/me/project/src",
           .target = "/s",
           .attrs = {.nosuid = true, .nodev = true},
           .kind = Kind::rbind,
           .line = 0};
  CHECK(check_derived(parent, ok));

  Entry e = ok;
  e.source = "/home/me";
  auto err = deny(e);
  CHECK(err.reason == "mount_not_visible");
  CHECK(err.msg == "not visible to the parent (no parent mount shows /home/me)");
  // /home/me/project/cache is a host path under the /work mount's source,
  // but the parent sees /work/cache through /opt/cache instead.
  e = ok;
  e.source = "/home/me/project/cache/x";
  err = deny(e);
  CHECK(err.reason == "mount_not_visible");
  e = ok;
  e.source = "/ctx/tool";
  err = deny(e);
  CHECK(err.reason == "mount_widens_access");
  CHECK(err.msg == "rw requested but the parent sees /ctx read-only");
  e = ok;
  e.kind = Kind::bind;
  err = deny(e);
  CHECK(err.reason == "mount_widens_access");
  CHECK(err.msg ==
        "bind requested but the parent sees /work with rbind: a bind would uncover what the submounts below "
        "it cover; leave the kind unset or ask rbind");
  e = Entry{
      .source = "/srv/a", .target = "/a", .attrs = {.rdonly = true, .nosuid = true}, .kind = Kind::rbind, .line = 0};
  err = deny(e);
  CHECK(err.msg ==
        "rbind requested but the parent's mount of /shared/project-a is bind (its submounts are hidden from "
        "the parent)");
  e = ok;
  e.attrs.nodev = false;
  err = deny(e);
  CHECK(err.reason == "mount_widens_access");
  CHECK(err.msg == "nodev dropped but the parent's mount of /work has it");
  e = Entry{.source = "/opt/cache", .target = "/c", .attrs = {.rdonly = true}, .kind = Kind::bind, .line = 0};
  CHECK(deny(e).msg == "noexec dropped but the parent's mount of /work/cache has it");
}

TEST_CASE("attenuate never drops the parent's flags; a request may add some", "[unit]") {
  ChildMount c = req("/shared/project-a", "/p", kRo);
  c.attrs.noexec = true;
  auto r = attenuate(parent_table(), {c});
  REQUIRE(r);
  CHECK((*r)[0].attrs.nosuid);
  CHECK((*r)[0].attrs.noexec);
}

TEST_CASE("property: attenuation never widens (random tables)", "[unit]") {
  std::mt19937 rng(20261122);
  const char* comps[] = {"a", "b", "c"};
  auto path = [&](int max_depth) {
    std::string p;
    int n = 1 + static_cast<int>(rng() % static_cast<unsigned>(max_depth));
    for (int i = 0; i < n; ++i) p += std::string("/") + comps[rng() % 3];
    return p;
  };
  int granted = 0, refused = 0;
  for (int iter = 0; iter < 4000; ++iter) {
    Table parent;
    int n = 1 + static_cast<int>(rng() % 4);
    for (int i = 0; i < n; ++i) {
      // One draw per statement, in the order the values were always drawn.
      std::string source = "/host" + path(3);
      std::string target = path(3);
      bool rdonly = rng() % 2 != 0;
      Kind kind = rng() % 2 ? Kind::bind : Kind::rbind;
      bool nosuid = rng() % 2 == 0;
      bool nodev = rng() % 2 == 0;
      bool noexec = rng() % 2 == 0;
      Entry e{.source = source,
              .target = target,
              .attrs = {.rdonly = rdonly, .nosuid = nosuid, .nodev = nodev, .noexec = noexec},
              .kind = kind,
              .line = i + 1};
      bool dup = false;
      for (const auto& x : parent) dup = dup || x.target == e.target;
      if (!dup) parent.push_back(e);
    }
    std::vector<ChildMount> request;
    int m = 1 + static_cast<int>(rng() % 3);
    for (int i = 0; i < m; ++i) {
      ChildMount c = req(path(4), "/t" + std::to_string(i), rng() % 2 ? kRo : kRw);
      if (rng() % 3 == 0) c.kind = rng() % 2 ? Kind::bind : Kind::rbind;
      c.attrs.noexec = rng() % 4 == 0;
      request.push_back(c);
    }
    auto r = attenuate(parent, request);
    // A kind asked explicitly must be the covering parent mount's.
    for (const auto& c : request)
      if (const Entry* p = covering(parent, c.source); p != nullptr && c.kind && *c.kind != p->kind) {
        INFO(c.source << " kind differs from " << format_entry(*p));
        CHECK_FALSE(r);
      }
    if (!r) {
      ++refused;
      CHECK((r.error().code == EACCES || r.error().code == EINVAL));
      continue;
    }
    ++granted;
    for (const auto& child : *r) {
      // Some parent mount p must show this host source at a path the
      // parent really sees through p (p is the deepest mount there), and
      // the child must be no wider than p in mode and flags, and of p's
      // kind (bind under rbind would uncover what host submounts cover).
      bool justified = false;
      for (const auto& p : parent) {
        if (!ctx::path_is_at_or_under(child.source, p.source)) continue;
        std::string inner = ctx::path_join(p.target, ctx::path_suffix(child.source, p.source));
        const Entry* deepest = nullptr;
        for (const auto& q : parent)
          if (ctx::path_is_at_or_under(inner, q.target) &&
              (deepest == nullptr || ctx::path_depth(q.target) > ctx::path_depth(deepest->target)))
            deepest = &q;
        if (deepest != &p) continue;
        bool narrower = (!p.attrs.rdonly || child.attrs.rdonly) && (!p.attrs.nosuid || child.attrs.nosuid) &&
                        (!p.attrs.nodev || child.attrs.nodev) && (!p.attrs.noexec || child.attrs.noexec) &&
                        child.kind == p.kind;
        justified = justified || narrower;
      }
      INFO(format_entry(child));
      CHECK(justified);
      // The re-check a supervisor runs before starting a child agrees.
      CHECK(check_derived(parent, child));
    }
    // Every parent mount nested below a granted request stays in force.
    for (std::size_t i = 0; i < request.size(); ++i)
      for (const auto& p : parent)
        if (ctx::path_is_at_or_under(p.target, request[i].source) && p.target != request[i].source) {
          std::string where = ctx::path_join(request[i].target, ctx::path_suffix(p.target, request[i].source));
          bool found = false;
          for (const auto& c : *r) found = found || (c.target == where && c.source == p.source);
          INFO(p.target << " under " << request[i].source);
          CHECK(found);
        }
  }
  CHECK(granted > 200);
  CHECK(refused > 200);
}
