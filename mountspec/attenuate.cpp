#include "mountspec/attenuate.hpp"

#include <set>

#include "base/path.hpp"

namespace ctx::mountspec {

namespace {

Error denial(std::size_t i, const ChildMount& c, int code, const std::string& reason, const std::string& what) {
  return Error{code, "mount[" + std::to_string(i) + "] " + c.source + " -> " + c.target + ": " + errno_name(code) + ": " + what,
               reason};
}

// The parent mount through which `inner` is seen: the deepest target at or
// above it (a deeper mount shadows a shallower one). Later entries with
// the same depth cannot exist (targets are unique).
const Entry* covering(const Table& parent, std::string_view inner) {
  const Entry* best = nullptr;
  for (const auto& p : parent)
    if (path_is_at_or_under(inner, p.target) && (best == nullptr || path_depth(p.target) > path_depth(best->target)))
      best = &p;
  return best;
}

}  // namespace

Result<Table> attenuate(const Table& parent, const std::vector<ChildMount>& request) {
  Table out;
  std::set<std::string> targets;
  auto add = [&](Entry e, std::size_t i, const ChildMount& c) -> Result<void> {
    if (!targets.insert(e.target).second)
      return fail(denial(i, c, EINVAL, "invalid_mount", "target " + e.target + " requested twice"));
    out.push_back(std::move(e));
    return {};
  };
  for (std::size_t i = 0; i < request.size(); ++i) {
    const ChildMount& c = request[i];
    for (const std::string* p : {&c.source, &c.target})
      if (auto issue = abs_path_issue(*p))
        return fail(denial(i, c, EINVAL, "invalid_mount", issue->what + ": " + *p));
    if (c.target == "/") return fail(denial(i, c, EINVAL, "invalid_mount", "target must not be /"));
    const Entry* p = covering(parent, c.source);
    if (p == nullptr)
      return fail(denial(i, c, EACCES, "mount_not_visible", "not visible to the parent (no parent mount covers " + c.source + ")"));
    if (c.mode == Mode::rw && p->mode == Mode::ro)
      return fail(denial(i, c, EACCES, "mount_widens_access", "rw requested but the parent sees " + p->target + " read-only"));
    Kind kind = c.kind.value_or(p->kind);
    if (kind == Kind::rbind && p->kind != Kind::rbind)
      return fail(denial(i, c, EACCES, "mount_widens_access",
                         "rbind requested but the parent's mount of " + p->target + " is bind (its submounts are hidden from the parent)"));
    Entry e;
    e.source = path_join(p->source, path_suffix(c.source, p->target));
    e.target = c.target;
    e.mode = c.mode;
    e.kind = kind;
    // Flags: the parent's are kept whatever the request says; the request
    // may add more.
    e.nosuid = p->nosuid || c.nosuid;
    e.nodev = p->nodev || c.nodev;
    e.noexec = p->noexec || c.noexec;
    CTX_TRY(add(e, i, c));
    // Parent mounts strictly below the requested source hide what lies
    // beneath them in the parent's view: carry them into the child so the
    // child sees exactly what the parent sees there, never the host's
    // directory underneath. Every parent target is part of the parent's
    // view (its table is applied parents first), so all are carried.
    for (const auto& q : parent) {
      if (!path_is_at_or_under(q.target, c.source) || q.target == c.source) continue;
      Entry n;
      n.source = q.source;
      n.target = path_join(c.target, path_suffix(q.target, c.source));
      n.mode = c.mode == Mode::ro ? Mode::ro : q.mode;
      n.kind = q.kind;
      n.nosuid = q.nosuid || e.nosuid;
      n.nodev = q.nodev || e.nodev;
      n.noexec = q.noexec || e.noexec;
      CTX_TRY(add(n, i, c));
    }
  }
  return out;
}

}  // namespace ctx::mountspec
