#!/usr/bin/env python3
"""File-system metadata calls each rank makes, against a bare mpi4py start in the same run.

What it counts: every system call of strace's %file class (each call that names a path:
open/openat, stat/newfstatat/statx, access, readlink, execve, statfs, mkdir, unlink, ...;
glibc's fstat is newfstatat(fd, "") and counts too) plus getdents64 (directory reads), made
by one rank's process and its threads and children (strace -f), from its exec to its exit.
Each rank gets its own strace inside the launcher (`mpiexec -n N sh -c 'exec strace ...'`),
so the launcher's and its proxies' calls are not counted.  With `--engine null` and a tiny
size a run does no I/O: what it adds to a bare start is its start-up (imports, node facts,
preflight) and its end.  One posix run shows the target's share.  This is a count of calls,
not of the server's operations: a cached lookup costs a client little, yet at scale every
rank's misses land on the metadata server that holds the install.

Where each call lands, by the path it names (relative names resolved against the process's
folder; fd-based calls by the fd's path, which `strace -y` prints):
  install      the environment's folder (sys.prefix: the venv, its site-packages and bin/),
               and mpiwrite's own package folder (the checkout, for an editable install)
  interpreter  the interpreter's prefix (sys.base_prefix: its stdlib and lib-dynload)
  target       the run's TARGET, and its --results folder (the HDF5 record: rank 0 only)
  other        everything else: /proc, /sys, /dev, /etc, the C library's folders, the cwd

Beside each run, launched the same way in the same round: the bare start (`python -c 'from
mpi4py import MPI'`), and two references: "+numpy" (the bare start and `import numpy`, which
node leaders and rank 0 load: they make the pattern and keep the record) and "+click" (the
bare start and `import click`), which rank 0 loads to parse the command line (the other ranks
take its parsed options and load no click, cli/ranks.py, unless their command line differs
from rank 0's).

Rank 0 (facts, preflight, the HDF5 record, h5py) is shown apart from the median of the other
ranks.  Counts are medians over --repeat rounds; each round runs the bare start, then the
mpiwrite runs, at every rank count.  Bytecode: as bench_startup.py, compiled first unless
--as-is.  16 ranks on 2 cores are oversubscribed; the counts do not depend on it (the waits
of a rank make no file calls).

    python benchmarks/bench_startup_metadata.py [--ranks 1,4,16] [--repeat 1]
        [--posix-ranks 4] [--nodes 1] [--detail 12] [--keep DIR]

Exits 2 with one line on stderr when strace is missing or cannot trace here.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections import Counter
from typing import Dict, List, Optional, Tuple

from bench_startup import BIN, bytecode

CLASSES = ("install", "interpreter", "target", "other")
# The bare start, and two references launched the same way: a bare start that also imports
# numpy (node leaders and rank 0: the pattern, numpy's PCG64 stream, and the record), and
# one that also imports click (rank 0, which parses the command line for the others).
BARE = {"bare": "from mpi4py import MPI",
        "+numpy": "from mpi4py import MPI; import numpy",
        "+click": "from mpi4py import MPI; import click"}
TRACE = ["-f", "-y", "-qq", "-s", "4096", "-e", "trace=%file,getdents64"]
# One line of strace -f -y -o FILE: "PID name(args) = result", or a call split in two by
# another thread ("... <unfinished ...>" then "PID <... name resumed> ..."): counted once.
LINE = re.compile(r"^(\d+)\s+([a-z0-9_]+)\((.*)$")
FD_PATH = re.compile(r"^(?:-?\d+|AT_FDCWD)<((?:[^>\\]|\\.)*)>")
STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')
# The per-rank wrapper: each rank's own strace writes PREFIX.RANK (MPICH and Open MPI names).
WRAP = 'exec strace -o "$0.${PMI_RANK:-${OMPI_COMM_WORLD_RANK:-0}}" "$@"'


def unescape(text: str) -> str:
    """strace's C-style escapes (\\n, \\", \\ooo, \\xhh) back to the path's bytes as text."""
    if "\\" not in text:
        return text
    return text.encode("latin-1", "backslashreplace").decode("unicode_escape")\
        .encode("latin-1").decode("utf-8", "replace")


def path_of(name: str, args: str, cwd: str) -> Optional[str]:
    """The path one traced call names, absolute, or None (no path: e.g. inotify by fd)."""
    fd = FD_PATH.match(args)
    rest = args[fd.end():] if fd else args
    string = STRING.match(rest.lstrip(", ")) if fd else STRING.match(args)
    if fd and string:
        base, leaf = unescape(fd.group(1)), unescape(string.group(1))
        path = os.path.join(base, leaf) if leaf else base
    elif string:
        path = os.path.join(cwd, unescape(string.group(1)))
    elif fd:
        path = unescape(fd.group(1))
    else:
        return None
    return os.path.normpath(path)


def read_trace(path: str, cwd: str) -> List[Tuple[str, str]]:
    """[(call name, absolute path or "")] of one rank's trace, one entry per call."""
    calls = []
    with open(path, errors="replace") as f:
        for line in f:
            m = LINE.match(line)
            if not m:
                continue  # "<... x resumed>", "+++ exited", "--- SIGCHLD": no new call
            name, args = m.group(2), m.group(3)
            where = path_of(name, args, cwd) or ""
            if name in ("chdir", "fchdir") and " = 0" in line and where:
                cwd = where
            calls.append((name, where))
    return calls


