#include "launcher/tool_view.hpp"

#include <algorithm>

#include "base/names.hpp"
#include "base/path.hpp"

namespace ctx::launcher {

namespace {

std::vector<std::string> ctx_path_of(const LaunchPlan& plan) {
  std::vector<std::string> out;
  for (const auto& kv : plan.env) {
    if (kv.rfind("CTX_PATH=", 0) != 0) continue;
    std::string v = kv.substr(9);
    for (std::size_t start = 0; start <= v.size();) {
      std::size_t colon = v.find(':', start);
      std::string d = v.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
      if (!d.empty() && !abs_path_issue(d)) out.push_back(d);
      if (colon == std::string::npos) break;
      start = colon + 1;
    }
  }
  return out;
}

// The bind that decides what an inner path shows.
const MountStep* shown_by(const LaunchPlan& plan, const std::string& inner) {
  return mountspec::covering_step(plan.mounts, inner, {StepKind::bind});
}

bool masked(const LaunchPlan& plan, const std::string& inner) {
  for (const auto& m : plan.mounts)
    if (m.kind == StepKind::mask && path_is_at_or_under(inner, m.target)) return true;
  return false;
}

bool allowed(const agentdir::AgentSpec& spec, const ToolDirEntry& e) {
  const std::string subject = spec.subject();
  if (subject.empty() || tool_name_issue(e.name)) return false;
  if (!spec.policy.allows(subject, policy::Class::tool, e.name, "execute")) return false;
  if (!e.own_policy) return true;
  auto own = policy::Policy::parse(e.name + ".d/policy", *e.own_policy);
  return own && own->allows(subject, policy::Class::tool, e.name, "execute");
}

}  // namespace

std::vector<std::string> ctx_path_host_dirs(const LaunchPlan& plan) {
  std::vector<std::string> out;
  for (const auto& inner : ctx_path_of(plan)) {
    const MountStep* b = shown_by(plan, inner);
    if (b == nullptr || masked(plan, inner)) continue;
    std::string host = path_join(b->source, path_suffix(inner, b->target));
    bool seen = false;
    for (const auto& h : out) seen = seen || h == host;
    if (!seen) out.push_back(host);
  }
  return out;
}

void plan_tool_views(const agentdir::AgentSpec& spec, const std::vector<ToolDirListing>& listings, LaunchPlan& plan,
                     const std::string& helper) {
  for (const auto& l : listings) {
    std::vector<std::string> show;
    std::vector<std::string> hidden;
    std::vector<std::string> wrapped;
    for (const auto& e : l.entries) {
      switch (e.kind) {
        case ToolDirEntry::Kind::directory:
        case ToolDirEntry::Kind::file: show.push_back(e.name); break;
        case ToolDirEntry::Kind::executable:
          (allowed(spec, e) ? show : hidden).push_back(e.name);
          if (!helper.empty() && allowed(spec, e)) wrapped.push_back(e.name);
          break;
        case ToolDirEntry::Kind::other: hidden.push_back(e.name); break;
      }
    }
    // Everywhere the directory appears, not only at its CTX_PATH name: a
    // second bind of the same tree must not show what the first hides.
    std::vector<MountStep> views;
    for (const auto& b : plan.mounts) {
      if (b.kind != StepKind::bind || !path_is_at_or_under(l.host_dir, b.source)) continue;
      std::string inner = path_join(b.target, path_suffix(l.host_dir, b.source));
      if (shown_by(plan, inner) != &b || masked(plan, inner)) continue;
      MountStep v;
      v.kind = StepKind::tool_view;
      v.target = inner;
      v.source = l.host_dir;
      v.attrs = {.rdonly = true, .nosuid = true, .nodev = true, .noexec = true};
      v.show = show;
      v.wrapped = wrapped;
      v.helper = helper;
      // A deeper bind inside the tier stays visible (the clone of its
      // first component below the tier carries it), unless it lies on a
      // hidden entry.
      for (const auto& deeper : plan.mounts) {
        if (deeper.kind != StepKind::bind || deeper.target == inner || !path_is_at_or_under(deeper.target, inner))
          continue;
        std::string first(path_suffix(deeper.target, inner));
        first = first.substr(0, first.find('/'));
        auto in = [&](const std::vector<std::string>& names) {
          return std::find(names.begin(), names.end(), first) != names.end();
        };
        if (!in(v.show) && !in(hidden)) v.show.push_back(first);
      }
      views.push_back(std::move(v));
    }
    for (auto& v : views) plan.mounts.push_back(std::move(v));
  }
}

}  // namespace ctx::launcher
