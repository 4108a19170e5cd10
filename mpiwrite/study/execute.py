"""`study run`: every point of a study inside one MPI launch (docs/study.md).

Rank 0 decides what runs: the (point, repetition) pairs of the file not already complete in
the results folder, and every rank gets the same list.  Before each point one rank per node
applies the study's settings (`set` with the point's value, only where it changes; `get` read
once before the first point and restored after the last, also when the study stops early).
A point runs on a sub-communicator of the allocation's first k nodes x r ranks per node
through `guard.run_one`, so every rule of `run` holds per point (one guard, checks before
data, nothing left behind, one line on failure); the other ranks wait on a barrier, napping.
Everything a rank must decide the same way (membership, stop, problems) is agreed.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

from mpiwrite import structs
from mpiwrite.errors import AgreedError, ConfigError, raise_agreed
from mpiwrite.run import guard
from mpiwrite.run.config import RUN_KEYS, parse_tags
from mpiwrite.run.parallel import Team
from mpiwrite.run.process import Signals
from mpiwrite.study import order, resume, settle
from mpiwrite.study.plan import Study
from mpiwrite.study.settings import Settings  # noqa: F401  (cli/study.py's restore)
from mpiwrite.text import printable
from mpiwrite.units import format_size

IDLE_NAP = 0.05  # seconds between looks of a rank that waits out a point it is not part of


def fingerprint(st: Study) -> str:
    """What makes two files the same study, 16 hex digits: comments and layout do not, nor
    `repeat` (raising it adds repetitions to what is there) or the order."""
    doc = {"name": st.name, "target": st.target, "fixed": st.fixed, "axes": st.axes,
           "settings": [list(s[:4]) + ([s.scope, s.remount] if (s.scope, s.remount) !=
                                       ("node", "") else []) for s in st.settings]}
    if st.listed:  # a screening design's points
        doc["points"] = list(st.listed)
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()[:16]


def point_tags(st: Study, index: int, point: Dict[str, Any], key: str) -> Dict[str, str]:
    """The keys a point's record carries (its repetition and generation are added per run),
    checked by `run`'s tag rules (ConfigError): the study, the point (its key: its values,
    study/resume.py; its place in the file, for people), and every axis by its name, as a
    tag where the record has no built-in key of that name (`block_size` and `nodes` are)."""
    words = [f"study={st.name}", f"study_point={index}", f"study_hash={fingerprint(st)}",
             f"{resume.KEY_TAG}={key}"]
    words += [f"{k}={_word(v)}" for k, v in point.items() if k not in RUN_KEYS]
    return parse_tags(words)


def _word(v: Any) -> str:
    return ("true" if v else "false") if isinstance(v, bool) else str(v)


def restore_lines(nodes: List[Dict[str, Any]]) -> List[str]:
    """What each node put back at the study's end, one line per distinct answer (nodes that
    put back the same values share it): `settings put back on 3 nodes (h1, h2, h3):
    client_oc_max_dirty=104857600`, or `settings as they were on vm: knob=1`."""
    groups: Dict[tuple, List[str]] = {}
    for node in nodes:
        groups.setdefault((tuple(node["back"]), tuple(node["same"])), []).append(node["host"])
    out = []
    for (back, same), hosts in groups.items():
        where = (hosts[0] if len(hosts) == 1 else
                 f"{len(hosts)} nodes ({', '.join(hosts[:8])}{' ...' if len(hosts) > 8 else ''})")
        if back:
            out.append(f"settings put back on {where}: {', '.join(back)}"
                       + (f" (as they were: {', '.join(same)})" if same else ""))
        else:
            out.append(f"settings as they were on {where}: {', '.join(same)} (nothing to put "
                       "back)")
    return out


def _say(team: Team, text: str) -> None:
    if team.rank == 0:
        sys.stdout.write(printable(text) + "\n")
        sys.stdout.flush()


def _fail(team: Team, problems: List[Dict[str, Any]], what: str) -> None:
    if team.rank == 0:
        for p in problems:
            sys.stderr.write(printable(f"mpiwrite: error: study {what} on {p['host']} "
                                       f"(rank {p['rank']}): {p['message']}") + "\n")
        sys.stderr.flush()


def _idle(team: Team) -> None:
    """Wait for the point's ranks at the world's barrier without spinning."""
    team.idle_barrier(IDLE_NAP)


def main(st: Optional[Study], configs: Sequence[Any], argv: List[str], problem: str = "",
         new: bool = False, screen: Optional[dict] = None) -> int:
    """Every rank of the launch runs this: the study's points in order, each on its ranks."""
    world = guard.start()
    if isinstance(world, int):
        return world
    ex = None
    try:
        ex = Execution(world, st, configs, argv, new, screen)
        return ex.execute(problem)
    except AgreedError as exc:
        if world.rank == 0:  # a file's problems: one line each
            for line in str(exc).split("\n"):
                sys.stderr.write(printable(f"mpiwrite: error: {line}") + "\n")
        return exc.exit_code
    except BaseException as exc:  # anything else in the study's own steps (between points):
        # the one guard, as guard.run_one's around each point: the job ends in seconds
        guard.end_job(guard.Unmade(world, phase="study"), exc)
        return 1
    finally:
        if ex is not None:
            ex.settings.release()  # this node's claim on the study's settings, and its file
            if ex.lock_fd >= 0:
                os.close(ex.lock_fd)  # the next `study run` of it may start


