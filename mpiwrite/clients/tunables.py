"""The catalogue of client tunables: what `mpiwrite tune` may list, plan and set (docs/tune.md).

Each `Tunable` is named as its filesystem names it (`osc.*.checksums`, `client_oc_max_dirty`,
`performance.write-behind`, `vm.dirty_ratio`) and says its scope (`node`: set on every node;
`once`: from one place for the whole allocation), how it is read and set (`access`: lctl, a
file under /proc or /sys, ceph-fuse's admin socket, the gluster CLI, a mount option), the
values it may take here (`low`..`high` or `choices`: the safe range, outside which `tune`
refuses), the values worth trying with the reason, and whether it needs root or a remount.
A client object's `tunables` maps names to these (clients/base.Client); reading and setting
them is clients/tuning.py.  The values and reasons are a starting catalogue, not the
filesystems' whole documentation: a tunable not here can still be a hand-written [[setting]].
"""

from __future__ import annotations

from typing import Dict, List, NamedTuple, Optional, Tuple

from mpiwrite.units import MiB, format_size, parse_size
from mpiwrite.vocab.limits import CACHE, CPU, DIRTY, LINK, STORAGE, TARGET

KiB = 1024


def gluster_text(n: int) -> str:
    """Bytes as gluster writes a size: 1048576 -> '1MB', 524288 -> '512KB'."""
    if n % MiB == 0:
        return f"{n // MiB}MB"
    return f"{n // KiB}KB" if n % KiB == 0 else str(n)


class Kind:
    """How a tunable's values are read, compared and shown: `normal` gives the form a study
    compares (raises ValueError or OverflowError for text that is not one); a numeric kind's
    `number` is the value the catalogue's safe range bounds, `show` writes a bound."""

    name = ""
    noun = "number"  # what a value that is not one of the kind is not
    numeric = True

    def normal(self, text: str, unit: str) -> str:
        raise NotImplementedError

    def number(self, value: str, unit: str) -> float:
        return float(value)

    def show(self, x: float) -> str:
        return f"{x:g}"


class Int(Kind):
    name = "int"

    def normal(self, text: str, unit: str) -> str:
        return str(int(text))


class Number(Kind):
    name = "number"

    def normal(self, text: str, unit: str) -> str:
        x = float(text)
        if x != x:
            raise ValueError("NaN")
        return f"{x:g}"


class Size(Kind):
    """Bytes; a gluster size as gluster writes it (1MB, 512KB: binary units)."""

    name = noun = "size"

    def normal(self, text: str, unit: str) -> str:
        n = int(self.number(text, unit))
        return gluster_text(n) if unit == "gluster" else str(n)

    def number(self, value: str, unit: str) -> float:
        if unit == "gluster":
            value = value.replace("MB", "MiB").replace("KB", "KiB")
        return float(parse_size(value))

    def show(self, x: float) -> str:
        return format_size(x)


class Choice(Kind):
    """One of some words: the active one of a file that lists them all (`[mq-deadline] none`)."""

    name = "choice"
    numeric = False

    def normal(self, text: str, unit: str) -> str:
        active = [w[1:-1] for w in text.split() if w.startswith("[") and w.endswith("]")]
        return active[0] if active else text


KINDS = {k.name: k for k in (Int(), Number(), Size(), Choice())}


class Tunable(NamedTuple):
    name: str
    access: str  # lctl | file | ceph | gluster | mount
    kind: str  # a name of KINDS: int | number | size | choice
    candidates: Tuple[Tuple[str, str], ...]  # (value, why it is worth trying)
    about: str  # what it decides, in one line
    scope: str = "node"  # node | once
    low: Optional[float] = None  # the safe range of an int, number or size
    high: Optional[float] = None
    choices: Tuple[str, ...] = ()  # of a choice; () with access lctl/file: read from its file
    path: str = ""  # access file: relative to the sysroot, {bdi} and {disk} filled in
    root: bool = True  # setting it needs root (reading it does not)
    remount: bool = False  # only a new mount takes it
    unit: str = ""  # of a size as the filesystem writes it: "" bytes, "MB" (MiB), "gluster"
    # per candidate, "below" or "above": worth trying only on that side of the value now
    # (a "large" 1280 KiB request is no suggestion where a device already takes 4096)
    sides: Tuple[str, ...] = ()
    # the limits (vocab/limits.py) it acts on: `tune plan --from RECORD` takes these
    acts_on: Tuple[str, ...] = ()

    def worth_trying(self, now: Optional[str]) -> Tuple[Tuple[str, str], ...]:
        """The candidates that differ from the value now and lie on their side of it."""
        out = []
        for i, (value, why) in enumerate(self.candidates):
            if now is not None and value == now:
                continue
            side = self.sides[i] if i < len(self.sides) else ""
            if side and now is not None:
                try:
                    below = float(value) < float(now)
                except ValueError:
                    below = None
                if below is not None and below != (side == "below"):
                    continue
            out.append((value, why))
        return tuple(out)

    @property
    def kinds(self) -> Kind:
        """Its kind's reading, comparing and showing of values (KINDS)."""
        return KINDS[self.kind]

    @property
    def how(self) -> str:
        """How it is read and set, in the filesystem's own words."""
        if self.access == "lctl":
            return f"lctl get_param / set_param {self.name}"
        if self.access == "file":
            return "/" + self.path
        if self.access == "ceph":
            return f"admin socket: config get / config set {self.name}"
        if self.access == "gluster":
            return f"gluster volume get / set VOLUME {self.name}"
        return f"mount option {self.name} (umount and mount again)"


