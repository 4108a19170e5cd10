"""Which keys explain a metric's variation over a history of runs (`explain`).

Every run key (node facts, run parameters, tags) with at least two values is a candidate
factor.  For each: its groups' means with intervals, the share of the variance it explains
(eta squared over the samples, mpiwrite.stats.variance_share) and a permutation p-value.
Keys whose values split the runs the same way are one factor, named as confounded, with the
combinations no run has (the A/B runs that would separate them).  The top factors are also
taken within each other's levels, and given all the other clear factors together, so that an
effect drowned by a bigger one, or one that only a confounder made, shows.  docs/explain.md
describes the method and its limits; the JSON is described in docs/output.md.
"""

from __future__ import annotations

from itertools import permutations as ordered_pairs
from typing import Any, Dict, List, Optional, Sequence

from mpiwrite import stats
from mpiwrite.answers.report import DURABILITY_KEYS, Sampling, no_figure_text, within_warmup
from mpiwrite.answers.results import metric_info, resolve_unit, sample_values
from mpiwrite.errors import ConfigError
from mpiwrite.facts.nodeinfo import SUMMARY_KEYS
from mpiwrite.formats import contract
from mpiwrite.text import printable

# What names a run, not a setting: never a factor (and not listed).
IDENTITY_KEYS = ("run_id", "status", "start_time")
TOP = 5  # factors taken within each other's levels (every ordered pair of them)
ALPHA = 0.05  # a factor with p below this is "clear": the others are taken given it
MISSING_SHOWN = 12  # in the text; the JSON keeps up to MISSING_KEPT
MISSING_KEPT = 64
FACTORS_SHOWN = 12  # in the text; the JSON has every factor
SAME_SHOWN = 30  # keys listed as the same everywhere in the text
LEVELS_SHOWN = 4  # a within entry shows each level's share when there are this few
GROUPS_SHOWN = 16  # a factor with more groups (the ranks of a run) shows its 5 lowest and
MEANS_SHOWN = 8  # 5 highest means in the text; a within level, its 3 lowest and 3 highest


def _order(key: str):
    """Built-in keys in their usual order, then other plain keys, then dotted node facts."""
    if key in SUMMARY_KEYS:
        return (0, SUMMARY_KEYS.index(key), key)
    return (1 if "." not in key else 2, 0, key)


def _restates(a: List[str], b: List[str]) -> bool:
    """Whether key b says what key a says in every run (the same value, or one holds the
    other: `client` "lustre 1.6.5" restates `lustre` "1.6.5")."""
    def one(x: str, y: str) -> bool:
        x, y = x.lower(), y.lower()
        return x == y or (min(len(x), len(y)) >= 2 and (x in y or y in x))
    return all(one(x, y) for x, y in zip(a, b))


def _partition(values: List[str]) -> tuple:
    first: Dict[str, int] = {}
    return tuple(first.setdefault(v, len(first)) for v in values)


def _levels(values: Sequence[str]) -> List[str]:
    """Values in a stable order: numbers by value, then text."""
    def key(v: str):
        try:
            return (0, float(v), v)
        except ValueError:
            return (1, 0.0, v)
    return sorted(set(values), key=key)


class Samples:
    """The samples of the runs and, per sample, the run's key values.  The analysis below
    reads `values`, `run_of` (the unit each sample is of), `keys` (per unit) and
    `count_key` (what a group counts: runs here; explain_run.RankSamples counts ranks)."""

    count_key = "runs"

    def __init__(self, runs, keys_of, sampling: Sampling, unit: str):
        self.runs, self.values, self.run_of = [], [], []
        for r in runs:
            vals = sample_values([r], sampling.metric, unit, sampling.warmup)
            if not vals:
                continue
            self.run_of += [len(self.runs)] * len(vals)
            self.values += vals
            self.runs.append(r)
        names = set().union(*(keys_of(r) for r in self.runs)) if self.runs else set()
        self.keys: Dict[str, List[str]] = {
            k: [printable(keys_of(r).get(k, "-")) for r in self.runs]
            for k in sorted(names, key=_order) if k not in IDENTITY_KEYS}
        for k in [k for k in self.keys if k.startswith("tag.")]:
            # `tag.NAME` names the tag NAME on every record (results.run_keys): the same key
            # twice where NAME is the tag itself, not a restatement to name
            if self.keys.get(k[4:]) == self.keys[k]:
                del self.keys[k]

    def per_sample(self, key: str) -> List[str]:
        col = self.keys[key]
        return [col[i] for i in self.run_of]


