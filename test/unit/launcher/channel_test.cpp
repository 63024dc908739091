// The sandbox-to-supervisor channel's codec (launcher/sandbox/channel.hpp):
// every record kind survives encode and decode whole, and bytes no
// sandbox sends (short, an unknown kind or step) decode to nothing.
#include "launcher/sandbox/channel.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

using ctx::launcher::BindReport;
using ctx::launcher::decode;
using ctx::launcher::decode_static_binds;
using ctx::launcher::decode_timings;
using ctx::launcher::encode;
using ctx::launcher::encode_static_binds;
using ctx::launcher::encode_timings;
using ctx::launcher::kMaxRecordSize;
using ctx::launcher::Record;
using ctx::launcher::Step;
using ctx::launcher::StepTiming;

namespace {

// kind, step, code (int32), usec (uint32): the header every message has.
constexpr std::size_t kHeader = 10;

void check_same(const Record& got, const Record& want) {
  CHECK(got.kind == want.kind);
  CHECK(got.step == want.step);
  CHECK(got.code == want.code);
  CHECK(got.usec == want.usec);
  CHECK(got.detail == want.detail);
}

}  // namespace

TEST_CASE("channel: every record kind decodes to what was encoded", "[unit]") {
  for (auto kind : {Record::Kind::timings, Record::Kind::sockets, Record::Kind::pty, Record::Kind::view,
                    Record::Kind::tools, Record::Kind::static_binds, Record::Kind::namespaces, Record::Kind::error}) {
    INFO(static_cast<int>(kind));
    Record r;
    r.kind = kind;
    r.step = Step::binds;
    r.code = kind == Record::Kind::error ? 13 : 0;
    r.usec = 4000000000u;  // above INT32_MAX: unsigned on the wire
    r.detail = kind == Record::Kind::error ? "open /data: EACCES" : "";
    std::string bytes = encode(r);
    CHECK(bytes.size() == kHeader + r.detail.size());
    auto back = decode(bytes);
    REQUIRE(back);
    check_same(*back, r);
  }
}

TEST_CASE("channel: every step and a negative code survive the round trip", "[unit]") {
  for (auto s = static_cast<int>(Step::start); s <= static_cast<int>(Step::exec); ++s) {
    Record r;
    r.kind = Record::Kind::error;
    r.step = static_cast<Step>(s);
    r.code = -s - 1;
    r.detail = std::string(1, '\0') + "bytes, NUL included";
    auto back = decode(encode(r));
    INFO(ctx::launcher::to_string(r.step));
    REQUIRE(back);
    check_same(*back, r);
  }
}

TEST_CASE("channel: a detail past the largest message is cut, never sent whole", "[unit]") {
  Record r;
  r.kind = Record::Kind::error;
  r.step = Step::exec;
  r.detail = std::string(kMaxRecordSize, 'x') + "tail";
  std::string bytes = encode(r);
  CHECK(bytes.size() == kMaxRecordSize);
  auto back = decode(bytes);
  REQUIRE(back);
  CHECK(back->detail == std::string(kMaxRecordSize - kHeader, 'x'));
  // A detail that fits exactly is kept whole.
  r.detail = std::string(kMaxRecordSize - kHeader, 'y');
  CHECK(decode(encode(r))->detail == r.detail);
}

TEST_CASE("channel: short messages and unknown kinds or steps decode to nothing", "[unit]") {
  Record r;
  r.kind = Record::Kind::sockets;
  r.step = Step::run_ctx;
  const std::string whole = encode(r);
  REQUIRE(whole.size() == kHeader);
  for (std::size_t n = 0; n < kHeader; ++n) {
    INFO(n << " bytes");
    CHECK_FALSE(decode(whole.substr(0, n)));
  }
  CHECK(decode(whole));
  std::string bad_kind = whole;
  bad_kind[0] = static_cast<char>(static_cast<std::uint8_t>(Record::Kind::error) + 1);
  CHECK_FALSE(decode(bad_kind));
  std::string bad_step = whole;
  bad_step[1] = static_cast<char>(static_cast<std::uint8_t>(Step::exec) + 1);
  CHECK_FALSE(decode(bad_step));
  bad_step[1] = static_cast<char>(0xff);
  CHECK_FALSE(decode(bad_step));
}

