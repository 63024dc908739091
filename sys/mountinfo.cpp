#include "sys/mountinfo.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <libmount/libmount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <utility>

#include "sys/error.hpp"

namespace ctx::sys {

namespace {

// libmount is loaded when a mount table is first read, not at start: it
// brings libblkid, libselinux and libpcre2 along, whose relocation cost a
// third of a millisecond on every launch and tool call, while only a root
// launch's binds (and ctx check) read a mount table.
struct Libmount {
  void* handle = nullptr;
  decltype(&mnt_new_table) new_table = nullptr;
  decltype(&mnt_unref_table) unref_table = nullptr;
  decltype(&mnt_table_parse_file) parse_file = nullptr;
  decltype(&mnt_new_iter) new_iter = nullptr;
  decltype(&mnt_free_iter) free_iter = nullptr;
  decltype(&mnt_table_next_fs) next_fs = nullptr;
  decltype(&mnt_fs_get_target) get_target = nullptr;
  decltype(&mnt_fs_get_fstype) get_fstype = nullptr;
  decltype(&mnt_fs_get_root) get_root = nullptr;
};

template <typename F>
bool bind_symbol(void* h, const char* name, F& out) {
  out = reinterpret_cast<F>(::dlsym(h, name));
  return out != nullptr;
}

Result<const Libmount*> libmount() {
  static Libmount lm;
  static std::string error;
  if (lm.handle != nullptr) return &lm;
  if (!error.empty()) return fail(Error{ELIBACC, error});
  void* h = ::dlopen("libmount.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    const char* why = ::dlerror();
    error = std::string("libmount.so.1: ELIBACC: ") + (why != nullptr ? why : "cannot be loaded") +
            " (apt-get install libmount1)";
    return fail(Error{ELIBACC, error});
  }
  Libmount l;
  l.handle = h;
  if (!bind_symbol(h, "mnt_new_table", l.new_table) || !bind_symbol(h, "mnt_unref_table", l.unref_table) ||
      !bind_symbol(h, "mnt_table_parse_file", l.parse_file) || !bind_symbol(h, "mnt_new_iter", l.new_iter) ||
      !bind_symbol(h, "mnt_free_iter", l.free_iter) || !bind_symbol(h, "mnt_table_next_fs", l.next_fs) ||
      !bind_symbol(h, "mnt_fs_get_target", l.get_target) || !bind_symbol(h, "mnt_fs_get_fstype", l.get_fstype) ||
      !bind_symbol(h, "mnt_fs_get_root", l.get_root)) {
    error = "libmount.so.1: ELIBBAD: a symbol is missing";
    return fail(Error{ELIBBAD, error});
  }
  lm = l;
  return &lm;
}

// listmount(2) and statmount(2), Linux 6.8. Debian 12's uapi headers
// (6.1) have neither the numbers nor the structs: these are the kernel's
// (include/uapi/linux/mount.h, arch/x86/entry/syscalls/syscall_64.tbl and
// include/uapi/asm-generic/unistd.h, the same numbers on every
// architecture), in their first published size.
#ifndef SYS_statmount
#define SYS_statmount 457
#endif
#ifndef SYS_listmount
#define SYS_listmount 458
#endif

struct MntIdReq {
  std::uint32_t size;
  std::uint32_t spare;
  std::uint64_t mnt_id;
  std::uint64_t param;  // statmount: the STATMOUNT_* mask; listmount: the last id seen
};
constexpr std::uint32_t kMntIdReqSizeVer0 = 24;
static_assert(sizeof(MntIdReq) == kMntIdReqSizeVer0);

// struct statmount: a fixed 512-byte head (later kernels fill spare
// fields, never move these), then the strings, which the head's string
// fields locate as offsets into `str`.
struct Statmount {
  std::uint32_t size;  // of what was written, strings included
  std::uint32_t spare1;
  std::uint64_t mask;  // the STATMOUNT_* groups written
  std::uint32_t sb_dev_major;
  std::uint32_t sb_dev_minor;
  std::uint64_t sb_magic;
  std::uint32_t sb_flags;
  std::uint32_t fs_type;  // string
  std::uint64_t mnt_id;
  std::uint64_t mnt_parent_id;
  std::uint32_t mnt_id_old;
  std::uint32_t mnt_parent_id_old;
  std::uint64_t mnt_attr;
  std::uint64_t mnt_propagation;
  std::uint64_t mnt_peer_group;
  std::uint64_t mnt_master;
  std::uint64_t propagate_from;
  std::uint32_t mnt_root;   // string
  std::uint32_t mnt_point;  // string
  std::uint64_t spare2[50];
};
static_assert(sizeof(Statmount) == 512);

constexpr std::uint64_t kStatmountSbBasic = 0x01;
constexpr std::uint64_t kStatmountMntRoot = 0x08;
constexpr std::uint64_t kStatmountMntPoint = 0x10;
constexpr std::uint64_t kStatmountFsType = 0x20;
// listmount's parent id meaning "the caller's root": every mount reachable
// from it, as /proc/self/mountinfo shows them.
constexpr std::uint64_t kLsmtRoot = ~std::uint64_t{0};
// The statmount buffer grows on EOVERFLOW up to 1 MiB.
constexpr std::size_t kMaxStatmountWords = (1u << 20) / sizeof(std::uint64_t);

// The ids of every mount below the caller's root, in id order.
Result<std::vector<std::uint64_t>> listmount_all() {
  std::vector<std::uint64_t> ids;
  std::uint64_t batch[256];
  MntIdReq req{kMntIdReqSizeVer0, 0, kLsmtRoot, 0};
  while (true) {
    long n = ::syscall(SYS_listmount, &req, batch, std::size(batch), 0);
    if (n < 0) return CTX_FAIL_ERRNO("listmount");
    ids.insert(ids.end(), batch, batch + n);
    if (static_cast<std::size_t>(n) < std::size(batch)) return ids;
    req.param = batch[n - 1];
  }
}

// The string at `offset` in the strings after the head, or "" when the
// kernel did not write the group `bit` or the offset is out of bounds.
std::string statmount_string(const Statmount& sm, const char* buf, std::size_t written, std::uint64_t bit,
                             std::uint32_t offset) {
  if ((sm.mask & bit) == 0 || sizeof sm + offset >= written) return {};
  const char* s = buf + sizeof sm + offset;
  return std::string(s, ::strnlen(s, written - sizeof sm - offset));
}

// One mount's point, type and root, with its superblock's magic; nullopt
// when it was unmounted since its id was learnt. `storage` grows on
// EOVERFLOW (a path longer than it holds), up to 1 MiB.
Result<std::optional<std::pair<MountEntry, std::uint64_t>>> statmount_entry(std::uint64_t id,
                                                                            std::vector<std::uint64_t>& storage) {
  MntIdReq req{kMntIdReqSizeVer0, 0, id, kStatmountSbBasic | kStatmountMntRoot | kStatmountMntPoint | kStatmountFsType};
  long rc = 0;
  while ((rc = ::syscall(SYS_statmount, &req, storage.data(), storage.size() * sizeof(std::uint64_t), 0)) < 0 &&
         errno == EOVERFLOW && storage.size() < kMaxStatmountWords)
    storage.resize(storage.size() * 2);
  if (rc < 0) {
    if (errno == ENOENT) return std::optional<std::pair<MountEntry, std::uint64_t>>();
    return CTX_FAIL_ERRNO("statmount");
  }
  const char* buf = reinterpret_cast<const char*>(storage.data());
  Statmount sm;
  std::memcpy(&sm, buf, sizeof sm);
  std::size_t written = std::min<std::size_t>(sm.size, storage.size() * sizeof(std::uint64_t));
  MountEntry e{statmount_string(sm, buf, written, kStatmountMntPoint, sm.mnt_point),
               statmount_string(sm, buf, written, kStatmountFsType, sm.fs_type),
               statmount_string(sm, buf, written, kStatmountMntRoot, sm.mnt_root)};
  return std::optional<std::pair<MountEntry, std::uint64_t>>(std::pair(std::move(e), sm.sb_magic));
}

// Every mount below the caller's root, or only those of `type`: then a
// first statmount asks for the numbers alone, and the strings are asked
// for when the superblock has the type's magic. The name is checked too:
// types may share a magic (devtmpfs has tmpfs's).
Result<std::vector<MountEntry>> statmount_all(const std::optional<FsType>& type) {
  CTX_TRY_ASSIGN(std::vector<std::uint64_t> ids, listmount_all());
  // Two paths of PATH_MAX and a type fit; a longer one is EOVERFLOW, and
  // the buffer grows.
  std::vector<std::uint64_t> storage((sizeof(Statmount) + 2 * 4096 + 256) / sizeof(std::uint64_t));
  std::vector<MountEntry> out;
  out.reserve(type ? 1 : ids.size());
  for (std::uint64_t id : ids) {
    if (type) {
      Statmount head;
      MntIdReq req{kMntIdReqSizeVer0, 0, id, kStatmountSbBasic};
      if (::syscall(SYS_statmount, &req, &head, sizeof head, 0) < 0) {
        if (errno == ENOENT) continue;  // unmounted since listmount
        return CTX_FAIL_ERRNO("statmount");
      }
      if (head.sb_magic != type->magic) continue;
    }
    CTX_TRY_ASSIGN(auto got, statmount_entry(id, storage));
    if (got && (!type || got->first.fstype == type->name)) out.push_back(std::move(got->first));
  }
  return out;
}

// statx's unique mount id (Linux 6.8, the id statmount takes).
constexpr unsigned kStatxMntIdUnique = 0x4000U;

}  // namespace

Result<std::optional<MountEntry>> mount_at(const std::string& path, const FsType& type) {
  struct statx sx {};
  if (::statx(AT_FDCWD, path.c_str(), AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT, kStatxMntIdUnique, &sx) < 0) {
    if (errno == ENOENT || errno == ENOTDIR) return std::optional<MountEntry>();
    return CTX_FAIL_ERRNO("statx " + path);
  }
  if ((sx.stx_mask & kStatxMntIdUnique) == 0) return fail(Error{ENOSYS, "statx: ENOSYS: no unique mount id"});
  std::vector<std::uint64_t> storage((sizeof(Statmount) + 2 * 4096 + 256) / sizeof(std::uint64_t));
  CTX_TRY_ASSIGN(auto got, statmount_entry(sx.stx_mnt_id, storage));
  // The mount on top at path, and path its mount point (not a directory
  // inside another file system).
  if (!got || got->second != type.magic || got->first.fstype != type.name || got->first.target != path)
    return std::optional<MountEntry>();
  return std::optional<MountEntry>(std::move(got->first));
}

Result<std::vector<MountEntry>> read_mountinfo() {
  CTX_TRY_ASSIGN(const Libmount* lm, libmount());
  libmnt_table* table = lm->new_table();
  if (table == nullptr) return fail(Error{ENOMEM, "mnt_new_table: ENOMEM"});
  struct TableGuard {
    const Libmount* lm;
    libmnt_table* t;
    ~TableGuard() { lm->unref_table(t); }
  } table_guard{lm, table};
  // libmount returns a negative errno.
  if (int rc = lm->parse_file(table, "/proc/self/mountinfo"); rc != 0)
    return fail(sys_error("parsing /proc/self/mountinfo", rc < 0 ? -rc : EINVAL));
  libmnt_iter* it = lm->new_iter(MNT_ITER_FORWARD);
  if (it == nullptr) return fail(Error{ENOMEM, "mnt_new_iter: ENOMEM"});
  struct IterGuard {
    const Libmount* lm;
    libmnt_iter* i;
    ~IterGuard() { lm->free_iter(i); }
  } iter_guard{lm, it};
  std::vector<MountEntry> out;
  libmnt_fs* fs = nullptr;
  while (lm->next_fs(table, it, &fs) == 0) {
    const char* target = lm->get_target(fs);
    const char* type = lm->get_fstype(fs);
    const char* root = lm->get_root(fs);
    out.push_back({target != nullptr ? target : "", type != nullptr ? type : "", root != nullptr ? root : ""});
  }
  return out;
}

Result<std::vector<MountEntry>> list_mounts() { return statmount_all(std::nullopt); }

Result<std::vector<MountEntry>> mount_table() {
  auto listed = list_mounts();
  if (listed || (listed.error().code != ENOSYS && listed.error().code != EPERM)) return listed;
  return read_mountinfo();
}

Result<std::vector<MountEntry>> mount_table_of(const FsType& type) {
  auto listed = statmount_all(type);
  if (listed || (listed.error().code != ENOSYS && listed.error().code != EPERM)) return listed;
  CTX_TRY_ASSIGN(std::vector<MountEntry> all, read_mountinfo());
  std::erase_if(all, [&](const MountEntry& e) { return e.fstype != type.name; });
  return all;
}

Result<std::string> fd_path(int fd) {
  std::string link = "/proc/self/fd/" + std::to_string(fd);
  std::string buf(4096, '\0');
  ssize_t n = ::readlink(link.c_str(), buf.data(), buf.size());
  if (n < 0) return CTX_FAIL_ERRNO("readlink " + link);
  buf.resize(static_cast<std::size_t>(n));
  return buf;
}

}  // namespace ctx::sys
