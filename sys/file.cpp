#include "sys/file.hpp"

#include <cstdlib>

#include <dirent.h>
#include <fcntl.h>
#include <sys/random.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <limits>
#include <random>
#include <string_view>

#include "sys/error.hpp"

namespace ctx::sys {

namespace {

FileStat from_stat(const struct stat& s) {
  auto ns = [](const struct timespec& t) { return static_cast<std::int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec; };
  return FileStat{s.st_mode, s.st_uid, s.st_gid,      static_cast<std::uint64_t>(s.st_size),
                  s.st_dev,  s.st_ino, ns(s.st_mtim), ns(s.st_ctim)};
}

Result<void> write_all(int fd, std::string_view data, const char* what) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return CTX_FAIL_ERRNO(what);
    }
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return {};
}

// Temporary names only: unpredictable enough that no other process guesses
// one first. Seeded by getrandom(2): std::random_device's start asks the
// processor for RDRAND with CPUID, which in a virtual machine exits to the
// hypervisor (20 us of a launch, docs/performance.md).
std::uint64_t random_u64() {
  static std::mt19937_64 rng{[] {
    std::uint64_t seed = 0;
    if (::getrandom(&seed, sizeof seed, GRND_NONBLOCK) != sizeof seed)
      seed = static_cast<std::uint64_t>(::getpid()) ^ static_cast<std::uint64_t>(::time(nullptr));
    return seed;
  }()};
  return rng();
}

}  // namespace

static_assert(at_cwd == AT_FDCWD);

namespace {

int open_flags(Open how) {
  int flags = O_CLOEXEC;
  if (has(how, Open::read_write)) flags |= O_RDWR;
  if (has(how, Open::path_only)) flags |= O_PATH;
  if (has(how, Open::directory)) flags |= O_DIRECTORY;
  if (has(how, Open::no_follow)) flags |= O_NOFOLLOW;
  if (has(how, Open::nonblock)) flags |= O_NONBLOCK;
  if (has(how, Open::regular)) flags |= O_NONBLOCK | O_NOCTTY;
  return flags;
}

std::uint64_t resolve_flags(Open how) {
  std::uint64_t r = 0;
  if (has(how, Open::beneath)) r |= RESOLVE_BENEATH;
  if (has(how, Open::in_root)) r |= RESOLVE_IN_ROOT;
  if (has(how, Open::no_symlinks)) r |= RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  if (has(how, Open::no_xdev)) r |= RESOLVE_NO_XDEV;
  return r;
}

}  // namespace

Result<UniqueFd> open(int dirfd, const std::string& path, Open how) {
  const std::string p = path.empty() && dirfd != AT_FDCWD ? "." : path;
  const std::uint64_t resolve = resolve_flags(how);
  long fd = -1;
  if (resolve != 0) {
    struct open_how oh {};
    oh.flags = static_cast<std::uint64_t>(open_flags(how));
    oh.resolve = resolve;
    fd = ::syscall(SYS_openat2, dirfd, p.c_str(), &oh, sizeof oh);
  } else {
    fd = ::openat(dirfd, p.c_str(), open_flags(how));
  }
  if (fd < 0) {
    const char* call = dirfd == AT_FDCWD ? "open " : resolve != 0 ? "openat2 " : "openat ";
    return CTX_FAIL_ERRNO(call + p);
  }
  UniqueFd f(static_cast<int>(fd));
  if (has(how, Open::regular)) {
    struct stat st {};
    if (::fstat(f.get(), &st) < 0) return CTX_FAIL_ERRNO("fstat " + p);
    if (!S_ISREG(st.st_mode)) return fail(Error{EINVAL, p + ": EINVAL: not a regular file"});
  }
  return f;
}

Result<FileStat> stat_fd(int fd) {
  struct stat s {};
  if (::fstat(fd, &s) < 0) return CTX_FAIL_ERRNO("fstat");
  return from_stat(s);
}

