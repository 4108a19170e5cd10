"""`mpiwrite tune`: the tunables of the client serving a target, a screening study over them,
and its answer (docs/tune.md).  No MPI: `list`, `get`, `set` and `plan` run on one node;
`study run` runs the plan.

`get` and `set` are the commands a tune study runs on every node (its [[setting]] `get` and
`set`): this node's client, found from TARGET as `env` finds it, read or set through its
catalogue entry (clients/tuning.py), the value checked against the catalogue's safe range.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Tuple

import click

from mpiwrite.errors import ConfigError, RunError
from mpiwrite.text import printable


def where_of(target: str, sysroot: str):
    """(the client serving TARGET on this node, clients.tuning.Where)."""
    from mpiwrite.clients import registry
    from mpiwrite.clients.tuning import Where
    from mpiwrite.facts import nodeinfo
    from mpiwrite.sysroot import Reader, check

    root = check(sysroot) if sysroot else "/"
    if root == "/" and not os.path.exists(target):
        raise ConfigError(f"TARGET: {target!r} does not exist")
    reader = Reader(root)
    fs = nodeinfo.filesystem(reader, target)
    client_facts = registry.collect(reader, fs, "", {})
    return registry.for_fs(fs), Where(target, root, fs, client_facts)


def tunable_of(client, name: str):
    tunables = client.tunables
    if name not in tunables:
        known = ", ".join(tunables) or "none"
        raise ConfigError(f"{name}: not a tunable of the {client.name} client serving TARGET "
                          f"(its tunables: {known}; mpiwrite tune list TARGET)")
    return tunables[name]


def rows(client, where) -> List[Dict[str, Any]]:
    """Every tunable of the client with its value now (None and why when it cannot be read)."""
    from mpiwrite.clients import tuning

    out = []
    for t in client.tunables.values():
        value, why = tuning.read(t, where)
        out.append({"name": t.name, "scope": t.scope, "how": t.how, "value": value,
                    "unreadable": why or None, "about": t.about,
                    "candidates": [{"value": v, "why": w} for v, w in t.worth_trying(value)],
                    "range": ([t.low, t.high] if t.kinds.numeric else
                              list(tuning.offered(t, where))),
                    "root": t.root, "remount": t.remount})
    return out


_SYSROOT = click.option("--sysroot", default=None, envvar="MPIWRITE_SYSROOT",
                        help="Read /proc and /sys under this folder.")


@click.group()
def tune():
    """The client's tunables: list them, plan a screening study, report its answer."""


@tune.command(name="list")
@click.argument("target")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table",
              show_default=True)
@_SYSROOT
def list_(target, fmt, sysroot):
    """The tunables of the client serving TARGET: scope, how read and set, value now, the
    values worth trying and why, and whether they need root or a remount."""
    client, where = where_of(target, sysroot)
    found = rows(client, where)
    if fmt == "json":
        click.echo(json.dumps(found, indent=1))
        return 0
    click.echo(printable(f"{client.name} client serving {target}: {len(found)} tunable(s)"))
    if os.geteuid() != 0 and any(r["root"] for r in found):
        click.echo("(those marked root need root to set: as you, tune plan refuses them and "
                   "says what an administrator would run)")
    for r in found:
        need = ", ".join(w for w, on in (("root", r["root"]), ("remount", r["remount"])) if on)
        value = r["value"] if r["value"] is not None else f"? ({r['unreadable']})"
        click.echo(printable(f"{r['name']}  = {value}   [{r['scope']}{', ' + need if need else ''}]"
                             f"  {r['about']}"))
        click.echo(printable(f"    how: {r['how']}; safe: {_range(r)}"))
        for c in r["candidates"]:
            click.echo(printable(f"    try {c['value']}: {c['why']}"))
    return 0


def _range(r: Dict[str, Any]) -> str:
    rng = r["range"]
    if rng and isinstance(rng[0], str):
        return "one of " + ", ".join(rng)
    if len(rng) == 2:
        return " to ".join("-" if x is None else f"{x:.0f}" if x == int(x) else f"{x:g}"
                           for x in rng)
    return "?"


@tune.command(name="get")
@click.argument("name")
@click.argument("target")
@_SYSROOT
def get_(name, target, sysroot):
    """Print the value of tunable NAME in force on this node (a study's `get`)."""
    from mpiwrite.clients import tuning

    client, where = where_of(target, sysroot)
    t = tunable_of(client, name)
    value, why = tuning.in_force(t, where)
    if value is None and t.access == "gluster" and "not switched" in why:
        _probe(target)  # a GlusterFS client switches on its next request
        value, why = tuning.in_force(t, where)
    if value is None:
        raise RunError(f"{name} on this node: {why}")
    click.echo(value)
    return 0


def _probe(target: str) -> None:
    """One request that no cache answers: create and remove a file in TARGET."""
    import tempfile

    try:
        fd, path = tempfile.mkstemp(prefix=".mpiwrite-probe-", dir=target)
        os.close(fd)
        os.unlink(path)
    except OSError:
        pass


@tune.command(name="set")
@click.argument("name")
@click.argument("value")
@click.argument("target")
@_SYSROOT
def set_(name, value, target, sysroot):
    """Set tunable NAME to VALUE for the client serving TARGET (a study's `set`)."""
    from mpiwrite.clients import tuning

    client, where = where_of(target, sysroot)
    t = tunable_of(client, name)
    good, why = tuning.checked(t, value, tuning.offered(t, where))
    if good is None:
        raise ConfigError(why)
    problem = tuning.write(t, good, where)
    if problem:
        raise RunError(f"{name}={good}: {problem}")
    return 0


def readable(client, where, names: List[str]) -> List[Tuple[Any, str]]:
    """(tunable, value now) of each name; ConfigError for an unknown tunable, one that needs
    a remount, or one that cannot be read back (tune never sets what it cannot restore)."""
    from mpiwrite.clients import tuning

    out = []
    for name in names:
        t = tunable_of(client, name)
        if t.remount:
            raise ConfigError(f"{name}: takes effect only on a new mount (remount); tune "
                              "does not plan it (a study with a `remount` command can)")
        value, why = tuning.read(t, where)
        if value is None:
            raise ConfigError(f"{name}: cannot be read back on this node ({why}): tune "
                              "changes nothing it cannot restore")
        out.append((t, value))
    return out

