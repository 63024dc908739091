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
#include "launcher/plan/model_plan.hpp"
#include "launcher/records/agent_files.hpp"
#include "launcher/records/as_owner.hpp"
#include "launcher/records/dot_log.hpp"
#include "launcher/sandbox/sandbox.hpp"
#include "launcher/sandbox/start.hpp"
#include "launcher/sandbox/static_view.hpp"
#include "policy/policy.hpp"
#include "sys/file.hpp"
#include "sys/identity.hpp"
#include "sys/namespace.hpp"
#include "sys/process.hpp"
#include "sys/resolve.hpp"
#include "sys/socket.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>

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

}  // namespace

std::vector<std::pair<std::string, std::string>> parse_model_env(std::string_view text) {
  std::vector<std::pair<std::string, std::string>> out;
  for (std::string_view line : lines_of(text)) {
    auto eq = line.find('=');
    if (line.empty() || line[0] == '#' || eq == std::string_view::npos || eq == 0) continue;
    out.emplace_back(std::string(line.substr(0, eq)), std::string(line.substr(eq + 1)));
  }
  return out;
}

bool cap_grants_network(std::string_view cap) {
  for (std::string_view line : lines_of(cap))
    if (line == "network") return true;
  return false;
}

std::string model_call_object(const std::string& asked, const std::string& model) {
  if (!model.empty()) return "model/" + model;
  const bool valid = asked.find('/') != std::string::npos ? !model_name_issue(asked) : !space_name_issue(asked);
  return valid ? "model/" + asked : "model";
}

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

ModelAnchor::ModelAnchor(std::string shared, std::string prefix, std::uint32_t owner, sys::MakeAs as)
    : shared_(std::move(shared)), prefix_(std::move(prefix)), owner_(owner), as_(std::move(as)) {}

ModelAnchor::~ModelAnchor() {
  if (found_ && found_->own && intact()) (void)sys::remove_at(AT_FDCWD, found_->path, true);
}

bool ModelAnchor::intact() const {
  if (!found_) return false;
  auto st = sys::stat_at(AT_FDCWD, found_->path);
  if (!st || !*st) return false;
  const sys::FileStat& now = **st;
  const sys::FileStat& then = found_->stat;
  return now.dev == then.dev && now.ino == then.ino && now.uid == then.uid && now.mode == then.mode;
}

std::optional<sys::FileStat> ModelAnchor::shared_dir() const {
  if (!sys::make_dir_if_missing_at(AT_FDCWD, shared_, 0700, as_)) return std::nullopt;
  auto st = sys::stat_at(AT_FDCWD, shared_);
  if (!st || !*st || (**st).uid != owner_ || (**st).mode != (S_IFDIR | 0700)) return std::nullopt;
  return **st;
}

Result<std::string> ModelAnchor::get() {
  if (intact()) return found_->path;
  found_.reset();
  if (auto st = shared_dir()) {
    found_ = Found{shared_, *st, false};
    return shared_;
  }
  CTX_TRY_ASSIGN(std::string dir, sys::make_temp_dir(prefix_));
  if (as_) (void)sys::chown_at(AT_FDCWD, dir, sys::Ownership{as_->uid, as_->gid});
  auto st = sys::stat_at(AT_FDCWD, dir);
  if (!st || !*st) {
    (void)sys::remove_at(AT_FDCWD, dir, true);
    return fail(st ? Error{ENOENT, dir + ": ENOENT: the models' anchor directory vanished as it was made"}
                   : st.error());
  }
  found_ = Found{dir, **st, true};
  return dir;
}

ModelGate::ModelGate(const LaunchPlan& plan, int tree, RecordSink& records)
    : plan_(plan),
      tree_(tree),
      records_(records),
      live_(plan.ctx_root, runtime_viewer(plan)),
      anchor_("/tmp/ctx-model-anchor." + std::to_string(plan.ids.fs.uid), "/tmp/ctx-model.", plan.ids.fs.uid,
              plan.ids.privileged ? sys::MakeAs(plan.ids.fs) : std::nullopt) {}

ModelGate::~ModelGate() {
  if (maker_) (void)sys::wait_pid(maker_->pid);
}

void ModelGate::record(const Event& ev) {
  records_.event(ev);
  records_.log(ev);
}

