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

from collections import Counter
from itertools import permutations as ordered_pairs
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from mpiwrite import stats
from mpiwrite.answers import carryover, confounding
from mpiwrite.answers.report import DURABILITY_KEYS, Sampling, no_figure_text, within_warmup
from mpiwrite.answers.results import metric_info, resolve_unit, sample_values
from mpiwrite.errors import ConfigError
from mpiwrite.formats import contract
from mpiwrite.text import printable
from mpiwrite.vocab import keys as runkinds
from mpiwrite.vocab.keys import COMMON as SUMMARY_KEYS

# What names a run, not a setting: never a factor (and not listed).
IDENTITY_KEYS = tuple(k for k, v in runkinds.KINDS.items() if v == runkinds.IDENTITY)
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
        self.keys_of = keys_of
        for r in runs:
            vals = sample_values([r], sampling.metric, unit, sampling.warmup)
            if not vals:
                continue
            self.run_of += [len(self.runs)] * len(vals)
            self.values += vals
            self.runs.append(r)
        names = set().union(*(keys_of(r) for r in self.runs)) if self.runs else set()
        # what a run measured (a time-limited run's bytes) is never its cause, and what only
        # names runs (a study's point, a job id) explains nothing: vocab/keys.py says which
        outcomes = set().union(*(runkinds.outcome_keys(keys_of(r)) for r in self.runs)) \
            if self.runs else set()
        self.outcomes = sorted(outcomes, key=_order)
        self.labels = sorted((k for k in names if runkinds.kind(k) == runkinds.LABEL
                              and k not in outcomes and not (k.startswith("tag.")
                                                             and k[4:] in names)), key=_order)
        self.keys: Dict[str, List[str]] = {
            k: [printable(keys_of(r).get(k, "-")) for r in self.runs]
            for k in sorted(names, key=_order) if k not in IDENTITY_KEYS
            and runkinds.kind(k) != runkinds.IDENTITY and k not in outcomes
            and runkinds.kind(k) != runkinds.LABEL}
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
    unit = resolve_unit(runs, sampling.unit, sampling.warmup)
    # durability settings are different questions, never pooled in one share: the runs are
    # explained within each combination of them (a stratum), and the settings themselves
    # are ranked over all runs on the ratio scale (the log of the rate)
    from mpiwrite.answers import method

    methods = method.between_tools(runs, keys_of, sampling.metric)  # read before the factors
    mixed = [dk for dk in DURABILITY_KEYS if len({str(keys_of(r).get(dk)) for r in runs}) > 1]
    if mixed:
        doc = _stratified(runs, keys_of, sampling, unit, mixed, permutations, seed)
        return dict(doc, methods=methods) if methods else doc
    s = Samples(runs, keys_of, sampling, unit)
    if not s.values:
        raise ConfigError(no_figure_text("PATHS", len(runs), sampling.metric, sampling.warmup,
                                         within_warmup(runs, sampling.metric, sampling.warmup)))
    doc = _header(sampling, unit, s, runs)
    doc.update(analyse(s, sampling.confidence, metric_info(sampling.metric).suffix,
                       permutations, seed))
    if methods:
        doc["methods"] = methods
    return contract.finite(doc)


def _header(sampling: Sampling, unit: str, s: Samples, runs) -> Dict[str, Any]:
    doc = contract.header("explain")
    doc.update(scope="runs", metric=sampling.metric,
               metric_unit=metric_info(sampling.metric).unit,
               higher_is_better=metric_info(sampling.metric).higher_is_better, unit=unit,
               unit_requested=sampling.unit, warmup=sampling.warmup,
               confidence=sampling.confidence, runs=len(s.runs), samples=len(s.values),
               runs_without_figure=len(runs) - len(s.runs))
    return doc


