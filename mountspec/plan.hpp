// Ordering a table for application. Pure.
#pragma once

#include "mountspec/table.hpp"

namespace ctx::mountspec {

/// Returns the entries ordered parents-before-children by target
/// (component-wise, base/path.hpp path_less), stable for equal depth, so a
/// later mount can never hide an earlier one by accident. The targets are
/// unique: parse (table.hpp) refuses a second one, naming both lines, and
/// every table reaches a plan through it.
Table order_for_apply(const Table& t);

}  // namespace ctx::mountspec
