"""bench/inside.py: what bench/tool and bench/model share. Builds a small CTX
tree with one agent `bench`, launches it with ctx-agent-run, and runs a
Python timing loop inside its sandbox, where `ctx tool` and `ctx model`
have a supervisor to ask. The loop times each command of a list, the
commands alternated run by run so that the machine's drift hits them
alike, and prints the times (ms) as one JSON object. A supervisor takes
256 requests at once (its rate limit's burst), so a long run is split
over several launches. Runs as the unprivileged test user when started
as root.

compare() runs two builds side by side: one sandbox each (its launcher,
its supervisor, its helper), both running, and every command timed in
one and then the other, call by call, so that the drift of a busy
machine hits both builds alike.
"""
import json
import os
import pwd
import shutil
import statistics
import subprocess
import sys
import tempfile

# Runs inside the sandbox: argv[1] runs, argv[2] JSON {label: [argv, stdin]}.
# With runs "serve": one label a line on stdin, one time (ms) a line back.
RUNNER = r'''
import json, subprocess, sys, time
runs, cmds = sys.argv[1], json.loads(sys.argv[2])
def once(k):
    argv, data = cmds[k]
    t0 = time.perf_counter()
    p = subprocess.run(argv, input=data.encode(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit("bench: %s failed with %d: %s" % (argv, p.returncode, p.stderr.decode()[-300:]))
    return dt
for k in cmds:
    once(k)  # warm caches
if runs == "serve":
    print("ready", flush=True)
    for line in sys.stdin:
        print(once(line.strip()) * 1000, flush=True)
    sys.exit(0)
times = {k: [] for k in cmds}
for _ in range(int(runs)):
    for k in cmds:
        times[k].append(once(k) * 1000)
print(json.dumps(times))
'''


def user_ids():
    if os.geteuid() != 0:
        return os.getuid(), os.getgid(), None
    pw = pwd.getpwnam(os.environ.get("CTX_TEST_USER", "ctx-test"))
    return pw.pw_uid, pw.pw_gid, {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": []}


def write(path, text, mode=0o644):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)


def make_tree(work, build, files, policy):
    """The CTX tree of agent `bench` in work (the helpers of build in
    /ctx/bin/); returns the CTX root."""
    uid, gid, kw = user_ids()
    root = os.path.join(work, "ctx")
    aroot = os.path.join(root, "home", str(uid), "agent", "bench", "root")
    os.makedirs(aroot)
    for l in ("bin", "lib", "lib64", "sbin"):
        os.symlink(f"usr/{l}", os.path.join(aroot, l))
    os.makedirs(os.path.join(root, "bin"))
    # As `ctx init` lays bin/ out: the small program of tool and model
    # calls at bin/ctx and the full helper beside it, where the build has
    # the small one; else the full helper at bin/ctx.
    call = os.path.abspath(os.path.join(build, "ctx", "ctx-call"))
    full = os.path.abspath(os.path.join(build, "ctx", "ctx"))
    if os.path.exists(call):
        shutil.copy(call, os.path.join(root, "bin", "ctx"))
        shutil.copy(full, os.path.join(root, "bin", "ctx-helper"))
    else:
        shutil.copy(full, os.path.join(root, "bin", "ctx"))
    bench = os.path.join(work, "bench")
    write(os.path.join(bench, "runner.py"), RUNNER)
    for rel, (text, mode) in files.items():
        write(os.path.join(bench if rel.startswith("bench/") else root, rel.removeprefix("bench/")), text, mode)
    d = os.path.join(root, "agent", "bench.d")
    control = {
        "owner": f"{uid}\n", "gid": f"{gid}\n", "iso": "userns\n", "label": "bench_t\n",
        "root": aroot + "\n", "path": "/ctx/tool\n",
        "mount": f"/usr\t/usr\tro\trbind,nodev\n{root}\t/ctx\tro\trbind,nosuid,nodev\n"
                 f"{bench}\t/bench\tro\tbind,nosuid,nodev\n",
        "policy": "".join(f"allow bench_t {p}\n"
                          for p in ["session:default write", "session:default resume"] + list(policy)),
    }
    # Each mount line needs its mount rules (docs/abi-policy.md, "What each class gates").
    control["policy"] += "".join(
        f"allow bench_t mount:{l.split(chr(9))[1]} read\n"
        + (f"allow bench_t mount:{l.split(chr(9))[1]} write\n" if l.split(chr(9))[2] == "rw" else "")
        for l in control["mount"].splitlines())
    for k, v in control.items():
        write(os.path.join(d, k), v)
    if kw:
        subprocess.run(["chown", "-R", f"{uid}:{gid}", root, bench], check=True)
    return root


