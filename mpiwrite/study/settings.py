"""A study's client settings on one node (docs/study.md, "Settings"): read before the study,
set before each point where the point changes them, settled and verified, read again after
every timed phase, restored at the end (and by the journal after a launch that was killed).

Scope: a `node` setting is set by every node's leader; a `once` setting (a GlusterFS volume
option, `lctl set_param -P`) by rank 0's alone, for the whole allocation.  Either way every
leader then waits until `get` shows the new value on its node (`settle` seconds at most), so
no run starts while a node still has the old one: the one line names the node and what it
still reports.
"""

from __future__ import annotations

import os
import shlex
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from mpiwrite.study.plan import Setting

SETTING_TIMEOUT = 120.0  # seconds a `set` or `get` command may take on a node
SETTING_OUTPUT = 1 << 16  # bytes of a `get` or `set` answer; one that prints more is ended
OUTPUT_CHARS = 300  # of a setting command's output, kept in the record and in messages
SETTLE_NAP = 0.5  # seconds between two reads of a setting that has not shown its value yet


def _unrestorable(value: str) -> str:
    """'' for a value `set` can be given back, else why not (before anything changes)."""
    from mpiwrite.study.journal import VALUE_CHARS

    if len(value) > VALUE_CHARS:
        return f"of {len(value)} characters (at most {VALUE_CHARS} are put back)"
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        return "with a control character (a NUL, an escape): it cannot be put back as it was"
    return ""