class Places:
    """Which class a path belongs to (the longest matching folder wins)."""

    def __init__(self, install: List[str], interpreter: List[str], target: List[str],
                 results: List[str]):
        self.roots = []
        for cls, folders in (("install", install), ("interpreter", interpreter),
                             ("target", target), ("results", results)):
            for folder in folders:
                for form in {os.path.normpath(folder), os.path.realpath(folder)}:
                    self.roots.append((form, cls))
        self.roots.sort(key=lambda r: -len(r[0]))

    def of(self, path: str) -> str:
        for root, cls in self.roots:
            if path == root or path.startswith(root + os.sep):
                return cls
        return "other"


def folders_of_python(python: str) -> Tuple[List[str], List[str]]:
    """(install folders, interpreter folders) as the traced interpreter sees them."""
    out = subprocess.run([python, "-c", "import sys, os, importlib.util as u\n"
                          "s = u.find_spec('mpiwrite')\n"
                          "print(sys.prefix); print(sys.base_prefix)\n"
                          "print(os.path.dirname(s.origin) if s and s.origin else '')"],
                         capture_output=True, text=True, check=True,
                         cwd=tempfile.gettempdir())
    prefix, base, pkg = (out.stdout.splitlines() + ["", "", ""])[:3]
    return [p for p in (prefix, pkg) if p], [base]


def nodes_of(n: int, nodes: int) -> int:
    """How many pretended nodes n ranks make (as many as asked that divide them evenly)."""
    k = max(1, min(nodes, n))
    while n % k:
        k -= 1
    return k


