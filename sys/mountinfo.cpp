#include "sys/mountinfo.hpp"

#include <dlfcn.h>
#include <libmount/libmount.h>
#include <unistd.h>

#include <string>

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
      !bind_symbol(h, "mnt_fs_get_target", l.get_target) || !bind_symbol(h, "mnt_fs_get_fstype", l.get_fstype)) {
    error = "libmount.so.1: ELIBBAD: a symbol is missing";
    return fail(Error{ELIBBAD, error});
  }
  lm = l;
  return &lm;
}

}  // namespace

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
    out.push_back({target != nullptr ? target : "", type != nullptr ? type : ""});
  }
  return out;
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
