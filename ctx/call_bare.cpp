// ctx-call on x86-64 and arm64: the program a sandbox runs most, built
// without a C library. `ctx init` installs it as a CTX tree's bin/ctx, so
// that it is /ctx/bin/ctx inside a sandbox and what the agent view shows at
// an allowed tool's name; the full helper lies beside it as bin/ctx-helper.
//
// It does what ctx/call_main.cpp (the same program on other machines, and
// in the sanitizer build) does, with the same requests, answers, messages
// and exit statuses: a direct tool call (the path it was run by names a
// tool), `ctx tool NAME [JSON]` and `ctx model NAME [REQUEST]`; every other
// command line runs the full helper. What it saves is the C library's start:
// glibc's start of even a static program asks the processor for its
// features and caches, instructions that exit to the hypervisor in a
// virtual machine, about 0.2 ms of a tool call's overhead
// (docs/performance.md, "Tool calls"). It allocates nothing; its text
// rules are the project's own, shared with the rest through header-only
// code (base/text_core.hpp, base/name_rules.hpp, base/json_scan.hpp,
// base/errno_symbol.hpp), and test/integration/tool_test.cpp holds its
// output to the full helper's.
//
// Where the full helper ends by an exception (an answer whose fields have
// other types than the supervisor's, a name that is not UTF-8 in a
// request), this program answers EIO or EINVAL instead.
#include <fcntl.h>
#include <linux/auxvec.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cerrno>
#include <cstddef>

#include "base/errno_symbol.hpp"
#include "base/json_scan.hpp"
#include "base/name_rules.hpp"
#include "base/text_core.hpp"
#include "ctx/tool.hpp"
#include "sys/raw.hpp"

// What the compiler may call for copies and zeroing. The empty asm in each
// loop keeps the compiler from making the loop a call to itself.
extern "C" {
void* memcpy(void* d, const void* s, std::size_t n) {
  auto* to = static_cast<unsigned char*>(d);
  const auto* from = static_cast<const unsigned char*>(s);
  for (std::size_t i = 0; i < n; ++i) {
    to[i] = from[i];
    asm volatile("" ::: "memory");
  }
  return d;
}
void* memmove(void* d, const void* s, std::size_t n) {
  auto* to = static_cast<unsigned char*>(d);
  const auto* from = static_cast<const unsigned char*>(s);
  if (to < from) return memcpy(d, s, n);
  for (std::size_t i = n; i > 0; --i) {
    to[i - 1] = from[i - 1];
    asm volatile("" ::: "memory");
  }
  return d;
}
void* memset(void* d, int c, std::size_t n) {
  auto* to = static_cast<unsigned char*>(d);
  for (std::size_t i = 0; i < n; ++i) {
    to[i] = static_cast<unsigned char>(c);
    asm volatile("" ::: "memory");
  }
  return d;
}
int memcmp(const void* a, const void* b, std::size_t n) {
  const auto* x = static_cast<const unsigned char*>(a);
  const auto* y = static_cast<const unsigned char*>(b);
  for (std::size_t i = 0; i < n; ++i)
    if (x[i] != y[i]) return x[i] < y[i] ? -1 : 1;
  return 0;
}
std::size_t strlen(const char* s) {
  std::size_t n = 0;
  while (s[n] != '\0') ++n;
  return n;
}
}

