#include "launcher/control/model_gate.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string_view>

#include "base/names.hpp"
#include "base/path.hpp"
#include "base/text.hpp"
#include "base/timestamp.hpp"
#include "launcher/control/http_meta.hpp"
#include "launcher/records/agent_files.hpp"
#include "launcher/records/as_owner.hpp"
#include "launcher/plan/model_plan.hpp"
#include "launcher/sandbox/static_view.hpp"
#include "policy/policy.hpp"
#include "sys/file.hpp"
#include "sys/resolve.hpp"
#include "sys/socket.hpp"

#include <fcntl.h>

namespace ctx::launcher {

namespace {

using nlohmann::json;

Error refusal(int code, std::string reason, std::string msg) {
  Error e{code, std::move(msg)};
  e.reason = std::move(reason);
  return e;
}

// The lines of a model's small .d/ file, without their '\n'.
std::vector<std::string_view> lines_of(std::string_view text) {
  std::vector<std::string_view> out;
  for (std::size_t start = 0; start < text.size();) {
    std::size_t nl = text.find('\n', start);
    out.push_back(text.substr(start, nl == std::string_view::npos ? std::string_view::npos : nl - start));
    start = nl == std::string_view::npos ? text.size() : nl + 1;
  }
  return out;
}

// A model's .d/env: KEY=VALUE lines; blank lines and # comments skipped;
// a line that is neither is left out (the model's own file, not the
// agent's to get wrong).
std::vector<std::pair<std::string, std::string>> parse_env(std::string_view text) {
  std::vector<std::pair<std::string, std::string>> out;
  for (std::string_view line : lines_of(text)) {
    auto eq = line.find('=');
    if (line.empty() || line[0] == '#' || eq == std::string_view::npos || eq == 0) continue;
    out.emplace_back(std::string(line.substr(0, eq)), std::string(line.substr(eq + 1)));
  }
  return out;
}

// Whether a model's .d/cap grants it the network: a line `network`.
bool names_network(std::string_view cap) {
  for (std::string_view line : lines_of(cap))
    if (line == "network") return true;
  return false;
}

}  // namespace

// An HTTP call names its model in its path: one segment for an alias (a
// symbolic link in a model tier, the user's or the system's), else two
// (provider/model); the endpoint sends the first as the name.
void ModelGate::take_model_segment(std::string& name, HttpMeta& h) const {
  if (name.find('/') != std::string::npos) return;
  access::FsTree tree(tree_);
  for (const std::string& tier : {"home/" + std::to_string(plan_.owner) + "/model/", std::string("model/")})
    if (auto e = tree.stat(tier + name); e && e->type == access::HostEntry::Type::symlink) return;
  const std::size_t end = h.path.find('/', 1);
  if (h.path.size() < 2) return;
  name += h.path.substr(0, end);
  h.path = end == std::string::npos ? "" : h.path.substr(end);
}

ModelGate::ModelGate(const LaunchPlan& plan, int tree, std::function<void(const Event&)> event,
                     std::function<void(const Event&)> log)
    : plan_(plan),
      tree_(tree),
      event_(std::move(event)),
      log_(std::move(log)),
      live_(plan.ctx_root, runtime_viewer(plan)) {}

void ModelGate::record(const Event& ev) {
  event_(ev);
  log_(ev);
}

// The model's own <m>.d/log, beneath the CTX root and never through a
// symlink; nothing when the model has no .d/. A root supervisor writes as
// root only into a .d/ that root owns and nobody else may write (the
// system tier of a root-owned tree); anywhere else with the owner's ids,
// so a user tier's log gets nothing the owner could not write.
void ModelGate::log_model(const std::string& rel, const Event& ev) {
  const json line = stamp_event(ev, {timestamp_now(), plan_.name, plan_.session});
  auto root = sys::open_dir(plan_.ctx_root);
  if (!root) return;
  auto d = sys::open_dir_beneath(root->get(), rel + ".d");
  if (!d) return;
  auto st = sys::stat_fd(d->get());
  if (!st) return;
  const bool root_only = st->uid == 0 && (st->mode & 022) == 0;
  std::optional<AsOwner> as_owner;
  if (!root_only) {
    auto a = AsOwner::enter(plan_.ids);
    if (!a) return;
    as_owner.emplace(std::move(*a));
  }
  std::uint64_t size = kUnknownLogSize;
  auto r = append_capped_log(d->get(), line.dump(-1, ' ', true) + "\n", size);
  if (!r) std::fprintf(stderr, "ctx-agent-run: warning: %s.d/log: %s\n", rel.c_str(), printable(r.error().msg).c_str());
}

void ModelGate::finished(const ModelRun& run, int exit_status) {
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - run.started).count();
  Event ev{"model.call",
           "model/" + run.name,
           exit_status == 0 ? EventStatus::ok : EventStatus::failed,
           {{"exit_status", exit_status}, {"ms", ms}}};
  if (!run.alias.empty()) ev.facts["alias"] = run.alias;
  record(ev);
  log_model(run.rel, ev);
}

json ModelGate::refuse(const std::string& name, const Error& e, EventStatus status, const std::string& model,
                       const std::string& alias) {
  // A name that is no model's (access::model_call looks none up) is not
  // written: the record stays as short as a valid name makes it (the
  // rate limit's arithmetic, launcher/control/rate_limit.hpp, counts on it).
  const bool valid = name.find('/') != std::string::npos ? !model_name_issue(name) : !space_name_issue(name);
  const std::string object = !model.empty() ? "model/" + model : valid ? "model/" + name : "model";
  Event ev{"model.call", object, status};
  if (!e.reason.empty()) ev.facts["reason"] = e.reason;
  if (!alias.empty()) ev.facts["alias"] = alias;
  record(ev);
  json a{{"ok", false}, {"op", "model"}, {"name", name}, {"code", errno_name(e.code)}, {"message", e.msg}};
  if (!e.reason.empty()) a["reason"] = e.reason;
  return a;
}

