"""bench/inside.py: what bench/tool and bench/model share. Builds a small CTX
tree with one agent `bench`, launches it with ctx-agent-run, and runs a
Python timing loop inside its sandbox, where `ctx tool` and `ctx model`
have a supervisor to ask. The loop times each command of a list, the
commands alternated run by run so that the machine's drift hits them
alike, and prints medians (ms) as one JSON object. Runs as the
unprivileged test user when started as root.
"""
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile

# Runs inside the sandbox: argv[1] runs, argv[2] JSON {label: [argv, stdin]}.
RUNNER = r'''
import json, statistics, subprocess, sys, time
runs, cmds = int(sys.argv[1]), json.loads(sys.argv[2])
times = {k: [] for k in cmds}
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
for _ in range(runs):
    for k in cmds:
        times[k].append(once(k))
print(json.dumps({k: statistics.median(v) * 1000 for k, v in times.items()}))
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


def measure(build, files, policy, cmds, runs):
    """files: {path below the CTX root, or bench/NAME for /bench/NAME in the
    sandbox: (text, mode)}; policy: lines for
    bench_t; cmds: {label: [argv inside the sandbox, stdin text]}.
    Returns {label: median ms}."""
    launcher = os.path.abspath(os.path.join(build, "launcher", "ctx-agent-run"))
    helper = os.path.abspath(os.path.join(build, "ctx", "ctx"))
    uid, gid, kw = user_ids()
    work = tempfile.mkdtemp(prefix="ctx-bench.")
    os.chmod(work, 0o755)
    try:
        root = os.path.join(work, "ctx")
        aroot = os.path.join(root, "home", str(uid), "agent", "bench", "root")
        os.makedirs(aroot)
        for l in ("bin", "lib", "lib64", "sbin"):
            os.symlink(f"usr/{l}", os.path.join(aroot, l))
        os.makedirs(os.path.join(root, "bin"))
        shutil.copy(helper, os.path.join(root, "bin", "ctx"))
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
        argv = [launcher, "--ctx-root", root, "bench", "--", "/usr/bin/python3", "/bench/runner.py", str(runs),
                json.dumps(cmds)]
        p = subprocess.run(argv, env={"PATH": "/usr/bin:/bin"}, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, **(kw or {}))
        if p.returncode != 0:
            sys.exit(f"bench: the sandboxed loop failed ({p.returncode}): {p.stderr.decode()[-600:]}")
        return json.loads(p.stdout.decode().strip().splitlines()[-1])
    finally:
        shutil.rmtree(work, ignore_errors=True)