namespace {

namespace raw = ctx::sys::raw;

[[noreturn]] void quit(int status) { raw::exit_group(status); }

std::size_t length(const char* s) { return strlen(s); }

bool same(const char* a, const char* b) {
  while (*a != '\0' && *a == *b) ++a, ++b;
  return *a == *b;
}

// A byte span.
struct Text {
  const char* p = "";
  std::size_t n = 0;
};

Text text(const char* s) { return Text{s, length(s)}; }

// Text built in a fixed buffer; what does not fit is cut (never more than
// the caller made room for: paths and names of at most a few KiB).
template <std::size_t N>
struct Buf {
  char b[N];
  std::size_t n = 0;
  void put(const char* p, std::size_t len) {
    for (std::size_t i = 0; i < len && n + 1 < N; ++i) b[n++] = p[i];
    b[n] = '\0';
  }
  void put(const char* s) { put(s, length(s)); }
  void put(Text t) { put(t.p, t.n); }
  void number(long long v) {
    char d[24];
    std::size_t k = 0;
    unsigned long long m = v < 0 ? 0ULL - static_cast<unsigned long long>(v) : static_cast<unsigned long long>(v);
    do {
      d[k++] = static_cast<char>('0' + m % 10);
      m /= 10;
    } while (m != 0);
    if (v < 0) put("-", 1);
    while (k > 0) put(&d[--k], 1);
  }
  Text text() const { return Text{b, n}; }
  const char* c_str() const { return n == 0 ? "" : b; }
  auto sink() {
    return [this](const char* p, std::size_t len) { put(p, len); };
  }
};

void write_all(int fd, const char* p, std::size_t n) {
  while (n > 0) {
    long w = raw::write(fd, p, n);
    if (w == -EINTR) continue;
    if (w <= 0) return;
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}

// Text written out as it is made, 64 KiB at a time, whatever its length:
// `Out::flush()` takes what is gathered.
template <class Out>
struct Chunks {
  char b[1U << 16];
  std::size_t n = 0;
  void put(const char* p, std::size_t len) {
    while (len > 0) {
      if (n == sizeof b) static_cast<Out*>(this)->flush();
      std::size_t k = len < sizeof b - n ? len : sizeof b - n;
      memcpy(b + n, p, k);
      n += k;
      p += k;
      len -= k;
    }
  }
  void put(const char* s) { put(s, length(s)); }
  void put(Text t) { put(t.p, t.n); }
  auto sink() {
    return [this](const char* p, std::size_t len) { put(p, len); };
  }
};

// stderr (a refusal repeats the name it was asked, which can be long).
struct ErrWriter : Chunks<ErrWriter> {
  void flush() {
    write_all(2, b, n);
    n = 0;
  }
};

ErrWriter g_err;

// errno_name() (base/result.hpp).
template <std::size_t N>
void errno_name(Buf<N>& out, int code) {
  if (const char* s = ctx::errno_symbol(code)) {
    out.put(s);
  } else {
    out.put("E");
    out.number(code);
  }
}

// An error as the full helper's ctx::Error carries it.
struct Failure {
  int code = 0;
  Buf<(1U << 17)> msg;  ///< room for anything an answer holds
  const char* reason = "";
};

void sys_failure(Failure& f, const char* call_text, Text what, int err) {
  f.code = err;
  f.msg.put(call_text);
  f.msg.put(what);
  f.msg.put(": ");
  errno_name(f.msg, err);
}

// refuse_call() (ctx/supervisor_client.hpp): one JSON line and one
// sentence on stderr; returns `code`.
int refuse(const char* what, Text name, int code, Text reason, Text sentence, Text agent) {
  ErrWriter& out = g_err;
  Buf<4096> code_name;
  errno_name(code_name, code);
  auto field = [&](const char* key, Text v, bool first) {
    if (!first) out.put(",");
    out.put("\"");
    out.put(key);
    out.put("\":");
    // Text that is not UTF-8 reaches here only in a name the request
    // could not carry (the full helper ends by an exception there).
    return ctx::text::json_quote_to(v.p, v.n, true, out.sink(), true);
  };
  // nlohmann::json's order: the names sorted.
  const bool model = same(what, "model");
  bool ok = true;
  out.put("{");
  ok = field("agent", agent, true) && ok;
  ok = field("code", code_name.text(), false) && ok;
  ok = field("message", sentence, false) && ok;
  if (model) ok = field(what, name, false) && ok;
  ok = field("reason", reason, false) && ok;
  if (!model) ok = field(what, name, false) && ok;
  ok = field("type", text("error"), false) && ok;
  out.put("}\nctx ");
  out.put(what);
  out.put(": ");
  ctx::text::printable_to(name.p, name.n, out.sink());
  out.put(": ");
  out.put(code_name.text());
  out.put(": ");
  ctx::text::printable_to(sentence.p, sentence.n, out.sink());
  out.put("\n");
  (void)ok;
  out.flush();
  return code;
}

int refuse(const char* what, Text name, const Failure& f) {
  return refuse(what, name, f.code, text(f.reason), f.msg.text(), Text{});
}

// The supervisor's answer, as ask_supervisor() (ctx/supervisor_client.hpp)
// gets it.
struct Answer {
  static constexpr std::size_t kMax = 1U << 16;
  char text[2 * kMax];
  std::size_t n = 0;
  ctx::json_scan::Value object;
  int fds[8];
  int nfds = 0;
};

Answer g_answer;

// The request line, sent as it is written: 64 KiB at a time, the
// descriptors with the first part, as one sendmsg(2) of the whole line
// would send them.
struct Sender : Chunks<Sender> {
  int sock = -1;
  const int* fds = nullptr;
  int nfds = 0;
  int err = 0;  ///< the errno of a failed send

  void start(int s, const int* f, int count) {
    sock = s;
    fds = f;
    nfds = count;
    err = 0;
    n = 0;
  }
  void flush() {
    std::size_t done = 0;
    while (err == 0 && done < n) {
      iovec iov{b + done, n - done};
      msghdr m{};
      m.msg_iov = &iov;
      m.msg_iovlen = 1;
      union {
        cmsghdr h;
        char bytes[CMSG_SPACE(sizeof(int) * 3)];
      } ctl{};
      if (nfds > 0) {
        m.msg_control = ctl.bytes;
        m.msg_controllen = CMSG_SPACE(sizeof(int) * static_cast<std::size_t>(nfds));
        cmsghdr* h = CMSG_FIRSTHDR(&m);
        h->cmsg_level = SOL_SOCKET;
        h->cmsg_type = SCM_RIGHTS;
        h->cmsg_len = CMSG_LEN(sizeof(int) * static_cast<std::size_t>(nfds));
        memcpy(CMSG_DATA(h), fds, sizeof(int) * static_cast<std::size_t>(nfds));
      }
      long sent = raw::sendmsg(sock, &m, MSG_NOSIGNAL);
      if (sent == -EINTR) continue;
      if (sent < 0) {
        err = static_cast<int>(-sent);
        break;
      }
      nfds = 0;  // sent with the first part
      done += static_cast<std::size_t>(sent);
    }
    n = 0;
  }
};

// Appends `"key":` and JSON string `v` (UTF-8: checked before) to the
// request line, as dump() writes it.
void json_member(Sender& line, const char* key, Text v) {
  line.put("\"");
  line.put(key);
  line.put("\":");
  ctx::text::json_quote_to(v.p, v.n, false, line.sink());
}

// ask_supervisor()'s connection: the socket, or -1 with `f` set.
int connect_supervisor(char** envp, Failure& f) {
  const char* path = "/run/ctx/supervisor";
  for (char** e = envp; *e != nullptr; ++e) {
    const char* s = *e;
    const char* k = "CTX_SUPERVISOR=";
    while (*k != '\0' && *s == *k) ++s, ++k;
    if (*k == '\0') {  // the first, as getenv(3) finds it
      if (*s != '\0') path = s;
      break;
    }
  }
  auto no_supervisor = [&] {
    static Buf<(1U << 17)> m;
    m.n = 0;
    m.put("no supervisor here; this works inside a sandbox started by ctx-agent-run: ");
    m.put(f.msg.text());
    f.msg = m;
    f.reason = "no_supervisor";
    return -1;
  };
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  const std::size_t plen = length(path);
  if (plen >= sizeof a.sun_path) {
    f.code = ENAMETOOLONG;
    f.msg.put("socket path too long: ");
    f.msg.put(path);
    return no_supervisor();
  }
  for (std::size_t i = 0; i < plen; ++i) a.sun_path[i] = path[i];
  if (path[0] == '@') a.sun_path[0] = '\0';
  long s = raw::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) {
    sys_failure(f, "socket", Text{}, static_cast<int>(-s));
    return no_supervisor();
  }
  const int sock = static_cast<int>(s);
  long c = raw::connect(sock, &a, sizeof a);
  if (c < 0) {
    sys_failure(f, "connect ", text(path), static_cast<int>(-c));
    return no_supervisor();
  }
  return sock;
}

// The request, as nlohmann::json dumps it (the names sorted), sent as it
// is written, however long (the supervisor refuses what is too long);
// false with `f` set.
bool send_request(int sock, const char* op, Text name, Text dir, const int* fds, int nfds, Failure& f) {
  auto none = [](const char*, std::size_t) {};
  const bool utf8 = ctx::text::json_quote_to(name.p, name.n, false, none) &&
                    (dir.n == 0 || ctx::text::json_quote_to(dir.p, dir.n, false, none));
  if (!utf8) {
    f.code = EINVAL;
    f.msg.put("EINVAL: the call's name or directory is not UTF-8");
    return false;
  }
  static Sender line;
  line.start(sock, fds, nfds);
  line.put("{");
  if (dir.n > 0) {
    json_member(line, "dir", dir);
    line.put(",");
  }
  json_member(line, "name", name);
  line.put(",\"op\":\"");
  line.put(op);
  line.put("\"}\n");
  line.flush();
  if (line.err != 0) {
    sys_failure(f, "sendmsg", Text{}, line.err);
    return false;
  }
  return true;
}

// The answer into g_answer, up to the first newline, as the full helper
// reads it: 64 KiB at most per message, one descriptor; false with `f` set.
bool read_answer(int sock, Failure& f) {
  Answer& ans = g_answer;
  auto has_newline = [&] {
    for (std::size_t i = 0; i < ans.n; ++i)
      if (ans.text[i] == '\n') return true;
    return false;
  };
  while (!has_newline() && ans.n < Answer::kMax) {
    iovec in{ans.text + ans.n, Answer::kMax};
    msghdr r{};
    r.msg_iov = &in;
    r.msg_iovlen = 1;
    union {
      cmsghdr h;
      char bytes[CMSG_SPACE(sizeof(int))];
    } rctl{};
    r.msg_control = rctl.bytes;
    r.msg_controllen = sizeof rctl.bytes;
    long got;
    do {
      got = raw::recvmsg(sock, &r, MSG_CMSG_CLOEXEC);
    } while (got == -EINTR);
    if (got < 0) {
      sys_failure(f, "recvmsg", Text{}, static_cast<int>(-got));
      return false;
    }
    int received = 0;
    for (cmsghdr* h = CMSG_FIRSTHDR(&r); h != nullptr; h = nullptr) {
      if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS) continue;
      received = static_cast<int>((h->cmsg_len - CMSG_LEN(0)) / sizeof(int));
      for (int i = 0; i < received && ans.nfds < 8; ++i)
        memcpy(&ans.fds[ans.nfds++], CMSG_DATA(h) + i * sizeof(int), sizeof(int));
    }
    if ((r.msg_flags & (MSG_CTRUNC | MSG_TRUNC)) != 0) {
      f.code = EMSGSIZE;
      f.msg.put("recvmsg: EMSGSIZE: message truncated");
      return false;
    }
    if (got == 0 && received == 0) break;
    ans.n += static_cast<std::size_t>(got);
  }
  std::size_t end = 0;
  while (end < ans.n && ans.text[end] != '\n') ++end;
  if (!ctx::json_scan::valid(ans.text, end, &ans.object) || ans.object.kind != ctx::json_scan::Kind::object) {
    f.code = EIO;
    f.msg.put("EIO: the supervisor closed the connection without an answer (is the agent stopping?)");
    return false;
  }
  return true;
}

