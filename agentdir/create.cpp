// Writing a planned child to disk (docs/abi.md "Children" and "A child's
// session and its handoff"), all or nothing: everything is made first
// under names no agent can have, and `<name>.d` appears last, by a rename that never
// replaces. After that rename nothing can fail, so a failure never has to
// take back an agent that a launcher may already have seen.
#include <sys/stat.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "agentdir/child.hpp"
#include "base/names.hpp"
#include "base/path.hpp"
#include "sys/fault.hpp"
#include "sys/file.hpp"
#include "sys/resolve.hpp"
#include "sys/socket.hpp"

namespace ctx::agentdir {

namespace {

constexpr mode_t kDirMode = 0755;
constexpr mode_t kFileMode = 0644;
constexpr mode_t kEntryMode = 0755;
/// The parent's entry is copied through memory; a runtime program larger
/// than this is a mistake, not a program.
constexpr std::size_t kMaxEntrySize = 64u << 20;
/// The entry's name inside the temporary `.d` until it is renamed into
/// place (a control file can never have it).
const std::string kEntryTmp = ".entry";

/// What one write_child call has made, removed again in reverse order
/// unless the call succeeds. Directories are held open, so that nothing is
/// removed through a path someone could change meanwhile.
class Made {
 public:
  Made() = default;
  Made(const Made&) = delete;
  Made& operator=(const Made&) = delete;
  ~Made() {
    for (auto it = items_.rbegin(); it != items_.rend(); ++it)
      (void)sys::remove_at(fd(it->dir), it->name, it->self.has_value());
  }

  /// Holds a directory open; the handle names it in the calls below.
  std::size_t hold(UniqueFd dir) {
    dirs_.push_back(std::move(dir));
    return dirs_.size() - 1;
  }
  int fd(std::size_t dir) const { return dirs_[dir].get(); }
  /// Records that this call made the file dir/name.
  void file(std::size_t dir, std::string name) { items_.push_back(Item{dir, std::move(name), std::nullopt}); }
  /// Records that this call made the directory dir/name, held as `self`.
  void directory(std::size_t dir, std::string name, std::size_t self) {
    items_.push_back(Item{dir, std::move(name), self});
  }
  /// The call succeeded: keep everything.
  void keep() { items_.clear(); }

