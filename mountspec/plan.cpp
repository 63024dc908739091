#include "mountspec/plan.hpp"

#include <algorithm>

#include "base/path.hpp"

namespace ctx::mountspec {

Table order_for_apply(const Table& t) {
  Table out = t;
  std::stable_sort(out.begin(), out.end(),
                   [](const Entry& a, const Entry& b) { return path_less(a.target, b.target); });
  return out;
}

}  // namespace ctx::mountspec
