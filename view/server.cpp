#include "view/server.hpp"

#define FUSE_USE_VERSION 35
#include <fuse_lowlevel.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <random>
#include <string_view>
#include <unordered_map>

#include "sys/file.hpp"
#include "sys/process.hpp"
#include "sys/resolve.hpp"
#include "access/fs_tree.hpp"
#include "view/position.hpp"

namespace ctx::view {

using access::decide;
using access::FsTree;
using access::HostEntry;
using access::HostTree;
using access::ListingTree;
using access::LiveViewer;
using access::tool_at;
using access::Viewer;

namespace {

constexpr fuse_ino_t kRootIno = FUSE_ROOT_ID;

// Where the `ctx` helper lives below the CTX root: shown at each allowed
// tool's name, as in the static view.
constexpr const char* kHelper = "bin/ctx";

// What identifies the contents of a host file a node served: a file
// replaced by rename has a new ctime (rename sets it; no one but root can
// set it back), one written in place a new ctime and mtime.
struct FileKey {
  std::uint64_t size = 0;
  std::int64_t mtime_ns = 0;
  std::int64_t ctime_ns = 0;
  bool operator==(const FileKey&) const = default;
};

struct Node {
  std::string rel;  ///< path in the view below the CTX root ("" the root)
  std::uint64_t lookups = 0;
  /// The file a regular node served when the kernel learnt of it: the
  /// kernel keeps its pages (no OPEN is sent, every open keeps the page
  /// cache), so another file at rel gets another node.
  std::optional<FileKey> key;
};

// What a name serves: the shown entry, and for an allowed tool the helper
// (its content and size, the tool's mode).
struct Served {
  std::string host_rel;
  HostEntry entry;
};

// Who looks: the agent, its owner and the runtime's host ids.
Viewer who(const ServeOptions& o) {
  Viewer v;
  v.agent = o.agent;
  v.user_tier = o.user_tier;
  v.owner = o.owner;
  v.ancestors = o.ancestors;
  v.session = o.session;
  v.uid = o.uid;
  v.gid = o.gid;
  v.groups = o.groups;
  return v;
}

// The key of the positions a server hands out, new for each server.
std::array<std::uint64_t, 4> random_keys() {
  std::random_device rd;
  std::array<std::uint64_t, 4> k{};
  for (auto& w : k) w = (std::uint64_t{rd()} << 32) | rd();
  return k;
}

class Server {
 public:
  Server(const ServeOptions& o, UniqueFd root)
      : o_(o), root_(std::move(root)), tree_(root_.get()), live_(o.ctx_root, who(o)), positions_(random_keys()) {
    nodes_[kRootIno].lookups = 1;
    by_rel_.emplace(nodes_[kRootIno].rel, kRootIno);
  }

  void lookup(fuse_req_t req, fuse_ino_t parent, const char* name);
  void forget(fuse_ino_t ino, std::uint64_t n);
  void getattr(fuse_req_t req, fuse_ino_t ino);
  void read(fuse_req_t req, fuse_ino_t ino, std::size_t size, off_t off);
  void opendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
  void readdir(fuse_req_t req, fuse_ino_t ino, std::size_t size, off_t off);

 private:
  const Viewer& viewer();
  bool shown(const HostTree& listing, const std::string& dir, const std::string& name);
  std::optional<Served> served(const std::string& rel);
  struct stat attrs(fuse_ino_t ino, const HostEntry& e) const;
  fuse_ino_t ino_of(const std::string& rel, const HostEntry& e);
  const Node* node(fuse_ino_t ino) const;

