#include "view/server.hpp"

#define FUSE_USE_VERSION 35
#include <fuse_lowlevel.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <unordered_map>

#include "agentdir/load.hpp"
#include "base/names.hpp"
#include "base/timestamp.hpp"
#include "sys/file.hpp"
#include "sys/process.hpp"
#include "sys/resolve.hpp"
#include "view/fs_tree.hpp"

namespace ctx::view {

namespace {

// __FMODE_EXEC (include/linux/fs.h): execve opens the program with this
// bit in f_flags, and FUSE hands f_flags to the server in an open request;
// it is how the view tells running a tool from reading it.
constexpr int kOpenForExec = 0x20;

constexpr fuse_ino_t kRootIno = FUSE_ROOT_ID;

// What identifies the contents of a host file for the page cache: a file
// replaced by rename has a new inode; one written in place a new ctime
// (which no one but root can set back) and mtime, and likely a new size.
struct FileKey {
  dev_t dev = 0;
  ino_t ino = 0;
  std::uint64_t size = 0;
  std::int64_t mtime_ns = 0;
  std::int64_t ctime_ns = 0;
  bool operator==(const FileKey&) const = default;
};

struct Node {
  std::string rel;  ///< path in the view below the CTX root ("" the root)
  std::uint64_t lookups = 0;
  // The kernel's page cache of this node holds what was read through the
  // handles opened since the last open that dropped it. It is kept at an
  // open only if every such handle served the file the open finds (`key`):
  // a handle opened on an older file (`stale_open`) could read the old
  // contents into the cache at any time, and `dirty` says one may have.
  std::optional<FileKey> key;
  std::uint64_t era = 0;  ///< counts changes of key
  std::uint32_t open = 0;
  std::uint32_t stale_open = 0;
  bool dirty = false;
};

// An open file of the view: the host file and the era of its node it was
// opened in.
struct Handle {
  UniqueFd fd;
  std::uint64_t era = 0;
};

class Server {
 public:
  /// The session the server answers on (for notifications to the kernel).
  fuse_session* session = nullptr;

  Server(const ServeOptions& o, UniqueFd root) : o_(o), root_(std::move(root)), tree_(root_.get()) {
    nodes_[kRootIno].lookups = 1;
    by_rel_[""] = kRootIno;
  }