Result<std::optional<FileStat>> stat_at(int dirfd, const std::string& name) {
  struct stat s {};
  if (::fstatat(dirfd, name.c_str(), &s, AT_SYMLINK_NOFOLLOW) < 0) {
    if (errno == ENOENT) return std::optional<FileStat>();
    return CTX_FAIL_ERRNO("fstatat " + name);
  }
  return std::optional<FileStat>(from_stat(s));
}

Result<std::optional<FileContent>> read_small_file(int dirfd, const std::string& name, std::size_t max_size) {
  // O_NONBLOCK: a FIFO planted as a control file must not hang the reader;
  // it is refused below as not regular.
  int raw = ::openat(dirfd, name.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK);
  if (raw < 0) {
    int err = errno;
    if (err == ENOENT) return std::optional<FileContent>();
    if (err == ELOOP) return fail(Error{ELOOP, "is a symbolic link; control files must be regular files"});
    return fail(sys_error("openat", err));
  }
  UniqueFd fd(raw);
  CTX_TRY_ASSIGN(FileStat st, stat_fd(fd.get()));
  if (!S_ISREG(st.mode)) return fail(Error{EINVAL, "is not a regular file"});
  if (st.size > max_size) return fail(Error{EFBIG, "is larger than " + std::to_string(max_size) + " bytes"});
  // Sized from fstat (plus one byte to notice growth), not from the cap:
  // zero-filling 64 KiB per control file was most of a launch's CPU time.
  // A size of 0 is what procfs and sysfs report; their files must be read
  // in one call (a sysctl read at an offset other than 0 is EOF), so those
  // get a page at once.
  std::string data;
  data.resize(st.size == 0 ? std::min<std::size_t>(4096, max_size + 1) : static_cast<std::size_t>(st.size) + 1);
  std::size_t got = 0;
  while (true) {
    if (got == data.size()) {
      if (data.size() > max_size) break;
      data.resize(std::min(data.size() * 2, max_size + 1));
    }
    ssize_t n = ::read(fd.get(), data.data() + got, data.size() - got);
    if (n < 0) {
      if (errno == EINTR) continue;
      return CTX_FAIL_ERRNO("read");
    }
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
    // All fstat saw: no read for the end of the file (a file that grew
    // since fills the byte beyond and goes on).
    if (st.size != 0 && got == static_cast<std::size_t>(st.size)) break;
  }
  // The file may have grown between fstat and read.
  if (got > max_size) return fail(Error{EFBIG, "is larger than " + std::to_string(max_size) + " bytes"});
  data.resize(got);
  return std::optional<FileContent>(FileContent{std::move(data), st});
}

Result<UniqueFd> open_or_make_dirs(int dirfd, const std::string& rel, mode_t mode, const MakeAs& as) {
  CTX_TRY_ASSIGN(FsIdScope scope, FsIdScope::enter(as));
  // Usually every directory exists: one openat2 that follows no symlink
  // and stays beneath dirfd opens what the walk below would (three calls
  // per component). Any failure takes the walk, which makes what is
  // missing and words an error as before.
  if (!rel.empty())
    if (auto whole = open(dirfd, rel, Open::directory | Open::beneath | Open::no_symlinks)) return whole;
  int raw = ::openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (raw < 0) return CTX_FAIL_ERRNO("openat .");
  UniqueFd cur(raw);
  std::size_t start = 0;
  while (start < rel.size()) {
    std::size_t slash = rel.find('/', start);
    std::string comp = rel.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    if (!comp.empty()) {
      if (::mkdirat(cur.get(), comp.c_str(), mode) < 0 && errno != EEXIST) return CTX_FAIL_ERRNO("mkdirat " + comp);
      CTX_TRY_ASSIGN(UniqueFd next, open(cur.get(), comp, Open::directory | Open::no_follow));
      cur = std::move(next);
    }
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return cur;
}

Result<bool> make_dir_if_missing_at(int dirfd, const std::string& name, mode_t mode, const MakeAs& as) {
  CTX_TRY_ASSIGN(FsIdScope scope, FsIdScope::enter(as));
  if (::mkdirat(dirfd, name.c_str(), mode) == 0) return true;
  int err = errno;
  if (err != EEXIST) return fail(sys_error("mkdirat " + name, err));
  struct stat st {};
  if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) < 0) return CTX_FAIL_ERRNO("fstatat " + name);
  if (S_ISDIR(st.st_mode)) return false;
  if (S_ISLNK(st.st_mode)) return fail(Error{ELOOP, "mkdirat " + name + ": ELOOP: is a symbolic link"});
  return fail(Error{ENOTDIR, "mkdirat " + name + ": ENOTDIR: exists and is not a directory"});
}