def launch_argv(build, root, runs, cmds):
    launcher = os.path.abspath(os.path.join(build, "launcher", "ctx-agent-run"))
    return [launcher, "--ctx-root", root, "bench", "--", "/usr/bin/python3", "/bench/runner.py", str(runs),
            json.dumps(cmds)]


def measure(build, files, policy, cmds, runs):
    """files: {path below the CTX root, or bench/NAME for /bench/NAME in the
    sandbox: (text, mode)}; policy: lines for
    bench_t; cmds: {label: [argv inside the sandbox, stdin text]}.
    Returns {label: median ms}."""
    kw = user_ids()[2]
    times = {k: [] for k in cmds}
    for first in range(0, runs, runs_per_launch(cmds)):
        n = min(runs_per_launch(cmds), runs - first)
        work = tempfile.mkdtemp(prefix="ctx-bench.")
        os.chmod(work, 0o755)
        try:
            root = make_tree(work, build, files, policy)
            p = subprocess.run(launch_argv(build, root, n, cmds), env={"PATH": "/usr/bin:/bin"},
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **(kw or {}))
            if p.returncode != 0:
                sys.exit(f"bench: the sandboxed loop failed ({p.returncode}): {p.stderr.decode()[-600:]}")
            for k, v in json.loads(p.stdout.decode().strip().splitlines()[-1]).items():
                times[k] += v
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return {k: statistics.median(v) for k, v in times.items()}


# Requests one sandbox's supervisor takes at once: its rate limit's burst
# (launcher/control/rate_limit.hpp) less room for the warm-up calls.
REQUESTS_PER_LAUNCH = 200


def runs_per_launch(cmds):
    """Runs of every command in cmds that one launch takes (as if each
    command asked the supervisor)."""
    return max(1, REQUESTS_PER_LAUNCH // len(cmds))


def compare(build, old_build, files, policy, cmds, runs):
    """measure() for two builds at once: a sandbox of each, every command
    run in one build's and then in the other's (which goes first flips
    each run), call by call. Returns ({label: [ms of each run]} of build,
    the same of old_build), run i of both taken back to back."""
    times = ({k: [] for k in cmds}, {k: [] for k in cmds})
    done = 0
    while done < runs:
        n = min(runs_per_launch(cmds), runs - done)
        _compare_launch(build, old_build, files, policy, cmds, n, done, times)
        done += n
    return times


def _compare_launch(build, old_build, files, policy, cmds, runs, first, times):
    kw = user_ids()[2]
    work = tempfile.mkdtemp(prefix="ctx-bench.")
    os.chmod(work, 0o755)
    procs = []
    try:
        for i, b in enumerate((build, old_build)):
            w = os.path.join(work, str(i))
            os.makedirs(w)
            os.chmod(w, 0o755)
            procs.append(subprocess.Popen(launch_argv(b, make_tree(w, b, files, policy), "serve", cmds),
                                          env={"PATH": "/usr/bin:/bin"}, stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **(kw or {})))
        for p in procs:
            if p.stdout.readline().strip() != "ready":
                sys.exit(f"bench: a sandboxed loop failed: {p.stderr.read()[-600:]}")
        for r in range(first, first + runs):
            for k in cmds:
                for p, t in (zip(procs, times) if r % 2 == 0 else zip(procs[::-1], times[::-1])):
                    p.stdin.write(k + "\n")
                    p.stdin.flush()
                    line = p.stdout.readline()
                    if not line:
                        sys.exit(f"bench: a sandboxed loop failed: {p.stderr.read()[-600:]}")
                    t[k].append(float(line))
    finally:
        for p in procs:
            p.stdin.close()
            p.wait()
        shutil.rmtree(work, ignore_errors=True)