  void lookup(fuse_req_t req, fuse_ino_t parent, const char* name);
  void forget(fuse_ino_t ino, std::uint64_t n);
  void getattr(fuse_req_t req, fuse_ino_t ino);
  void open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
  void read(fuse_req_t req, std::size_t size, off_t off, fuse_file_info* fi);
  void release(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
  void opendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
  void readdir(fuse_req_t req, std::size_t size, off_t off, fuse_file_info* fi);

 private:
  const Viewer& viewer();
  std::optional<Shown> shown(const std::string& rel);
  struct stat attrs(fuse_ino_t ino, const HostEntry& e) const;
  fuse_ino_t ino_of(const std::string& rel);
  const Node* node(fuse_ino_t ino) const;
  bool keep_cache(fuse_ino_t ino, Node& n, const FileKey& key);
  void record_exec(const std::string& tool, pid_t pid);

  const ServeOptions& o_;
  UniqueFd root_;
  FsTree tree_;
  Viewer v_;
  std::uint64_t loaded_us_ = 0;
  bool loaded_ = false;
  std::unordered_map<fuse_ino_t, Node> nodes_;
  std::unordered_map<std::string, fuse_ino_t> by_rel_;
  fuse_ino_t next_ = kRootIno + 1;
};

// The agent's label and policy as they are now, read again at most every
// kPolicyRecheckMs: an edit takes effect without a new launch. A policy
// that no longer parses grants nothing (fail closed).
const Viewer& Server::viewer() {
  std::uint64_t now = sys::now_us();
  if (loaded_ && now - loaded_us_ < static_cast<std::uint64_t>(kPolicyRecheckMs) * 1000) return v_;
  loaded_ = true;
  loaded_us_ = now;
  v_.agent = o_.agent;
  v_.owner = o_.owner;
  v_.uid = o_.uid;
  v_.gid = o_.gid;
  v_.groups = o_.groups;
  auto spec = agentdir::load_subject_policy(o_.ctx_root, o_.agent);
  if (spec) {
    v_.subject = spec->subject();
    v_.policy = std::move(spec->policy);
  } else {
    v_.subject.clear();
    v_.policy = policy::Policy();
  }
  return v_;
}

std::optional<Shown> Server::shown(const std::string& rel) {
  if (rel.empty()) {
    auto e = tree_.stat("");
    return e ? std::optional<Shown>(Shown{"", *e}) : std::nullopt;
  }
  return decide(viewer(), tree_, rel);
}

struct stat Server::attrs(fuse_ino_t ino, const HostEntry& e) const {
  struct stat st {};
  bool dir = e.type == HostEntry::Type::directory;
  st.st_ino = ino;
  // Read-only, and nothing set-id: the mount is nosuid anyway.
  st.st_mode = (dir ? S_IFDIR : S_IFREG) | (e.mode & 0555);
  st.st_nlink = dir ? 2 : 1;
  st.st_uid = id_inside(o_.uid_map, e.uid);
  st.st_gid = id_inside(o_.gid_map, e.gid);
  st.st_size = static_cast<off_t>(dir ? 0 : e.size);
  st.st_blksize = 4096;
  st.st_blocks = (st.st_size + 511) / 512;
  st.st_mtim.tv_sec = e.mtime_ns / 1000000000;
  st.st_mtim.tv_nsec = e.mtime_ns % 1000000000;
  st.st_ctim.tv_sec = e.ctime_ns / 1000000000;
  st.st_ctim.tv_nsec = e.ctime_ns % 1000000000;
  st.st_atim = st.st_mtim;
  return st;
}

fuse_ino_t Server::ino_of(const std::string& rel) {
  auto it = by_rel_.find(rel);
  if (it != by_rel_.end()) return it->second;
  fuse_ino_t ino = next_++;
  nodes_[ino].rel = rel;
  by_rel_[rel] = ino;
  return ino;
}

const Node* Server::node(fuse_ino_t ino) const {
  auto it = nodes_.find(ino);
  return it == nodes_.end() ? nullptr : &it->second;
}

void Server::lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  const Node* p = node(parent);
  std::string n = name;
  if (p == nullptr) return (void)fuse_reply_err(req, ESTALE);
  if (n.empty() || n == "." || n == ".." || n.find('/') != std::string::npos || n.size() > 255)
    return (void)fuse_reply_err(req, ENOENT);
  std::string rel = p->rel.empty() ? n : p->rel + "/" + n;
  auto s = shown(rel);
  // Not cached as a negative entry: a tool installed or granted later
  // appears at the next lookup.
  if (!s) return (void)fuse_reply_err(req, ENOENT);
  fuse_entry_param e{};
  e.ino = ino_of(rel);
  e.attr = attrs(e.ino, s->entry);
  e.attr_timeout = kCacheSeconds;
  e.entry_timeout = kCacheSeconds;
  if (fuse_reply_entry(req, &e) == 0) ++nodes_[e.ino].lookups;
}

void Server::forget(fuse_ino_t ino, std::uint64_t n) {
  auto it = nodes_.find(ino);
  if (it == nodes_.end() || ino == kRootIno) return;
  it->second.lookups -= std::min(n, it->second.lookups);
  if (it->second.lookups == 0) {
    by_rel_.erase(it->second.rel);
    nodes_.erase(it);
  }
}

void Server::getattr(fuse_req_t req, fuse_ino_t ino) {
  const Node* n = node(ino);
  if (n == nullptr) return (void)fuse_reply_err(req, ESTALE);
  auto s = shown(n->rel);
  if (!s) return (void)fuse_reply_err(req, ENOENT);
  struct stat st = attrs(ino, s->entry);
  fuse_reply_attr(req, &st, kCacheSeconds);
}

// Whether an open of n that found the host file `key` may keep the page
// cache, and the bookkeeping of the open; one that may not makes the kernel
// drop the cache (no FOPEN_KEEP_CACHE), so a file replaced since is read
// anew.
bool Server::keep_cache(fuse_ino_t ino, Node& n, const FileKey& key) {
  bool changed = n.key != key;
  if (changed) {
    n.key = key;
    ++n.era;
    n.stale_open = n.open;
    // The kernel reads a cached file only up to the size it holds (from a
    // lookup or getattr up to kCacheSeconds old): a file replaced by a
    // longer one would be cut at the old size. Its attributes alone are
    // dropped, so the read asks for them again; dropping pages from here
    // could wait on a page lock held by a read that waits for this
    // server. Sent before the answer to the open, so no read of this open
    // comes first.
    (void)fuse_lowlevel_notify_inval_inode(session, ino, -1, 0);
  }
  bool keep = !changed && n.stale_open == 0 && !n.dirty;
  // Dropped now, a stale handle still open may fill it again.
  if (!keep) n.dirty = n.stale_open > 0;
  ++n.open;
  return keep;
}

void Server::open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC) != 0) return (void)fuse_reply_err(req, EROFS);
  auto it = nodes_.find(ino);
  if (it == nodes_.end()) return (void)fuse_reply_err(req, ESTALE);
  Node& n = it->second;
  // Decided again at every open: a grant revoked since the lookup counts.
  auto s = shown(n.rel);
  if (!s) return (void)fuse_reply_err(req, ENOENT);
  if (s->entry.type != HostEntry::Type::regular) return (void)fuse_reply_err(req, EISDIR);
  auto f = sys::open_file_beneath(root_.get(), s->host_rel);
  if (!f) return (void)fuse_reply_err(req, f.error().code);
  auto st = sys::stat_fd(f->get());
  if (!st) return (void)fuse_reply_err(req, st.error().code);
  if ((fi->flags & kOpenForExec) != 0)
    if (std::string tool = tool_at(viewer(), n.rel); !tool.empty()) record_exec(tool, fuse_req_ctx(req)->pid);
  fi->keep_cache = keep_cache(ino, n, FileKey{st->dev, st->ino, st->size, st->mtime_ns, st->ctime_ns}) ? 1 : 0;
  // Read-only: nothing to flush at close (FOPEN_NOFLUSH: no FLUSH request,
  // no write-back of the inode).
  fi->noflush = 1;
  auto* h = new Handle{std::move(*f), n.era};
  fi->fh = reinterpret_cast<std::uint64_t>(h);
  if (fuse_reply_open(req, fi) != 0) {
    // The kernel took no answer, so it dropped nothing: the next open must.
    --n.open;
    n.dirty = true;
    delete h;
  }
}