def explain(runs, keys_of, sampling: Sampling, permutations: int = stats.PERMUTATIONS,
            seed: int = stats.SEED) -> Dict[str, Any]:
    """The `explain --format json` document over these complete runs (schema:
    explain-json.schema.json).  ConfigError when the runs pool durability settings, or when
    none has a figure for the metric."""
    runs = list(runs)
    if not runs:
        raise ConfigError("PATHS: no complete runs match")
    for dk in DURABILITY_KEYS:  # report's rule: these are different questions, never pooled
        seen = sorted({str(keys_of(r).get(dk)) for r in runs})
        if len(seen) > 1:
            raise ConfigError(f"explain: the runs would pool {dk} {' and '.join(seen)}, "
                              f"which measure different things; select one value, e.g. "
                              f"--where {dk}={seen[0]}")
    unit = resolve_unit(runs, sampling.unit, sampling.warmup)
    s = Samples(runs, keys_of, sampling, unit)
    if not s.values:
        raise ConfigError(no_figure_text("PATHS", len(runs), sampling.metric, sampling.warmup,
                                         within_warmup(runs, sampling.metric, sampling.warmup)))
    doc = contract.header("explain")
    doc.update(scope="runs", metric=sampling.metric,
               metric_unit=metric_info(sampling.metric).unit,
               higher_is_better=metric_info(sampling.metric).higher_is_better, unit=unit,
               unit_requested=sampling.unit, warmup=sampling.warmup,
               confidence=sampling.confidence, runs=len(s.runs), samples=len(s.values),
               runs_without_figure=len(runs) - len(s.runs))
    doc.update(analyse(s, sampling.confidence, metric_info(sampling.metric).suffix,
                       permutations, seed))
    return contract.finite(doc)


def analyse(s, conf: float, suffix: str, permutations: int = stats.PERMUTATIONS,
            seed: int = stats.SEED, clear_first: bool = False) -> Dict[str, Any]:
    """What explain finds in samples `s` (Samples, or any object with its attributes): the
    document's test, total, factors, within, same_everywhere and unique_per_run.  Factors by
    share; with `clear_first`, those with p < ALPHA before the others (the ranks of a run:
    a key with a level per few samples, `rank`, has a large share by chance alone)."""
    n_runs = len(s.runs)
    same, unique, groups = {}, [], {}
    for k, col in s.keys.items():
        nvals = len(set(col))
        if nvals == 1:
            same[k] = col[0]
        elif nvals == n_runs:
            unique.append(k)
        else:
            groups.setdefault(_partition(col), []).append(k)
    factors = []
    for keys in groups.values():
        factors.append(_factor(s, keys, conf, suffix, permutations, seed))
    factors.sort(key=lambda f: (clear_first and not (f["p_value"] is not None
                                                     and f["p_value"] < ALPHA),
                                -f["variance_share"], _order(f["keys"][0])))
    for f in factors:  # a host has one CPU model: what the host explains includes the CPU's
        col = s.keys[f["key"]]
        f["determines"] = [g["key"] for g in factors if g is not f
                           and len(set(zip(col, s.keys[g["key"]]))) == f["levels"]]
    flat = len(set(s.values)) == 1  # nothing varies: no factor can explain anything
    top = [] if flat else factors[:TOP]
    within = [_within(s, a, b, permutations, seed) for a, b in ordered_pairs(top, 2)]
    clear = [f for f in factors if f["p_value"] is not None and f["p_value"] < ALPHA][:TOP]
    for f in top:
        others = [g["key"] for g in clear if g is not f]
        f["given_others"] = _given(s, f["key"], others, permutations, seed)
        g = f["given_others"]
        f["hidden"] = bool(g and g["varied"] and (f["p_value"] is None or f["p_value"] >= ALPHA)
                           and g["p_value"] is not None and g["p_value"] < ALPHA)
    return dict(test="permutation", permutations=permutations, seed=seed,
                total=contract.stat_block(s.values, conf, suffix),
                factors=factors, within=within, same_everywhere=same, unique_per_run=unique)


