#include "access/fs_tree.hpp"

#include <sys/stat.h>

#include "agentdir/load.hpp"
#include "base/path.hpp"
#include "sys/file.hpp"
#include "sys/process.hpp"
#include "sys/resolve.hpp"

namespace ctx::access {

namespace {

// (parent directory, last name) of a non-empty rel.
std::pair<std::string, std::string> parent_and_name(const std::string& rel) {
  auto slash = rel.rfind('/');
  if (slash == std::string::npos) return {"", rel};
  return {rel.substr(0, slash), rel.substr(slash + 1)};
}

HostEntry::Type type_of(mode_t m) {
  if (S_ISDIR(m)) return HostEntry::Type::directory;
  if (S_ISREG(m)) return HostEntry::Type::regular;
  if (S_ISLNK(m)) return HostEntry::Type::symlink;
  return HostEntry::Type::other;
}

// Absent is nullopt; anything that cannot be reached (a symlink on the
// way, no search permission) is an entry of type `other`, which no rule
// shows and no check takes for absent.
const HostEntry kUnreachable{HostEntry::Type::other, 0, 0, 0, 0, 0, 0};

// The entry `name` directly in the open directory dir.
std::optional<HostEntry> stat_in(int dir, const std::string& name) {
  auto st = sys::stat_at(dir, name);
  if (!st) return kUnreachable;
  if (!*st) return std::nullopt;
  return entry_of(**st);
}

}  // namespace

Viewer load_viewer(const std::string& ctx_root, Viewer who) {
  who.subject.clear();
  who.policy = policy::Policy();
  if (auto spec = agentdir::load_subject_policy(
          ctx_root, who.agent, who.user_tier ? std::optional<std::uint32_t>(who.owner) : std::nullopt)) {
    who.subject = spec->subject();
    who.policy = std::move(spec->policy);
  }
  return who;
}

const Viewer& LiveViewer::get() {
  std::uint64_t now = sys::now_us();
  if (loaded_ && now - loaded_us_ < static_cast<std::uint64_t>(kPolicyRecheckMs) * 1000) return v_;
  loaded_ = true;
  loaded_us_ = now;
  v_ = load_viewer(ctx_root_, std::move(v_));
  return v_;
}

HostEntry entry_of(const sys::FileStat& s) {
  return HostEntry{type_of(s.mode), static_cast<std::uint32_t>(s.mode & 07777), s.uid, s.gid, s.size, s.mtime_ns,
                   s.ctime_ns};
}

Result<UniqueFd> FsTree::open_dir(const std::string& rel) const {
  return sys::open(root_, rel, sys::Open::directory | sys::Open::beneath | sys::Open::no_symlinks);
}

std::optional<HostEntry> FsTree::stat(const std::string& rel) const {
  if (rel.empty()) {
    auto st = sys::stat_fd(root_);
    if (!st) return std::nullopt;
    return entry_of(*st);
  }
  auto [dir, name] = parent_and_name(rel);
  auto d = open_dir(dir);
  if (!d) return d.error().code == ENOENT ? std::nullopt : std::optional<HostEntry>(kUnreachable);
  return stat_in(d->get(), name);
}

std::optional<HostEntry> ListingTree::stat(const std::string& rel) const {
  auto [dir, name] = parent_and_name(rel);
  return !rel.empty() && dir == dir_rel_ ? stat_in(dir_, name) : base_.stat(rel);
}

std::optional<std::string> FsTree::read(const std::string& rel) const {
  auto [dir, name] = parent_and_name(rel);
  auto d = open_dir(dir);
  if (!d) return std::nullopt;
  auto f = sys::read_small_file(d->get(), name, kMaxRuleFile);
  if (!f || !*f) return std::nullopt;
  return std::move((*f)->data);
}

std::optional<std::string> FsTree::read_link(const std::string& rel) const {
  auto [dir, name] = parent_and_name(rel);
  auto d = open_dir(dir);
  if (!d) return std::nullopt;
  auto t = sys::read_link_at(d->get(), name);
  if (!t) return std::nullopt;
  return std::move(*t);
}

std::vector<std::string> FsTree::list(const std::string& rel) const {
  auto d = open_dir(rel);
  if (!d) return {};
  auto names = sys::list_dir(d->get());
  return names ? std::move(*names) : std::vector<std::string>();
}

}  // namespace ctx::access