// ask_supervisor(): false with `f` set, or the answer in g_answer.
bool ask(char** envp, const char* op, Text name, Text dir, const int* fds, int nfds, Failure& f) {
  const int sock = connect_supervisor(envp, f);
  return sock >= 0 && send_request(sock, op, name, dir, fds, nfds, f) && read_answer(sock, f);
}

// A string member of the answer, decoded; `fallback` when it is absent.
template <std::size_t N>
void answer_string(Buf<N>& out, const char* key, Text fallback) {
  auto v = ctx::json_scan::member(g_answer.object, key);
  if (v.kind == ctx::json_scan::Kind::absent) {
    out.put(fallback);
    return;
  }
  ctx::json_scan::string_to(v, out.sink());
}

// refused() (ctx/supervisor_client.hpp): the exit status of a refusal, or
// -1 for an allowed call.
int refused(const char* what, Text name) {
  using ctx::json_scan::Kind;
  auto ok = ctx::json_scan::member(g_answer.object, "ok");
  if (ok.kind == Kind::boolean && ok.p[0] == 't') return -1;
  static Buf<(1U << 17)> code_text, reason, message, agent;
  answer_string(code_text, "code", text("EIO"));
  int code = EIO;
  const int known[] = {EACCES, EINVAL, ENOENT, ESRCH, EBUSY, EIO, ECANCELED, EPERM, EEXIST, ENOTSUP, EAGAIN};
  for (int e : known)
    if (same(ctx::errno_symbol(e), code_text.c_str())) code = e;
  if (ctx::json_scan::member(g_answer.object, "agent").kind == Kind::string) answer_string(agent, "agent", Text{});
  answer_string(reason, "reason", Text{});
  Buf<4096> name_of_code;
  errno_name(name_of_code, code);
  answer_string(message, "message", name_of_code.text());
  refuse(what, name, code, reason.text(), message.text(), agent.text());
  return code > 124 ? 1 : code;
}