def launch(n: int, nodes: int, prefix: str, cmd: List[str], cwd: str,
           env: Dict[str, str]) -> None:
    """n ranks, each under its own strace; with nodes > 1, an MPMD launch whose groups name
    their node (MPIWRITE_HOSTNAME: mpiwrite splits its node communicators by it, so each
    group has a node leader that reads the node's facts; the bare start ignores it)."""
    full = [os.path.join(BIN, "mpiexec")]
    per = n // nodes
    for i in range(nodes):
        full += ([":"] if i else []) + ["-n", str(per)]
        if nodes > 1:
            full += ["-env", "MPIWRITE_HOSTNAME", f"node{i}"]
        full += ["sh", "-c", WRAP, prefix] + TRACE + cmd
    out = subprocess.run(full, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        raise SystemExit(f"bench_startup_metadata: {' '.join(cmd[:3])}... at {n} ranks exited "
                         f"{out.returncode}: {out.stderr.strip()[-400:]}")


def rank_counts(prefix: str, n: int, cwd: str, places: Places) -> List[Tuple[Counter, list]]:
    """Per rank: (Counter of class -> calls, with 'total'; the calls themselves)."""
    found = []
    for r in range(n):
        calls = read_trace(f"{prefix}.{r}", cwd)
        c = Counter(places.of(p) if p else "other" for _, p in calls)
        c["total"] = len(calls)
        found.append((c, calls))
    return found


def clean_env() -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PMI_", "PMIX_", "OMPI_", "SLURM_", "MPIWRITE_"))}
    return env


def can_trace() -> Optional[str]:
    """None when strace is there and can trace a child here, else why not (one line)."""
    if shutil.which("strace") is None:
        return "strace not found on PATH (apt-get install strace); nothing was measured"
    out = subprocess.run(["strace", "-qq", "-o", os.devnull, "true"], capture_output=True,
                         text=True)
    if out.returncode != 0:
        why = (out.stderr.strip().splitlines() or [f"exit {out.returncode}"])[-1]
        return f"strace cannot trace here ({why}); nothing was measured"
    return None


def folder_key(path: str, depth: int) -> str:
    if not path:
        return "(no path)"
    parts = path.split(os.sep)
    return os.sep.join(parts[:depth + 1]) or "/"


def detail(label: str, mine: List[Tuple[str, str]], bare: List[Tuple[str, str]], top: int,
           roots: Dict[str, str]) -> None:
    """The folders (and calls) whose counts differ most between one rank and a bare start: a
    call on a file counts for its folder, a call on a folder (one that holds another path
    named in either trace) for that folder."""
    folders = {os.path.dirname(p) for _, p in mine + bare if p}
    folders |= {os.path.dirname(f) for f in list(folders)}

    def key(call):
        name, path = call
        if path and path not in folders:
            path = os.path.dirname(path)
        path = re.sub(r"^/proc/\d+(?=/|$)", "/proc/PID", path)
        for root, short in roots.items():
            if path == root or path.startswith(root + os.sep):
                path = short + path[len(root):]
                break
        return folder_key(path, 5), name

    a, b = Counter(map(key, mine)), Counter(map(key, bare))
    diff = Counter({k: a[k] - b[k] for k in set(a) | set(b) if a[k] != b[k]})
    print(f"  {label}: the {top} largest differences to the bare start (folder, call)")
    for (folder, name), d in sorted(diff.items(), key=lambda kv: -abs(kv[1]))[:top]:
        print(f"    {d:+6d}  {name:<12} {folder}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", default="1,4,16")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--posix-ranks", type=int, default=4,
                    help="rank count of the one posix run (0: none)")
    ap.add_argument("--size", default="1M", help="bytes per rank of the runs, and their "
                    "block size (1M: the default block; under 256k every rank loads numpy for "
                    "its latency histograms, engines/latency.py)")
    ap.add_argument("--nodes", type=int, default=1,
                    help="pretend the ranks are on this many nodes (MPIWRITE_HOSTNAME), so "
                    "that node leaders other than rank 0 are counted apart")
    ap.add_argument("--detail", type=int, default=0, metavar="N",
                    help="also print the N folders whose counts differ most from the bare "
                    "start (a non-root rank at the largest rank count)")
    ap.add_argument("--keep", default=None, metavar="DIR", help="keep the traces in DIR")
    ap.add_argument("--as-is", action="store_true",
                    help="do not compile mpiwrite's bytecode first")
    args = ap.parse_args()
    why = can_trace()
    if why:
        print(f"bench_startup_metadata: {why}", file=sys.stderr)
        return 2
    ranks = [int(x) for x in args.ranks.split(",")]
    python, mpiwrite = os.path.join(BIN, "python"), os.path.join(BIN, "mpiwrite")
    install, interp = folders_of_python(python)
    print(bytecode(compile_it=not args.as_is))
    print("counts: calls of strace's %file class + getdents64 per rank process, exec to exit "
          "(strace -f inside the launcher)")
    print(f"install = {', '.join(install)}; interpreter = {', '.join(interp)}")
    env = clean_env()
    work = args.keep or tempfile.mkdtemp(prefix="mpiwrite-meta-")
    os.makedirs(work, exist_ok=True)
    work = os.path.realpath(work)
    kinds = [(k, None) for k in BARE] + [("null", "null")]
    runs = [(n, kind) for n in ranks for kind in kinds]
    if args.posix_ranks:
        if args.posix_ranks not in ranks:
            runs += [(args.posix_ranks, (k, None)) for k in BARE]
        runs.append((args.posix_ranks, ("posix", "posix")))
    results: Dict[Tuple[int, str], List[Tuple[Counter, list]]] = {}
    try:
        for rnd in range(args.repeat):
            for n, (kind, engine) in runs:
                folder = os.path.join(work, f"{kind}-{n}-{rnd}")
                os.makedirs(folder, exist_ok=True)
                target, res = os.path.join(folder, "target"), os.path.join(folder, "results")
                if engine is None:
                    cmd = [python, "-c", BARE[kind]]
                else:
                    cmd = [mpiwrite, "run", target, "-s", args.size, "-b", args.size,
                           "--engine", engine, "--results", res, "--progress-interval", "0"]
                prefix = os.path.join(folder, "trace")
                launch(n, nodes_of(n, args.nodes), prefix, cmd, folder, env)
                places = Places(install, interp, [target], [res])
                for r, got in enumerate(rank_counts(prefix, n, folder, places)):
                    results.setdefault((n, kind, r), []).append(got)
        print_table(results, sorted({n for n, _ in runs}), args.repeat, args.nodes)
        if args.detail:
            n = max(ranks)
            r = 1 if n > 1 else 0
            roots = {install[0]: "$PREFIX", interp[0]: "$BASE"}
            if len(install) > 1:
                roots[install[1]] = "$PKG"
            for kind in ("null",):
                detail(f"{kind} at {n} ranks, rank {r}", results[(n, kind, r)][0][1],
                       results[(n, "bare", r)][0][1], args.detail, roots)
            if r:
                detail(f"null at {n} ranks, rank 0", results[(n, "null", 0)][0][1],
                       results[(n, "bare", 0)][0][1], args.detail, roots)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