void Server::read(fuse_req_t req, std::size_t size, off_t off, fuse_file_info* fi) {
  const auto* h = reinterpret_cast<const Handle*>(fi->fh);
  std::vector<char> buf(std::min<std::size_t>(size, 1 << 20));
  auto n = sys::read_at(h->fd.get(), buf.data(), buf.size(), static_cast<std::uint64_t>(off));
  if (!n) return (void)fuse_reply_err(req, n.error().code);
  fuse_reply_buf(req, buf.data(), *n);
}

void Server::release(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  auto* h = reinterpret_cast<Handle*>(fi->fh);
  // The kernel holds the node while a file of it is open: it is here.
  if (auto it = nodes_.find(ino); it != nodes_.end()) {
    Node& n = it->second;
    --n.open;
    if (h->era != n.era) --n.stale_open;
  }
  delete h;
  fuse_reply_err(req, 0);
}

// A directory's listing is taken at opendir and kept with the handle, so
// that readdir's offsets index one consistent list.
void Server::opendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  const Node* n = node(ino);
  if (n == nullptr) return (void)fuse_reply_err(req, ESTALE);
  auto s = shown(n->rel);
  if (!s) return (void)fuse_reply_err(req, ENOENT);
  if (s->entry.type != HostEntry::Type::directory) return (void)fuse_reply_err(req, ENOTDIR);
  auto* names = new std::vector<std::string>{".", ".."};
  for (auto& name : list(viewer(), tree_, n->rel)) names->push_back(std::move(name));
  fi->fh = reinterpret_cast<std::uint64_t>(names);
  if (fuse_reply_open(req, fi) != 0) delete names;
}

void Server::readdir(fuse_req_t req, std::size_t size, off_t off, fuse_file_info* fi) {
  const auto* names = reinterpret_cast<const std::vector<std::string>*>(fi->fh);
  std::vector<char> buf(size);
  std::size_t used = 0;
  for (std::size_t i = static_cast<std::size_t>(off); i < names->size(); ++i) {
    struct stat st {};
    // Only the type bits and a non-zero inode number are read from st.
    st.st_ino = i + 1;
    st.st_mode = S_IFREG;
    std::size_t need =
        fuse_add_direntry(req, buf.data() + used, size - used, (*names)[i].c_str(), &st, static_cast<off_t>(i + 1));
    if (need > size - used) break;
    used += need;
  }
  fuse_reply_buf(req, buf.data(), used);
}

