// libFuzzer target: the policy v0 parser, rule formatting round trip,
// from_rules, and the subset check of a policy against itself.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "policy/policy.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  std::vector<ctx::Error> all;
  auto p = ctx::policy::Policy::parse("f.d/policy", in, &all);
  if (!p) {
    if (all.empty() || !(all.front() == p.error())) std::abort();
    return 0;
  }
  for (const auto& r : p->rules()) {
    auto again = ctx::policy::Policy::parse("x", ctx::policy::format_rule(r) + "\n");
    if (!again || again->rules().size() != 1) std::abort();
    auto a = again->rules().front();
    a.line = r.line;
    if (!(a == r)) std::abort();
    if (!p->allows(r.subject, r.cls, r.object, r.permission)) std::abort();
    // A policy holding only this rule is within the whole policy.
    auto single = ctx::policy::Policy::from_rules({r});
    if (!single || !ctx::policy::check_subset(*p, r.subject, *single, r.subject)) std::abort();
  }
  auto same = ctx::policy::Policy::from_rules(p->rules());
  if (!same || !(*same == *p)) std::abort();
  return 0;
}