// The model's own <m>.d/log (append_dot_log, shared); nothing when the
// model has no .d/.
void ModelGate::log_model(const std::string& rel, const Event& ev) {
  const json line = stamp_event(ev, {timestamp_now(), plan_.name, plan_.session});
  auto r = append_dot_log(plan_, rel, line.dump(-1, ' ', true) + "\n", DotLogRule::shared);
  if (!r && r.error().code != ENOENT)
    std::fprintf(stderr, "ctx-agent-run: warning: %s.d/log: %s\n", rel.c_str(), printable(r.error().msg).c_str());
}

void ModelGate::add_poll_fds(std::vector<struct pollfd>& fds) const {
  for (const auto& [conn, run] : runs_) fds.push_back({run.child.pidfd.get(), POLLIN, 0});
  if (maker_sock_.valid()) fds.push_back({maker_sock_.get(), POLLIN, 0});
}

// The spare's maker: a child of the supervisor that makes a user namespace
// (with the model plans' id maps: one line, the caller's own ids, setgroups
// denied, what it may write for itself) and a network namespace owned by
// it, hands both to the supervisor and ends. Nothing runs in them until a
// call's sandbox joins them; nothing but this process and the supervisor
// ever holds them before that.
void ModelGate::make_spare() {
  if (!spare_maps_ || spare_ || maker_) return;
  auto pair = sys::make_seqpacket_pair();
  if (!pair) return;
  auto child = sys::clone_child({0, -1});
  if (!child) return;
  if (child->pid == 0) {
    const int out = pair->second.get();
    if (!sys::close_fds_except({0, 1, 2, out})) _exit(1);
    if (!sys::unshare_ns(CLONE_NEWUSER | CLONE_NEWNET)) _exit(1);
    if (!sys::write_id_maps(0, spare_maps_->uid_map, spare_maps_->gid_map, spare_maps_->deny_setgroups)) _exit(1);
    auto user = sys::open_own_ns("user");
    auto net = sys::open_own_ns("net");
    if (!user || !net || !sys::send_message(out, "s", {user->get(), net->get()})) _exit(1);
    _exit(0);
  }
  maker_ = std::move(*child);
  maker_sock_ = std::move(pair->first);
}

void ModelGate::caller_gone(int conn) {
  if (auto m = runs_.find(conn); m != runs_.end()) m->second.lifeline.reset();
}

bool ModelGate::waits(int conn) const { return runs_.count(conn) != 0; }

std::vector<ModelExit> ModelGate::exited(const std::vector<struct pollfd>& fds) {
  auto ready = [&](int fd) {
    for (const auto& p : fds)
      if (p.fd == fd) return (p.revents & (POLLIN | POLLHUP | POLLERR)) != 0;
    return false;
  };
  if (maker_sock_.valid() && ready(maker_sock_.get())) {
    auto m = sys::recv_message(maker_sock_.get(), 16, 2);
    if (m && *m && (*m)->fds.size() == 2) spare_ = Spare{std::move((*m)->fds[0]), std::move((*m)->fds[1])};
    maker_sock_.reset();
    (void)sys::wait_pid(maker_->pid);
    maker_.reset();
  }
  std::vector<ModelExit> out;
  for (auto it = runs_.begin(); it != runs_.end();) {
    if (!ready(it->second.child.pidfd.get())) {
      ++it;
      continue;
    }
    auto st = sys::wait_pid(it->second.child.pid);
    out.push_back({it->first, st ? exit_code_of(*st) : kExitLaunchFailed, std::move(it->second)});
    it = runs_.erase(it);
  }
  return out;
}

void ModelGate::finished(const ModelExit& e) {
  const ModelRun& run = e.run;
  const int exit_status = e.exit_status;
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - run.started).count();
  Event ev{"model.call",
           "model/" + run.name,
           exit_status == 0 ? EventStatus::ok : EventStatus::failed,
           {{"exit_status", exit_status}, {"ms", ms}}};
  if (!run.alias.empty()) ev.facts["alias"] = run.alias;
  record(ev);
  log_model(run.rel, ev);
  make_spare();
}

json ModelGate::refuse_request(const Error& e) { return refuse("", e, EventStatus::error); }