def median_counts(results, n: int, kind: str, ranks: List[int],
                  repeat: int) -> Optional[Counter]:
    """Per class: the median over rounds of the median over the given ranks."""
    if not ranks or (n, kind, ranks[0]) not in results:
        return None
    out = Counter()
    for cls in ("total", "results") + CLASSES:
        per_round = [statistics.median(results[(n, kind, r)][i][0][cls] for r in ranks)
                     for i in range(repeat)]
        out[cls] = statistics.median(per_round)
    return out


def print_table(results, ranks: List[int], repeat: int, nodes: int) -> None:
    print(f"medians over {repeat} round(s); 'others' = median of ranks 1..N-1 (with --nodes: "
          "less the other nodes' leaders, shown as 'leaders'); 'vs bare' = total minus the "
          "bare start's at the same rank count and ranks")
    head = f"{'ranks':>5} {'run':<6} {'rank':<8} {'total':>7}"
    head += "".join(f" {c:>11}" for c in CLASSES) + f" {'vs bare':>8}"
    print(head)
    for n in ranks:
        per = n // nodes_of(n, nodes)
        leaders = list(range(per, n, per))
        for who, rs in (("0", [0]), ("leaders", leaders),
                        ("others", [r for r in range(1, n) if r not in leaders])):
            bare = median_counts(results, n, "bare", rs, repeat)
            for kind in tuple(BARE) + ("null", "posix"):
                c = median_counts(results, n, kind, rs, repeat)
                if c is None:
                    continue
                line = f"{n:>5} {kind:<6} {who:<8} {c['total']:>7g}"
                line += "".join(f" {c[k] + (c['results'] if k == 'target' else 0):>11g}"
                                for k in CLASSES)
                line += f" {c['total'] - bare['total']:>+8g}" if kind != "bare" and bare \
                    else f" {'':>8}"
                print(line)


if __name__ == "__main__":
    sys.exit(main())
