// libFuzzer target for policy v0.
//
// Every input is read twice:
//  - as a policy file: a failed parse returns the first of the errors it
//    collects; a successful one round-trips each rule through format_rule,
//    parse_request and from_rules, and each subject's own rules lie within
//    the policy (check_subset of a policy against itself);
//  - as a rule made in code, fields separated by 0x1f (subject, class,
//    object, permission): whatever from_rules accepts formats to a line that
//    parses back to the same rule, and parse_request agrees with it.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "policy/policy.hpp"

namespace {

using ctx::policy::Class;
using ctx::policy::Policy;
using ctx::policy::Rule;

void check(bool ok) {
  if (!ok) std::abort();
}

std::string class_object(const Rule& r) { return std::string(ctx::policy::to_string(r.cls)) + ":" + r.object; }

/// The rule read back from its one-line form must be the rule itself.
void round_trip(const Rule& r) {
  auto again = Policy::parse("x.d/policy", ctx::policy::format_rule(r) + "\n");
  check(static_cast<bool>(again) && again->rules().size() == 1);
  Rule a = again->rules().front();
  check(a.line == 1);
  a.line = r.line;
  check(a == r);
  auto req = ctx::policy::parse_request(class_object(r), r.permission);
  check(static_cast<bool>(req) && req->cls == r.cls && req->object == r.object && req->permission == r.permission);
}

void as_policy(std::string_view in) {
  std::vector<ctx::Error> all;
  auto p = Policy::parse("f.d/policy", in, &all);
  if (!p) {
    check(!all.empty() && all.front() == p.error());
    for (const auto& e : all) check(e.code == EINVAL || e.code == EILSEQ);
    for (const auto& e : all) check(e.msg.rfind("f.d/policy:", 0) == 0);
    return;
  }
  check(all.empty());
  std::map<std::string, std::vector<Rule>> by_subject;
  int last_line = 0;
  for (const Rule& r : p->rules()) {
    check(r.line > last_line);
    last_line = r.line;
    round_trip(r);
    check(p->allows(r.subject, r.cls, r.object, r.permission));
    auto found = p->find(r.subject, r.cls, r.object, r.permission);
    check(found.has_value() && found->line <= r.line);
    auto e = ctx::policy::explain(*p, r.subject, ctx::policy::Request{r.cls, r.object, r.permission});
    check(e.allowed && e.rule == found);
    // A policy holding only this rule is within the whole policy.
    auto single = Policy::from_rules({r});
    check(static_cast<bool>(single));
    check(static_cast<bool>(ctx::policy::check_subset(*p, r.subject, *single, r.subject)));
    by_subject[r.subject].push_back(r);
  }
  auto same = Policy::from_rules(p->rules());
  check(static_cast<bool>(same) && *same == *p);
  for (const auto& [subject, rules] : by_subject) {
    auto own = Policy::from_rules(rules);
    check(static_cast<bool>(own));
    check(static_cast<bool>(ctx::policy::check_subset(*p, subject, *own, subject)));
    // A policy naming one subject only is within itself.
    if (by_subject.size() == 1) check(static_cast<bool>(ctx::policy::check_subset(*p, subject, *p, subject)));
  }
}

void as_rule(std::string_view in) {
  std::vector<std::string_view> f;
  for (std::size_t start = 0; f.size() < 3;) {
    std::size_t sep = in.find('\x1f', start);
    if (sep == std::string_view::npos) return;
    f.push_back(in.substr(start, sep - start));
    start = sep + 1;
    if (f.size() == 3) f.push_back(in.substr(start));
  }
  auto cls = ctx::policy::class_from(f[1]);
  if (!cls) return;
  Rule r{std::string(f[0]), *cls, std::string(f[2]), std::string(f[3]), 0};
  auto p = Policy::from_rules({r});
  auto req = ctx::policy::parse_request(std::string(f[1]) + ":" + r.object, r.permission);
  if (!p) {
    check(p.error().code == EINVAL);
    // The request half alone is valid only when the subject is at fault.
    if (req) check(static_cast<bool>(Policy::from_rules({Rule{"s_t", r.cls, r.object, r.permission, 0}})));
    return;
  }
  check(static_cast<bool>(req));
  round_trip(r);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  as_policy(in);
  as_rule(in);
  return 0;
}
