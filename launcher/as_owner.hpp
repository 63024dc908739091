// A root supervisor reading the CTX tree as the owner would (the tool and
// model gates): the file-system ids set to the owner's for a scope.
#pragma once

#include <cstdlib>
#include <optional>

#include "base/result.hpp"
#include "launcher/plan.hpp"
#include "sys/identity.hpp"

namespace ctx::launcher {

// A root supervisor's file-system ids set to the owner's for a scope, as
// the sandbox and the view read the tree; back to root's at its end (the
// supervisor is single-threaded: the ids are the process's).
class AsOwner {
 public:
  static Result<AsOwner> enter(const IdPlan& ids) {
    if (!ids.privileged) return AsOwner(std::nullopt);
    CTX_TRY_ASSIGN(sys::Creds saved, sys::current_creds());
    CTX_TRY(sys::set_fs_ids(ids.fs.uid, ids.fs.gid, ids.fs.groups));
    return AsOwner(std::move(saved));
  }
  AsOwner(AsOwner&& o) noexcept : saved_(std::move(o.saved_)) { o.saved_.reset(); }
  AsOwner& operator=(AsOwner&&) = delete;
  ~AsOwner() {
    if (!saved_) return;
    // Failing to become root again would leave the supervisor unable to
    // do its work (cgroups, files of other owners): stop rather than go on.
    if (!sys::set_fs_ids(saved_->uid, saved_->gid, saved_->groups)) std::abort();
  }

 private:
  explicit AsOwner(std::optional<sys::Creds> saved) : saved_(std::move(saved)) {}
  std::optional<sys::Creds> saved_;
};

}  // namespace ctx::launcher