def _stratified(runs, keys_of, sampling: Sampling, unit: str, mixed: List[str],
                permutations: int, seed: int) -> Dict[str, Any]:
    """Runs that mix durability settings (`mixed`): those settings ranked as factors over
    all runs on the log of the metric (a share of the log rate, Welch's test on the logs
    for two levels), then a section per combination of them, each with its own analysis."""
    s = Samples(runs, keys_of, sampling, unit)
    if not s.values:
        raise ConfigError(no_figure_text("PATHS", len(runs), sampling.metric, sampling.warmup,
                                         within_warmup(runs, sampling.metric, sampling.warmup)))
    suffix = metric_info(sampling.metric).suffix
    doc = _header(sampling, unit, s, runs)
    ratio = stats.on_ratio_scale(s.values)
    pooled = Samples.__new__(Samples)  # the same runs, their durability keys only
    pooled.runs, pooled.run_of, pooled.raw = s.runs, s.run_of, s.values
    pooled.values = [float(np.log(v)) for v in s.values] if ratio else s.values
    pooled.keys = {k: s.keys[k] for k in mixed}
    pooled.context, pooled.keys_of = s, keys_of  # the other keys: what may confound them
    doc.update(analyse(pooled, sampling.confidence, suffix, permutations, seed,
                       pairs=False))
    doc.update(scale="log" if ratio else "values", stratified_by=mixed,
               labels=s.labels, outcomes=s.outcomes, strata=[])
    combos: Dict[tuple, list] = {}
    for r in s.runs:
        combos.setdefault(tuple(str(keys_of(r).get(k)) for k in mixed), []).append(r)
    for combo in sorted(combos, key=lambda c: [_num_key(v) for v in c]):
        sub = Samples(combos[combo], keys_of, sampling, unit)
        part = dict(where=dict(zip(mixed, combo)), runs=len(sub.runs),
                    samples=len(sub.values))
        part.update(analyse(sub, sampling.confidence, suffix, permutations, seed))
        doc["strata"].append(part)
    return contract.finite(doc)


def _num_key(v: str):
    """Sizes and numbers by value (64KiB before 1MiB), then text."""
    from mpiwrite.units import parse_size

    try:
        return (0, float(parse_size(v)), v)
    except (ValueError, TypeError):
        return (1, 0.0, v)