class Execution:
    def __init__(self, world: Team, st: Optional[Study], configs: Sequence[Any],
                 argv: List[str], new: bool, screen: Optional[dict]):
        self.world, self.st, self.configs, self.argv = world, st, list(configs), argv
        self.new, self.screen = new, screen
        self.keys: List[str] = []
        self.generation = 1
        self.settle = settle.Settle("none")
        self.lock_fd = -1  # rank 0: held for the whole study (study/resume.py)
        owner = (world.host, st.name, fingerprint(st), st.path) if st else None
        self.settings = Settings(st.settings if st else [], world.is_leader, owner,
                                 first=world.rank == 0,
                                 stop=lambda: world.signals is not None
                                 and world.signals.received)

    def _check(self, problem: str) -> Tuple[List[Tuple[int, int]], List[Dict[str, str]]]:
        """Before any point: the input on every rank, the allocation each point needs, the
        tags, and the runs left to do (decided by rank 0)."""
        world, st = self.world, self.st
        tags: List[Dict[str, str]] = []
        if not problem:
            try:
                self.keys = resume.point_keys(st, self.configs)
                tags = [point_tags(st, i, p, k)
                        for i, (p, k) in enumerate(zip(st.points(), self.keys))]
            except ConfigError as exc:
                problem = str(exc)
        if not problem:  # the file's settle was checked with the file (cli/study.py)
            self.settle = settle.for_study(st.settle, [s.name for s in st.settings],
                                           self.configs)
        raise_agreed(world.agree(problem), world.size)
        fewest = -int(world.allreduce_max(-world.local_size))
        need_nodes = max([p.get("nodes", 1) for p in st.points()])
        need_ranks = max([p.get("ranks_per_node", 1) for p in st.points()])
        if need_nodes > world.nnodes or need_ranks > fewest:
            raise_agreed(world.agree(
                f"the study needs {need_nodes} node(s) x {need_ranks} rank(s) per node; this "
                f"launch has {world.nnodes} node(s) with {fewest} rank(s) on the fewest"
                if world.rank == 0 else ""), world.size)
        plan = ""
        if world.rank == 0:
            plan = self._plan()
        plan = world.bcast_text(plan if world.rank == 0 else None)
        if plan.startswith("!"):
            raise AgreedError(plan[1:])
        got = json.loads(plan)
        world.root_host = got["host"]  # named if rank 0 stops answering (guard.end_job)
        self.generation = int(got["generation"])
        if got["skipped"]:
            _say(world, f"study {st.name}: {got['skipped']} of {len(st.runs())} runs already "
                        f"complete in {st.results}; running the {len(got['todo'])} left")
        return [tuple(r) for r in got["todo"]], tags

    def _plan(self) -> str:
        """Rank 0: the study locked for this launch, and the runs left to do as JSON (or
        "!" and the reason there are none to do)."""
        st = self.st
        try:
            self.lock_fd = resume.lock(st.results, st)
        except AgreedError as exc:
            return "!" + str(exc)
        wants = [resume.expected(st, p, c) for p, c in zip(st.points(), self.configs)]
        done = resume.done_in(st.results, st, fingerprint(st), self.keys, wants, self.new)
        if done.others:
            return "!" + (f"results {st.results} hold study {st.name!r} from a different "
                          f"file ({', '.join(done.others)}; this one is {fingerprint(st)}): "
                          "give the study a new name, or --new to start it again")
        runs = st.runs()
        todo = [run for run in runs if run not in done.runs]
        return json.dumps({"todo": todo, "skipped": len(runs) - len(todo),
                           "generation": done.generation, "host": self.world.host})

    def execute(self, problem: str) -> int:
        world, st = self.world, self.st
        todo, tags = self._check(problem)
        said, trouble = self.settings.recover()
        for line in world.allgather_texts(said):
            if line:
                _say(world, f"study {st.name}: {line}")
        failed = world.agree(trouble)
        if failed:
            _fail(world, failed, "settings")
            return 1
        failed = world.agree(self.settings.read())
        if failed:
            _fail(world, failed, "get")
            self._restore()
            return 1
        code = 0
        points = st.points()
        place = {run: i for i, run in enumerate(st.runs())}
        previous = "none"  # the point run just before on these nodes, in this launch
        if st.order == "interleaved" and st.settings:
            if world.rank == 0:
                sys.stderr.write(printable(f"mpiwrite: warning: study {st.name}: "
                                           f"{order.ALIASED}") + "\n")
        for n, (index, repeat) in enumerate(todo):
            if world.allreduce_max(world.signals.received):
                code = Signals.exit_code_of(int(world.allreduce_max(world.signals.received)))
                break
            point = points[index]
            problem, ran = self.settings.apply(point)
            if world.allreduce_max(world.signals.received):  # a `set` it cut is restored
                code = Signals.exit_code_of(int(world.allreduce_max(world.signals.received)))
                for line in world.allgather_texts(problem):
                    if line:
                        _say(world, f"study {st.name}: {line}; restoring")
                break
            failed = world.agree(problem)
            notes = self._setting_notes(ran)
            if failed:
                _fail(world, failed, f"{st.name} point {index}: set")
                code = 1
                break
            failed = world.agree(self.settings.settle())  # every node shows the new value
            if failed:
                _fail(world, failed, f"{st.name} point {index}: settle")
                code = 1
                break
            _say(world, f"== study {st.name}: run {n + 1} of {len(todo)}, point {index} "
                        f"({', '.join(f'{k}={_word(v)}' for k, v in point.items())}), "
                        f"repetition {repeat}")
            settled, settle_tags = self._settle(index)
            ordered = dict(tags[index], study_order=st.order, study_seed=str(st.order_seed()),
                           study_seq=str(place.get((index, repeat), -1)),
                           study_prev_key=previous, **settle_tags)
            code = self._point(index, repeat, point, ordered, notes + settled)
            previous = self.keys[index]
            if code:
                break
        restore = self._restore()
        if code == 0 and restore:
            code = 1
        if code == 0:
            _say(world, f"study {st.name}: {len(todo)} run(s) done; records in {st.results}")
        return code

    def _settle(self, index: int) -> Tuple[List[str], Dict[str, str]]:
        """Every node leader settles before the point (study/settle.py); every rank gets the
        record's notes (a line a node) and tags (the settle, the largest seconds and dirty
        bytes left).  A bound reached is said, and the run goes on."""
        world, spec = self.world, self.settle
        if spec.mode == "none":
            return [], {"settle": "none"}
        mine = ""
        if world.is_leader:
            mine = json.dumps(dict(settle.settle(spec, self.configs[index].target),
                                   host=world.host))
        notes, seconds, left = [], 0.0, 0
        for text in world.allgather_texts(mine):
            if not text:
                continue
            got = json.loads(text)
            seconds = max(seconds, float(got["seconds"]))
            left = max(left, int(got["dirty_bytes"] or 0))
            dirty = ("unknown" if got["dirty_bytes"] is None
                     else format_size(int(got["dirty_bytes"])))
            notes.append(f"settle {got['mode']} on {got['host']}: {got['seconds']:.2f} s, "
                         f"{dirty} dirty or in writeback left"
                         + (f" ({got['note']})" if got["note"] else ""))
            if got["note"]:
                _say(world, f"study {self.st.name}: settle on {got['host']}: {got['note']}")
        return notes, {"settle": spec.text(), "settle_seconds": f"{seconds:.3f}",
                       "settle_dirty_bytes": str(left)}

    def _setting_notes(self, ran: List[Dict[str, Any]]) -> List[str]:
        """What the node leaders ran for this point, as the record's notes (on rank 0)."""
        texts = self.world.allgather_texts(json.dumps({"host": self.world.host, "ran": ran})
                                           if self.world.is_leader else "")
        notes = []
        for t in texts:
            if not t:
                continue
            got = json.loads(t)
            for r in got["ran"]:
                notes.append(f"setting {r['name']}={r['value']} on {got['host']}: "
                             f"`{r['command']}` exit {r['exit']}"
                             f"{': ' + r['output'] if r['output'] else ''}")
        return notes

    def _restore(self) -> str:
        """Every node's settings put back, the job waiting for it: after a signal (SIGTERM,
        Ctrl-C) the other ranks wait for a restore in progress as long as its commands may
        take (each bounded by SETTING_TIMEOUT), not the grace period, so that a slow `set`
        is never cut and the job ends after it."""
        from mpiwrite.study.settings import SETTING_TIMEOUT

        world = self.world
        if self.settings.settings:
            bound = len(self.settings.settings) * (SETTING_TIMEOUT + 1.0) + world.grace
            world.signal_patience = max(world.grace, bound)
            world.stall_seconds = max(world.stall_seconds or 0.0, bound) or None
        problem = self.settings.restore()
        failed = self.world.agree(problem)
        if failed:
            how = (f"; the journal keeps it: `mpiwrite study restore {self.st.path}` on that "
                   "node puts it back" if self.st else "")
            _fail(self.world, [dict(p, message=p["message"] + how) for p in failed],
                  f"{self.st.name if self.st else ''} restore")
        said = ""
        if self.world.is_leader and (self.settings.restored or self.settings.unchanged):
            said = json.dumps({"host": self.world.host, "back": self.settings.restored,
                               "same": self.settings.unchanged})
        lines = restore_lines([json.loads(t) for t in self.world.allgather_texts(said) if t])
        for line in lines:
            _say(self.world, f"study {self.st.name}: {line}")
        return "; ".join(p["message"] for p in failed)

    def _point(self, index: int, repeat: int, point: Dict[str, Any], tags: Dict[str, str],
               notes: List[str]) -> int:
        """One run of one point on its ranks; the others wait.  The exit code, agreed."""
        world = self.world
        k = int(point.get("nodes", world.nnodes))
        r = int(point.get("ranks_per_node", world.local_size))
        member = world.node < k and world.local_rank < r
        team = world.part(member)
        code = 0
        if team is not None:
            team.start_problem = ""
            cfg = self.configs[index]
            cfg = structs.replace(cfg, tags=dict(
                cfg.tags, **tags, study_repeat=str(repeat),
                **{resume.GENERATION_TAG: str(self.generation)}))
            try:
                code = guard.run_one(team, cfg, self.argv, "", self.screen, notes,
                                     self.settings.probe)
            finally:
                team.free()
        _idle(world)
        return int(world.allreduce_max(code))