class Settings:
    """The study's client settings on this node (node leaders only run commands)."""

    def __init__(self, settings: Sequence[Setting], leader: bool,
                 owner: Optional[Tuple[str, str, str, str]] = None, first: bool = True,
                 stop: Optional[Callable[[], int]] = None):
        self.settings = list(settings)
        # a point's `set` ends when this turns true (a signal to the rank) and dies with the
        # rank: nothing changes a node after its job; a restore is never cut (it puts back)
        self.stop = stop
        self.leader = leader
        self.first = first  # rank 0's leader: it alone sets `once` settings
        self.asked: Dict[str, str] = {}  # the point's values
        self.before: Dict[str, str] = {}  # what `get` showed once settled, on this node
        self.original: Dict[str, str] = {}
        self.now: Dict[str, str] = {}
        # (host, study name, fingerprint, file): whose journal this node keeps (journal.py)
        self.owner = owner
        self.claimed = -1  # the study's lock on this node (journal.claim), for this process
        self.held: list = []  # this node's settings held for the study (study/holds.py)
        self.restored: List[str] = []  # NAME=VALUE put back by the last restore()
        self.unchanged: List[str] = []  # NAME=VALUE that were as they had been

    def recover(self) -> Tuple[str, str]:
        """Before anything is read: this node's settings of the study claimed (a second live
        launch of it is refused), then what an earlier launch left changed on this node (its
        journal) put back.  ('' or what was put back, '' or the problem)."""
        if not (self.leader and self.owner):
            return "", ""
        from mpiwrite.study import journal

        try:
            doc = journal.of_study(self.owner[0], self.owner[1])
            if not doc and not self.settings:
                return "", ""  # a study that changes nothing keeps no journal, takes no lock
            if self.claimed < 0:
                self.claimed = journal.claim(self.owner[0], self.owner[1])
            doc = journal.of_study(self.owner[0], self.owner[1])
        except journal.JournalError as exc:
            return "", str(exc)
        problem = self._hold([s.name for s in self.settings if self.mine(s)]
                             + [e["name"] for e in (doc or {}).get("settings", [])
                                if isinstance(e, dict)])
        if problem:
            return "", problem
        if not doc:
            return "", ""
        done, problems = [], []
        for e in doc["settings"]:
            try:
                words = self.command(e["set"], e["original"])
            except ValueError as exc:  # shlex: a journal's command it cannot split
                problems.append(f"restoring {e['name']} from the journal: its `set` "
                                f"cannot be split ({exc})")
                continue
            code, text = self._run(words)
            if code:
                problems.append(f"restoring {e['name']}={e['original']} from the journal: "
                                f"`{shlex.join(words)}` exit {code}: {text}")
            else:
                done.append(f"{e['name']}={e['original']}")
        if problems:
            return "", "; ".join(problems) + f" (the journal is kept in {journal.folder()})"
        journal.remove(self.owner[0], self.owner[1])
        return (f"put back what an earlier launch of the study left changed on "
                f"{self.owner[0]}: {', '.join(done)}"), ""

    def _hold(self, names: List[str]) -> str:
        """This node's settings of these names held for this study (study/holds.py): '' or
        who holds one (then nothing is held, nothing read or changed)."""
        from mpiwrite.study import holds

        names = [n for n in names if n not in {h.name for h in self.held}]
        if not names:
            return ""
        got, problem = holds.hold(names, self.owner[0] if self.owner else "this node")
        self.held += got
        return problem

    def release(self) -> None:
        """The study is over on this node: its hold on the settings and its lock go
        (study/holds.py, study/journal.py)."""
        from mpiwrite.study import holds

        holds.release(self.held)
        if self.claimed >= 0 and self.owner:
            from mpiwrite.study import journal

            journal.release(self.owner[0], self.owner[1], self.claimed)
            self.claimed = -1

    def _journal(self) -> str:
        """The originals written down before the first `set`: '' or why they cannot be
        (then nothing is changed)."""
        if not self.owner or not self.original:
            return ""
        from mpiwrite.study import journal

        entries = [{"name": s.name, "set": s.set, "original": self.original[s.name]}
                   for s in self.settings if s.name in self.original and self.mine(s)]
        try:
            journal.write(self.owner[0], self.owner[1], self.owner[2], self.owner[3], entries)
        except journal.JournalError as exc:
            return str(exc)
        return ""

    def mine(self, s: Setting) -> bool:
        """Whether this rank sets (and restores) s: every leader a `node` setting, rank 0's
        leader a `once` setting."""
        return self.leader and (s.scope != "once" or self.first)

    @staticmethod
    def command(template: str, value: str = "") -> List[str]:
        # no shell: `lctl set_param osc.*.checksums={value}` keeps its * for lctl
        return [w.replace("{value}", value) for w in shlex.split(template)]

    def _run(self, words: List[str], lines: bool = False,
             forward: bool = False) -> Tuple[int, str]:
        """Run a setting's command: (exit, its output or the problem).  `forward`: a point's
        `set`, ended by `stop` and by the rank's death (exit 130 when stopped)."""
        from mpiwrite.procs import run_bounded
        from mpiwrite.study import journal

        env = None
        if self.owner:  # `mpiwrite tune set` as the command: its journal is live, no leftover
            env = dict(os.environ, **{journal.RUNNING: self.owner[1]})
        out = run_bounded(words, SETTING_TIMEOUT, output_cap=SETTING_OUTPUT, env=env,
                          stop=self.stop if forward else None, with_parent=forward)
        if out.stopped:
            return 130, out.why(SETTING_TIMEOUT)
        if out.missing:
            return 127 if out.error == "command not found" else 126, out.error
        if out.timed_out:
            return 124, out.why(SETTING_TIMEOUT)
        if out.overflowed:
            return 125, out.why(SETTING_TIMEOUT, SETTING_OUTPUT)
        code = out.code if out.code is not None and out.code >= 0 else 128 - (out.code or 0)
        if lines and not code:  # `get`: its lines, each stripped
            try:
                text = out.out.decode("utf-8")
            except UnicodeDecodeError:
                return 65, "printed bytes that are not UTF-8 text: cannot be put back as such"
            return 0, "\n".join(ln.strip() for ln in text.splitlines())
        text = " ".join((out.text() + " " + out.text("err")).split())
        return code, text[:OUTPUT_CHARS]

    def read(self) -> str:
        """`get` of every setting: '' or the problem."""
        if not self.leader:
            return ""
        for s in self.settings:
            if not s.get:
                continue
            words = self.command(s.get)
            code, text = self._run(words, lines=True)
            if code:
                return f"setting {s.name}: `{shlex.join(words)}` exit {code}: {text}"
            values = sorted(set(text.split("\n")) - {""})
            if len(values) != 1:
                # `lctl get_param -n osc.*.checksums` prints one line per OST: one value to
                # restore, or the study cannot put things back as they were
                return (f"setting {s.name}: `{shlex.join(words)}` printed "
                        f"{len(values)} different values ({', '.join(values)[:OUTPUT_CHARS]}): "
                        "cannot restore one value at the end")
            bad = _unrestorable(values[0])
            if bad:
                return f"setting {s.name}: `{shlex.join(words)}` printed a value {bad}"
            self.original[s.name] = self.now[s.name] = values[0]
        return self._journal()

    def apply(self, point: Dict[str, Any]) -> Tuple[str, List[Dict[str, Any]]]:
        """`set` of every setting whose value this point changes: ('' or the problem, what
        was run: name, value, command, exit, output)."""
        done: List[Dict[str, Any]] = []
        if not self.leader:
            return "", done
        for s in self.settings:
            value = str(point[f"setting.{s.name}"])
            self.asked[s.name] = value
            if self.now.get(s.name) == value or not self.mine(s):
                continue
            for words in [self.command(s.set, value)] + (
                    [self.command(s.remount)] if s.remount else []):
                code, text = self._run(words, forward=True)
                done.append({"name": s.name, "value": value, "command": shlex.join(words),
                             "exit": code, "output": text})
                if code:
                    self.now.pop(s.name, None)
                    return (f"setting {s.name}={value}: `{shlex.join(words)}` exit {code}: "
                            f"{text}"), done
            self.now[s.name] = value
        return "", done

    def settle(self) -> str:
        """Every leader: wait until `get` shows each setting's asked value on this node, for
        at most its `settle` seconds: '' or the one line naming what it still shows."""
        self.before = {}
        for s in self.settings if self.leader else ():
            if not s.get:
                continue
            want, end = self.asked[s.name], time.monotonic() + s.settle
            while True:
                seen = self.value(s)
                if seen == want:
                    self.before[s.name] = seen
                    self.now[s.name] = seen
                    break
                if time.monotonic() >= end:
                    return (f"setting {s.name}={want}: after {s.settle:g} s `get` still shows "
                            f"{seen or '(nothing)'}")
                time.sleep(SETTLE_NAP)
        return ""

    def value(self, s: Setting) -> str:
        """What `get` shows now: one value, or the problem in parentheses."""
        code, text = self._run(self.command(s.get), lines=True)
        if code:
            return f"(`{s.get}` exit {code}: {text[:OUTPUT_CHARS]})"
        values = sorted(set(text.split("\n")) - {""})
        return values[0] if len(values) == 1 else f"({', '.join(values)[:OUTPUT_CHARS]})"

    def probe(self) -> Optional[Dict[str, Any]]:
        """Leaders, after a timed phase: the values asked, seen before it, and seen now."""
        if not (self.leader and self.asked):
            return None
        return {"asked": dict(self.asked), "before": dict(self.before),
                "after": {s.name: self.value(s) for s in self.settings if s.get}}

    def restore(self) -> str:
        """`set` of what `get` read, where a point changed it: '' or the problems.  What was
        put back, and what was as it had been, are kept in `restored` and `unchanged`."""
        problems = []
        self.restored, self.unchanged = [], []
        for s in self.settings if self.leader else ():
            value = self.original.get(s.name)
            if not self.mine(s) or value is None:
                continue
            if self.now.get(s.name) == value:
                self.unchanged.append(f"{s.name}={value}")
                continue
            words = self.command(s.set, value)
            code, text = self._run(words)
            if code:
                problems.append(f"restoring {s.name}={value}: `{shlex.join(words)}` exit "
                                f"{code}: {text}")
            else:
                self.now[s.name] = value
                self.restored.append(f"{s.name}={value}")
        if self.leader and self.owner and not problems:
            from mpiwrite.study import journal

            journal.remove(self.owner[0], self.owner[1])  # everything is back on this node
        return "; ".join(problems)
