"""Reading, checking and setting one tunable of the catalogue (clients/tunables.py) on this node.

`Where` is what the node knows of the target: its sysroot, its filesystem facts and its
client's facts (the FUSE daemon's pid and argv, ceph-fuse's admin socket).  Every value read
is put in the form the study compares and records (`normal`: sizes as the filesystem writes
them, numbers without trailing zeros, a choice's active word out of `[...]`), so "the value
asked" and "the value seen" are one string each.  External commands (lctl, gluster) run only
through procs.run_bounded.
"""

from __future__ import annotations

import os
import re
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

from mpiwrite.clients.tunables import Tunable
from mpiwrite.sysroot import Reader

COMMAND_TIMEOUT = 60.0
MAX_VALUE = 256  # characters of a value read back (5,000 digits or bytes ff fe are no value)
GLUSTER_CLI = "MPIWRITE_GLUSTER_CLI"  # how to run gluster where glusterd takes volume get/set


class Where(NamedTuple):
    target: str
    sysroot: str
    fs: Dict[str, Any]
    client: Dict[str, Any]

    @property
    def reader(self) -> Reader:
        return Reader(self.sysroot or "/")

    @property
    def daemon(self) -> Dict[str, Any]:
        """A FUSE client's daemon as its facts found it: pid, name, argv (clients/fuse.py)."""
        d = self.client.get("daemon")
        return d if isinstance(d, dict) else {}


def _run(argv: List[str]) -> Tuple[Optional[str], str]:
    from mpiwrite.procs import run_bounded

    out = run_bounded(argv, COMMAND_TIMEOUT)
    if not out.ok:
        said = " ".join((out.text() + " " + out.text("err")).split())[:300]
        return None, f"`{' '.join(argv)}`: {out.why(COMMAND_TIMEOUT)}{': ' + said if said else ''}"
    return out.text(), ""


def normal(t: Tunable, text: str) -> Tuple[Optional[str], str]:
    """A value as the study compares it, or (None, why it is not one of this tunable's)."""
    text = str(text).strip()
    try:
        return t.kinds.normal(text, t.unit), ""
    except (ValueError, OverflowError) as exc:
        return None, f"{text!r} is not a {t.kinds.noun} ({exc})"


def checked(t: Tunable, value: str, offered: Tuple[str, ...] = ()) -> Tuple[Optional[str], str]:
    """A value asked of `tune` or a study: its normal form, or (None, one line why not: not its
    kind, outside the catalogue's safe range, not a choice offered here)."""
    v, why = normal(t, value)
    if v is None:
        return None, f"{t.name}={value}: {why}"
    if not t.kinds.numeric:
        allowed = t.choices or offered
        if allowed and v not in allowed:
            return None, f"{t.name}={value}: not one of {', '.join(allowed)}"
        return v, ""
    x = t.kinds.number(v, t.unit)
    if (t.low is not None and x < t.low) or (t.high is not None and x > t.high):
        return None, (f"{t.name}={value}: outside the safe range {_num(t, t.low)} to "
                      f"{_num(t, t.high)} of the catalogue (mpiwrite tune list)")
    return v, ""


def _num(t: Tunable, x: Optional[float]) -> str:
    return "-" if x is None else t.kinds.show(x)


def _path(t: Tunable, where: Where) -> Tuple[Optional[str], str]:
    """The tunable's file relative to the sysroot ({bdi}: the mount's MAJ:MIN; {disk}: the
    whole disk under it), or (None, why)."""
    from mpiwrite.clients.fuse import mount_device

    path = t.path
    if "{bdi}" in path or "{disk}" in path:
        reader = where.reader
        dev = mount_device(reader, "proc/self", str(where.fs.get("mount_point") or ""))
        if dev is None:
            return None, f"no MAJ:MIN for {where.fs.get('mount_point')} in /proc/self/mountinfo"
        path = path.replace("{bdi}", dev)
        if "{disk}" in path:
            link, why = reader.readlink(f"sys/dev/block/{dev}")
            if link is None:
                return None, f"{dev} is not a block device here ({why})"
            disk = os.path.basename(link.rstrip("/"))
            if reader.read(f"sys/class/block/{disk}/partition", keep=False)[0] is not None:
                disk = os.path.basename(os.path.dirname(link.rstrip("/")))
            path = path.replace("{disk}", disk)
    return path, ""


