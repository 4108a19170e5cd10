"""Emulated hosts with a real network filesystem, asked for by the filesystem's name.

    bed = testbed.fixture("ceph")                     # a module's fixture (skips with why)
    bed = testbed.fixture("gluster", rates="160mbit")  # tc tbf on every host's link
    with testbed.testbed("ceph", folder, hosts=2) as bed: ...

Both filesystems run on the same emulated nodes (hosts.py: persistent hosts, one
mount namespace each, MPICH launched across them through the wrapper): "gluster" is a
GlusterFS volume (gluster.py), "ceph" a CephFS with one ceph-fuse per host
(ceph.py).  A `Bed` gives the hosts (`h`), the filesystem (`fs`), the mount every host
sees (`mount`), and the launch of `mpiwrite` over the first N hosts.  docs/testbed.md.
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import Dict, Optional, Union

import pytest
from common import MPIEXEC, MPIWRITE, bounded, clean_env

from testbed import hosts as hostlib

FILESYSTEMS = ("gluster", "ceph")
PER_HOST = 2
# MPI's messages between the emulated hosts over their links (tc-limited), not through the
# shared memory of their one kernel: the network check then measures the links
TCP = {"MPIR_CVAR_NOLOCAL": "1", "UCX_TLS": "tcp"}


def _library(name: str):
    if name == "gluster":
        from testbed import gluster

        return gluster, gluster.Gluster
    if name == "ceph":
        from testbed import ceph

        return ceph, ceph.Ceph
    raise ValueError(f"no testbed filesystem {name!r} (one of {', '.join(FILESYSTEMS)})")


def why_not(name: str) -> str:
    """Why the `name` testbed cannot run here, or ''."""
    return _library(name)[0].why_not()


class Bed:
    def __init__(self, name: str, h: hostlib.Hosts, fs, folder: str):
        self.name, self.h, self.fs, self.folder = name, h, fs, folder

    @property
    def mount(self) -> str:
        return self.fs.mount

    def target(self, name: str) -> str:
        return os.path.join(self.fs.mount, name)

    def command(self, nhosts, args, per_host=PER_HOST, env=None):
        hosts = ",".join(self.h.ips[:nhosts])
        genv = [w for k, v in (env or {}).items() for w in ("-genv", k, v)]
        return (self.h.mpiexec(MPIEXEC) + genv + ["-hosts", hosts, "-ppn", str(per_host), "-n",
                                                  str(nhosts * per_host), MPIWRITE] + list(args))

    def run(self, nhosts, args, timeout=120, per_host=PER_HOST, env=None):
        """`mpiwrite ARGS --json -` over the first nhosts hosts: (completed, parsed JSON);
        `env`: variables for every rank (TCP: MPI's messages over the hosts' links)."""
        out = bounded(self.command(nhosts, list(args) + ["--json", "-"], per_host, env),
                      timeout, cwd=self.folder, env=clean_env())
        try:
            doc = json.loads(out.stdout)
        except ValueError:
            doc = None
        return out, doc

    def rx_bytes(self, i):
        out = self.h.run(i, "cat /sys/class/net/eth0/statistics/rx_bytes", timeout=10)
        return int(out.stdout)


def _rates(rates, hosts: int) -> Optional[Dict[int, str]]:
    if rates is None or isinstance(rates, dict):
        return rates
    return {i: rates for i in range(hosts)}


@contextlib.contextmanager
def testbed(name: str, folder: str, hosts: int = 3,
            rates: Union[None, str, Dict[int, str]] = None, **options):
    """Hosts and filesystem `name` ("gluster", "ceph") up for the `with` body, then removed;
    options go to the filesystem (Gluster: bricks, options; Ceph: conf, osd_gib, mgr, ...);
    rates: one tc rate for every host's link, or {host: rate}.  After the body, nothing may
    be left (asserted)."""
    _, make = _library(name)
    h = hostlib.Hosts(hosts, folder, persistent=True, rates=_rates(rates, hosts))
    fs = make(h, folder, **options)
    with h, fs:
        yield Bed(name, h, fs, str(folder))
    assert fs.leftovers() == []
    assert h.leftovers() == []


def fixture(name: str, hosts: int = 3, rates=None, scope: str = "module", **options):
    """A pytest fixture (assign it to a module name) yielding a Bed of filesystem `name`;
    the tests using it skip with why_not() where it cannot run (or without mpiexec)."""

    @pytest.fixture(scope=scope)
    @hostlib.needs("root", "slow")
    def bed(tmp_path_factory):
        reason = why_not(name) or ("" if MPIEXEC else "no mpiexec")
        if reason:
            pytest.skip(f"{name} testbed: {reason}")
        with testbed(name, str(tmp_path_factory.mktemp(name)), hosts, rates, **options) as b:
            yield b

    return bed