json ModelGate::refuse(const std::string& name, const Error& e, EventStatus status, const std::string& model,
                       const std::string& alias) {
  // A name that is no model's (access::model_call looks none up) is not
  // written: the record stays as short as a valid name makes it (the
  // rate limit's arithmetic, launcher/control/rate_limit.hpp, counts on it).
  Event ev{"model.call", model_call_object(name, model), status};
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
  if (auto env = tree.read(c.rel + ".d/env")) m.env = parse_model_env(*env);
  if (auto cap = tree.read(c.rel + ".d/cap")) m.network = cap_grants_network(*cap);
  return m;
}

Result<ModelRun> ModelGate::start(const ModelEntry& m, std::vector<UniqueFd> stdio) {
  CTX_TRY_ASSIGN(std::string anchor, anchor_.get());
  if (!base_) {
    base_.emplace();
    for (const char* d : {"/usr", "/etc/alternatives", "/etc/ssl", "/etc/ca-certificates"})
      if (sys::open(sys::at_cwd, d, sys::Open::path_only | sys::Open::no_symlinks)) base_->emplace_back(d);
    // Resolved: /etc/resolv.conf is often a link into /run (systemd-resolved).
    for (const char* f : {"/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf"})
      if (auto real = sys::real_path(f)) net_files_.emplace_back(f, *real);
  }
  LaunchPlan p = model_plan(plan_, m, anchor, *base_, net_files_);
  // The caller's stdio; the model's exec, or the error that ended it.
  SandboxStart how;
  how.stdio = std::array<int, 3>{stdio[0].get(), stdio[1].get(), stdio[2].get()};
  how.id_maps_context = "the model's id maps";
  how.report_context = "the model's sandbox";
  // Spare namespaces made ahead for a call like this one (below): joined,
  // once. Only a plan whose sandbox maps itself, in a user and a network
  // namespace of its own (a model without the network, an unprivileged
  // launch), with the maps they were made with.
  const std::uint64_t own = CLONE_NEWUSER | CLONE_NEWNET;
  const bool spare_kind = !p.ids.privileged && p.ids.user_ns && !p.ids.user_ns_after_mounts &&
                          !supervisor_maps_ids(p.ids) && (p.clone_flags & own) == own;
  const SpareMaps maps{p.ids.uid_map, p.ids.gid_map, p.ids.deny_setgroups};
  if (spare_kind && !spare_maps_) spare_maps_ = maps;
  std::optional<Spare> spare = std::move(spare_);
  spare_.reset();
  if (spare_kind && spare && maps == *spare_maps_ && maps.deny_setgroups)
    how.join = JoinNamespaces{spare->user.get(), spare->net.get()};
  auto sandbox = start_sandbox(p, how);
  spare.reset();
  if (sandbox && sandbox->setup.error) {
    (void)reap_failed(sandbox->child);
    sandbox = fail(setup_error(*sandbox->setup.error));
  }
  if (!sandbox) return fail(sandbox.error());
  ModelRun run;
  run.child = std::move(sandbox->child);
  run.lifeline = std::move(sandbox->lifeline);
  return run;
}

std::optional<json> ModelGate::call(int conn, const ModelRequest& req, std::vector<UniqueFd> stdio) {
  // One model at a time per connection: its exit is the answer, and a
  // second run on the connection would have no answer to give (nor a
  // record, nor a reaper).
  if (waits(conn))
    return refuse(req.name,
                  refusal(EBUSY, "busy", "this connection's model is still running; wait for its answer or connect again"),
                  EventStatus::error);
  if (stdio.size() != 3)
    return refuse("", refusal(EINVAL, "invalid_request", "model needs the caller's stdin, stdout and stderr"),
                  EventStatus::error);
  std::string name = req.name;
  // A call through the HTTP endpoint: its request (checked by the decoder;
  // the endpoint has the agent's authority only) becomes the CGI
  // environment, and its path completes the model's name.
  std::optional<HttpMeta> http;
  if (req.http) {
    if (!*req.http) return refuse(name, req.http->error(), EventStatus::error);
    http = **req.http;
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
  auto run = start(m, std::move(stdio));
  if (!run) {
    json answer = refuse(name, refusal(run.error().code, "error", run.error().msg), EventStatus::error);
    log_model(m.rel, {"model.call", "model/" + m.name, EventStatus::error, {{"reason", "error"}}});
    return answer;
  }
  run->name = m.name;
  run->rel = m.rel;
  run->alias = m.alias;
  run->started = started;
  runs_.emplace(conn, std::move(*run));
  return std::nullopt;
}

}  // namespace ctx::launcher