def _gluster_volume(where: Where) -> Tuple[Optional[Tuple[str, str]], str]:
    source = str(where.fs.get("mount_source") or "")
    server, sep, volume = source.partition(":")
    if not sep or not server or not volume.strip("/"):
        return None, f"mount source {source!r} is not SERVER:/VOLUME"
    host, name = server.split(",")[0], volume.strip("/").split("/")[0]  # vol of vol/sub
    # names that reach another program are checked as names: never an option of it
    for what, word in (("server", host), ("volume", name)):
        if word.startswith("-") or not all(c.isalnum() or c in "._-:[]" for c in word):
            return None, f"mount source {source!r}: {what} {word!r} is not a name gluster takes"
    return (host, name), ""


def _gluster(vol: Tuple[str, str], *words: str) -> Tuple[Optional[str], str]:
    """`gluster volume WORDS...`: through MPIWRITE_GLUSTER_CLI when given (a command that
    runs gluster where glusterd accepts it: `ssh storage1 gluster`), else against the mount's
    server with --remote-host, which glusterd answers for read-only requests only."""
    import shlex

    given = os.environ.get(GLUSTER_CLI, "").strip()
    if given:
        try:
            command = shlex.split(given)
        except ValueError as exc:  # an unbalanced quote: said, not a traceback
            return None, f"{GLUSTER_CLI}={given!r} is not a command line ({exc})"
        return _run(command + ["--mode=script", "volume", *words])
    text, why = _run(["gluster", "--mode=script", f"--remote-host={vol[0]}", "volume", *words])
    if text is None:
        why += (f"; glusterd answers `volume {words[0]}` from its own host only (--remote-host"
                f" is read-only): set {GLUSTER_CLI} to a command that runs gluster there, "
                "e.g. 'ssh SERVER gluster'")
    return text, why


def raw_read(t: Tunable, where: Where) -> Tuple[Optional[str], str]:
    """The tunable's value as its filesystem prints it (one per device for lctl)."""
    if t.access == "lctl":
        return _run(["lctl", "get_param", "-n", t.name])
    if t.access == "file":
        rel, why = _path(t, where)
        if rel is None:
            return None, why
        text, why = where.reader.read(rel, keep=False)
        return (text, "") if text is not None else (None, f"/{rel}: {why}")
    if t.access == "ceph":
        return _ceph(where, {"prefix": "config get", "var": t.name}, t.name)
    if t.access == "gluster":
        vol, why = _gluster_volume(where)
        if vol is None:
            return None, why
        text, why = _gluster(vol, "get", vol[1], t.name)
        # `performance.write-behind-window-size   1MB (DEFAULT)`: the value, not the mark
        lines = [[w for w in ln.split()[1:] if w != "(DEFAULT)"]
                 for ln in (text or "").splitlines() if ln.split()[:1] == [t.name]]
        return (lines[-1][-1], "") if lines and lines[-1] else (None, why or
                                                                "no value printed")
    opts = dict(o.partition("=")[::2] for o in str(where.fs.get("mount_options", "")).split(","))
    return (opts[t.name], "") if opts.get(t.name) else (None, "not among the mount's options")


def _ceph(where: Where, command: Dict[str, Any], name: str) -> Tuple[Optional[str], str]:
    from mpiwrite.clients import ceph

    sock, pid = where.client.get("admin_socket"), where.daemon.get("pid")  # peer: the daemon
    if not sock:
        return None, "no admin socket of the ceph-fuse daemon found (mpiwrite env TARGET)"
    answer, why = ceph.ask(sock, command, int(pid) if pid else None)
    if why:
        return None, why
    if command["prefix"] == "config set":
        return "", ""
    if isinstance(answer, dict) and isinstance(answer.get(name), (str, int, float)):
        return str(answer[name]), ""
    return None, f"the admin socket's answer names no {name}"


def read(t: Tunable, where: Where) -> Tuple[Optional[str], str]:
    """The value now in force on this node in normal form: one value, or (None, why), also
    when devices disagree (`mixed`: a study could not restore one value)."""
    text, why = raw_read(t, where)
    if text is None:
        return None, why
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if t.name.endswith("max_cached_mb"):  # 2.4+: a block of "key: value" lines per llite
        keyed = [ln.split(":", 1)[1] for ln in lines if ln.startswith("max_cached_mb:")]
        lines = keyed or lines
    found = set()
    for ln in lines:  # each must be a value of the tunable's kind: what a study can restore
        v, why = normal(t, ln)
        if v is None or len(v) > MAX_VALUE or not (v.isascii() and v.isprintable()):
            shown = repr(ln[:40]) + ("..." if len(ln) > 40 else "")
            article = "an" if t.kind[:1] in "aeiou" else "a"
            return None, f"read {shown}: not {article} {t.kind} value{f' ({why})' if why else ''}"
        found.add(v)
    values = sorted(found)
    if len(values) != 1:
        return None, (f"{len(values)} different values ({', '.join(values)[:200]})"
                      if values else "printed nothing")
    # a choice is checked against the catalogue's choices or the words its file offers
    good, why = checked(t, values[0], () if t.kinds.numeric else offered(t, where))
    if good is None:
        return None, f"the value now is {why.split(': ', 1)[-1]}"
    return values[0], ""