// A tool run through the view is a tool call: recorded as `ctx tool`
// records it (facts only), in the agent's session events.
void Server::record_exec(const std::string& tool, pid_t pid) {
  nlohmann::json e{{"ts", timestamp_now()},    {"type", "tool.call"}, {"agent", o_.agent}, {"session", o_.session},
                   {"object", "tool/" + tool}, {"status", "ok"},      {"via", "exec"},     {"pid", pid}};
  std::string rel = "home/" + session_rel(viewer().owner, o_.agent, o_.session);
  auto dir = sys::open_dir_beneath(root_.get(), rel);
  if (!dir) dir = sys::open_or_make_dirs(root_.get(), rel, 0755);
  if (dir) (void)sys::append_file(dir->get(), "events.jsonl", e.dump(-1, ' ', true) + "\n", 0644);
}

Server* self(fuse_req_t req) { return static_cast<Server*>(fuse_req_userdata(req)); }

fuse_lowlevel_ops make_ops() {
  fuse_lowlevel_ops ops{};
  ops.lookup = [](fuse_req_t req, fuse_ino_t parent, const char* name) { self(req)->lookup(req, parent, name); };
  ops.forget = [](fuse_req_t req, fuse_ino_t ino, std::uint64_t n) {
    self(req)->forget(ino, n);
    fuse_reply_none(req);
  };
  ops.forget_multi = [](fuse_req_t req, std::size_t count, fuse_forget_data* f) {
    for (std::size_t i = 0; i < count; ++i) self(req)->forget(f[i].ino, f[i].nlookup);
    fuse_reply_none(req);
  };
  ops.getattr = [](fuse_req_t req, fuse_ino_t ino, fuse_file_info*) { self(req)->getattr(req, ino); };
  ops.open = [](fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) { self(req)->open(req, ino, fi); };
  ops.read = [](fuse_req_t req, fuse_ino_t, std::size_t size, off_t off, fuse_file_info* fi) {
    self(req)->read(req, size, off, fi);
  };
  ops.release = [](fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) { self(req)->release(req, ino, fi); };
  ops.opendir = [](fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) { self(req)->opendir(req, ino, fi); };
  ops.readdir = [](fuse_req_t req, fuse_ino_t, std::size_t size, off_t off, fuse_file_info* fi) {
    self(req)->readdir(req, size, off, fi);
  };
  ops.releasedir = [](fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
    delete reinterpret_cast<std::vector<std::string>*>(fi->fh);
    fuse_reply_err(req, 0);
  };
  ops.statfs = [](fuse_req_t req, fuse_ino_t) {
    struct statvfs s {};
    s.f_bsize = 4096;
    s.f_namemax = 255;
    fuse_reply_statfs(req, &s);
  };
  return ops;
}

}  // namespace

std::uint32_t id_inside(const std::vector<sys::IdMapLine>& map, std::uint32_t id) {
  if (map.empty()) return id;
  for (const auto& l : map)
    if (id >= l.outer && id - l.outer < l.count) return l.inner + (id - l.outer);
  return 65534;
}

Result<void> serve(const ServeOptions& opts) {
  CTX_TRY_ASSIGN(UniqueFd root, sys::open_dir(opts.ctx_root, true));
  Server server(opts, std::move(root));
  fuse_lowlevel_ops ops = make_ops();
  const char* argv[] = {"ctx-view", nullptr};
  fuse_args args = FUSE_ARGS_INIT(1, const_cast<char**>(argv));
  fuse_session* se = fuse_session_new(&args, &ops, sizeof ops, &server);
  if (se == nullptr) return fail(Error{EIO, "ctx-view: fuse_session_new failed"});
  server.session = se;
  // "/dev/fd/N": libfuse takes the descriptor the sandbox mounted, and
  // mounts nothing itself.
  std::string dev = "/dev/fd/" + std::to_string(opts.fuse_fd);
  if (fuse_session_mount(se, dev.c_str()) != 0) {
    fuse_session_destroy(se);
    return fail(Error{EBADF, "ctx-view: " + dev + " is not a FUSE descriptor"});
  }
  int rc = fuse_session_loop(se);
  fuse_session_destroy(se);
  if (rc < 0) return fail(Error{-rc, "ctx-view: serving the view: " + std::string(std::strerror(-rc))});
  return {};
}

}  // namespace ctx::view