def _factor(s: Samples, keys: List[str], conf: float, suffix: str, permutations: int,
            seed: int) -> Dict[str, Any]:
    facts: List[str] = []  # the keys that are not a restatement of an earlier one
    aliases: Dict[str, List[str]] = {}
    for k in keys:
        of = next((f for f in facts if _restates(s.keys[f], s.keys[k])), None)
        if of is None:
            facts.append(k)
        else:
            aliases.setdefault(of, []).append(k)
    keys = facts + [k for f in facts for k in aliases.get(f, [])]
    # the fact whose values name the groups (the shortest: 1.6.5 rather than a kernel's name)
    main = min(facts, key=lambda k: sum(map(len, s.keys[k])))
    labels = s.per_sample(main)
    share = stats.variance_share(s.values, labels, None, permutations, seed)
    groups = []
    for level in _levels(s.keys[main]):
        vals = [v for v, lab in zip(s.values, labels) if lab == level]
        at = s.keys[main].index(level)
        groups.append(dict(values={k: s.keys[k][at] for k in facts},
                           **{s.count_key: s.keys[main].count(level)},
                           **contract.stat_block(vals, conf, suffix)))
    missing = []
    for other in [k for k in facts if k != main]:  # what would separate main from each
        pairs = set(zip(s.keys[main], s.keys[other]))
        missing += [{main: a, other: b} for a in _levels(s.keys[main])
                    for b in _levels(s.keys[other]) if (a, b) not in pairs]
    return dict(keys=keys, key=main, facts=facts, aliases=aliases, confounded=len(facts) > 1,
                levels=len(groups), variance_share=share.share, p_value=share.p_value,
                groups=groups, missing_combinations=missing[:MISSING_KEPT])


def _within(s: Samples, a: Dict[str, Any], b: Dict[str, Any], permutations: int,
            seed: int) -> Dict[str, Any]:
    """Factor a within each level of factor b: per level, a's share and p, and its means;
    then pooled over the levels (the partial share, values permuted within b's levels)."""
    ka, kb = a["key"], b["key"]
    la, lb = s.per_sample(ka), s.per_sample(kb)
    levels = []
    for level in _levels(s.keys[kb]):
        idx = [i for i, x in enumerate(lb) if x == level]
        vals, labs = [s.values[i] for i in idx], [la[i] for i in idx]
        present = _levels(labs)
        nruns = len({s.run_of[i] for i in idx})
        # as over all runs: a key with a value for every run of the level explains nothing
        sh = stats.variance_share(vals, labs, None, permutations, seed) \
            if 1 < len(present) < nruns else None
        means = {x: sum(v for v, lab in zip(vals, labs) if lab == x)
                 / labs.count(x) for x in present}
        levels.append({"level": level, s.count_key: nruns,
                       "values": present, "means": means,
                       "variance_share": sh.share if sh else None,
                       "p_value": sh.p_value if sh else None})
    varied = {lv["level"] for lv in levels if lv["variance_share"] is not None}
    pooled = _pooled(s.values, la, lb, varied, permutations, seed) if varied else None
    pairs = set(zip(s.keys[ka], s.keys[kb]))
    # a key that decides the other (each host has one CPU model) has no combination to add
    nested = len(pairs) == len(set(s.keys[ka])) or len(pairs) == len(set(s.keys[kb]))
    missing = [] if nested else [{ka: x, kb: y} for x in _levels(s.keys[ka])
                                 for y in _levels(s.keys[kb]) if (x, y) not in pairs]
    return {"key": ka, "within": kb, "keys": a["facts"], "within_keys": b["facts"],
            "varied": bool(varied), "nested": nested,
            "variance_share": pooled.share if pooled else None,
            "p_value": pooled.p_value if pooled else None, "levels": levels,
            "missing_combinations": missing[:MISSING_KEPT]}


