"""Fake /proc and /sys trees of Lustre clients, in the exact formats the kernel modules print.

Formats: docs/node-facts.md.  Each builder returns {relative path: file content}; `make`
writes one under a folder, to be passed as --sysroot / MPIWRITE_SYSROOT.
"""

import os

CPUINFO = ("processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) CPU "
           "E5462 @ 2.80GHz\nflags\t\t: fpu sse2 ssse3 sse4_1\n\nprocessor\t: 1\nmodel name\t"
           ": Intel(R) Xeon(R) CPU E5462 @ 2.80GHz\nflags\t\t: fpu sse2 ssse3 sse4_1\n")
CPUINFO_NEW = ("processor\t: 0\nmodel name\t: AMD EPYC 7763 64-Core Processor\nflags\t\t: fpu "
               "sse4_2 pclmulqdq avx2\n")


def base(kernel="2.6.18-53.1.14.el5", mem_kb=16432136, mounts=None, cpuinfo=CPUINFO):
    files = {
        "proc/sys/kernel/osrelease": kernel + "\n",
        "proc/meminfo": f"MemTotal:       {mem_kb} kB\nMemFree:         1234 kB\nDirty:   "
                        "           12 kB\n",
        "proc/cpuinfo": cpuinfo,
        "etc/os-release": 'PRETTY_NAME="Red Hat Enterprise Linux Server release 5.2"\n',
        "proc/sys/vm/dirty_ratio": "40\n",
        "proc/sys/vm/dirty_background_ratio": "10\n",
        "proc/sys/vm/dirty_bytes": "0\n",
        "proc/sys/vm/dirty_background_bytes": "0\n",
        "proc/sys/vm/dirty_expire_centisecs": "3000\n",
        "proc/sys/vm/dirty_writeback_centisecs": "500\n",
    }
    files["proc/mounts"] = mounts or ("/dev/sda1 / ext3 rw 0 0\n"
                                      "10.0.0.1@o2ib:/lustre /mnt/lustre lustre rw,flock 0 0\n")
    return files


def lustre_1643_patched():
    f = base(kernel="2.6.9-67.0.4.EL_lustre.1.6.4.3smp")
    f["proc/fs/lustre/version"] = ("lustre: 1.6.4.3\nkernel: 47\nbuild:  1.6.4.3-19700101000000-"
                                   "PRISTINE-.cache.build.BUILD.lustre-kernel-2.6.9\n")
    osc = "proc/fs/lustre/osc/lustre-OST0000-osc-000001012a3c6000/"
    f[osc + "checksums"] = "1\n"
    f[osc + "max_rpcs_in_flight"] = "8\n"
    f[osc + "max_dirty_mb"] = "32\n"
    f["proc/fs/lustre/llite/lustre-000001012a3c6000/checksum_pages"] = "1\n"
    f["proc/fs/lustre/llite/lustre-000001012a3c6000/max_cached_mb"] = "12288\n"
    return f


def lustre_165(checksums=1):
    f = base()
    f["proc/fs/lustre/version"] = ("lustre: 1.6.5\nkernel: patchless\nbuild:  1.6.5-2008052600"
                                   "0000-PRISTINE-.usr.src.linux-2.6.18-53.1.14.el5-2.6.18-53.1."
                                   "14.el5\n")
    for i in range(2):
        osc = f"proc/fs/lustre/osc/lustre-OST000{i}-osc-ffff81012a3c6000/"
        f[osc + "checksums"] = f"{checksums}\n"
        f[osc + "checksum_type"] = "crc32 [adler] \n"
        f[osc + "max_rpcs_in_flight"] = "8\n"
        f[osc + "max_dirty_mb"] = "32\n"
    f["proc/fs/lustre/llite/lustre-ffff81012a3c6000/checksum_pages"] = "0\n"
    f["proc/fs/lustre/llite/lustre-ffff81012a3c6000/max_cached_mb"] = "12288\n"
    return f


