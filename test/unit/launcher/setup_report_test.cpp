// What the supervisor makes of each record of a sandbox's setup
// (launcher/sandbox/start.hpp), the agent's or a model's, without a sandbox.
#include <fcntl.h>

#include <catch2/catch.hpp>

#include "launcher/sandbox/start.hpp"
#include "sys/resolve.hpp"

using ctx::Error;
using ctx::Result;
using ctx::UniqueFd;
using ctx::launcher::Record;
using ctx::launcher::SetupReport;
using ctx::launcher::Step;
using ctx::launcher::StepTiming;

namespace {

std::vector<UniqueFd> fds(int n) {
  std::vector<UniqueFd> out;
  for (int i = 0; i < n; ++i) {
    auto fd = ctx::sys::open(ctx::sys::at_cwd, "/dev/null", ctx::sys::Open::read);
    REQUIRE(fd);
    out.push_back(std::move(*fd));
  }
  return out;
}

Record record(Record::Kind kind, Step step = Step::start, int code = 0, std::string detail = {}) {
  return Record{kind, step, code, 0, std::move(detail)};
}

const std::function<Result<void>(UniqueFd)> no_view;

}  // namespace

TEST_CASE("a setup's records: a static view's binds are kept in order across records", "[unit]") {
  using ctx::launcher::BindReport;
  SetupReport s;
  const std::vector<BindReport> a{{"file", "/ctx/bin/ctx"}, {"directory", "/ctx/home/me"}};
  const std::vector<BindReport> b{{"tool", "/ctx/tool/fs.read"}};
  for (const auto* binds : {&a, &b})
    for (auto& d : ctx::launcher::encode_static_binds(*binds))
      s.take(record(Record::Kind::static_binds, Step::binds, 0, d), {}, no_view);
  CHECK(s.static_binds == std::vector<BindReport>{
                              {"file", "/ctx/bin/ctx"}, {"directory", "/ctx/home/me"}, {"tool", "/ctx/tool/fs.read"}});
  CHECK_FALSE(s.error);
}

TEST_CASE("a setup's records: timings kept in order, descriptors only in the number their kind carries", "[unit]") {
  SetupReport s;
  const StepTiming a[] = {{Step::root, 5}, {Step::binds, 7}};
  const StepTiming b[] = {{Step::exec, 3}};
  s.take(record(Record::Kind::timings, Step::binds, 0, ctx::launcher::encode_timings(a, 2)), {}, no_view);
  s.take(record(Record::Kind::timings, Step::exec, 0, ctx::launcher::encode_timings(b, 1)), {}, no_view);
  REQUIRE(s.timings.size() == 3);
  CHECK((s.timings[0].step == Step::root && s.timings[0].usec == 5));
  CHECK((s.timings[1].step == Step::binds && s.timings[1].usec == 7));
  CHECK((s.timings[2].step == Step::exec && s.timings[2].usec == 3));

  s.take(record(Record::Kind::sockets), fds(1), no_view);
  CHECK_FALSE(s.notify.valid());
  CHECK_FALSE(s.control.valid());
  s.take(record(Record::Kind::sockets), fds(2), no_view);
  CHECK(s.notify.valid());
  CHECK(s.control.valid());
  s.take(record(Record::Kind::pty), fds(2), no_view);
  CHECK_FALSE(s.master.valid());
  s.take(record(Record::Kind::pty), fds(1), no_view);
  CHECK(s.master.valid());
  s.take(record(Record::Kind::tools), {}, no_view);
  CHECK_FALSE(s.tools.valid());
  s.take(record(Record::Kind::tools), fds(1), no_view);
  CHECK(s.tools.valid());
  CHECK_FALSE(s.error);
}

TEST_CASE("a setup's records: the view goes to its server, whose error ends the setup; an error record wins",
          "[unit]") {
  SetupReport s;
  // A model's start has no view server: the descriptor is dropped.
  s.take(record(Record::Kind::view, Step::binds), fds(1), no_view);
  CHECK_FALSE(s.error);

  int served = 0;
  auto refuse = [&](UniqueFd fd) -> Result<void> {
    CHECK(fd.valid());
    ++served;
    return ctx::fail(Error{ENOMEM, "ENOMEM: no server"});
  };
  s.take(record(Record::Kind::view, Step::binds), fds(0), refuse);
  CHECK(served == 0);
  s.take(record(Record::Kind::view, Step::binds), fds(1), refuse);
  CHECK(served == 1);
  REQUIRE(s.error);
  CHECK(s.error->kind == Record::Kind::error);
  CHECK(s.error->step == Step::binds);
  CHECK(s.error->code == ENOMEM);
  CHECK(s.error->detail == "the agent view: ENOMEM: no server");
  // A second failure keeps the first.
  s.take(record(Record::Kind::view, Step::proc), fds(1), refuse);
  CHECK(served == 2);
  CHECK(s.error->step == Step::binds);
  // The sandbox's own error record replaces it.
  s.take(record(Record::Kind::error, Step::cwd, ENOENT, "a.d/cwd: ENOENT: no such directory"), {}, no_view);
  CHECK(s.error->step == Step::cwd);
  CHECK(s.error->detail == "a.d/cwd: ENOENT: no such directory");
}

TEST_CASE("a failed setup's error: the sandbox's errno and detail, EIO when it names none", "[unit]") {
  using ctx::launcher::setup_error;
  CHECK(setup_error(record(Record::Kind::error, Step::exec, ENOENT, "runtime x: ENOENT")) ==
        Error{ENOENT, "runtime x: ENOENT"});
  CHECK(setup_error(record(Record::Kind::error, Step::exec, 0, "it ended")) == Error{EIO, "it ended"});
}

TEST_CASE("a setup's records: the namespaces a sandbox reports are kept, malformed lines dropped", "[unit]") {
  SetupReport s;
  s.take(record(Record::Kind::namespaces, Step::id_maps, 0, "pid=4026532281\nuser=x\n"), fds(1), no_view);
  REQUIRE(s.namespaces.size() == 1);
  CHECK(s.namespaces[0].name == "pid");
  CHECK(s.namespaces[0].inode == 4026532281ul);
  CHECK_FALSE(s.error);
}