def offered(t: Tunable, where: Where) -> Tuple[str, ...]:
    """A choice's values offered here (checksum_type, scheduler: the words of its file)."""
    if t.kinds.numeric or t.choices:
        return t.choices
    text, _ = raw_read(t, where)
    words = (text or "").split("\n")[0].split()
    return tuple(w.strip("[]") for w in words)


def write(t: Tunable, value: str, where: Where) -> str:
    """Set the tunable to a value already `checked`: '' or one line why not."""
    if t.remount:
        return f"{t.name} takes effect only on a new mount: give the study a remount command"
    if t.access == "lctl":
        return _run(["lctl", "set_param", f"{t.name}={value}"])[1]
    if t.access == "ceph":
        return _ceph(where, {"prefix": "config set", "var": t.name, "val": [value]}, t.name)[1]
    if t.access == "gluster":
        vol, why = _gluster_volume(where)
        return why if vol is None else _gluster(vol, "set", vol[1], t.name, value)[1]
    rel, why = _path(t, where)
    if rel is None:
        return why
    fd, why = where.reader.open_write(rel)  # a regular file, reached without a link
    if fd is None:
        return f"/{rel}: {why}"
    try:
        from mpiwrite.files import write_all

        write_all(fd, (value + "\n").encode())
    except OSError as exc:
        from mpiwrite.errors import why as reason

        return f"/{rel}: {reason(exc)}"
    finally:
        os.close(fd)
    return ""


GRAPH = {  # volume option -> (translator whose presence is "on", or the graph's option; default)
    "performance.write-behind": ("performance/write-behind", None),
    "performance.client-io-threads": ("performance/io-threads", None),
    "performance.flush-behind": ("write-behind.flush-behind", "on"),
    "performance.write-behind-window-size": ("write-behind.cache-size", "1MB"),
    "performance.io-thread-count": ("io-threads.thread-count", "16"),
}


def in_force(t: Tunable, where: Where) -> Tuple[Optional[str], str]:
    """What the client itself runs with, where it can tell: a GlusterFS client's graph once it
    has switched to it (its log: "Final graph", then "switched to graph"); else `read`.
    (None, why) when the client has not switched yet."""
    if t.access != "gluster":
        return read(t, where)
    from mpiwrite.clients.fuse import parse_graph

    text, why = gluster_log(where)
    if text is None:
        return None, why
    graph = parse_graph(text)
    if graph is None:
        return None, "no 'Final graph' in the client's log"
    if "switched to graph" not in text[text.rfind("Final graph:"):]:
        return None, "its client has a new graph but has not switched to it"
    what, default = GRAPH.get(t.name, (None, None))
    if what is None:
        return read(t, where)
    if default is None:
        return ("on" if what in graph["translators"] else "off"), ""
    return normal(t, graph["options"].get(what, default))[0], ""


def gluster_log(where: Where) -> Tuple[Optional[str], str]:
    """The end of the GlusterFS client's log (where its last graph is)."""
    from mpiwrite.clients.fuse import GRAPH_LOG_BYTES, _flags

    argv = where.daemon.get("argv") or []
    mp = str(where.fs.get("mount_point") or "")
    log = _flags(argv, ("--log-file",)).get("log-file") or (
        "/var/log/glusterfs/" + mp.strip("/").replace("/", "-") + ".log")
    text, why = where.reader.read(log.lstrip("/"), keep=False, limit=GRAPH_LOG_BYTES, tail=True)
    return (text, "") if text is not None else (None, f"{log}: {why}")


def graph_mark(where: Where) -> Optional[str]:
    """Which graph a GlusterFS client runs: how many graphs and switches its log holds (a
    change between two reads is a graph switch)."""
    text, _ = gluster_log(where)
    if text is None:
        return None
    return f"{text.count('Final graph:')} graphs, {len(re.findall('switched to graph', text))}"
