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


def make(root, files):
    for rel, text in files.items():
        path = os.path.join(str(root), rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as fh:
            fh.write(text)
    return str(root)
