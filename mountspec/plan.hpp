// Ordering a table for application. Pure.
#pragma once

#include "base/result.hpp"
#include "mountspec/table.hpp"

namespace ctx::mountspec {

/// Returns the entries ordered parents-before-children by target
/// (component-wise, base/path.hpp path_less), stable for equal depth, so a
/// later mount can never hide an earlier one by accident. Duplicate
/// targets are EINVAL naming both lines.
Result<Table> order_for_apply(const Table& t, std::string_view file);

}  // namespace ctx::mountspec
