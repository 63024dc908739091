// scripts/text-order's recorder, linked only into a launcher built with
// -finstrument-functions: the first execution of each function, in order,
// kept in memory shared by every process the launcher forks or clones
// (offsets from the program's start, so that nm names them); the process
// that made that memory (the supervisor) appends it to the file named by
// CTX_TEXT_ORDER_OUT at its exit. Never part of a launcher that is
// installed or tested.
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define NI __attribute__((no_instrument_function))
#define SLOTS (1u << 16)
extern char __executable_start[];
struct shared { unsigned long n; pid_t owner; uintptr_t fn[SLOTS]; };
static struct shared* sh;
static uintptr_t seen[1u << 15];  // open-addressing set, private per process
NI static int mark(uintptr_t f) {
  unsigned h = (unsigned)((f >> 4) * 2654435761u) & ((1u << 15) - 1);
  while (seen[h] && seen[h] != f) h = (h + 1) & ((1u << 15) - 1);
  if (seen[h] == f) return 0;
  seen[h] = f;
  return 1;
}
NI void __cyg_profile_func_enter(void* fn, void* site) {
  (void)site;
  if (!sh) {
    void* p = (void*)syscall(SYS_mmap, 0, sizeof(struct shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return;
    sh = p;
    sh->owner = (pid_t)syscall(SYS_getpid);
  }
  uintptr_t f = (uintptr_t)fn - (uintptr_t)__executable_start;
  if (!mark(f)) return;
  unsigned long i = __atomic_fetch_add(&sh->n, 1, __ATOMIC_RELAXED);
  if (i < SLOTS) sh->fn[i] = f;
}
NI void __cyg_profile_func_exit(void* fn, void* site) { (void)fn; (void)site; }
NI __attribute__((destructor)) static void dump(void) {
  if (!sh || sh->owner != (pid_t)syscall(SYS_getpid)) return;
  const char* out = getenv("CTX_TEXT_ORDER_OUT");
  if (!out) return;
  int fd = open(out, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return;
  unsigned long n = sh->n < SLOTS ? sh->n : SLOTS;
  (void)!write(fd, sh->fn, n * sizeof(uintptr_t));
  close(fd);
}
