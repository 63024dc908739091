#include "mountspec/plan.hpp"

#include <algorithm>

#include "base/path.hpp"
#include "base/text.hpp"

namespace ctx::mountspec {

Result<Table> order_for_apply(const Table& t, std::string_view file) {
  Table out = t;
  std::stable_sort(out.begin(), out.end(),
                   [](const Entry& a, const Entry& b) { return path_less(a.target, b.target); });
  for (std::size_t i = 1; i < out.size(); ++i)
    if (out[i].target == out[i - 1].target)
      return fail(located(file, out[i].line, 0, EINVAL,
                          "target " + out[i].target + " already mounted at line " + std::to_string(out[i - 1].line)));
  return out;
}

}  // namespace ctx::mountspec