Result<std::string> make_temp_dir_at(int dirfd, const std::string& prefix, mode_t mode) {
  static constexpr std::string_view kChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  // 62^10 names: a collision with another creator is retried, not fatal.
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::uint64_t r = random_u64();
    std::string name = prefix;
    for (int i = 0; i < 10; ++i, r /= kChars.size()) name += kChars[r % kChars.size()];
    if (::mkdirat(dirfd, name.c_str(), mode) == 0) return name;
    if (errno != EEXIST) return CTX_FAIL_ERRNO("mkdirat " + name);
  }
  return fail(Error{EEXIST, "mkdirat " + prefix + "*: EEXIST: no free temporary name after 100 attempts"});
}

Result<void> rename_noreplace_at(int olddirfd, const std::string& oldname, int newdirfd, const std::string& newname) {
  if (::renameat2(olddirfd, oldname.c_str(), newdirfd, newname.c_str(), RENAME_NOREPLACE) < 0)
    return CTX_FAIL_ERRNO("renameat2 " + oldname + " " + newname);
  return {};
}

Result<void> remove_tree_at(int dirfd, const std::string& name, int depth) {
  struct stat st {};
  if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) < 0) {
    if (errno == ENOENT) return {};
    return CTX_FAIL_ERRNO("fstatat " + name);
  }
  if (S_ISDIR(st.st_mode)) {
    if (depth <= 0) return fail(Error{ELOOP, name + ": ELOOP: nested too deep to remove"});
    int raw = ::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (raw < 0) return CTX_FAIL_ERRNO("openat " + name);
    UniqueFd dir(raw);
    struct stat inner {};
    if (::fstat(dir.get(), &inner) < 0) return CTX_FAIL_ERRNO("fstat " + name);
    if (inner.st_dev != st.st_dev || inner.st_ino != st.st_ino)
      return fail(Error{EXDEV, name + ": EXDEV: changed while being removed"});
    CTX_TRY_ASSIGN(std::vector<std::string> names, list_dir(dir.get()));
    for (const auto& n : names) {
      struct stat e {};
      if (::fstatat(dir.get(), n.c_str(), &e, AT_SYMLINK_NOFOLLOW) < 0) continue;
      if (S_ISDIR(e.st_mode) && e.st_dev != st.st_dev)
        return fail(Error{EXDEV, name + "/" + n + ": EXDEV: another file system is mounted there"});
      CTX_TRY_CTX(remove_tree_at(dir.get(), n, depth - 1), name);
    }
  }
  if (::unlinkat(dirfd, name.c_str(), S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) < 0 && errno != ENOENT)
    return CTX_FAIL_ERRNO("unlinkat " + name);
  return {};
}

Result<void> rename_at(int olddirfd, const std::string& oldname, int newdirfd, const std::string& newname) {
  if (::renameat(olddirfd, oldname.c_str(), newdirfd, newname.c_str()) < 0)
    return CTX_FAIL_ERRNO("renameat " + oldname + " " + newname);
  return {};
}

Result<void> chown_at(int dirfd, const std::string& name, Ownership owner) {
  int flags = AT_SYMLINK_NOFOLLOW | (name.empty() ? AT_EMPTY_PATH : 0);
  if (::fchownat(dirfd, name.c_str(), owner.uid, owner.gid, flags) < 0)
    return CTX_FAIL_ERRNO("fchownat " + (name.empty() ? std::string(".") : name));
  return {};
}

