"""`explain`'s answer as text: a table or markdown (the JSON is the document itself).
The analysis is answers/explain.py; docs/explain.md describes both."""

from __future__ import annotations

from typing import Any, Dict, List, Sequence

from mpiwrite.answers.explain import (
    FACTORS_SHOWN,
    GROUPS_SHOWN,
    LEVELS_SHOWN,
    MEANS_SHOWN,
    MISSING_SHOWN,
    SAME_SHOWN,
)
from mpiwrite.answers.results import metric_info
from mpiwrite.errors import ConfigError
from mpiwrite.formats import contract
from mpiwrite.text import printable


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
                f"squared); {_test_words(doc)}"]
    return [f"explain: {doc['metric']} {doc['metric_unit']} over {doc['runs']} runs {stat}",
            f"samples: {unit_text(doc['unit'], doc['unit_requested'], doc['warmup'])}",
            "share: of the variance, between the key's groups (eta squared); "
            + _test_words(doc)]


def _test_words(doc: Dict[str, Any]) -> str:
    return (f"p: Welch's t-test for two levels (as compare), else a permutation test "
            f"({doc['permutations']} permutations, seed {doc['seed']}); corrected for the "
            f"{doc.get('keys_tried', 0)} keys tried (Holm)")


def _num(x, digits: int = 1) -> str:
    from mpiwrite.units import format_number

    return format_number(x, digits)


def _group_cells(g: Dict[str, Any], suffix: str, digits: int, noun: str) -> List[str]:
    """A group's count and mean with its interval: the geometric mean of a rate with the
    geometric mean's interval (from the log of the values: always positive; the scale of
    the factor's change), else the arithmetic mean with its own."""
    mean, lo, hi = (g.get(f"{k}_{suffix}") for k in ("gmean", "gmean_ci_lo", "gmean_ci_hi"))
    if mean is None:
        mean, lo, hi = (g.get(f"{k}_{suffix}") for k in ("mean", "ci_lo", "ci_hi"))
    span = "[?]" if lo is None else f"[{_num(lo, digits)}, {_num(hi, digits)}]"
    return [" / ".join(g["values"].values()), str(g[noun]), f"{_num(mean, digits)} {span}"]


def _welch_line(f: Dict[str, Any], noun: str) -> str:
    """A two-level factor's change as compare says it, and what the permutation test adds."""
    w = f["welch"]
    perm = (f"permutation p {f['p_permutation']:.2g}" if f["permutation_min_p"] <= 0.05
            else f"too few {noun} for a permutation test to reach 0.05 (its smallest p: "
            f"{f['permutation_min_p']:.2g})")
    what = "ratio of geometric means" if w["scale"] == "ratio" else "difference of means"
    return (f"{w['level']} vs {w['against']}: {w['change_pct']:+.1f}% "
            f"[{w['change_ci_lo_pct']:+.1f}, {w['change_ci_hi_pct']:+.1f}] ({what}; Welch p "
            f"{w['p_value']:.2g}, n {w['n'][0]} vs {w['n'][1]}; {perm})")


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
    from mpiwrite.answers import method

    first = method.explain_text(doc.get("methods") or [])  # the tools' ways, before all
    first = [("- " if fmt == "markdown" else "") + printable(ln) for ln in first]
    if doc.get("strata") is None:
        return "\n".join(first + [_format(doc, fmt)])
    md = fmt == "markdown"
    scale = "the log of the metric (a ratio)" if doc.get("scale") == "log" else "the metric"
    pooled = dict(doc, labels=[], outcomes=[])
    text = first + [_format(pooled, fmt, order=f"durability settings over all runs, on "
                            f"{scale}, by the share they explain (each stratum below is "
                            "explained on its own)")]
    for part in doc["strata"]:
        where = ", ".join(f"{k}={v}" for k, v in part["where"].items())
        title = f"within {where}: {part['runs']} runs, n={part['samples']}"
        text += ["", f"# {title}" if md else f"=== {title} ==="]
        text.append(_format(dict(doc, **part, strata=None), fmt, head=False))
    if doc.get("labels") or doc.get("outcomes"):
        text.append(_format(dict(doc, factors=[], same_everywhere={}, unique_per_run=[],
                                 within=[]), fmt, head=False, factors=False))
    return "\n".join(text)


def _format(doc: Dict[str, Any], fmt: str, order: str = "", head: bool = True,
            factors: bool = True) -> str:
    md = fmt == "markdown"
    info = metric_info(doc["metric"])
    noun, one = _noun(doc), _noun(doc)[:-1]
    lines = [("- " if md else "") + ln for ln in _head(doc)] if head else []
    if doc.get("targets") is not None:
        from mpiwrite.answers.targets import format_targets

        t = doc["targets"]
        lines += [""] + format_targets(t["rows"], t["notes"], doc["iterations"], md)
    order = order or ("clear ones (p < 0.05) first, then by the share they explain"
                      if doc.get("scope") == "ranks" else "by the share they explain")
    if factors:
        lines += ["", f"## factors, {order}" if md else f"factors, {order}:"]
    if len(doc["factors"]) and doc["total"]["n"] > 1 and not doc["total"][
            f"std_{info.suffix}"]:
        lines.append("the metric has the same value in every sample: there is nothing to "
                     "explain")
    if not doc["factors"] and factors:
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
        with_ = ", ".join(c["key"] for c in f.get("confounded_with") or ())
        name = _names(f["facts"]) + (
            f" (confounded; and with {with_})" if f["confounded"] and with_ else
            " (confounded)" if f["confounded"] else f" (confounded with {with_})" if with_
            else "")
        also = [k for k in f["keys"] if k not in f["facts"]]
        raw = f.get("p_value_uncorrected")
        unc = (f" (uncorrected {raw:.2g})" if raw is not None and f["p_value"] is not None
               and f"{raw:.2g}" != f"{f['p_value']:.2g}" else "")
        head = (f"{i}. {name}: {_pct(f['variance_share'])} {_p(f['p_value'])}{unc}{extra}"
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
        if f.get("confounded_with"):
            from mpiwrite.answers import confounding

            found = [dict(c, v=c["association"]) for c in f["confounded_with"]]
            inside = f.get("within_confounders")
            for ln in confounding.text(f["key"], found, inside, doc["confidence"], noun):
                lines.append(("" if md else "     ") + ln)
        if f.get("carryover"):
            from mpiwrite.answers import carryover

            lines.append(("" if md else "     ") + carryover.text(f["key"], f["carryover"],
                                                                  doc["confidence"]))
        if f.get("welch"):
            lines.append(("" if md else "     ") + ("over all runs, confounded: " if
                                                     f.get("confounded_with") else "")
                         + _welch_line(f, noun))
        geo = any(g and g.get(f"gmean_{info.suffix}") is not None for g in groups)
        head_cells = [" / ".join(f["facts"]), noun,
                      f"{info.header} {'geo. mean' if geo else 'mean'} [{_conf(doc)}]"]
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
    if doc.get("labels"):
        lines += ["", f"labels (name {noun}, not settings: never factors): "
                  f"{', '.join(doc['labels'])}"]
    if doc.get("unreplicated"):
        lines += ["", f"not factors, too few {noun} at each value (a value for most {noun} "
                  "explains any variance by construction): " + ", ".join(
                      f"{k} ({why})" for k, why in doc["unreplicated"].items())]
    if doc.get("outcomes"):
        lines += ["", f"not factors, outcomes (what the {noun} measured, e.g. the bytes of a "
                  f"time-limited run: never causes): {', '.join(doc['outcomes'])}"]
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
