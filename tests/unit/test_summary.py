"""The figures against straightforward reference implementations."""

import numpy as np
import pytest

from mpiwrite.formats import summary


def _ranks(n, nodes, rng, unfinished=()):
    r = np.zeros(n, dtype=summary.RANK_DTYPE)
    r["rank"] = np.arange(n)
    r["node"] = np.sort(rng.integers(0, nodes, n))  # uneven ranks per node
    r["t_write_start"] = rng.uniform(0, 0.1, n)
    r["t_close_end"] = r["t_write_start"] + rng.uniform(1, 3, n)
    r["bytes"] = rng.integers(1, 1000, n) * 2**20
    for i in unfinished:
        r["t_close_end"][i] = np.nan
    summary.fill_rates(r)
    return r


def _samples(r, rng, empty=()):
    rows = []
    for row in r:
        if row["rank"] in empty or not np.isfinite(row["t_close_end"]):
            continue
        k = rng.integers(1, 6)
        ts = np.sort(rng.uniform(row["t_write_start"], row["t_close_end"], k))
        bs = np.sort(rng.integers(0, row["bytes"], k))
        for t, b in zip(ts, bs):
            rows.append((0, row["rank"], t, b, 0))
    return np.array(rows, dtype=summary.SAMPLE_DTYPE)


def _bytes_at_reference(t, samples, ranks):
    total = 0.0
    for row in ranks:
        if not np.isfinite(row["t_write_start"]) or not np.isfinite(row["t_close_end"]):
            continue
        if t >= row["t_close_end"]:
            total += row["bytes"]
            continue
        mine = samples[samples["rank"] == row["rank"]]
        ts = [row["t_write_start"], *mine["t"], row["t_close_end"]]
        bs = [0, *mine["bytes"], row["bytes"]]
        total += np.interp(t, ts, bs) if t > row["t_write_start"] else 0
    return total


@pytest.mark.parametrize("n,nodes", [(1, 1), (5, 2), (64, 7), (300, 16)])
def test_bytes_at_matches_reference(n, nodes):
    rng = np.random.default_rng(n)
    r = _ranks(n, nodes, rng, unfinished=(1,) if n > 3 else ())
    s = _samples(r, rng, empty=(0, 2))
    for t in (-1.0, 0.05, 0.7, 1.5, 2.2, 10.0):
        assert summary.bytes_at(t, s, r) == pytest.approx(_bytes_at_reference(t, s, r))
    assert summary.bytes_at(1.0, None, r) == pytest.approx(
        _bytes_at_reference(1.0, np.zeros(0, summary.SAMPLE_DTYPE), r))


@pytest.mark.parametrize("n,nodes", [(1, 1), (7, 3), (500, 40)])
def test_node_totals_match_reference(n, nodes):
    rng = np.random.default_rng(n)
    r = _ranks(n, nodes, rng, unfinished=(3,) if n > 3 else ())
    got = summary.node_totals(r)
    assert list(got["node"]) == sorted(set(r["node"]))
    for row in got:
        sel = r[r["node"] == row["node"]]
        assert row["ranks"] == len(sel) and row["bytes"] == sel["bytes"].sum()
        if np.isfinite(sel["t_close_end"]).all():
            span = sel["t_close_end"].max() - sel["t_write_start"].min()
            assert row["MB_per_s"] == pytest.approx(sel["bytes"].sum() / span / 1e6)
        else:
            assert np.isnan(row["MB_per_s"])
        assert row["slowest_rank_MB_per_s"] == pytest.approx(np.nanmin(sel["MB_per_s"]))


def test_iteration_summary_known_figures():
    r = np.zeros(2, dtype=summary.RANK_DTYPE)
    r["rank"] = [0, 1]
    r["t_write_start"] = [0.0, 0.0]
    r["t_close_end"] = [1.0, 2.0]
    r["bytes"] = [100e6, 100e6]
    summary.fill_rates(r)
    s = np.array([(0, 1, 1.0, 50e6, 0)], dtype=summary.SAMPLE_DTYPE)  # rank 1 halfway at t=1
    row = summary.iteration_summary(r, s)
    assert row["aggregate_MB_per_s"] == pytest.approx(100.0)  # 200 MB in 2 s
    assert row["first_done_MB_per_s"] == pytest.approx(150.0)  # 150 MB by t=1
    assert row["tail_seconds"] == pytest.approx(1.0)
    assert row["slowest_rank"] == 1 and row["fastest_rank"] == 0
    assert row["rank_std_MB_per_s"] == pytest.approx(np.std([100, 50], ddof=1))