TEST_CASE("channel: timings round-trip; a partial entry and an unknown step are skipped", "[unit]") {
  const StepTiming t[] = {{Step::id_maps, 12}, {Step::binds, 4000000000u}, {Step::exec, 0}};
  std::string d = encode_timings(t, 3);
  CHECK(d.size() == 15);
  auto back = decode_timings(d);
  REQUIRE(back.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(back[i].step == t[i].step);
    CHECK(back[i].usec == t[i].usec);
  }
  CHECK(decode_timings("").empty());
  CHECK(encode_timings(t, 0).empty());
  // The last entry cut short: the whole ones stay.
  CHECK(decode_timings(d.substr(0, 14)).size() == 2);
  // An unknown step between two known ones is passed over.
  std::string mid = d;
  mid[5] = static_cast<char>(static_cast<std::uint8_t>(Step::exec) + 1);
  auto skipped = decode_timings(mid);
  REQUIRE(skipped.size() == 2);
  CHECK(skipped[0].step == Step::id_maps);
  CHECK(skipped[1].step == Step::exec);
  // Through a timings record, as the supervisor reads them.
  Record r;
  r.detail = d;
  auto rec = decode(encode(r));
  REQUIRE(rec);
  CHECK(rec->kind == Record::Kind::timings);
  CHECK(decode_timings(rec->detail).size() == 3);
}

TEST_CASE("channel: a static view's binds survive in records of the largest size, any byte of a name included",
          "[unit]") {
  std::vector<BindReport> binds;
  for (int i = 0; i < 500; ++i)
    binds.push_back({i % 2 == 0 ? "file" : "directory", "/ctx/home/me/a name\twith\nodd bytes " + std::to_string(i)});
  const auto details = encode_static_binds(binds);
  REQUIRE(details.size() > 1);
  std::vector<BindReport> back;
  for (const auto& d : details) {
    CHECK(d.size() + kHeader <= kMaxRecordSize);
    Record r;
    r.kind = Record::Kind::static_binds;
    r.detail = d;
    auto rec = decode(encode(r));
    REQUIRE(rec);
    for (auto& b : decode_static_binds(rec->detail)) back.push_back(std::move(b));
  }
  CHECK(back == binds);
  CHECK(encode_static_binds({}).empty());
  // A pair cut short: the whole ones stay.
  CHECK(decode_static_binds(std::string("file\0/a\0dir", 11)) == std::vector<BindReport>{{"file", "/a"}});
}

TEST_CASE("channel: the namespaces a sandbox reports round-trip; malformed lines are skipped", "[unit]") {
  using ctx::launcher::NamespaceReport;
  const std::vector<NamespaceReport> ns{{"pid", 4026532281ul}, {"user", 4026532280ul}, {"cgroup", 1}};
  const std::string d = ctx::launcher::encode_namespaces(ns);
  CHECK(d == "pid=4026532281\nuser=4026532280\ncgroup=1\n");
  CHECK(ctx::launcher::decode_namespaces(d) == ns);
  // No name, no value, a zero, a non-digit, a value of 20 digits (which
  // could overflow), no '=': skipped; the last line needs no newline.
  const std::string bad = "=5\npid=\nnet=0\nuts=12a\nipc=99999999999999999999\nmnt\nx=7\nmnt=9";
  CHECK(ctx::launcher::decode_namespaces(bad) == std::vector<NamespaceReport>{{"x", 7}, {"mnt", 9}});
  CHECK(ctx::launcher::decode_namespaces("").empty());
}