def lustre_18():
    f = base(kernel="2.6.18-194.17.1.el5")
    f["proc/fs/lustre/version"] = ("lustre: 1.8.9\nkernel: patchless_client\nbuild:  "
                                   "jenkins-wc1--PRISTINE-2.6.18-348.1.1.el5\n")
    osc = "proc/fs/lustre/osc/scratch-OST0003-osc-ffff810217d5c400/"
    f[osc + "checksums"] = "1\n"
    f[osc + "checksum_type"] = "crc32 [adler] \n"
    f[osc + "max_dirty_mb"] = "32.00\n"
    return f


def lustre_2952():
    f = base(kernel="3.10.0-514.el7.x86_64", cpuinfo=CPUINFO_NEW)
    f["sys/fs/lustre/version"] = "lustre: 2.9.52\n"
    osc = "sys/fs/lustre/osc/work-OST0000-osc-ffff88003a5f1000/"
    f[osc + "checksums"] = "1\n"
    f[osc + "max_rpcs_in_flight"] = "8\n"
    f["proc/fs/lustre/osc/work-OST0000-osc-ffff88003a5f1000/checksum_type"] = (
        "crc32 adler [crc32c] \n")
    return f


def lustre_215(checksums=(1, 1)):
    f = base(kernel="4.18.0-477.10.1.el8_8.x86_64", mem_kb=263921780, cpuinfo=CPUINFO_NEW,
             mounts="10.0.0.1@o2ib:/bigfs /mnt/bigfs lustre rw,flock,lazystatfs 0 0\n"
                    "/dev/nvme0n1p1 / xfs rw,relatime 0 0\n")
    f["sys/fs/lustre/version"] = "2.15.5\n"
    for i, on in enumerate(checksums):
        dev = f"bigfs-OST000{i + 1}-osc-ffff8aac839ed800"
        f[f"sys/fs/lustre/osc/{dev}/checksums"] = f"{on}\n"
        f[f"sys/fs/lustre/osc/{dev}/max_rpcs_in_flight"] = "8\n"
        f[f"sys/fs/lustre/osc/{dev}/max_dirty_mb"] = "2000\n"
        f[f"proc/fs/lustre/osc/{dev}/checksum_type"] = (
            "crc32 adler [crc32c] t10ip512 t10ip4K t10crc512 t10crc4K \n")
        f[f"proc/fs/lustre/osc/{dev}/max_pages_per_rpc"] = "1024\n"
    f["sys/fs/lustre/llite/bigfs-ffff8aac839ed800/checksums"] = "1\n"
    f["sys/fs/lustre/llite/bigfs-ffff8aac839ed800/checksum_pages"] = "1\n"
    f["sys/kernel/debug/lustre/llite/bigfs-ffff8aac839ed800/max_cached_mb"] = (
        "users: 2\nmax_cached_mb: 128877\nused_mb: 0\nunused_mb: 128877\nreclaim_count: 0\n"
        "max_read_ahead_mb: 64\nused_read_ahead_mb: 0\n")
    f["sys/kernel/debug/lustre/checksum_speed"] = "adler32: 1955\ncrc32: 2423\ncrc32c: 14035\n"
    return f


def no_lustre():
    return base(kernel="6.1.0-18-amd64", cpuinfo=CPUINFO_NEW,
                mounts="/dev/vda / ext4 rw,relatime 0 0\n")


def infiniband(files, rates=("40 Gb/sec (4X QDR)",), hca="mlx4_0"):
    for port, rate in enumerate(rates, start=1):
        p = f"sys/class/infiniband/{hca}/ports/{port}/"
        files[p + "rate"] = rate + "\n"
        files[p + "state"] = "4: ACTIVE\n"
        files[p + "phys_state"] = "5: LinkUp\n"
        files[p + "link_layer"] = "InfiniBand\n"
    return files


class Link(str):
    """A symbolic link's target, not a file's content (`/proc/PID/ns/mnt` -> `mnt:[4026531840]`)."""