def _given(s: Samples, key: str, others: List[str], permutations: int,
           seed: int) -> Optional[Dict[str, Any]]:
    """The key's share within the combinations of the other clear factors' values (its
    partial share once they are taken out), or None when it does not vary within any."""
    if not others:
        return None
    cols = [s.per_sample(k) for k in others]
    strata = ["\x1f".join(c[i] for c in cols) for i in range(len(s.values))]
    labels = s.per_sample(key)
    varied = set()
    for st in set(strata):
        idx = [i for i, x in enumerate(strata) if x == st]
        if 1 < len({labels[i] for i in idx}) < len({s.run_of[i] for i in idx}):
            varied.add(st)
    if not varied:
        return {"keys": others, "varied": False, "variance_share": None, "p_value": None,
                "strata": 0}
    sh = _pooled(s.values, labels, strata, varied, permutations, seed)
    return {"keys": others, "varied": True, "variance_share": sh.share, "p_value": sh.p_value,
            "strata": len(varied)}


def _pooled(values, labels, strata, varied, permutations: int, seed: int) -> stats.Share:
    """The share of `labels` within strata, over the strata where labels vary only (a
    stratum with one label has nothing to say and would only dilute the share)."""
    idx = [i for i, st in enumerate(strata) if st in varied]
    return stats.variance_share([values[i] for i in idx], [labels[i] for i in idx],
                                [strata[i] for i in idx], permutations, seed)


# ---------------------------------------------------------------- text
def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _p(x) -> str:
    return "p -" if x is None else f"p {x:.2g}"


def _names(keys: Sequence[str]) -> str:
    return keys[0] if len(keys) == 1 else ", ".join(keys[:-1]) + " and " + keys[-1]


def _combo(c: Dict[str, str]) -> str:
    return " with ".join(f"{k}={v}" for k, v in c.items())


def confounded_text(f: Dict[str, Any], noun: str = "runs") -> str:
    """'kernel and lustre change together here: the runs cannot tell them apart'."""
    return f"{_names(f['facts'])} change together here: the {noun} cannot tell them apart"


def _noun(doc: Dict[str, Any]) -> str:
    """What a sample's unit is called: runs, or the ranks of one run (explain_run.py)."""
    return "ranks" if doc.get("scope") == "ranks" else "runs"


def _head(doc: Dict[str, Any]) -> List[str]:
    from mpiwrite.answers.report import unit_text

    t = doc["total"]
    suffix = metric_info(doc["metric"]).suffix
    stat = f"(n={t['n']}, mean {_num(t['mean_' + suffix])}, sd {_num(t['std_' + suffix])})"
    if doc.get("scope") == "ranks":  # explain_run.py's document
        from mpiwrite.answers.targets import iterations_text

        its = doc["iterations"]
        return [f"explain: each rank's write {doc['metric_unit']} within run {doc['run_id']} "
                f"({doc['run_status']}): {doc['ranks']} ranks on {doc['nodes']} node(s) x "
                f"{len(its)} iteration(s) {stat}",
                f"samples: one per rank and iteration ({iterations_text(its)}; warm-up "
                f"{doc['warmup'] or 'none'} dropped)",
                f"share: of the variance between the ranks, between the key's groups (eta "
                f"squared); p: permutation test, {doc['permutations']} permutations, seed "
                f"{doc['seed']}"]
    return [f"explain: {doc['metric']} {doc['metric_unit']} over {doc['runs']} runs {stat}",
            f"samples: {unit_text(doc['unit'], doc['unit_requested'], doc['warmup'])}",
            f"share: of the variance, between the key's groups (eta squared); p: permutation "
            f"test, {doc['permutations']} permutations, seed {doc['seed']}"]


