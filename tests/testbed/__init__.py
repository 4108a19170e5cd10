"""The emulated cluster the tests run on, as one package (docs/testbed.md):

- hosts.py: emulated hosts, one network and mount namespace each, on one bridge; a server's
  namespace on the same bridge (`Hosts.server_namespace`, shared by the filesystems);
- gluster.py, ceph.py: a GlusterFS volume, a CephFS with a ceph-fuse client per host;
- slurm.py: a real Slurm (slurmctld, slurmd per host, munge) over the hosts;
- ompi.py: Open MPI's launch across the hosts;
- beds.py: hosts and a filesystem together by the filesystem's name (`fixture`, `testbed`).

A fixture made here marks the tests that use it `root` and `slow` itself (`needs`, read by
conftest.py), so that `-m "not root"` and `-m "not slow"` leave them out without each test
module having to say so.
"""

from __future__ import annotations

from testbed.beds import FILESYSTEMS, PER_HOST, TCP, Bed, fixture, testbed, why_not  # noqa: F401
from testbed.hosts import needs  # noqa: F401
