#include "sys/mountinfo.hpp"

#include <libmount/libmount.h>
#include <unistd.h>

#include <memory>

#include "sys/error.hpp"

namespace ctx::sys {

namespace {

struct TableFree {
  void operator()(libmnt_table* t) const { mnt_unref_table(t); }
};
struct IterFree {
  void operator()(libmnt_iter* i) const { mnt_free_iter(i); }
};

}  // namespace

Result<std::vector<MountEntry>> read_mountinfo() {
  std::unique_ptr<libmnt_table, TableFree> table(mnt_new_table());
  if (!table) return fail(Error{ENOMEM, "mnt_new_table: ENOMEM"});
  // libmount returns a negative errno.
  if (int rc = mnt_table_parse_file(table.get(), "/proc/self/mountinfo"); rc != 0)
    return fail(sys_error("parsing /proc/self/mountinfo", rc < 0 ? -rc : EINVAL));
  std::unique_ptr<libmnt_iter, IterFree> it(mnt_new_iter(MNT_ITER_FORWARD));
  if (!it) return fail(Error{ENOMEM, "mnt_new_iter: ENOMEM"});
  std::vector<MountEntry> out;
  libmnt_fs* fs = nullptr;
  while (mnt_table_next_fs(table.get(), it.get(), &fs) == 0) {
    const char* target = mnt_fs_get_target(fs);
    const char* type = mnt_fs_get_fstype(fs);
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
