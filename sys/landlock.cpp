#include "sys/landlock.hpp"

#include <linux/landlock.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>

#include "base/unique_fd.hpp"
#include "sys/error.hpp"
#include "sys/probe.hpp"

namespace ctx::sys {

namespace {

// Debian 12's uapi headers predate ABI 6: the attribute with its `scoped`
// field, as the kernel defines it (include/uapi/linux/landlock.h).
struct RulesetAttr {
  std::uint64_t handled_access_fs;
  std::uint64_t handled_access_net;
  std::uint64_t scoped;
};
constexpr std::uint64_t kScopeAbstractUnixSocket = 1ULL << 0;
constexpr std::uint64_t kScopeSignal = 1ULL << 1;

}  // namespace

Result<bool> landlock_scope_ipc() {
  if (landlock_abi().value_or(0) < kLandlockScopeAbi) return false;
  RulesetAttr attr{0, 0, kScopeAbstractUnixSocket | kScopeSignal};
  long fd = ::syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0);
  if (fd < 0) return CTX_FAIL_ERRNO("landlock_create_ruleset");
  UniqueFd ruleset(static_cast<int>(fd));
  if (::syscall(SYS_landlock_restrict_self, ruleset.get(), 0) < 0) return CTX_FAIL_ERRNO("landlock_restrict_self");
  return true;
}

}  // namespace ctx::sys
