// Fault injection for tests: a build with -Dfault_injection=true (never a
// normal build) makes one named point of a launch, of a child's
// create/start/stop or of the cancellation sequence fail or SIGKILL its
// process, as $CTX_FAULT says ("<point>:fail" or "<point>:kill"; "<point>:late"
// fails 300 ms late, as on a busy machine).
// test/integration/fault_test.cpp walks every point of fault_points().
// In a normal build fault_at() is an inline no-op.
#pragma once

#include <string_view>
#include <vector>

#include "base/result.hpp"

namespace ctx::sys {

/// One point: where it is, which process runs it, whether it can fail
/// (an error path exists there) as well as be killed, and what a launch
/// needs for it to be reached ("" any launch; "masks" a hidden shared
/// space; "terminal" an interactive launch; "child" a child's create,
/// start or stop; "cancel" a stopped agent; "children" a runtime that ends
/// while its children run).
struct FaultPoint {
  std::string_view name;
  std::string_view process;  ///< supervisor, sandbox (its init), runtime
  bool can_fail;
  std::string_view needs;
};

/// Every point, in the order a launch reaches them.
const std::vector<FaultPoint>& fault_points();

#ifdef CTX_FAULT_INJECTION
inline constexpr bool kFaultInjection = true;
/// At `point`: SIGKILLs this process when $CTX_FAULT is "<point>:kill";
/// returns EIO "injected fault at <point>" when it is "<point>:fail", and
/// 300 ms later when it is "<point>:late".
Result<void> fault_at(std::string_view point);
#else
inline constexpr bool kFaultInjection = false;
inline Result<void> fault_at(std::string_view) { return {}; }
#endif

}  // namespace ctx::sys