// Decides a call as the owner: the model entry to start, or the refusal
// (with the model file when the call reached the model).
std::variant<ModelEntry, ModelGate::Refusal> ModelGate::decide(const std::string& name) {
  const access::Viewer& v = live_.get();
  auto as_owner = AsOwner::enter(plan_.ids);
  if (!as_owner)
    return Refusal{refusal(as_owner.error().code, "error", as_owner.error().msg), EventStatus::error, "", "", ""};
  access::FsTree tree(tree_);
  access::ModelCall c = access::model_call(v, tree, name);
  auto missing = [&] { return policy::missing_rule(v.subject, policy::Class::model, c.name, "use"); };
  using V = access::ModelVerdict;
  switch (c.verdict) {
    case V::allowed: break;
    case V::not_found:
      return Refusal{refusal(ENOENT, "not_found", "no model " + name + " in home/<owner>/model or model/"),
                     EventStatus::error, "", "", ""};
    case V::agent_policy:
      return Refusal{refusal(EACCES, "agent_policy", "the policy of " + plan_.name + " has no " + missing()),
                     EventStatus::denied, "", c.name, c.alias};
    case V::mode:
      return Refusal{refusal(EACCES, "mode", c.rel + " is not executable for uid " + std::to_string(v.uid)),
                     EventStatus::denied, c.rel, c.name, c.alias};
    case V::model_policy:
      return Refusal{refusal(EACCES, "model_policy",
                             "the model's own policy (" + c.name + ".d/policy) has no " +
                                 access::own_policy_gap(v, c.refused_type, policy::Class::model, c.name, "use")),
                     EventStatus::denied, c.rel, c.name, c.alias};
  }
  ModelEntry m;
  m.name = c.name;
  m.rel = c.rel;
  m.alias = c.alias;
  m.host_path = path_join(plan_.ctx_root, c.rel);
  if (auto d = tree.stat(c.rel + ".d"); d && d->type == access::HostEntry::Type::directory)
    m.meta_dir = m.host_path + ".d";
  if (auto env = tree.read(c.rel + ".d/env")) m.env = parse_env(*env);
  if (auto cap = tree.read(c.rel + ".d/cap")) m.network = names_network(*cap);
  return m;
}

std::variant<json, ModelRun> ModelGate::call(const json& req, std::vector<UniqueFd> stdio) {
  for (const auto& [k, v] : req.items())
    if (k != "op" && k != "name" && k != "http")
      return refuse("", refusal(EINVAL, "invalid_request", "unknown key '" + k + "' in model"), EventStatus::error);
  if (!req.contains("name") || !req["name"].is_string())
    return refuse("", refusal(EINVAL, "invalid_request", "model needs \"name\", a string"), EventStatus::error);
  if (stdio.size() != 3)
    return refuse("", refusal(EINVAL, "invalid_request", "model needs the caller's stdin, stdout and stderr"),
                  EventStatus::error);
  std::string name = req["name"].get<std::string>();
  // A call through the HTTP endpoint: its request, checked here (the
  // endpoint has the agent's authority only), becomes the CGI environment.
  std::optional<HttpMeta> http;
  if (req.contains("http")) {
    auto h = decode_http_meta(req["http"]);
    if (!h) return refuse(name, h.error(), EventStatus::error);
    http = std::move(*h);
    auto as_owner = AsOwner::enter(plan_.ids);
    if (!as_owner)
      return refuse(name, refusal(as_owner.error().code, "error", as_owner.error().msg), EventStatus::error);
    take_model_segment(name, *http);
  }
  auto decided = decide(name);
  if (auto* r = std::get_if<Refusal>(&decided)) {
    json answer = refuse(name, r->error, r->status, r->model, r->alias);
    if (!r->rel.empty())
      log_model(r->rel, {"model.call", "model/" + r->model, r->status, {{"reason", r->error.reason}}});
    return answer;
  }
  ModelEntry& m = std::get<ModelEntry>(decided);
  if (http) m.request_env = cgi_env(*http);
  const auto started = std::chrono::steady_clock::now();
  // An empty directory for the model's root to be mounted over; what it
  // holds is never seen (the sandbox mounts a fresh tmpfs over it).
  auto anchor = sys::make_temp_dir("/tmp/ctx-model.");
  if (!anchor) return refuse(name, refusal(anchor.error().code, "error", anchor.error().msg), EventStatus::error);
  if (plan_.ids.privileged) (void)sys::chown_at(AT_FDCWD, *anchor, sys::Ownership{plan_.ids.fs.uid, plan_.ids.fs.gid});
  if (!base_) {
    base_.emplace();
    for (const char* d : {"/usr", "/etc/alternatives", "/etc/ssl", "/etc/ca-certificates"})
      if (sys::open_path_no_symlinks(d)) base_->emplace_back(d);
  }
  LaunchPlan p = model_plan(plan_, m, *anchor, *base_);
  auto run = start_model(p, {stdio[0].get(), stdio[1].get(), stdio[2].get()});
  (void)sys::remove_at(AT_FDCWD, *anchor, true);  // empty on the host: the tmpfs was the sandbox's
  if (!run) {
    json answer = refuse(name, refusal(run.error().code, "error", run.error().msg), EventStatus::error);
    log_model(m.rel, {"model.call", "model/" + m.name, EventStatus::error, {{"reason", "error"}}});
    return answer;
  }
  run->name = m.name;
  run->rel = m.rel;
  run->alias = m.alias;
  run->started = started;
  return std::move(*run);
}

}  // namespace ctx::launcher