  const ServeOptions& o_;
  UniqueFd root_;
  FsTree tree_;
  LiveViewer live_;
  /// What the kernel sees of the host's directory positions.
  PositionCipher positions_;
  std::unordered_map<fuse_ino_t, Node> nodes_;
  /// Each key is a view of its node's own rel (one copy of a path per
  /// node: docs/view.md, "Bounds"), never kept past that node.
  std::unordered_map<std::string_view, fuse_ino_t> by_rel_;
  fuse_ino_t next_ = kRootIno + 1;
};

// The agent's label and policy as they are now (access/fs_tree.hpp,
// LiveViewer): an edit takes effect without a new launch.
const Viewer& Server::viewer() { return live_.get(); }

// Decided by the rules; an allowed tool (a regular file directly in a tool
// tier) serves the helper with the tool's mode bits, so that running it
// asks the supervisor, which decides, records and hands over the tool
// (docs/abi.md, "Direct calls"). Without a helper, the tool's bytes with
// no execute bit: not runnable from here.
std::optional<Served> Server::served(const std::string& rel) {
  if (rel.empty()) {
    auto e = tree_.stat("");
    return e ? std::optional<Served>(Served{"", *e}) : std::nullopt;
  }
  auto s = decide(viewer(), tree_, rel);
  if (!s) return std::nullopt;
  Served out{std::move(s->host_rel), s->entry};
  if (out.entry.type != HostEntry::Type::regular || tool_at(viewer(), rel).empty()) return out;
  auto h = tree_.stat(kHelper);
  if (h && h->type == HostEntry::Type::regular && (h->mode & 0111) != 0) {
    out.host_rel = kHelper;
    out.entry.size = h->size;
    out.entry.mtime_ns = h->mtime_ns;
    out.entry.ctime_ns = h->ctime_ns;
  } else {
    out.entry.mode &= ~0111U;
  }
  return out;
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

// The node of rel serving e. A regular file other than the one its node
// served gets a new node: the kernel, finding another node id at a
// lookup, drops its entry and starts a new inode with an empty page cache
// (the old one's pages can never be read at rel again).
fuse_ino_t Server::ino_of(const std::string& rel, const HostEntry& e) {
  std::optional<FileKey> key;
  if (e.type == HostEntry::Type::regular) key = FileKey{e.size, e.mtime_ns, e.ctime_ns};
  auto it = by_rel_.find(rel);
  if (it != by_rel_.end() && nodes_[it->second].key == key) return it->second;
  fuse_ino_t ino = next_++;
  Node& n = nodes_[ino];
  n.rel = rel;
  n.key = key;
  if (it != by_rel_.end()) by_rel_.erase(it);
  by_rel_.emplace(n.rel, ino);
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
  auto s = served(rel);
  // Not cached as a negative entry: a tool installed or granted later
  // appears at the next lookup.
  if (!s) return (void)fuse_reply_err(req, ENOENT);
  fuse_entry_param e{};
  e.ino = ino_of(rel, s->entry);
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
    // rel may have a newer node already.
    if (auto r = by_rel_.find(it->second.rel); r != by_rel_.end() && r->second == ino) by_rel_.erase(r);
    nodes_.erase(it);
  }
}

void Server::getattr(fuse_req_t req, fuse_ino_t ino) {
  const Node* n = node(ino);
  if (n == nullptr) return (void)fuse_reply_err(req, ESTALE);
  auto s = served(n->rel);
  if (!s) return (void)fuse_reply_err(req, ENOENT);
  // The file at rel now: a changed size or mtime makes the kernel drop
  // this inode's pages (auto_inval_data), in the caller's context.
  struct stat st = attrs(ino, s->entry);
  fuse_reply_attr(req, &st, kCacheSeconds);
}

// No OPEN reaches the server (it answers ENOSYS once; the kernel then
// opens alone, keeping the page cache): a READ is a miss of that cache,
// and is served from the file at the node's path now, decided again.
void Server::read(fuse_req_t req, fuse_ino_t ino, std::size_t size, off_t off) {
  const Node* n = node(ino);
  if (n == nullptr) return (void)fuse_reply_err(req, ESTALE);
  auto s = served(n->rel);
  if (!s) return (void)fuse_reply_err(req, ENOENT);
  if (s->entry.type != HostEntry::Type::regular) return (void)fuse_reply_err(req, EISDIR);
  auto f = sys::open(root_.get(), s->host_rel,
                     sys::Open::regular | sys::Open::no_follow | sys::Open::beneath | sys::Open::no_symlinks);
  if (!f) return (void)fuse_reply_err(req, f.error().code);
  std::vector<char> buf(std::min<std::size_t>(size, 1 << 20));
  auto got = sys::read_at(f->get(), buf.data(), buf.size(), static_cast<std::uint64_t>(off));
  if (!got) return (void)fuse_reply_err(req, got.error().code);
  fuse_reply_buf(req, buf.data(), *got);
}

// Nothing is kept with a directory handle: a READDIR opens the directory
// at the node's path again and resumes at the position the kernel hands
// back, which is the host's own (read_dir_from), mapped by positions_ (as
// they are, they would place the hidden names: view/position.hpp). So the
// server's memory does not grow with the handles an agent holds, and a
// listing is decided as the tree and the policy are at each request
// (docs/view.md, "Bounds").
void Server::opendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  const Node* n = node(ino);
  if (n == nullptr) return (void)fuse_reply_err(req, ESTALE);
  auto s = served(n->rel);
  if (!s) return (void)fuse_reply_err(req, ENOENT);
  if (s->entry.type != HostEntry::Type::directory) return (void)fuse_reply_err(req, ENOTDIR);
  fi->fh = 0;
  fuse_reply_open(req, fi);
}

bool Server::shown(const HostTree& listing, const std::string& dir, const std::string& name) {
  if (name == "." || name == "..") return true;
  return decide(viewer(), listing, dir.empty() ? name : dir + "/" + name).has_value();
}

// Fills one reply of at most `size` bytes from position off: each host
// batch is about one reply's worth; hidden names are skipped within the
// request (docs/view.md, "Bounds": what a request costs).
void Server::readdir(fuse_req_t req, fuse_ino_t ino, std::size_t size, off_t off) {
  const Node* n = node(ino);
  if (n == nullptr) return (void)fuse_reply_err(req, ESTALE);
  const std::string rel = n->rel;
  auto s = served(rel);
  if (!s) return (void)fuse_reply_err(req, ENOENT);
  if (s->entry.type != HostEntry::Type::directory) return (void)fuse_reply_err(req, ENOTDIR);
  auto d = tree_.open_dir(rel);
  if (!d) return (void)fuse_reply_err(req, d.error().code);
  ListingTree listing(tree_, rel, d->get());
  std::vector<char> buf(size);
  std::size_t used = 0;
  std::uint64_t from = positions_.reveal(static_cast<std::uint64_t>(off));
  while (true) {
    auto batch = sys::read_dir_from(d->get(), from, size);
    if (!batch) return (void)fuse_reply_err(req, batch.error().code);
    if (batch->empty()) break;
    for (const auto& e : *batch) {
      if (shown(listing, rel, e.name)) {
        struct stat st {};
        // Only the type bits and a non-zero inode number are read from
        // st. The type is left unknown (DT_UNKNOWN): a reader that needs
        // it (find, os.walk) asks with a lookup, which the rules decide; a
        // wrong type here made such readers skip every directory below
        // the first level. The number is the entry's hidden position,
        // never the host's inode number.
        const std::uint64_t next = positions_.hide(e.next);
        st.st_ino = std::max<std::uint64_t>(next, 1);
        std::size_t need =
            fuse_add_direntry(req, buf.data() + used, size - used, e.name.c_str(), &st, static_cast<off_t>(next));
        if (need > size - used) return (void)fuse_reply_buf(req, buf.data(), used);
        used += need;
      }
      from = e.next;
    }
  }
  fuse_reply_buf(req, buf.data(), used);
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
  // OPEN answered ENOSYS once: the kernel sends no OPEN, RELEASE or FLUSH
  // again and opens alone, keeping the page cache (fs/fuse/file.c,
  // fuse_file_open: no_open, FOPEN_KEEP_CACHE). (libfuse answers an unset
  // open with success, not ENOSYS.) A write open never gets here: the
  // mount is read-only. Freshness comes from the attributes (init below)
  // and from a new node for another file (ino_of).
  ops.open = [](fuse_req_t req, fuse_ino_t, fuse_file_info*) { fuse_reply_err(req, ENOSYS); };
  ops.init = [](void*, fuse_conn_info* c) {
    // A changed size or mtime seen at a getattr or lookup drops the
    // inode's pages.
    if ((c->capable & FUSE_CAP_AUTO_INVAL_DATA) != 0) c->want |= FUSE_CAP_AUTO_INVAL_DATA;
  };
  ops.read = [](fuse_req_t req, fuse_ino_t ino, std::size_t size, off_t off, fuse_file_info*) {
    self(req)->read(req, ino, size, off);
  };
  ops.opendir = [](fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) { self(req)->opendir(req, ino, fi); };
  ops.readdir = [](fuse_req_t req, fuse_ino_t ino, std::size_t size, off_t off, fuse_file_info*) {
    self(req)->readdir(req, ino, size, off);
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
  CTX_TRY_ASSIGN(UniqueFd root, sys::open(sys::at_cwd, opts.ctx_root, sys::Open::directory | sys::Open::no_follow));
  Server server(opts, std::move(root));
  fuse_lowlevel_ops ops = make_ops();
  const char* argv[] = {"ctx-view", nullptr};
  fuse_args args = FUSE_ARGS_INIT(1, const_cast<char**>(argv));
  fuse_session* se = fuse_session_new(&args, &ops, sizeof ops, &server);
  if (se == nullptr) return fail(Error{EIO, "ctx-view: fuse_session_new failed"});
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
