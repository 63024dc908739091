#include "sys/seccomp.hpp"

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>

#include "base/unique_fd.hpp"
#include "sys/error.hpp"

namespace ctx::sys {

namespace {

constexpr std::uint64_t kPersonalityQuery = 0xffffffff;

struct FilterFree {
  void operator()(void* ctx) const { seccomp_release(ctx); }
};

Error seccomp_error(const std::string& what, int rc) { return sys_error("seccomp: " + what, rc < 0 ? -rc : EINVAL); }

// One comparison (the SCMP_CMP macro is a C compound literal).
scmp_arg_cmp cmp(unsigned arg, scmp_compare op, std::uint64_t a, std::uint64_t b = 0) {
  return scmp_arg_cmp{arg, op, a, b};
}

int add(scmp_filter_ctx ctx, std::uint32_t action, int nr, const scmp_arg_cmp* c) {
  return c == nullptr ? seccomp_rule_add_array(ctx, action, nr, 0, nullptr)
                      : seccomp_rule_add_array(ctx, action, nr, 1, c);
}

// Adds one table entry; returns the libseccomp result (0 on success).
int add_rule(scmp_filter_ctx ctx, const SeccompRule& r, int nr) {
  const std::uint32_t action = SCMP_ACT_ERRNO(static_cast<std::uint32_t>(r.error));
  switch (r.when) {
    case SeccompWhen::always: return add(ctx, action, nr, nullptr);
    case SeccompWhen::arg_has_bits: {
      scmp_arg_cmp c = cmp(r.arg, SCMP_CMP_MASKED_EQ, r.value, r.value);
      return add(ctx, action, nr, &c);
    }
    case SeccompWhen::arg_low32_is: {
      scmp_arg_cmp c = cmp(r.arg, SCMP_CMP_MASKED_EQ, 0xffffffffULL, r.value);
      return add(ctx, action, nr, &c);
    }
    case SeccompWhen::arg_not_query: {
      // libseccomp takes one comparison per argument and rule. Going round
      // the 32 bits of a value other than 0 and 0xffffffff, some set bit is
      // followed by a clear one, so 32 masked comparisons ("bit i set, bit
      // i+1 mod 32 clear") name exactly the 32-bit values refused; one more
      // refuses anything above 32 bits.
      scmp_arg_cmp above = cmp(r.arg, SCMP_CMP_GT, kPersonalityQuery);
      int rc = add(ctx, action, nr, &above);
      for (unsigned bit = 0; rc == 0 && bit < 32; ++bit) {
        const std::uint64_t set = 1ULL << bit;
        const std::uint64_t next = 1ULL << ((bit + 1) % 32);
        scmp_arg_cmp c = cmp(r.arg, SCMP_CMP_MASKED_EQ, set | next, set);
        rc = add(ctx, action, nr, &c);
      }
      return rc;
    }
  }
  return -EINVAL;
}

}  // namespace

const std::vector<SeccompRule>& seccomp_rules() {
  static const std::vector<SeccompRule> rules{
      {"keyctl", SeccompWhen::always, 0, 0, EPERM,
       "kernel keyrings are per user, not per sandbox: the agent would read or plant its owner's keys"},
      {"add_key", SeccompWhen::always, 0, 0, EPERM, "as keyctl"},
      {"request_key", SeccompWhen::always, 0, 0, EPERM, "as keyctl"},
      {"io_uring_setup", SeccompWhen::always, 0, 0, EPERM,
       "io_uring runs operations the filter never sees, and has been a steady source of kernel exploits"},
      {"io_uring_enter", SeccompWhen::always, 0, 0, EPERM, "as io_uring_setup"},
      {"io_uring_register", SeccompWhen::always, 0, 0, EPERM, "as io_uring_setup"},
      {"perf_event_open", SeccompWhen::always, 0, 0, EPERM,
       "performance counters observe other processes and the kernel; a frequent exploit vector"},
      {"bpf", SeccompWhen::always, 0, 0, EPERM,
       "loading programs into the kernel; unprivileged eBPF has a long exploit history"},
      {"userfaultfd", SeccompWhen::always, 0, 0, EPERM,
       "lets user space stall kernel page faults, which makes kernel races reliable"},
      {"kexec_load", SeccompWhen::always, 0, 0, EPERM, "replaces the running kernel"},
      {"kexec_file_load", SeccompWhen::always, 0, 0, EPERM, "as kexec_load"},
      {"init_module", SeccompWhen::always, 0, 0, EPERM, "loads kernel code"},
      {"finit_module", SeccompWhen::always, 0, 0, EPERM, "as init_module"},
      {"delete_module", SeccompWhen::always, 0, 0, EPERM, "unloads kernel code"},
      {"unshare", SeccompWhen::arg_has_bits, 0, CLONE_NEWUSER, EPERM,
       "a user namespace of its own would give the agent every capability over new namespaces, the door to most "
       "kernel attack surface; the agent's children are created by its supervisor, outside"},
      {"clone", SeccompWhen::arg_has_bits, 0, CLONE_NEWUSER, EPERM, "as unshare (flags are clone's first argument)"},
      {"clone3", SeccompWhen::always, 0, 0, ENOSYS,
       "its flags are in memory a filter cannot read; ENOSYS makes the C library fall back to clone, which is filtered"},
      {"setns", SeccompWhen::always, 0, 0, EPERM, "joining another namespace; an agent never needs it"},
      {"ioctl", SeccompWhen::arg_low32_is, 1, TIOCSTI, EPERM,
       "pushes input into a terminal: keystrokes typed into whatever shell holds it"},
      {"ioctl", SeccompWhen::arg_low32_is, 1, TIOCLINUX, EPERM, "the console's own input injection and selection"},
      {"open_by_handle_at", SeccompWhen::always, 0, 0, EPERM,
       "opens files by handle, around the mount table (needs CAP_DAC_READ_SEARCH; denied for clarity)"},
      {"acct", SeccompWhen::always, 0, 0, EPERM, "process accounting of the whole system"},
      {"swapon", SeccompWhen::always, 0, 0, EPERM, "the host's swap"},
      {"swapoff", SeccompWhen::always, 0, 0, EPERM, "the host's swap"},
      {"reboot", SeccompWhen::always, 0, 0, EPERM, "the host, or the pid namespace's init"},
      {"personality", SeccompWhen::arg_not_query, 0, 0, EPERM,
       "execution domains such as READ_IMPLIES_EXEC or ADDR_NO_RANDOMIZE weaken the agent's own exploit mitigations; "
       "PER_LINUX and the query (0xffffffff) stay allowed"},
  };
  return rules;
}

Result<std::string> build_seccomp_program(SeccompLayout layout) {
  std::unique_ptr<void, FilterFree> ctx(seccomp_init(SCMP_ACT_ALLOW));
  if (!ctx) return fail(Error{ENOMEM, "seccomp: seccomp_init: ENOMEM"});
  // Only the native architecture is in the filter: a call made through
  // another one (int 0x80 on x86_64, the x32 ABI) is refused whole, so no
  // rule can be bypassed through a second syscall table.
  if (int rc = seccomp_attr_set(ctx.get(), SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_ERRNO(EPERM)); rc != 0)
    return fail(seccomp_error("bad architecture action", rc));
  // A binary tree over the syscall numbers: a call's rules are a few
  // comparisons away instead of at the end of a chain of every listed
  // call. The kernel runs the program over every syscall number when it
  // loads it (the cache of calls whose answer is always the same), and
  // again at each call that has an argument rule (ioctl, clone): 45 us
  // to load against 61 for the chain (bench/seccomp).
  if (layout == SeccompLayout::tree)
    if (int rc = seccomp_attr_set(ctx.get(), SCMP_FLTATR_CTL_OPTIMIZE, 2); rc != 0)
      return fail(seccomp_error("binary tree", rc));
  for (const auto& r : seccomp_rules()) {
    int nr = seccomp_syscall_resolve_name(r.syscall);
    if (nr == __NR_SCMP_ERROR || nr < 0) continue;  // not a call of this architecture
    if (int rc = add_rule(ctx.get(), r, nr); rc != 0) return fail(seccomp_error(r.syscall, rc));
  }
  // libseccomp 2.5 exports to a file descriptor only.
  int mfd = ::memfd_create("ctx-seccomp", MFD_CLOEXEC);
  if (mfd < 0) return CTX_FAIL_ERRNO("memfd_create");
  UniqueFd mem(mfd);
  if (int rc = seccomp_export_bpf(ctx.get(), mem.get()); rc != 0) return fail(seccomp_error("export", rc));
  std::string program;
  char buf[4096];
  for (off_t at = 0;;) {
    ssize_t n = ::pread(mem.get(), buf, sizeof buf, at);
    if (n < 0) return CTX_FAIL_ERRNO("pread");
    if (n == 0) break;
    program.append(buf, static_cast<std::size_t>(n));
    at += n;
  }
  if (program.empty() || program.size() % sizeof(sock_filter) != 0)
    return fail(Error{EINVAL, "seccomp: export: EINVAL: not a BPF program"});
  return program;
}

Result<void> load_seccomp_program(std::string_view program) {
  if (program.empty() || program.size() % sizeof(sock_filter) != 0)
    return fail(Error{EINVAL, "seccomp: EINVAL: not a BPF program"});
  std::vector<sock_filter> code(program.size() / sizeof(sock_filter));
  std::memcpy(code.data(), program.data(), program.size());
  sock_fprog prog{static_cast<unsigned short>(code.size()), code.data()};
  if (::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0) return CTX_FAIL_ERRNO("seccomp");
  return {};
}

Result<void> apply_seccomp_filter() {
  CTX_TRY_ASSIGN(std::string program, build_seccomp_program());
  return load_seccomp_program(program);
}

}  // namespace ctx::sys
