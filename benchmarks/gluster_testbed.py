"""Start the GlusterFS testbed by hand: emulated hosts, a volume, one FUSE client per host.

    sudo .venv/bin/python benchmarks/gluster_testbed.py --hosts 3 --rate 160mbit
    sudo .venv/bin/python benchmarks/gluster_testbed.py --hosts 3 -- \\
        sh -c '$TESTBED_MPIEXEC -ppn 2 -n 6 .venv/bin/mpiwrite run $TESTBED_MOUNT/data -s 32M'

Without a command it prints how to use the testbed and waits for Ctrl-C (or SIGTERM); with
one it runs it (environment: TESTBED_MPIEXEC, the launcher and its -hosts; TESTBED_MOUNT, the
volume's path on every host; TESTBED_ENTER, `$TESTBED_ENTER h1 CMD ARGS` runs one command
on host h1, its arguments joined as ssh does (several: `$TESTBED_ENTER h1 "sh -c 'a; b'"`);
TESTBED_GLUSTER, the gluster CLI of the testbed's glusterd), then stops.  Either way,
everything is removed afterwards.  How it works and its limits: docs/testbed.md.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))

from testbed import gluster as glusterlib  # noqa: E402
from testbed import hosts as hostlib  # noqa: E402


def mpiexec() -> str:
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    return here if os.path.exists(here) else "mpiexec"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hosts", type=int, default=3, help="emulated hosts (default 3)")
    p.add_argument("--rate", default=None, help="tc rate of each host's link, e.g. 160mbit")
    p.add_argument("--bricks", type=int, default=2, help="bricks of the volume (default 2)")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="volume option, e.g. network.compression=on (repeatable)")
    p.add_argument("--dir", default=None, help="where bricks, logs and the mount go "
                   "(default: a new temporary folder, removed afterwards)")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND to run, then stop")
    a = p.parse_args(argv)
    if any("=" not in o for o in a.option):
        return _refuse("--option takes KEY=VALUE")
    if a.dir and os.path.exists(os.path.join(a.dir, "gluster")):
        return _refuse(f"{a.dir!r} holds an earlier testbed (gluster/); give a new or empty "
                       "--dir")
    made = False
    if a.dir and not os.path.isdir(a.dir):
        if os.path.lexists(a.dir):
            return _refuse(f"--dir: {a.dir!r} is not a folder")
        try:
            os.makedirs(a.dir, mode=0o700)
        except OSError as exc:
            return _refuse(f"--dir: cannot make {a.dir!r}: {exc.strerror or exc}")
        made = True
    reason = glusterlib.why_not()
    if reason:
        if made:
            os.rmdir(a.dir)  # made a moment ago, still empty
        return _refuse(f"cannot run here: {reason}")
    options = dict(o.split("=", 1) for o in a.option)
    command = a.command[1:] if a.command[:1] == ["--"] else a.command
    folder = a.dir or tempfile.mkdtemp(prefix="mpiwrite-gluster-")
    rates = {i: a.rate for i in range(a.hosts)} if a.rate else None
    signal.signal(signal.SIGTERM, _stop)
    h = hostlib.Hosts(a.hosts, folder, persistent=True, rates=rates)
    g = glusterlib.Gluster(h, folder, bricks=a.bricks, options=options)
    code = 0
    try:
        with h, g:
            env = dict(os.environ, TESTBED_MOUNT=g.mount, TESTBED_ENTER=h.wrapper,
                       TESTBED_MPIEXEC=" ".join(h.mpiexec(mpiexec()) +
                                                ["-hosts", ",".join(h.ips)]),
                       TESTBED_GLUSTER=f"nsenter -t {g.server.pid} -n -m gluster")
            print(describe(h, g, env, a.rate), flush=True)
            if command:
                code = subprocess.run(command, env=env).returncode
            else:
                print("Ctrl-C to stop and remove everything.", flush=True)
                signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        left = g.leftovers() + h.leftovers()
        if not a.dir and not left:
            shutil.rmtree(folder, ignore_errors=True)
    if left:
        print(f"gluster_testbed: left behind: {left}", file=sys.stderr)
        return 1
    return code


def _refuse(text: str) -> int:
    print(f"gluster_testbed: {text}", file=sys.stderr)
    return 2


def _stop(*_):
    """SIGTERM ends the wait as Ctrl-C does, so the cleanup runs."""
    raise KeyboardInterrupt


def describe(h, g, env, rate) -> str:
    q = shlex.quote
    return "\n".join([
        f"GlusterFS volume {g.name} ({len(g.bricks)} bricks on {g.ip}) mounted at {g.mount}",
        f"hosts {', '.join(f'{n}={ip}' for n, ip in zip(h.names, h.ips))}; "
        f"links {rate or 'unlimited'}",
        "",
        f"export TESTBED_MOUNT={q(env['TESTBED_MOUNT'])}",
        f"export TESTBED_MPIEXEC={q(env['TESTBED_MPIEXEC'])}",
        f"export TESTBED_ENTER={q(env['TESTBED_ENTER'])}",
        f"export TESTBED_GLUSTER={q(env['TESTBED_GLUSTER'])}",
        "$TESTBED_MPIEXEC -ppn 2 -n 6 mpiwrite run $TESTBED_MOUNT/data -s 32M",
        "$TESTBED_ENTER h0 dd if=/dev/zero of=$TESTBED_MOUNT/dd bs=1M count=64 conv=fsync",
        f"$TESTBED_GLUSTER volume set {g.name} network.compression on",
    ])


if __name__ == "__main__":
    sys.exit(main())