def make(root, files):
    for rel, text in files.items():
        path = os.path.join(str(root), rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if isinstance(text, Link):
            if os.path.lexists(path):
                os.remove(path)
            os.symlink(str(text), path)
            continue
        with open(path, "w") as fh:
            fh.write(text)
    return str(root)


# ---- other filesystem clients: the mount in /proc/self/mountinfo plus each client's files ----

def mountinfo(*mounts):
    """mountinfo lines `ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [tags] - TYPE SOURCE SUPEROPTS`."""
    lines = ["22 1 253:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw"]
    for i, (mp, fstype, source, superopts) in enumerate(mounts):
        lines.append(f"{40 + i} 22 0:{50 + i} / {mp} rw,relatime shared:{10 + i} - {fstype} "
                     f"{source} {superopts}")
    return "\n".join(lines) + "\n"


NFS_OPTS = {
    "3": ("nfs", "rw,vers=3,rsize=1048576,wsize=1048576,namlen=255,hard,proto=tcp,timeo=600,"
                 "retrans=2,sec=sys,mountaddr=10.0.0.5,mountvers=3,mountport=20048,"
                 "mountproto=udp,local_lock=none,addr=10.0.0.5"),
    "4.1": ("nfs4", "rw,vers=4.1,rsize=524288,wsize=524288,namlen=255,soft,proto=tcp,"
                    "timeo=600,retrans=2,sec=krb5p,clientaddr=10.0.0.2,local_lock=none,"
                    "addr=10.0.0.5"),
    "4.2": ("nfs4", "rw,vers=4.2,rsize=1048576,wsize=1048576,namlen=255,hard,proto=tcp,"
                    "nconnect=8,timeo=600,retrans=2,sec=sys,clientaddr=10.0.0.2,"
                    "local_lock=none,addr=10.0.0.5"),
}


def mountstats_nfs(version="4.2", written=268435456, mp="/mnt/nfs"):
    """/proc/self/mountstats as fs/nfs/super.c prints it (statvers=1.1)."""
    fstype, opts = NFS_OPTS[version]
    nfsv4 = ("\tnfsv4:\tbm0=0xfdffbfff,bm1=0x40f9be3e,bm2=0x68800,acl=0x3,sessions,"
             "pnfs=not configured,lease_time=90,lease_expired=0\n") if fstype == "nfs4" else ""
    pages = written // 4096
    return (
        "device proc mounted on /proc with fstype proc\n"
        "device /dev/vda1 mounted on / with fstype ext4\n"
        f"device 10.0.0.5:/export mounted on {mp} with fstype {fstype} statvers=1.1\n"
        f"\topts:\t{opts}\n"
        "\tage:\t3600\n"
        "\tcaps:\tcaps=0x3ffbffff,wtmult=512,dtsize=1048576,bsize=0,namlen=255\n"
        f"{nfsv4}"
        "\tsec:\tflavor=1,pseudoflavor=1\n"
        "\tevents:\t" + " ".join(["0"] * 27) + "\n"
        f"\tbytes:\t4096 {written} 0 0 4096 {written} 1 {pages}\n"
        f"\tRPC iostats version: 1.1  p/v: 100003/{version[0]} (nfs)\n"
        "\txprt:\ttcp 875 1 1 0 0 300 300 0 300 0 2 0 0\n"
        "\tper-op statistics\n"
        "\t        NULL: 1 1 0 44 24 0 0 0 0\n"
        "\t        READ: 1 1 0 132 4212 0 1 1 0\n"
        f"\t       WRITE: {max(written // 1048576, 1)} {max(written // 1048576, 1)} 0 "
        f"{written + 38400} 25600 12 3400 3420 0\n"
        "\t      COMMIT: 1 1 0 120 104 0 2 2 0\n\n"
    )


def nfs(version="4.2", written=268435456, mp="/mnt/nfs"):
    fstype, opts = NFS_OPTS[version]
    f = base(kernel="6.1.0-18-amd64", cpuinfo=CPUINFO_NEW)
    f["proc/self/mountinfo"] = mountinfo((mp, fstype, "10.0.0.5:/export", opts))
    f["proc/self/mountstats"] = mountstats_nfs(version, written, mp)
    return f


def beegfs(version="7.4.2"):
    f = base(kernel="5.14.0-362.8.1.el9_3.x86_64", cpuinfo=CPUINFO_NEW)
    f["proc/self/mountinfo"] = mountinfo(("/mnt/beegfs", "beegfs", "beegfs_nodev",
                                          "rw,relatime,cfgFile=/etc/beegfs/beegfs-client.conf"))
    f["sys/module/beegfs/version"] = version + "\n"
    f["proc/fs/beegfs/5F3A1B2C-64B8E1D0-node01/config"] = (
        "cfgFile = /etc/beegfs/beegfs-client.conf\nlogLevel = 3\nlogType = helperd\n"
        "connUseRDMA = 1\nconnMaxInternodeNum = 12\nconnRDMABufSize = 8192\n"
        "connRDMABufNum = 70\ntuneFileCacheType = buffered\ntuneFileCacheBufSize = 524288\n"
        "tuneRemoteFSync = 1\ntuneUseGlobalFileLocks = 0\ntuneCoherentBuffers = 1\n"
        "sysMgmtdHost = mgmt01\nsysSyncOnClose = 0\nquotaEnabled = 0\n")
    return f


DPKG_HEAD = ("Package: bash\nStatus: install ok installed\nVersion: 5.2.15-2+b2\n\n"
             "Package: removed-thing\nStatus: deinstall ok config-files\nVersion: 1.0-1\n\n")


def dpkg(**packages):
    """/var/lib/dpkg/status with these packages installed ({'gpfs.base': '5.1.9-0'})."""
    text = DPKG_HEAD + "".join(
        f"Package: {name}\nStatus: install ok installed\nPriority: optional\n"
        f"Architecture: amd64\nVersion: {version}\nDescription: x\n\n"
        for name, version in packages.items())
    return {"var/lib/dpkg/status": text}


def gpfs(version="5.1.9-0"):
    f = base(kernel="4.18.0-513.5.1.el8_9.x86_64", cpuinfo=CPUINFO_NEW)
    f["proc/self/mountinfo"] = mountinfo(("/gpfs/fs1", "gpfs", "fs1", "rw,relatime"))
    f["var/mmfs/gen/mmfs.cfg"] = (
        "#   WARNING:   This is a machine generated file.  Do not edit!\n"
        "#   Use the mmchconfig command to change configuration parameters.\n\n"
        "clusterName gpfs.example.org\nclusterId 7812341234123412341\nautoload yes\n"
        "minReleaseLevel 5.1.9.0\nccrEnabled yes\npagepool 16G\nmaxblocksize 16M\n"
        "workerThreads 1024\nmaxMBpS 20000\n[nsdNodes]\npagepool 64G\n[common]\n"
        "verbsRdma enable\n")
    f.update(dpkg(**{"gpfs.base": version}))
    return f


def cephfs_kernel():
    f = base(kernel="6.1.0-18-amd64", cpuinfo=CPUINFO_NEW)
    f["proc/self/mountinfo"] = mountinfo((
        "/mnt/cephfs", "ceph", "10.0.0.7:6789,10.0.0.8:6789:/",
        "rw,relatime,name=admin,secret=<hidden>,fsid=00000000-0000-0000-0000-000000000000,"
        "acl,mds_namespace=cephfs,rsize=16777216,wsize=16777216"))
    f.update(dpkg(**{"ceph-common": "18.2.1-1"}))
    return f


def ceph_fuse():
    f = base(kernel="6.1.0-18-amd64", cpuinfo=CPUINFO_NEW)
    f["proc/self/mountinfo"] = mountinfo((
        "/mnt/cephfs", "fuse.ceph-fuse", "ceph-fuse",
        "rw,nosuid,nodev,relatime,user_id=0,group_id=0,allow_other"))
    f["proc/4711/cmdline"] = "\x00".join(["ceph-fuse", "--id", "admin", "-m", "10.0.0.7:6789",
                                          "/mnt/cephfs", ""])
    f.update(dpkg(**{"ceph-fuse": "2:18.2.1-1~bpo12+1"}))
    return f


def glusterfs(version="10.3-5"):
    f = base(kernel="6.1.0-18-amd64", cpuinfo=CPUINFO_NEW)
    f["proc/self/mountinfo"] = mountinfo((
        "/mnt/gv0", "fuse.glusterfs", "gluster1:/gv0",
        "rw,relatime,user_id=0,group_id=0,default_permissions,allow_other,max_read=131072"))
    f["proc/2345/cmdline"] = ("/usr/sbin/glusterfs\0--process-name\0fuse\0"
                              "--volfile-server=gluster1\0--volfile-id=/gv0\0/mnt/gv0\0")
    f["proc/2346/cmdline"] = "/usr/sbin/glusterd\0-p\0/var/run/glusterd.pid\0"
    if version:
        f.update(dpkg(**{"glusterfs-client": version}))
    return f


# ---- Lustre counters (2.15: stats and rpc_stats in debugfs, dirty/grant bytes in /sys) ----

LUSTRE_215_OSC = "bigfs-OST000{}-osc-ffff8aac839ed800"
LUSTRE_215_LLITE = "bigfs-ffff8aac839ed800"


def osc_stats(t, writes, block=1048576):
    return (f"snapshot_time             {t:.9f} secs.nsecs\n"
            "start_time                1700000000.000000000 secs.nsecs\n"
            f"elapsed_time              {t - 1700000000:.9f} secs.nsecs\n"
            f"req_waittime              {writes + 12} samples [usec] 25 90112 {writes * 3000} "
            f"{writes * 9000000}\n"
            f"req_active                {writes + 12} samples [reqs] 1 8 {writes * 4} "
            f"{writes * 16}\n"
            "read_bytes                3 samples [bytes] 4096 4096 12288 50331648\n"
            f"write_bytes               {writes} samples [bytes] {block} {block} "
            f"{writes * block} {writes * block * block}\n"
            f"ost_write                 {writes} samples [usec] 2351 90112 {writes * 2500} "
            f"{writes * 6250000}\n"
            "ost_punch                 1 samples [usec] 300 300 300 90000\n")


def osc_rpc_stats(t, writes, pages=256):
    hist = "".join(f"{p}:\t\t         0   0   0   |   {writes if p == pages else 0:8d} "
                   f"{100 if p == pages else 0:3d} {100 if p >= pages else 0:3d}\n"
                   for p in (1, 2, 4, 8, 16, 32, 64, 128, 256))
    flight = "".join(f"{i}:\t\t         0   0   0   |   {writes // 8 if writes else 0:8d}"
                     "  12  12\n" for i in range(8))
    return (f"snapshot_time:         {t:.9f} secs.nsecs\n"
            "start_time:            1700000000.000000000 secs.nsecs\n"
            f"elapsed_time:          {t - 1700000000:.9f} secs.nsecs\n"
            "read RPCs in flight:  0\nwrite RPCs in flight: 0\npending write pages:  0\n"
            "pending read pages:   0\n\n"
            "\t\t\tread\t\t\twrite\n"
            "pages per rpc         rpcs   % cum % |       rpcs   % cum %\n" + hist + "\n"
            "\t\t\tread\t\t\twrite\n"
            "rpcs in flight        rpcs   % cum % |       rpcs   % cum %\n" + flight + "\n"
            "\t\t\tread\t\t\twrite\n"
            "offset                rpcs   % cum % |       rpcs   % cum %\n"
            f"0:\t\t         0   0   0   |   {writes:8d} 100 100\n")


def lustre_215_counters(t=1700000100.0, writes=(100, 40), dirty=0, grant=33554432):
    """2.15 counter files for the two OSCs of lustre_215(): writes[i] 1 MiB RPCs on OSC i."""
    f = {}
    for i, n in enumerate(writes):
        dev = LUSTRE_215_OSC.format(i + 1)
        f[f"sys/kernel/debug/lustre/osc/{dev}/stats"] = osc_stats(t, n)
        f[f"sys/kernel/debug/lustre/osc/{dev}/rpc_stats"] = osc_rpc_stats(t, n)
        f[f"sys/fs/lustre/osc/{dev}/cur_dirty_bytes"] = f"{dirty}\n"
        f[f"sys/fs/lustre/osc/{dev}/cur_grant_bytes"] = f"{grant}\n"
        f[f"sys/fs/lustre/osc/{dev}/cur_lost_grant_bytes"] = "0\n"
    total = sum(writes)
    f[f"sys/kernel/debug/lustre/llite/{LUSTRE_215_LLITE}/stats"] = (
        f"snapshot_time             {t:.9f} secs.nsecs\n"
        f"write_bytes               {total * 256} samples [bytes] 4096 4096 {total * 1048576}\n"
        "open                      4 samples [usecs] 10 200 400 60000\n"
        "fsync                     2 samples [usecs] 900 120000 120900 14400810000\n")
    return f