def _num(x, digits: int = 1) -> str:
    from mpiwrite.units import format_number

    return format_number(x, digits)


def _group_cells(g: Dict[str, Any], suffix: str, digits: int, noun: str) -> List[str]:
    mean, lo, hi = (g[f"{k}_{suffix}"] for k in ("mean", "ci_lo", "ci_hi"))
    half = "±?" if lo is None else f"±{_num((hi - lo) / 2, digits)}"
    return [" / ".join(g["values"].values()), str(g[noun]), f"{_num(mean, digits)} {half}"]


def _within_levels(w: Dict[str, Any], noun: str = "runs") -> List[str]:
    """One line per level of the second key: the first key's share there and its means."""
    parts = []
    for lv in w["levels"]:
        if lv["variance_share"] is None and len(lv["values"]) == 1:
            parts.append(f"{lv['level']}: one value ({lv['values'][0]})")
        elif lv["variance_share"] is None:
            parts.append(f"{lv['level']}: a value per {noun[:-1]}")
        else:
            items = list(lv["means"].items())
            if len(items) > MEANS_SHOWN:  # the lowest and highest, by mean
                items.sort(key=lambda kv: (kv[1] is None, kv[1] or 0.0))
                items = items[:3] + [(f"... {len(items) - 6} more ...", None)] + items[-3:]
            means = ", ".join(k if v is None else f"{k} {_num(v)}" for k, v in items)
            parts.append(f"{lv['level']}: {_pct(lv['variance_share'])} "
                         f"{_p(lv['p_value'])} ({means})")
    return parts


