#include "mountspec/attenuate.hpp"

#include <set>
#include <utility>

#include "base/path.hpp"

namespace ctx::mountspec {

namespace {

Error denial(std::size_t i, const ChildMount& c, int code, const std::string& reason, const std::string& what) {
  return Error{
      code, "mount[" + std::to_string(i) + "] " + c.source + " -> " + c.target + ": " + errno_name(code) + ": " + what,
      reason};
}

}  // namespace

const Entry* covering(const Table& parent, std::string_view inner) {
  // A deeper mount shadows a shallower one; two entries of the same depth
  // cannot both cover `inner` (targets are unique).
  const Entry* best = nullptr;
  for (const auto& p : parent)
    if (path_is_at_or_under(inner, p.target) && (best == nullptr || path_depth(p.target) > path_depth(best->target)))
      best = &p;
  return best;
}

std::optional<std::string> widening(const Entry& p, const Entry& child) {
  if (!child.attrs.rdonly && p.attrs.rdonly) return "rw requested but the parent sees " + p.target + " read-only";
  if (child.kind == Kind::rbind && p.kind != Kind::rbind)
    return "rbind requested but the parent's mount of " + p.target +
           " is bind (its submounts are hidden from the parent)";
  // Without a user namespace, open_tree without AT_RECURSIVE shows what
  // lies under the host's submounts below the source, which the parent's
  // rbind covers.
  if (child.kind == Kind::bind && p.kind == Kind::rbind)
    return "bind requested but the parent sees " + p.target +
           " with rbind: a bind would uncover what the submounts below it cover; leave the kind unset or ask rbind";
  for (auto [name, flag] :
       {std::pair{"nosuid", &Attrs::nosuid}, std::pair{"nodev", &Attrs::nodev}, std::pair{"noexec", &Attrs::noexec}})
    if (p.attrs.*flag && !(child.attrs.*flag))
      return std::string(name) + " dropped but the parent's mount of " + p.target + " has it";
  return std::nullopt;
}

Result<void> check_derived(const Table& parent, const Entry& child) {
  const Entry* deepest = nullptr;
  for (const auto& p : parent) {
    if (!path_is_at_or_under(child.source, p.source)) continue;
    // Only where the parent really sees that host path through p.
    if (covering(parent, path_join(p.target, path_suffix(child.source, p.source))) != &p) continue;
    if (!widening(p, child)) return {};
    if (deepest == nullptr || path_depth(p.source) > path_depth(deepest->source)) deepest = &p;
  }
  if (deepest == nullptr)
    return fail(
        Error{EACCES, "not visible to the parent (no parent mount shows " + child.source + ")", "mount_not_visible"});
  return fail(Error{EACCES, *widening(*deepest, child), "mount_widens_access"});
}

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
      if (auto issue = abs_path_issue(*p)) return fail(denial(i, c, EINVAL, "invalid_mount", issue->what + ": " + *p));
    if (c.target == "/") return fail(denial(i, c, EINVAL, "invalid_mount", "target must not be /"));
    const Entry* p = covering(parent, c.source);
    if (p == nullptr)
      return fail(denial(i, c, EACCES, "mount_not_visible",
                         "not visible to the parent (no parent mount covers " + c.source + ")"));
    Entry e;
    e.source = path_join(p->source, path_suffix(c.source, p->target));
    e.target = c.target;
    e.kind = c.kind.value_or(p->kind);
    // Flags: the parent's are kept whatever the request says; the request
    // may add more. The mode is the request's: rw under a read-only parent
    // mount is refused below, not narrowed.
    e.attrs = p->attrs | c.attrs;
    e.attrs.rdonly = c.attrs.rdonly;
    if (auto why = widening(*p, e)) return fail(denial(i, c, EACCES, "mount_widens_access", *why));
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
      n.kind = q.kind;
      // q's flags and mode, narrowed by the request's (ro if it is ro).
      n.attrs = q.attrs | e.attrs;
      CTX_TRY(add(n, i, c));
    }
  }
  return out;
}

}  // namespace ctx::mountspec
