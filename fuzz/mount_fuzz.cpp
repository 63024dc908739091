// libFuzzer target: the v0 mount table parser, its round trip, ordering,
// and attenuation of a table against itself.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "mountspec/attenuate.hpp"
#include "mountspec/plan.hpp"
#include "mountspec/table.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  std::vector<ctx::Error> all;
  auto t = ctx::mountspec::parse("f.d/mount", in, &all);
  if (!t) {
    if (all.empty() || !(all.front() == t.error())) std::abort();  // the first error is returned
    return 0;
  }
  auto back = ctx::mountspec::parse("f.d/mount", ctx::mountspec::format_table(*t));
  if (!back) std::abort();
  for (std::size_t i = 0; i < t->size(); ++i) {
    auto a = (*t)[i], b = (*back)[i];
    a.line = b.line = 0;
    if (!(a == b)) std::abort();
  }
  const auto ordered = ctx::mountspec::order_for_apply(*t);
  for (std::size_t i = 1; i < ordered.size(); ++i)
    if (ordered[i].target == ordered[i - 1].target) std::abort();  // parse refuses duplicates
  std::vector<ctx::mountspec::ChildMount> req;
  for (const auto& e : *t) req.push_back({.source = e.target, .target = e.target, .attrs = e.attrs, .kind = e.kind});
  auto child = ctx::mountspec::attenuate(*t, req);
  (void)child;  // may refuse (nested targets), must not crash
  return 0;
}
