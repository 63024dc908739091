#include "mountspec/geometry.hpp"

#include <algorithm>

#include "base/path.hpp"

namespace ctx::mountspec {

namespace {

bool places_at_target(StepKind k) {
  switch (k) {
    case StepKind::root:
    case StepKind::bind:
    case StepKind::mask:
    case StepKind::view:
    case StepKind::fs:
    case StepKind::dev_node:
    case StepKind::socket: return true;
    case StepKind::symlink:
    case StepKind::seal: return false;
  }
  return false;
}

// The deepest step of plan[0, end) over `inner` that `admit` admits
// (the later one of two at the same target).
template <typename Pred>
const MountStep* deepest_over(const MountPlan& plan, std::size_t end, std::string_view inner, Pred admit) {
  const auto p = plain_path(inner);
  if (!p) return nullptr;
  const MountStep* best = nullptr;
  for (std::size_t i = 0; i < end && i < plan.size(); ++i) {
    const MountStep& s = plan[i];
    if (admit(kind_of(s)) && path_is_at_or_under(*p, target_of(s)) &&
        (best == nullptr || target_of(s).size() >= target_of(*best).size()))
      best = &s;
  }
  return best;
}

template <typename Pred>
const MountStep* deepest_over(const MountPlan& plan, std::string_view inner, Pred admit) {
  return deepest_over(plan, plan.size(), inner, admit);
}

// Whether `inner` lies in an entry a mask keeps (what the mask covered
// shows there).
bool kept_by(const MountStep& s, std::string_view inner) {
  const auto* m = std::get_if<MaskStep>(&s);
  return m != nullptr && std::any_of(m->keep.begin(), m->keep.end(), [&](const MaskKeep& k) {
           return path_is_at_or_under(inner, path_join(m->target, k.name));
         });
}

// The host directory a step's target shows, when it shows one.
std::optional<std::string> host_source(const MountStep& s, std::string_view ctx_root) {
  switch (kind_of(s)) {
    case StepKind::root:
      if (std::get<RootStep>(s).fresh) return std::nullopt;
      return std::get<RootStep>(s).source;
    case StepKind::bind: return std::get<BindStep>(s).source;
    case StepKind::dev_node: return std::get<DevNodeStep>(s).source;
    case StepKind::view: {
      const std::string& rel = std::get<ViewStep>(s).source;
      if (rel.empty() || rel == ".") return std::string(ctx_root);
      return path_join(ctx_root, rel);
    }
    case StepKind::mask:
    case StepKind::fs:
    case StepKind::socket:
    case StepKind::symlink:
    case StepKind::seal: return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> plain_path(std::string_view p) {
  if (p.empty() || p.front() != '/') return std::nullopt;
  std::string out = "/";
  for (std::size_t i = 0; i < p.size();) {
    std::size_t j = p.find('/', i);
    if (j == std::string_view::npos) j = p.size();
    const std::string_view c = p.substr(i, j - i);
    if (c == "..") return std::nullopt;
    if (!c.empty() && c != ".") out = path_join(out, c);
    i = j + 1;
  }
  if (abs_path_issue(out)) return std::nullopt;
  return out;
}

const MountStep* covering_step(const MountPlan& plan, std::string_view inner) {
  return deepest_over(plan, inner, places_at_target);
}

const MountStep* covering_step(const MountPlan& plan, std::string_view inner, std::initializer_list<StepKind> kinds) {
  return deepest_over(plan, inner, [&](StepKind k) { return std::find(kinds.begin(), kinds.end(), k) != kinds.end(); });
}

const MountStep* covering_step(const MountPlan& plan, std::size_t end, std::string_view inner,
                               std::initializer_list<StepKind> kinds) {
  return deepest_over(plan, end, inner,
                      [&](StepKind k) { return std::find(kinds.begin(), kinds.end(), k) != kinds.end(); });
}

std::optional<std::string> host_path_of(const MountPlan& plan, std::string_view ctx_root, std::string_view inner) {
  const auto p = plain_path(inner);
  const MountStep* s = p ? covering_step(plan, *p) : nullptr;
  // Through a kept entry of a mask: what the steps before it show there.
  while (s != nullptr && kept_by(*s, *p))
    s = deepest_over(plan, static_cast<std::size_t>(s - plan.data()), *p, places_at_target);
  if (s == nullptr) return std::nullopt;
  auto src = host_source(*s, ctx_root);
  if (!src) return std::nullopt;
  return path_join(*src, path_suffix(*p, target_of(*s)));
}

std::optional<std::string> inner_path_of(const MountPlan& plan, std::string_view ctx_root, std::string_view host) {
  const auto h = plain_path(host);
  if (!h) return std::nullopt;
  std::optional<std::string> best;
  std::size_t best_len = 0;
  for (const auto& s : plan) {
    const auto src = host_source(s, ctx_root);
    if (!src || !path_is_at_or_under(*h, *src) || (best && src->size() <= best_len)) continue;
    std::string inner = path_join(target_of(s), path_suffix(*h, *src));
    if (host_path_of(plan, ctx_root, inner) != *h) continue;  // a mask or a deeper step lies over it
    best = std::move(inner);
    best_len = src->size();
  }
  return best;
}

}  // namespace ctx::mountspec