def analyse(s, conf: float, suffix: str, permutations: int = stats.PERMUTATIONS,
            seed: int = stats.SEED, clear_first: bool = False,
            pairs: bool = True) -> Dict[str, Any]:
    """What explain finds in samples `s` (Samples, or any object with its attributes): the
    document's test, total, factors, within, same_everywhere and unique_per_run.  Factors by
    share; with `clear_first`, those with p < ALPHA before the others (the ranks of a run:
    a key with a level per few samples, `rank`, has a large share by chance alone)."""
    n_runs = len(s.runs)
    same, unique, groups, unreplicated = {}, [], {}, {}
    for k, col in s.keys.items():
        nvals = len(set(col))
        repeated = sum(1 for c in Counter(col).values() if c >= 2)
        if nvals == 1:
            same[k] = col[0]
        elif nvals == n_runs:
            unique.append(k)
        elif repeated < 2 or nvals > n_runs / 2:
            # a key with (nearly) a value per run explains any variance by construction:
            # only a setting whose values each hold several runs is a factor
            unreplicated[k] = (f"{nvals} values over {n_runs} {s.count_key}, "
                               f"{repeated} of them with more than one")
        else:
            groups.setdefault(_partition(col), []).append(k)
    factors = []
    for keys in groups.values():
        factors.append(_factor(s, keys, conf, suffix, permutations, seed))
    # every key tried is one more chance of a small p by chance alone: each factor's p is
    # corrected for the number tried (Holm), and "clear" reads the corrected p
    raw = [f["p_value_uncorrected"] for f in factors]
    for f, p in zip(factors, stats.holm(raw)):
        f["p_value"] = p
    factors.sort(key=lambda f: (clear_first and not (f["p_value"] is not None
                                                     and f["p_value"] < ALPHA),
                                -f["variance_share"], _order(f["keys"][0])))
    # the factors whose effect is a headline (the top ones, and every clear one): what they
    # are confounded with, and their carry-over (checked for these only: 200 keys would be
    # 40,000 pairs a history)
    for f in [g for i, g in enumerate(factors) if i < TOP or (
            g["p_value"] is not None and g["p_value"] < ALPHA)]:
        _two_level_checks(s, f, conf)
    for f in factors:  # a host has one CPU model: what the host explains includes the CPU's
        col = s.keys[f["key"]]
        f["determines"] = [g["key"] for g in factors if g is not f
                           and len(set(zip(col, s.keys[g["key"]]))) == f["levels"]]
    flat = len(set(s.values)) == 1  # nothing varies: no factor can explain anything
    top = [] if flat or not pairs else factors[:TOP]
    within = [_within(s, a, b, permutations, seed) for a, b in ordered_pairs(top, 2)]
    clear = [f for f in factors if f["p_value"] is not None and f["p_value"] < ALPHA][:TOP]
    for f in top:
        others = [g["key"] for g in clear if g is not f]
        f["given_others"] = _given(s, f["key"], others, permutations, seed)
        g = f["given_others"]
        f["hidden"] = bool(g and g["varied"] and (f["p_value"] is None or f["p_value"] >= ALPHA)
                           and g["p_value"] is not None and g["p_value"] < ALPHA)
    return dict(test="welch/permutation", correction="holm",
                keys_tried=sum(p is not None for p in raw), permutations=permutations,
                seed=seed, total=contract.stat_block(_raw(s), conf, suffix),
                factors=factors, within=within, same_everywhere=same, unique_per_run=unique,
                unreplicated=unreplicated,
                labels=list(getattr(s, "labels", [])),
                outcomes=list(getattr(s, "outcomes", [])))


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
        vals = [v for v, lab in zip(_raw(s), labels) if lab == level]
        at = s.keys[main].index(level)
        groups.append(dict(values={k: s.keys[k][at] for k in facts},
                           **{s.count_key: s.keys[main].count(level)},
                           **contract.stat_block(vals, conf, suffix)))
    missing = []
    for other in [k for k in facts if k != main]:  # what would separate main from each
        pairs = set(zip(s.keys[main], s.keys[other]))
        missing += [{main: a, other: b} for a in _levels(s.keys[main])
                    for b in _levels(s.keys[other]) if (a, b) not in pairs]
    perm_p = None if share.p_value != share.p_value else share.p_value
    out = dict(keys=keys, key=main, facts=facts, aliases=aliases, confounded=len(facts) > 1,
               levels=len(groups), variance_share=share.share, p_value=perm_p,
               p_value_uncorrected=perm_p, test="permutation", p_permutation=perm_p,
               permutation_min_p=stats.min_permutation_p([g["n"] for g in groups]),
               groups=groups, missing_combinations=missing[:MISSING_KEPT])
    if len(groups) == 2:  # two levels: the test compare and study report make (one verdict)
        lv = _levels(s.keys[main])
        a, b = ([v for v, lab in zip(_raw(s), labels) if lab == x] for x in lv)
        c = stats.compare(a, b, conf)
        if c.p_value == c.p_value and c.p_value > 0:
            out.update(test="welch", p_value=c.p_value, p_value_uncorrected=c.p_value,
                       welch=dict(against=lv[0], level=lv[1], change_pct=c.pct,
                                  change_ci_lo_pct=c.pct_lo, change_ci_hi_pct=c.pct_hi,
                                  p_value=c.p_value, df=c.df, n=[c.a.n, c.b.n],
                                  scale=c.scale))
    return out


def _two_level_checks(s, f: Dict[str, Any], conf: float) -> None:
    """What a two-level factor's headline needs said beside it: the keys it is confounded
    with (and its effect within them), and its carry-over where the runs are a study's."""
    if f["levels"] != 2:
        return
    main = f["key"]
    lv = _levels(s.keys[main])
    f.update(_confounded(s, f["keys"], main, s.per_sample(main), lv, conf))
    carry = _carryover(s, main, lv, conf)
    if carry is not None:
        f["carryover"] = carry