// call_tool() (ctx/tool.hpp). `args` ends with a null pointer and has room
// for the tool's path before it (args[-1]).
[[noreturn]] void call_tool(Text name, char** args, Text tier, char** envp) {
  Failure f;
  if (!ask(envp, "tool", name, tier, nullptr, 0, f)) quit(refuse("tool", name, f));
  int r = refused("tool", name);
  if (r >= 0) quit(r);
  static Buf<65536> path;
  auto p = ctx::json_scan::member(g_answer.object, "path");
  if (g_answer.nfds != 1 || p.kind != ctx::json_scan::Kind::string) {
    f.code = EIO;
    f.msg.put("EIO: the supervisor allowed the call but sent no tool");
    quit(refuse("tool", name, f));
  }
  ctx::json_scan::string_to(p, path.sink());
  const int fd = g_answer.fds[0];
  // Inheritable, so that a script's interpreter can open it (exec_fd).
  long fl = raw::fcntl(fd, F_GETFD);
  if (fl < 0 || (fl = raw::fcntl(fd, F_SETFD, fl & ~FD_CLOEXEC)) < 0) {
    sys_failure(f, "fcntl F_SETFD", Text{}, static_cast<int>(-fl));
  } else {
    args[-1] = path.b;
    long e = raw::execveat(fd, "", args - 1, envp, AT_EMPTY_PATH);
    sys_failure(f, "execveat ", path.text(), static_cast<int>(-e));
  }
  g_err.put("ctx tool: ");
  ctx::text::printable_to(f.msg.b, f.msg.n, g_err.sink());
  g_err.put("\n");
  g_err.flush();
  quit(f.code == ENOENT ? 127 : 126);
}

