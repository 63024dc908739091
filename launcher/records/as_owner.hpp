// A root supervisor acting as the agent's owner for a scope: the owner's
// file-system ids (IdPlan::fs) while it reads the CTX tree (the tool and
// model gates) or makes and writes the agent's files (sys::MakeAs).
#pragma once

#include <optional>

#include "base/result.hpp"
#include "launcher/plan/plan.hpp"
#include "sys/file.hpp"
#include "sys/identity.hpp"

namespace ctx::launcher {

/// The rights a supervisor makes and writes the agent's files with: the
/// owner's file-system ids in a root launch, the caller's own (nullopt)
/// otherwise, where the caller is the owner.
inline sys::MakeAs owner_rights(const IdPlan& ids) {
  if (!ids.privileged) return std::nullopt;
  return ids.fs;
}

/// A root supervisor's file-system ids set to the owner's for a scope, as
/// the sandbox and the view read the tree; the previous ones at its end.
/// Nothing in an unprivileged launch.
class AsOwner {
 public:
  static Result<AsOwner> enter(const IdPlan& ids) {
    CTX_TRY_ASSIGN(sys::FsIdScope scope, sys::FsIdScope::enter(owner_rights(ids)));
    return AsOwner(std::move(scope));
  }

 private:
  explicit AsOwner(sys::FsIdScope scope) : scope_(std::move(scope)) {}
  sys::FsIdScope scope_;
};

}  // namespace ctx::launcher