Result<std::string> read_link_at(int dirfd, const std::string& name) {
  std::string buf(256, '\0');
  while (true) {
    ssize_t n = ::readlinkat(dirfd, name.c_str(), buf.data(), buf.size());
    if (n < 0) return CTX_FAIL_ERRNO("readlinkat " + name);
    // A full buffer may mean a truncated target: grow and read again.
    if (static_cast<std::size_t>(n) < buf.size()) {
      buf.resize(static_cast<std::size_t>(n));
      return buf;
    }
    if (buf.size() >= 65536) return fail(Error{ENAMETOOLONG, "readlinkat " + name + ": ENAMETOOLONG: target too long"});
    buf.resize(buf.size() * 2);
  }
}

Result<void> write_existing_at(int dirfd, const std::string& name, std::string_view data) {
  int raw = ::openat(dirfd, name.c_str(), O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
  if (raw < 0) return CTX_FAIL_ERRNO("openat " + name);
  UniqueFd fd(raw);
  ssize_t n = ::write(fd.get(), data.data(), data.size());
  if (n < 0) return CTX_FAIL_ERRNO("write " + name);
  if (static_cast<std::size_t>(n) != data.size()) return fail(Error{EIO, "write " + name + ": short write"});
  return {};
}

bool writable_at(int dirfd, const std::string& name) {
  return ::faccessat(dirfd, name.empty() ? "." : name.c_str(), W_OK, AT_EACCESS) == 0;
}

bool executable_at(int dirfd, const std::string& name) {
  return ::faccessat(dirfd, name.c_str(), X_OK, AT_EACCESS | AT_SYMLINK_NOFOLLOW) == 0;
}

Result<bool> on_noexec_mount(int fd) {
  struct statvfs v {};
  if (::fstatvfs(fd, &v) < 0) return CTX_FAIL_ERRNO("fstatvfs");
  return (v.f_flag & ST_NOEXEC) != 0;
}

bool on_fuse(int fd) {
  struct statfs s {};
  constexpr long kFuseSuperMagic = 0x65735546;  // include/uapi/linux/magic.h
  return ::fstatfs(fd, &s) == 0 && s.f_type == kFuseSuperMagic;
}

bool is_private_dir(const std::string& path) {
  struct stat st {};
  if (path.empty() || path[0] != '/' || ::lstat(path.c_str(), &st) < 0) return false;
  return S_ISDIR(st.st_mode) && st.st_uid == ::geteuid() && (st.st_mode & 077) == 0;
}

Result<void> chmod_at(int dirfd, const std::string& name, mode_t mode) {
  if (::fchmodat(dirfd, name.c_str(), mode, 0) < 0) return CTX_FAIL_ERRNO("chmod " + name);
  return {};
}

std::string read_or_empty(const std::string& dir, const std::string& name) {
  auto d = open(AT_FDCWD, dir, Open::directory);
  if (!d) return {};
  auto f = read_small_file(d->get(), name, 1 << 20);
  if (!f || !*f) return {};
  return std::move((*f)->data);
}

Result<std::vector<std::string>> list_dir(int dirfd) {
  // A descriptor of its own (its own position), read with getdents64:
  // opendir's checks cost three system calls more.
  int raw = ::openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (raw < 0) return CTX_FAIL_ERRNO("openat .");
  UniqueFd d(raw);
  return list_open_dir(d.get());
}

Result<std::vector<std::string>> list_open_dir(int dirfd) {
  std::vector<std::string> names;
  std::vector<std::uint64_t> buf(1024);  // 8-byte words: records are 8-byte aligned
  while (true) {
    ssize_t n = ::getdents64(dirfd, buf.data(), buf.size() * 8);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return CTX_FAIL_ERRNO("getdents64");
    if (n == 0) break;
    const char* p = reinterpret_cast<const char*>(buf.data());
    for (ssize_t at = 0; at < n;) {
      const auto* e = reinterpret_cast<const struct dirent64*>(p + at);
      std::string name = e->d_name;
      if (name != "." && name != "..") names.push_back(std::move(name));
      at += e->d_reclen;
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

Result<std::vector<DirEntry>> read_dir_from(int dirfd, std::uint64_t from, std::size_t bytes) {
  if (from > static_cast<std::uint64_t>(std::numeric_limits<off_t>::max()))
    return fail(Error{EINVAL, "lseek: EINVAL: directory position " + std::to_string(from) + " is out of range"});
  if (::lseek(dirfd, static_cast<off_t>(from), SEEK_SET) < 0) return CTX_FAIL_ERRNO("lseek");
  // 8-byte words: struct dirent64 records are 8-byte aligned.
  std::vector<std::uint64_t> buf((std::max<std::size_t>(bytes, 1024) + 7) / 8);
  ssize_t n = ::getdents64(dirfd, buf.data(), buf.size() * 8);
  if (n < 0) return CTX_FAIL_ERRNO("getdents64");
  std::vector<DirEntry> out;
  const char* base = reinterpret_cast<const char*>(buf.data());
  for (ssize_t at = 0; at < n;) {
    const auto* d = reinterpret_cast<const struct dirent64*>(base + at);
    out.push_back(DirEntry{d->d_name, static_cast<std::uint64_t>(d->d_off)});
    at += d->d_reclen;
  }
  return out;
}

namespace {

// Why not renameat: ext4 (auto_da_alloc) starts the write-back of a file
// renamed over an existing one, about 0.1 ms per record on the launch
// path, more when the disk is busy. An exchange followed by an unlink of
// the old content is as atomic for a reader and forces nothing; what it
// gives up is the old-or-new content after a power loss (the name may
// then hold an empty file), which runtime state does not need.
Result<void> swap_in(int dirfd, const std::string& tmp, const std::string& name) {
  auto failed = [&](const std::string& what, int err) {
    ::unlinkat(dirfd, tmp.c_str(), 0);
    return fail(sys_error(what, err));
  };
  if (::renameat2(dirfd, tmp.c_str(), dirfd, name.c_str(), RENAME_EXCHANGE) < 0) {
    // ENOENT: no old file, so nothing is forced. EINVAL: a file system
    // without exchange.
    if (errno != ENOENT && errno != EINVAL) return failed("renameat2 " + tmp + " " + name, errno);
    if (::renameat(dirfd, tmp.c_str(), dirfd, name.c_str()) < 0) return failed("renameat " + tmp + " " + name, errno);
    return {};
  }
  if (::unlinkat(dirfd, tmp.c_str(), 0) == 0) return {};
  int err = errno;
  // A directory stood at name, where renameat fails: put it back.
  (void)::renameat2(dirfd, tmp.c_str(), dirfd, name.c_str(), RENAME_EXCHANGE);
  return failed("renameat " + tmp + " " + name, err);
}

}  // namespace

namespace {

// A temporary file's name: 64 random bits (random_u64, seeded from
// getrandom). A name that is taken (by chance, by a child forked without
// exec, whose generator goes on from its parent's, or planted by someone
// who guessed it) is refused by O_EXCL, and the next one is tried.
std::string temp_suffix() {
  static constexpr char kHex[] = "0123456789abcdef";
  std::uint64_t r = random_u64();
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, r >>= 4) s[static_cast<std::size_t>(i)] = kHex[r & 15];
  return s;
}

// Creates ".NAME.tmp.SUFFIX" in dirfd (O_EXCL): its descriptor and name.
Result<std::pair<UniqueFd, std::string>> create_temp(int dirfd, const std::string& name, mode_t mode) {
  for (int attempt = 0; attempt < 16; ++attempt) {
    std::string tmp = "." + name + ".tmp." + temp_suffix();
    int raw = ::openat(dirfd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
    if (raw >= 0) return std::make_pair(UniqueFd(raw), std::move(tmp));
    if (errno != EEXIST) return CTX_FAIL_ERRNO("openat " + tmp);
  }
  return fail(Error{EEXIST, "openat ." + name + ".tmp.*: EEXIST: no free temporary name after 16 attempts"});
}

}  // namespace

Result<void> atomic_replace(int dirfd, const std::string& name, std::string_view data, mode_t mode, bool durable,
                            const MakeAs& as) {
  CTX_TRY_ASSIGN(FsIdScope scope, FsIdScope::enter(as));
  CTX_TRY_ASSIGN(auto made, create_temp(dirfd, name, mode));
  UniqueFd fd = std::move(made.first);
  const std::string tmp = std::move(made.second);
  auto cleanup = [&] { ::unlinkat(dirfd, tmp.c_str(), 0); };
  if (auto r = write_all(fd.get(), data, "write"); !r) {
    cleanup();
    return fail(std::move(r).error().with_context(name));
  }
  // fchmod: the umask may have narrowed the create mode.
  if (::fchmod(fd.get(), mode) < 0) {
    int err = errno;
    cleanup();
    return fail(sys_error("fchmod " + tmp, err));
  }
  // fsync can be where a full disk shows (delayed allocation): the old
  // content stays then too.
  if (durable && ::fsync(fd.get()) < 0) {
    int err = errno;
    cleanup();
    return fail(sys_error("fsync " + tmp, err));
  }
  fd.reset();
  if (!durable) return swap_in(dirfd, tmp, name);
  if (::renameat(dirfd, tmp.c_str(), dirfd, name.c_str()) < 0) {
    int err = errno;
    cleanup();
    return fail(sys_error("renameat " + tmp + " " + name, err));
  }
  return {};
}

Result<void> copy_file_new(const std::string& from, int dirfd, const std::string& name, mode_t mode) {
  int in_raw = ::open(from.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (in_raw < 0) return CTX_FAIL_ERRNO("open " + from);
  UniqueFd in(in_raw);
  CTX_TRY_ASSIGN(FileStat st, stat_fd(in.get()));
  if (!S_ISREG(st.mode)) return fail(Error{EINVAL, from + ": EINVAL: not a regular file"});
  CTX_TRY_ASSIGN(auto made, create_temp(dirfd, name, mode));
  UniqueFd out = std::move(made.first);
  const std::string tmp = std::move(made.second);
  auto failed = [&](const std::string& what) {
    int err = errno;
    ::unlinkat(dirfd, tmp.c_str(), 0);
    return fail(sys_error(what, err));
  };
  char buf[1 << 16];
  while (true) {
    ssize_t n = ::read(in.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return failed("read " + from);
    if (n == 0) break;
    if (auto r = write_all(out.get(), std::string_view(buf, static_cast<std::size_t>(n)), "write"); !r) {
      ::unlinkat(dirfd, tmp.c_str(), 0);
      return fail(std::move(r).error().with_context(name));
    }
  }
  if (::fchmod(out.get(), mode) < 0) return failed("fchmod " + tmp);
  out.reset();
  if (::renameat2(dirfd, tmp.c_str(), dirfd, name.c_str(), RENAME_NOREPLACE) < 0) return failed("renameat2 " + name);
  return {};
}

Result<std::size_t> read_at(int fd, char* buf, std::size_t size, std::uint64_t offset) {
  while (true) {
    ssize_t n = ::pread(fd, buf, size, static_cast<off_t>(offset));
    if (n >= 0) return static_cast<std::size_t>(n);
    if (errno != EINTR) return CTX_FAIL_ERRNO("pread");
  }
}

Result<std::pair<UniqueFd, std::uint64_t>> open_append_sized(int dirfd, const std::string& name, mode_t mode,
                                                             const MakeAs& as) {
  CTX_TRY_ASSIGN(FsIdScope scope, FsIdScope::enter(as));
  int raw = ::openat(dirfd, name.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, mode);
  if (raw < 0) return CTX_FAIL_ERRNO("openat " + name);
  UniqueFd fd(raw);
  CTX_TRY_ASSIGN(FileStat st, stat_fd(fd.get()));
  if (!S_ISREG(st.mode)) return fail(Error{EINVAL, name + ": EINVAL: not a regular file"});
  return std::pair<UniqueFd, std::uint64_t>(std::move(fd), st.size);
}

Result<UniqueFd> open_append(int dirfd, const std::string& name, mode_t mode, const MakeAs& as) {
  CTX_TRY_ASSIGN(auto opened, open_append_sized(dirfd, name, mode, as));
  return std::move(opened.first);
}

Result<void> append_whole(int fd, std::string_view data) {
  std::size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    int err = n < 0 ? errno : EIO;  // a regular file never takes 0 bytes of a non-empty write
    if (done > 0) {
      struct stat st {};
      off_t end = ::lseek(fd, 0, SEEK_CUR);
      if (end >= 0 && ::fstat(fd, &st) == 0 && st.st_size == end) (void)::ftruncate(fd, end - static_cast<off_t>(done));
    }
    return fail(sys_error("write", err));
  }
  return {};
}

Result<void> append_file(int dirfd, const std::string& name, std::string_view data, mode_t mode, const MakeAs& as) {
  CTX_TRY_ASSIGN(UniqueFd fd, open_append(dirfd, name, mode, as));
  return append_whole(fd.get(), data);
}

namespace {

// An existing regular file below dirfd, for writing: no O_CREAT (nothing
// is ever made in a directory that is not the caller's), O_NOFOLLOW (a
// symlink planted under the name is ELOOP), O_NONBLOCK (a FIFO cannot
// block the caller), O_NOCTTY (a tty cannot become ours).
Result<UniqueFd> open_existing_for_write(int dirfd, const std::string& name, int extra) {
  int raw = ::openat(dirfd, name.c_str(), O_WRONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | extra);
  if (raw < 0) return CTX_FAIL_ERRNO("openat " + name);
  UniqueFd fd(raw);
  CTX_TRY_ASSIGN(FileStat st, stat_fd(fd.get()));
  if (!S_ISREG(st.mode)) return fail(Error{EINVAL, name + ": EINVAL: not a regular file"});
  return fd;
}

}  // namespace

Result<void> append_existing(int dirfd, const std::string& name, std::string_view data, std::uint64_t cap) {
  CTX_TRY_ASSIGN(UniqueFd fd, open_existing_for_write(dirfd, name, O_APPEND));
  CTX_TRY_ASSIGN(FileStat st, stat_fd(fd.get()));
  if (st.size > 0 && st.size + data.size() > cap && ::ftruncate(fd.get(), 0) < 0)
    return CTX_FAIL_ERRNO("ftruncate " + name);
  return append_whole(fd.get(), data);
}

Result<void> overwrite_existing(int dirfd, const std::string& name, std::string_view data) {
  CTX_TRY_ASSIGN(UniqueFd fd, open_existing_for_write(dirfd, name, 0));
  if (::ftruncate(fd.get(), 0) < 0) return CTX_FAIL_ERRNO("ftruncate " + name);
  std::size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::pwrite(fd.get(), data.data() + done, data.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return CTX_FAIL_ERRNO("pwrite " + name);
    if (n == 0) return fail(Error{EIO, "pwrite " + name + ": EIO: wrote nothing"});
    done += static_cast<std::size_t>(n);
  }
  return {};
}

}  // namespace ctx::sys

namespace ctx::sys {

Result<std::string> make_temp_dir(const std::string& prefix) {
  std::string t = prefix + "XXXXXX";
  if (::mkdtemp(t.data()) == nullptr) return CTX_FAIL_ERRNO("mkdtemp " + t);
  return t;
}

}  // namespace ctx::sys