ONOFF = ("on", "off")
BOOL01 = ("0", "1")


def _t(name, access, kind, candidates, about, **kw) -> Tunable:
    return Tunable(name, access, kind, tuple(candidates), about, **kw)


LUSTRE = {t.name: t for t in (
    _t("osc.*.checksums", "lctl", "choice", [("0", "no checksum of each bulk RPC: the client "
       "CPU it costs comes back (the data is then unprotected on the wire)"),
       ("1", "the default: every RPC checksummed")], "checksums of bulk RPCs", choices=BOOL01,
       acts_on=(CPU,)),
    _t("osc.*.checksum_type", "lctl", "choice", [("crc32c", "hardware CRC32C (SSE4.2): "
       "cheapest where the CPU has it"), ("adler", "cheapest without CRC32C instructions")],
       "the checksum algorithm (those offered are in its file)", acts_on=(CPU,)),
    _t("osc.*.max_rpcs_in_flight", "lctl", "int", [("8", "the default"), ("32", "more RPCs "
       "in flight to each OST hide the network's latency (wide, high-latency links)")],
       "concurrent RPCs to each OST", low=1, high=256, acts_on=(LINK, TARGET, STORAGE)),
    _t("osc.*.max_dirty_mb", "lctl", "int", [("64", "less dirty data per OST: writes wait "
       "for the server sooner"), ("2000", "the newer default: a large write-back per OST")],
       "dirty data the client holds per OST, in MiB", low=1, high=2048, acts_on=(DIRTY,)),
    _t("osc.*.max_pages_per_rpc", "lctl", "int", [("256", "1 MiB RPCs (4 KiB pages)"),
       ("1024", "4 MiB RPCs: fewer, larger RPCs when the OSTs take them")],
       "pages per bulk RPC", low=1, high=4096, acts_on=(LINK, TARGET, STORAGE, CPU)),
    _t("llite.*.max_cached_mb", "lctl", "int", [("4096", "a small page cache for Lustre: "
       "shows whether the cache hides the writes"), ("65536", "a large one")],
       "the client's page cache for Lustre, in MiB", low=64, high=1 << 22, acts_on=(CACHE, DIRTY)),
)}

CEPH_FUSE = {t.name: t for t in (
    _t("client_oc_max_dirty", "ceph", "size", [("0", "write-through: every write waits for "
       "the OSDs (measured on the testbed: half the rate)"),
       (str(100 * MiB), "the default, 100 MiB of dirty data")],
       "dirty bytes the object cacher holds before writes block", low=0, high=4 << 30,
       root=False, acts_on=(DIRTY, STORAGE)),
    _t("client_oc_size", "ceph", "size", [(str(200 * MiB), "the default, 200 MiB"),
       (str(1 << 30), "a larger cache: room for more dirty data")],
       "the object cacher's size in bytes", low=8 * MiB, high=16 << 30, root=False,
       acts_on=(DIRTY,)),
    _t("client_oc_target_dirty", "ceph", "size", [(str(8 * MiB), "the default: flushing "
       "starts early"), (str(64 * MiB), "flushing starts later, in larger pieces")],
       "dirty bytes at which the cacher starts flushing", low=0, high=4 << 30, root=False,
       acts_on=(DIRTY,)),
    _t("client_oc_max_dirty_age", "ceph", "number", [("5", "the default, seconds"),
       ("1", "dirty data leaves sooner")], "the age at which dirty data is flushed, s",
       low=0, high=600, root=False, acts_on=(DIRTY,)),
)}