def format_explain(doc: Dict[str, Any], fmt: str = "table") -> str:
    """The `explain` answer as a table (text), markdown or the JSON document."""
    if fmt == "json":
        return contract.dumps(doc)
    if fmt not in ("table", "markdown"):
        raise ConfigError(f"--format: {fmt!r} is not one of table, markdown, json")
    md = fmt == "markdown"
    info = metric_info(doc["metric"])
    noun, one = _noun(doc), _noun(doc)[:-1]
    lines = [("- " if md else "") + ln for ln in _head(doc)]
    if doc.get("targets") is not None:
        from mpiwrite.answers.targets import format_targets

        t = doc["targets"]
        lines += [""] + format_targets(t["rows"], t["notes"], doc["iterations"], md)
    order = ("clear ones (p < 0.05) first, then by the share they explain"
             if doc.get("scope") == "ranks" else "by the share they explain")
    lines += ["", f"## factors, {order}" if md else f"factors, {order}:"]
    if len(doc["factors"]) and doc["total"]["n"] > 1 and not doc["total"][
            f"std_{info.suffix}"]:
        lines.append("the metric has the same value in every sample: there is nothing to "
                     "explain")
    if not doc["factors"]:
        lines.append(f"no factor: no key has two values or more over these {noun} without "
                     f"having one for every {one}")
        if doc["runs"] == 1 and noun == "runs":
            lines.append("one run: give its record file (explain RECORD.h5) to explain the "
                         "variation between its ranks")
    for i, f in enumerate(doc["factors"][:FACTORS_SHOWN], 1):
        given = f.get("given_others")
        extra = ""
        if given and given["varied"]:
            extra = (f"; given {', '.join(given['keys'])}: {_pct(given['variance_share'])} "
                     f"{_p(given['p_value'])}")
        name = _names(f["facts"]) + (" (confounded)" if f["confounded"] else "")
        also = [k for k in f["keys"] if k not in f["facts"]]
        head = (f"{i}. {name}: {_pct(f['variance_share'])} {_p(f['p_value'])}{extra}"
                + (f"  [also recorded as {', '.join(also)}]" if also else ""))
        lines += ["", f"### {head}"] if md else [head]
        if f.get("determines"):
            dec = f["determines"]
            lines.append(("" if md else "     ") + f"each {f['key']} has one "
                         f"{' and one '.join(dec)}: its share includes what "
                         f"{' and '.join(dec)} explain{'s' * (len(dec) == 1)}")
        if f.get("hidden"):
            lines.append(("" if md else "     ") + "hidden by bigger effects: small over all "
                         f"{noun}, clear once {', '.join(f['given_others']['keys'])} are "
                         "taken out")
        if f["confounded"]:
            lines.append(("" if md else "     ") + confounded_text(f, noun))
            if f["missing_combinations"]:
                miss = "; ".join(_combo(c) for c in f["missing_combinations"][:MISSING_SHOWN])
                lines.append(("" if md else "     ") + f"{noun} that would separate them: {miss}")
        groups = f["groups"]
        if len(groups) > GROUPS_SHOWN:  # the 5 lowest and 5 highest means
            groups = sorted(groups, key=lambda g: (g[f"mean_{info.suffix}"] is None,
                                                   g[f"mean_{info.suffix}"] or 0.0))
            groups = groups[:5] + [None] + groups[-5:]
        cells = [_group_cells(g, info.suffix, info.digits, noun) if g else
                 [f"... {len(f['groups']) - 10} more (all in --format json)", "", ""]
                 for g in groups]
        head_cells = [" / ".join(f["facts"]), noun, f"{info.header} ±{_conf(doc)}"]
        lines += _table(head_cells, cells, md, "     ")
    if len(doc["factors"]) > FACTORS_SHOWN:
        rest = doc["factors"][FACTORS_SHOWN:]
        lines.append(f"... {len(rest)} more, each at most {_pct(rest[0]['variance_share'])}: "
                     + ", ".join(r["key"] for r in rest[:20]) + (" ..." if len(rest) > 20
                                                                   else "")
                     + " (all in --format json)")
    shown = [w for w in doc["within"] if w["varied"]]
    if shown:
        lines += ["", "## within the levels of another" if md else
                  "within the levels of another (share, p, means):"]
        for w in shown:
            text = (f"{'/'.join(w['keys'])} within {'/'.join(w['within_keys'])}: "
                    f"{_pct(w['variance_share'])} {_p(w['p_value'])}")
            lines.append(("- " if md else "  ") + text)
            sub = _within_levels(w, noun) if len(w["levels"]) <= LEVELS_SHOWN else []
            if w["missing_combinations"]:
                sub.append(f"no {one} has: " + "; ".join(
                    _combo(c) for c in w["missing_combinations"][:MISSING_SHOWN]))
            lines += [("  - " if md else "     ") + x for x in sub]
    if doc["same_everywhere"]:
        same_map = doc["same_everywhere"]  # a node fact that restates a run key: said once
        items = [(k, v) for k, v in same_map.items()
                 if not ("." in k and same_map.get(k.rsplit(".", 1)[1]) == v)]
        same = ", ".join(f"{k}={v}" for k, v in items[:SAME_SHOWN])
        if len(items) > SAME_SHOWN:
            same += f", ... {len(items) - SAME_SHOWN} more in --format json"
        lines += ["", f"the same everywhere (cannot explain anything): {same}"]
    if doc["unique_per_run"]:
        lines += ["", f"unique per {one} (a value for every {one}: cannot be told from "
                  f"{one}-to-{one} noise): {', '.join(doc['unique_per_run'])}"]
    return "\n".join(printable(ln) if not md else _md_line(ln) for ln in lines)


def _conf(doc) -> str:
    return f"{doc['confidence'] * 100:g}%"


def _md_line(line: str) -> str:
    return printable(line)


def _table(head: List[str], body: List[List[str]], md: bool, indent: str) -> List[str]:
    if md:
        esc = [[c.replace("\\", "\\\\").replace("|", "\\|") for c in row]
               for row in [head] + body]
        return ["", "| " + " | ".join(esc[0]) + " |", "|" + "---|" * len(head)] + \
            ["| " + " | ".join(row) + " |" for row in esc[1:]]
    widths = [max(len(r[i]) for r in [head] + body) for i in range(len(head))]
    return [indent + "  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                               for i, (c, w) in enumerate(zip(row, widths))).rstrip()
            for row in [head] + body]