// call_model() (ctx/model.hpp).
[[noreturn]] void call_model(Text name, const char* request, char** envp) {
  Failure f;
  int fds[3] = {0, 1, 2};
  if (request != nullptr) {
    const std::size_t n = length(request);
    if (n > 60 * 1024) {
      quit(refuse("model", name, E2BIG, text("invalid_request"),
                  text("E2BIG: a request this long goes on stdin, not as an argument"), Text{}));
    }
    int p[2] = {-1, -1};
    long r = raw::pipe2(p, O_CLOEXEC);
    if (r < 0) {
      sys_failure(f, "pipe2", Text{}, static_cast<int>(-r));
      quit(refuse("model", name, f));
    }
    for (std::size_t done = 0; done < n;) {
      long w = raw::write(p[1], request + done, n - done);
      if (w == -EINTR) continue;
      if (w < 0) {
        sys_failure(f, "write", Text{}, static_cast<int>(-w));
        quit(refuse("model", name, f));
      }
      done += static_cast<std::size_t>(w);
    }
    raw::close(p[1]);
    fds[0] = p[0];
  }
  if (!ask(envp, "model", name, Text{}, fds, 3, f)) quit(refuse("model", name, f));
  int r = refused("model", name);
  if (r >= 0) quit(r);
  long long status = 1;
  auto v = ctx::json_scan::member(g_answer.object, "exit_status");
  if (v.kind != ctx::json_scan::Kind::absent && !ctx::json_scan::integer(v, status)) status = 1;
  quit(static_cast<int>(status));
}

// The path as the sandbox resolves it (realpath(3) in the full helper):
// the name of the file the path opens, through /proc/self/fd; false where
// that cannot be read (no /proc), for the caller to make no direct call of
// a name it could not resolve.
bool resolved(const char* path, Buf<4096>& out) {
  long fd = raw::openat(AT_FDCWD, path, O_PATH | O_CLOEXEC);
  if (fd < 0) return false;
  Buf<64> link;
  link.put("/proc/self/fd/");
  link.number(fd);
  long n = raw::readlinkat(AT_FDCWD, link.b, out.b, sizeof out.b - 1);
  raw::close(static_cast<int>(fd));
  if (n <= 0 || n >= static_cast<long>(sizeof out.b) - 1 || out.b[0] != '/') return false;
  out.n = static_cast<std::size_t>(n);
  out.b[n] = '\0';
  return true;
}