 private:
  struct Item {
    std::size_t dir;
    std::string name;
    std::optional<std::size_t> self;  ///< set for a directory
  };
  std::vector<UniqueFd> dirs_;
  std::vector<Item> items_;
};

// A child's home holds whatever its runtime made there (a checkout).
constexpr int kRemoveDepth = 256;

// A re-run of a parent meets the child its earlier run made.
Error taken(std::string_view child, const std::string& path) {
  const std::string c(child);
  return Error{EEXIST,
               c + ": EEXIST: " + path + " already exists (a child made earlier); delete it first (ctx agent delete " +
                   c + "), create it with --replace, or choose another name",
               "exists"};
}

/// Opens base/rel one component at a time, never through a symlink,
/// making the missing directories with `as`'s rights. With `fresh` the
/// last one must be new: EEXIST, reason "exists", if it is already there.
Result<std::size_t> open_dirs(Made& made, std::size_t base, const std::string& rel, bool fresh, const sys::MakeAs& as) {
  std::size_t cur = base;
  std::size_t start = 0;
  while (start < rel.size()) {
    std::size_t slash = rel.find('/', start);
    bool last = slash == std::string::npos;
    std::string comp = rel.substr(start, last ? std::string::npos : slash - start);
    CTX_TRY_ASSIGN(bool created, sys::make_dir_if_missing_at(made.fd(cur), comp, kDirMode, as));
    if (last && fresh && !created) return fail(Error{EEXIST, comp + ": EEXIST", "exists"});
    CTX_TRY_ASSIGN(UniqueFd dir, sys::open(made.fd(cur), comp, sys::Open::directory | sys::Open::no_follow));
    std::size_t next = made.hold(std::move(dir));
    if (created) made.directory(cur, comp, next);
    cur = next;
    if (last) break;
    start = slash + 1;
  }
  return cur;
}

/// Copies the parent's executable entry into dir/kEntryTmp: a regular
/// file by content (mode 0755), a symlink as a symlink to the same target.
/// False if the parent has no entry.
Result<bool> copy_entry(Made& made, std::size_t agents, const std::string& parent_name, std::size_t dir) {
  CTX_TRY_ASSIGN(std::optional<sys::FileStat> st, sys::stat_at(made.fd(agents), parent_name));
  if (!st) return false;
  if (S_ISLNK(st->mode)) {
    CTX_TRY_ASSIGN(std::string target, sys::read_link_at(made.fd(agents), parent_name));
    CTX_TRY(sys::make_symlink_at(target, made.fd(dir), kEntryTmp));
    made.file(dir, kEntryTmp);
    return true;
  }
  if (!S_ISREG(st->mode)) return fail(Error{EINVAL, "EINVAL: is neither a regular file nor a symbolic link"});
  if (st->size > kMaxEntrySize)
    return fail(Error{EFBIG, "EFBIG: is larger than " + std::to_string(kMaxEntrySize) + " bytes"});
  CTX_TRY_ASSIGN(std::optional<sys::FileContent> content,
                 sys::read_small_file(made.fd(agents), parent_name, kMaxEntrySize));
  if (!content) return false;  // removed meanwhile
  CTX_TRY(sys::atomic_replace(made.fd(dir), kEntryTmp, content->data, kEntryMode, true, std::nullopt));
  made.file(dir, kEntryTmp);
  return true;
}

/// What a create its parent did not finish left (the parent was killed
/// half-way; no <name>.d exists, which the caller checked): temporary
/// `.<name>.d.tmp.*` directories, and the coordination directory when its
/// status says "created", or when it has no status and holds only what a
/// create writes before it (agent, session), and with it the entry
/// `agent/<name>` when it is the copy of the parent's entry that a create
/// renames in just before <name>.d. Anything else is an earlier child's
/// history and stays.
Result<void> remove_unfinished_create(int ctxfd, int agentsfd, const std::string& context_rel, const std::string& name,
                                      const std::string& parent_name) {
  CTX_TRY_ASSIGN(std::vector<std::string> entries, sys::list_dir(agentsfd));
  const std::string tmp_prefix = "." + name + ".d.tmp.";
  for (const auto& e : entries)
    if (e.rfind(tmp_prefix, 0) == 0) CTX_TRY(sys::remove_tree_at(agentsfd, e));
  auto slash = context_rel.rfind('/');
  auto parent = sys::open(ctxfd, context_rel.substr(0, slash),
                          sys::Open::directory | sys::Open::beneath | sys::Open::no_symlinks);
  if (!parent && parent.error().code == ENOENT) return {};
  if (!parent) return fail(parent.error());
  const std::string leaf = context_rel.substr(slash + 1);
  auto dir = sys::open(parent->get(), leaf, sys::Open::directory | sys::Open::beneath | sys::Open::no_symlinks);
  if (!dir && dir.error().code == ENOENT) return {};
  if (!dir) return fail(dir.error());
  auto status = sys::read_small_file(dir->get(), "status", 64);
  if (!status) return fail(status.error().with_context(leaf + "/status"));
  bool unfinished = status->has_value() && (*status)->data == "created\n";
  if (!status->has_value()) {
    // Killed before `status` was written: only what comes before it.
    CTX_TRY_ASSIGN(std::vector<std::string> names, sys::list_dir(dir->get()));
    unfinished =
        std::all_of(names.begin(), names.end(), [](const std::string& n) { return n == "agent" || n == "session"; });
  }
  if (!unfinished) return {};
  auto entry = sys::stat_at(agentsfd, name);
  if (!entry) return fail(entry.error());
  if (*entry && S_ISREG((*entry)->mode) && (*entry)->size <= kMaxEntrySize) {
    auto ours = sys::read_small_file(agentsfd, name, kMaxEntrySize);
    auto parents = sys::read_small_file(agentsfd, parent_name, kMaxEntrySize);
    if (ours && parents && *ours && *parents && (*ours)->data == (*parents)->data)
      CTX_TRY(sys::remove_at(agentsfd, name));
  }
  return sys::remove_tree_at(parent->get(), leaf);
}

}  // namespace

Result<void> write_child(const AgentSpec& parent, const ChildPlan& plan, std::string_view session,
                         std::string_view handoff, std::string_view output, const sys::MakeAs& owner) {
  const std::string& name = plan.spec.name;
  const std::string& ctx = parent.ctx_root;
  if (auto e = agent_name_issue(name))
    return fail(Error{EINVAL, "child name '" + name + "': EINVAL: " + *e, "invalid_request"});
  if (auto e = space_name_issue(session))
    return fail(
        Error{EINVAL, name + ": session '" + std::string(session) + "': EINVAL: session " + *e, "invalid_request"});
  for (const auto& [file, content] : plan.files) {
    const auto& known = known_control_files();
    if (std::find(known.begin(), known.end(), file) == known.end())
      return fail(Error{EINVAL, name + ": EINVAL: the plan holds '" + file + "', which is not a control file",
                        "invalid_request"});
  }
  if (!path_is_at_or_under(plan.spec.root, ctx) || plan.spec.root == ctx)
    return fail(
        Error{EINVAL, name + ": EINVAL: the root " + plan.spec.root + " is not below " + ctx, "invalid_request"});
  const std::string agent_dir = path_join(ctx, "agent");
  const std::string context = child_context_dir(parent, session, name);

  Made made;
  auto ctxfd = sys::open(sys::at_cwd, ctx, sys::Open::directory);
  if (!ctxfd) return fail(ctxfd.error().with_context(name));
  std::size_t top = made.hold(std::move(*ctxfd));
  auto agentsfd = sys::open(made.fd(top), "agent", sys::Open::directory | sys::Open::no_follow);
  if (!agentsfd) return fail(agentsfd.error().with_context(name + ": " + agent_dir));
  std::size_t agents = made.hold(std::move(*agentsfd));
  // What a create of this name that its parent did not finish left; never
  // while <name>.d exists (then the create was finished).
  auto have_d = sys::stat_at(made.fd(agents), name + ".d");
  if (!have_d) return fail(have_d.error().with_context(name + ": " + agent_dir));
  if (!*have_d)
    CTX_TRY_CTX(remove_unfinished_create(made.fd(top), made.fd(agents), std::string(path_suffix(context, ctx)), name,
                                         parent.name),
                name);
  for (const std::string& n : {name, name + ".d", name + ".sock"}) {
    auto st = sys::stat_at(made.fd(agents), n);
    if (!st) return fail(st.error().with_context(name + ": " + agent_dir));
    if (*st) return fail(taken(name, path_join(agent_dir, n)));
  }

  // The parent session's coordination directory: new, or an earlier
  // child's results would be mixed with this one's.
  auto cdir = open_dirs(made, top, std::string(path_suffix(context, ctx)), true, owner);
  if (!cdir) {
    if (cdir.error().reason == "exists")
      return fail(Error{EEXIST,
                        name + ": EEXIST: " + context +
                            " already exists (an earlier child of that name); delete the child (ctx agent delete " +
                            name + "), create it with --replace, or choose another name",
                        "exists"});
    return fail(cdir.error().with_context(name + ": creating " + context));
  }
  const std::pair<const char*, std::string> channels[] = {
      {"agent", name + "\n"},
      {"session", "default\n"},
      {"status", "created\n"},
      {"handoff.md", std::string(handoff)},
      {"result.md", ""},
      {"refs.jsonl", ""},
      {"input.jsonl", plan.inputs_jsonl},
      {"output.md", std::string(output)},
  };
  for (const auto& [file, content] : channels) {
    CTX_TRY_CTX(sys::atomic_replace(made.fd(*cdir), file, content, kFileMode, false, owner),
                name + ": writing " + context + "/" + file);
    made.file(*cdir, file);
  }
  auto artifact = open_dirs(made, *cdir, "artifact", true, owner);
  if (!artifact) return fail(artifact.error().with_context(name + ": creating " + context + "/artifact"));
  CTX_TRY_CTX(sys::fault_at("child.create.context"), name);

  // The child's root: kept if it is there already (the history of an
  // earlier child of that name lives beside it).
  auto root = open_dirs(made, top, std::string(path_suffix(plan.spec.root, ctx)), false, owner);
  if (!root) return fail(root.error().with_context(name + ": creating " + plan.spec.root));
  // It starts with the parent root's top-level symbolic links (the
  // merged-/usr layout: bin -> usr/bin, lib64 -> usr/lib64), so programs
  // from a /usr the child may see find their loader; nothing else of the
  // parent's root comes along.
  if (auto proot = sys::open(sys::at_cwd, parent.root, sys::Open::directory | sys::Open::no_follow)) {
    auto names = sys::list_dir(proot->get());
    for (const auto& n : names ? *names : std::vector<std::string>{}) {
      auto st = sys::stat_at(proot->get(), n);
      if (!st || !*st || !S_ISLNK((*st)->mode)) continue;
      auto have = sys::stat_at(made.fd(*root), n);
      if (!have || *have) continue;
      auto target = sys::read_link_at(proot->get(), n);
      if (!target) continue;
      if (auto r = sys::make_symlink_at(*target, made.fd(*root), n, owner); !r)
        return fail(r.error().with_context(name + ": " + plan.spec.root + "/" + n));
      made.file(*root, n);
    }
  }

  // Everything made so far lies in the owner's home and was made with the
  // owner's rights: its coordination directory and its root. What follows
  // (the .d, its files, the entry) stays the caller's, so that no agent
  // can rewrite a child's control files and the launcher's trust check
  // (root or the owner) accepts them.

  auto tmp_name = sys::make_temp_dir_at(made.fd(agents), "." + name + ".d.tmp.", kDirMode);
  if (!tmp_name) return fail(tmp_name.error().with_context(name + ": " + agent_dir));
  auto tmpfd = sys::open(made.fd(agents), *tmp_name, sys::Open::directory | sys::Open::no_follow);
  if (!tmpfd) {
    (void)sys::remove_at(made.fd(agents), *tmp_name, true);
    return fail(tmpfd.error().with_context(name + ": " + agent_dir));
  }
  std::size_t tmp = made.hold(std::move(*tmpfd));
  made.directory(agents, *tmp_name, tmp);
  for (const auto& [file, content] : plan.files) {
    CTX_TRY_CTX(sys::atomic_replace(made.fd(tmp), file, content, kFileMode, true, std::nullopt),
                name + ": writing " + path_join(agent_dir, *tmp_name) + "/" + file);
    made.file(tmp, file);
  }
  const std::string parent_entry = path_join(agent_dir, parent.name);
  auto entry = copy_entry(made, agents, parent.name, tmp);
  if (!entry) return fail(entry.error().with_context(name + ": copying " + parent_entry));
  CTX_TRY_CTX(sys::fault_at("child.create.files"), name);

  if (*entry) {
    if (auto r = sys::rename_noreplace_at(made.fd(tmp), kEntryTmp, made.fd(agents), name); !r) {
      if (r.error().code == EEXIST) return fail(taken(name, path_join(agent_dir, name)));
      return fail(r.error().with_context(name + ": " + agent_dir));
    }
    made.file(agents, name);
  }
  CTX_TRY_CTX(sys::fault_at("child.create.rename"), name);
  if (auto r = sys::rename_noreplace_at(made.fd(agents), *tmp_name, made.fd(agents), name + ".d"); !r) {
    if (r.error().code == EEXIST) return fail(taken(name, path_join(agent_dir, name + ".d")));
    return fail(r.error().with_context(name + ": " + agent_dir));
  }
  made.keep();
  return {};
}

Result<void> remove_child(const AgentSpec& parent, const std::string& name, std::string_view session) {
  const std::string& ctx = parent.ctx_root;
  const std::string agent_dir = path_join(ctx, "agent");
  CTX_TRY_ASSIGN(UniqueFd top, sys::open(sys::at_cwd, ctx, sys::Open::directory));
  auto agents = sys::open(top.get(), "agent", sys::Open::directory | sys::Open::beneath | sys::Open::no_symlinks);
  if (!agents) return fail(agents.error().with_context(name + ": " + agent_dir));
  auto ddir = sys::open(agents->get(), name + ".d", sys::Open::directory | sys::Open::beneath | sys::Open::no_symlinks);
  if (!ddir) return fail(ddir.error().with_context(name + ": " + path_join(agent_dir, name + ".d")));
  CTX_TRY_ASSIGN(bool locked, sys::try_lock(ddir->get()));
  if (!locked)
    return fail(Error{EBUSY, name + ": EBUSY: it runs (its supervisor holds " + name + ".d); stop it first", "running"});
  // Out of every launch's sight first; then nothing can find half of it.
  const std::string gone = "." + name + ".d.del";
  CTX_TRY_CTX(sys::remove_tree_at(agents->get(), gone), name + ": " + agent_dir);
  CTX_TRY_CTX(sys::rename_at(agents->get(), name + ".d", agents->get(), gone), name + ": " + agent_dir);
  CTX_TRY_CTX(sys::remove_tree_at(agents->get(), gone), name + ": " + agent_dir);
  for (const std::string& n : {name, name + ".sock"})
    CTX_TRY_CTX(sys::remove_tree_at(agents->get(), n), name + ": " + agent_dir);
  // The child's home and its coordination directory lie in the owner's
  // home; what is already gone is no error.
  for (const std::string& rel : {"home/" + std::to_string(parent.owner) + "/agent/" + name,
                                 std::string(path_suffix(child_context_dir(parent, session, name), ctx))}) {
    const auto slash = rel.rfind('/');
    auto dir =
        sys::open(top.get(), rel.substr(0, slash), sys::Open::directory | sys::Open::beneath | sys::Open::no_symlinks);
    if (!dir && dir.error().code == ENOENT) continue;
    if (!dir) return fail(dir.error().with_context(name + ": " + path_join(ctx, rel.substr(0, slash))));
    CTX_TRY_CTX(sys::remove_tree_at(dir->get(), rel.substr(slash + 1), kRemoveDepth), name + ": " + path_join(ctx, rel));
  }
  return {};
}

}  // namespace ctx::agentdir