def _confounded(s, keys: List[str], main: str, labels: List[str], lv: List[str],
                conf: float) -> Dict[str, Any]:
    """The other keys a two-level factor's levels also differ in (answers/confounding.py),
    and its effect within their values where the runs hold both levels there."""
    ctx = getattr(s, "context", s)
    n = len(ctx.keys[main]) if main in ctx.keys else len(s.keys[main])
    by_split: Dict[tuple, str] = {}  # keys that split the runs alike (fs.fstype, fstype;
    for k in sorted(ctx.keys, key=_order):  # kernel, lustre): said once, by the shortest
        col = ctx.keys[k]
        if k in keys or not 2 <= len(set(col)) <= max(2, n // 2):
            continue
        split = _partition(col)
        if split not in by_split or sum(map(len, col)) < sum(map(len, ctx.keys[by_split[split]])):
            by_split[split] = k
    cands = {k: ctx.keys[k] for k in sorted(by_split.values(), key=_order)}
    found = confounding.confounders(s.keys[main], cands)
    if not found:
        return {}
    strat = confounding.strata_keys(found, s.keys[main], cands)
    strata = [" / ".join(ctx.keys[k][u] for k in strat) for u in s.run_of]
    inside = confounding.within(_raw(s), labels, strata, lv[0], lv[1], conf)
    return {"confounded_with": [{"key": c["key"], "association": c["v"], "split": c["split"]}
                                for c in found],
            "within_confounders": dict(inside, keys=strat) if inside else None}


def _carryover(s, main: str, lv: List[str], conf: float) -> Optional[Dict[str, Any]]:
    """A two-level factor's carry-over where the runs are a study's with their order
    (answers/carryover.py): each run's own level, the previous run's, one value a run."""
    runs = list(s.runs)
    keys_of = getattr(s, "keys_of", None)
    if keys_of is None or not runs or not all(hasattr(r, "tags") for r in runs) or not any(
            r.tags().get("study_prev_key") for r in runs):
        return None  # not a study's runs with their order (or a run's ranks)
    before = carryover.predecessors(runs, keys_of)
    own = s.keys[main]
    prev = []
    for b in before:
        if b is None:
            prev.append(None)
        else:
            level = printable(str(b.get(main, "")))
            prev.append(level if level in lv else carryover.OTHER)
    sums: Dict[int, List[float]] = {}
    for v, u in zip(_raw(s), s.run_of):
        sums.setdefault(u, []).append(v)
    vals = [float(np.mean(sums[i])) for i in range(len(runs))]
    randomized = all(r.tags().get("study_order") in ("balanced", "random") for r in runs)
    found = carryover.two_levels(vals, own, prev, lv, carryover.blocks_of(runs),
                                 confidence=conf, randomized=randomized)
    return carryover.as_json(found)


def _raw(s) -> List[float]:
    """The metric's own values (`values` may be their logs: _stratified's pooled ranking)."""
    return getattr(s, "raw", s.values)


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
        p = sh.p_value if sh else None
        if sh and len(present) == 2:  # two values here: compare's Welch test, one verdict
            c = stats.compare(*([v for v, lab in zip(vals, labs) if lab == x] for x in present))
            p = c.p_value if c.p_value == c.p_value and c.p_value > 0 else p
        levels.append({"level": level, s.count_key: nruns,
                       "values": present, "means": means,
                       "variance_share": sh.share if sh else None,
                       "p_value": p, "p_permutation": sh.p_value if sh else None})
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
            "p_value": _pooled_p(pooled, levels), "levels": levels,
            "missing_combinations": missing[:MISSING_KEPT]}


def _pooled_p(pooled, levels) -> Optional[float]:
    """The pooled p; where a single level varies, that level's own (Welch's for two values:
    the same question as the level's line, one answer)."""
    if pooled is None:
        return None
    varied = [lv for lv in levels if lv["variance_share"] is not None]
    return varied[0]["p_value"] if len(varied) == 1 else pooled.p_value


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
    p = sh.p_value
    if len(varied) == 1:  # one stratum, two values: compare's Welch test there
        idx = [i for i, x in enumerate(strata) if x in varied]
        present = _levels([labels[i] for i in idx])
        if len(present) == 2:
            c = stats.compare(*([s.values[i] for i in idx if labels[i] == x] for x in present))
            p = c.p_value if c.p_value == c.p_value and c.p_value > 0 else p
    return {"keys": others, "varied": True, "variance_share": sh.share, "p_value": p,
            "strata": len(varied)}


def _pooled(values, labels, strata, varied, permutations: int, seed: int) -> stats.Share:
    """The share of `labels` within strata, over the strata where labels vary only (a
    stratum with one label has nothing to say and would only dilute the share)."""
    idx = [i for i, st in enumerate(strata) if st in varied]
    return stats.variance_share([values[i] for i in idx], [labels[i] for i in idx],
                                [strata[i] for i in idx], permutations, seed)