GLUSTER = {t.name: t for t in (
    _t("performance.write-behind", "gluster", "choice", [("on", "the default: writes are "
       "acknowledged before the bricks have them"), ("off", "every write waits for the "
       "bricks (measured on the testbed: -37% at 4 KiB)")], "the write-behind translator",
       scope="once", choices=ONOFF, acts_on=(STORAGE, LINK)),
    _t("performance.write-behind-window-size", "gluster", "size", [(str(MiB), "the default, "
       "1 MiB per file"), (str(16 * MiB), "more data in flight per file")],
       "data write-behind holds per file", scope="once", low=512 * KiB, high=1 << 30,
       unit="gluster", acts_on=(STORAGE, LINK)),
    _t("performance.flush-behind", "gluster", "choice", [("on", "the default: close() and "
       "flush return before the data is out"), ("off", "flush waits")],
       "flush in the background", scope="once", choices=ONOFF, acts_on=(STORAGE,)),
    _t("performance.client-io-threads", "gluster", "choice", [("on", "client requests in a "
       "thread pool: more parallel FUSE requests"), ("off", "one FUSE thread")],
       "io-threads on the client side", scope="once", choices=ONOFF, acts_on=(CPU,)),
    _t("performance.io-thread-count", "gluster", "int", [("16", "the default"),
       ("32", "more threads where the bricks have many disks")], "threads of io-threads",
       scope="once", low=1, high=64, acts_on=(CPU, TARGET)),
)}

WRITEBACK = {t.name: t for t in (
    _t("vm.dirty_ratio", "file", "int", [("20", "the usual default"), ("5", "writers are "
       "throttled much sooner: less data hidden in the page cache")],
       "% of memory dirty before writers must write back themselves", low=1, high=90,
       path="proc/sys/vm/dirty_ratio", acts_on=(DIRTY, CACHE)),
    _t("vm.dirty_background_ratio", "file", "int", [("10", "the usual default"), ("1", "the "
       "flusher starts almost at once")], "% of memory dirty before the flusher starts",
       low=1, high=50, path="proc/sys/vm/dirty_background_ratio", acts_on=(DIRTY, CACHE)),
    _t("vm.dirty_expire_centisecs", "file", "int", [("3000", "the default, 30 s"),
       ("500", "dirty data older than 5 s is written")], "age of dirty data the flusher "
       "writes, in 1/100 s", low=100, high=360000, path="proc/sys/vm/dirty_expire_centisecs",
       acts_on=(DIRTY, CACHE)),
)}

NFS = {t.name: t for t in (
    _t("sunrpc.tcp_slot_table_entries", "file", "int", [("2", "few RPCs in flight"),
       ("128", "many RPCs in flight per connection")], "RPC slots of a new TCP transport "
       "(an existing mount keeps its own: takes effect on a new mount)", low=2, high=65536,
       path="proc/sys/sunrpc/tcp_slot_table_entries", remount=True, acts_on=(LINK, STORAGE)),
    _t("read_ahead_kb", "file", "int", [("128", "a small read-ahead"), ("16384", "a large "
       "one, for streaming reads")], "the mount's read-ahead (its BDI), in KiB", low=0,
       high=1 << 20, path="sys/class/bdi/{bdi}/read_ahead_kb"),
    _t("max_ratio", "file", "int", [("100", "the default: this mount may hold all the "
       "dirty memory"), ("10", "a tenth: writes throttled sooner")], "% of the dirty limit "
       "this mount's BDI may hold", low=1, high=100, path="sys/class/bdi/{bdi}/max_ratio",
       acts_on=(DIRTY,)),
    _t("wsize", "mount", "size", [(str(MiB), "the usual maximum")], "bytes per WRITE RPC",
       low=4096, high=MiB, remount=True, acts_on=(LINK, STORAGE)),
)}

BLOCK = {t.name: t for t in (
    _t("nr_requests", "file", "int", [("64", "a short queue"), ("1024", "a deep queue")],
       "requests the block layer queues", low=4, high=4096,
       path="sys/class/block/{disk}/queue/nr_requests", sides=("below", "above"),
       acts_on=(STORAGE, TARGET)),
    _t("max_sectors_kb", "file", "int", [("128", "small requests"), ("1280", "large ones, "
       "where the device takes them (max_hw_sectors_kb)")], "largest request, in KiB",
       low=4, high=32768, path="sys/class/block/{disk}/queue/max_sectors_kb",
       sides=("below", "above"), acts_on=(STORAGE, TARGET)),
    _t("scheduler", "file", "choice", [("none", "no reordering: fast devices"),
       ("mq-deadline", "writes batched, reads first")], "the I/O scheduler (those offered "
       "are in its file)", path="sys/class/block/{disk}/queue/scheduler", acts_on=(STORAGE,)),
)}


def acting_on(catalogue: Dict[str, Tunable], limit: str) -> List[Tunable]:
    """The tunables of a client's catalogue that act on `limit` (vocab/limits.py): what
    `show` offers to try and `tune plan --from` plans over."""
    return [t for t in catalogue.values() if limit in t.acts_on]


def merged(*parts: Dict[str, Tunable]) -> Dict[str, Tunable]:
    out: Dict[str, Tunable] = {}
    for p in parts:
        out.update(p)
    return out