// plain_call() (ctx/tool.hpp).
bool plain(int argc, char** argv, const char* verb) {
  if (argc < 3 || argc > 4 || !same(argv[1], verb)) return false;
  for (int i = 2; i < argc; ++i)
    if (argv[i][0] == '-' || argv[i][0] == '[') return false;
  return true;
}

}  // namespace

extern "C" [[noreturn, gnu::used]] void ctx_call_main(long* sp) {
  const int argc = static_cast<int>(sp[0]);
  char** argv = reinterpret_cast<char**>(sp + 1);
  char** envp = argv + argc + 1;
  char** e = envp;
  while (*e != nullptr) ++e;
  const char* execfn = nullptr;
  for (auto* aux = reinterpret_cast<unsigned long*>(e + 1); aux[0] != AT_NULL; aux += 2)
    if (aux[0] == AT_EXECFN) execfn = reinterpret_cast<const char*>(aux[1]);
  // The kernel's AT_EXECFN names the path run (argv[0] is the caller's
  // choice; a shell that found the program through PATH passes its bare
  // name).
  const char* self = execfn != nullptr && *execfn != '\0' ? execfn : argc > 0 ? argv[0] : "";
  if (argc > 0) {
    // direct_call() (ctx/tool.hpp).
    static Buf<4096> real;
    Text a = resolved(self, real) ? real.text() : Text{};
    std::size_t slash = a.n;
    for (std::size_t i = 0; i < a.n; ++i)
      if (a.p[i] == '/') slash = i;
    if (slash < a.n) {
      Text name{a.p + slash + 1, a.n - slash - 1};
      Text dir = slash == 0 ? text("/") : Text{a.p, slash};
      bool tool = ctx::names::tool_name_rule(name.p, name.n) == ctx::names::Broken::none && !same(name.p, "ctx") &&
                  !same(name.p, ctx::helper::kFullHelperName);
      if (tool) call_tool(name, argv + 1, dir, envp);  // argv[0] becomes the tool's path
    }
    if (plain(argc, argv, "tool")) call_tool(text(argv[2]), argv + 3, Text{}, envp);  // argv[2] becomes the path
    if (plain(argc, argv, "model")) call_model(text(argv[2]), argc == 4 ? argv[3] : nullptr, envp);
  }
  // Everything else: the full helper, beside this program, by its path
  // (so that it sees that name as the path it was run by, never a tool's).
  static Buf<8192> full;
  std::size_t slash = length(self);
  for (std::size_t i = 0; self[i] != '\0'; ++i)
    if (self[i] == '/') slash = i;
  if (slash == length(self))
    full.put(".");
  else if (slash == 0)
    full.put("/");
  else
    full.put(self, slash);
  full.put("/");
  full.put(ctx::helper::kFullHelperName);
  long r = raw::execve(full.b, argv, envp);
  Failure f;
  sys_failure(f, "execve ", full.text(), static_cast<int>(-r));
  g_err.put("ctx: ");
  ctx::text::printable_to(full.b, full.n, g_err.sink());
  g_err.put(": ");
  ctx::text::printable_to(f.msg.b, f.msg.n, g_err.sink());
  g_err.put(
      "; this program makes tool and model calls only, the rest is the full helper's "
      "(ctx init installs both in the CTX tree's bin/)\n");
  g_err.flush();
  quit(f.code == ENOENT ? 127 : 126);
}

// The entry point: the stack as the kernel made it (argc, argv, envp,
// auxv), aligned for a call.
#if defined(__x86_64__)
asm(R"(
  .text
  .global _start
  .type _start, @function
_start:
  xor %ebp, %ebp
  mov %rsp, %rdi
  and $-16, %rsp
  call ctx_call_main
  hlt
)");
#elif defined(__aarch64__)
asm(R"(
  .text
  .global _start
  .type _start, %function
_start:
  mov x29, #0
  mov x30, #0
  mov x0, sp
  bl ctx_call_main
  brk #0
)");
#endif
