"""--steady's detection (formats/steady.py) on rates whose shape is known: one rank whose
samples follow a chosen rate curve, on a 0.5 s step."""

import numpy as np
import pytest

from mpiwrite.formats import steady
from mpiwrite.formats.summary import RANK_DTYPE, SAMPLE_DTYPE

STEP = 0.5


def _iteration(rate_of_t, seconds: float):
    """One rank writing at rate_of_t(t) MB/s for `seconds`, sampled every STEP."""
    t = np.arange(0, seconds + 1e-9, STEP / 4)
    cum = np.concatenate([[0.0], np.cumsum(rate_of_t(t[:-1]) * np.diff(t))]) * 1e6
    ranks = np.zeros(1, RANK_DTYPE)
    ranks["t_write_start"], ranks["bytes"] = 0.0, int(cum[-1])
    ranks["t_write_end"] = ranks["t_close_end"] = t[-1]
    samples = np.zeros(len(t) - 2, SAMPLE_DTYPE)
    samples["t"], samples["bytes"] = t[1:-1], cum[1:-1].astype(np.int64)
    return ranks, samples


def test_a_constant_rate_is_steady_at_the_first_window():
    ranks, samples = _iteration(lambda t: np.full_like(t, 500.0), 20)
    got = steady.detect(steady.parse("bw_slope:0.5%:4s"), ranks, samples, STEP)
    assert got["steady"] and got["at_seconds"] == pytest.approx(4.0)
    assert got["rate_MB_per_s"] == pytest.approx(500.0, rel=1e-3)


def test_a_rate_that_climbs_then_holds_is_steady_once_a_window_is_flat():
    # climbs from 100 to 500 MB/s over the first 10 s, then holds
    ranks, samples = _iteration(lambda t: np.minimum(100 + 40 * t, 500.0), 30)
    got = steady.detect(steady.parse("bw_slope:0.5:4s"), ranks, samples, STEP)
    assert got["steady"] and 10.0 < got["at_seconds"] <= 14.5
    assert got["rate_MB_per_s"] == pytest.approx(500.0, rel=0.01)
    within = steady.detect(steady.parse("bw:2%:4s"), ranks, samples, STEP)
    assert within["steady"] and 10.0 < within["at_seconds"] <= 14.5


def test_a_rate_that_keeps_climbing_is_never_steady_and_says_its_best_window():
    ranks, samples = _iteration(lambda t: 100 + 20 * t, 20)
    got = steady.detect(steady.parse("bw_slope:1%:4s"), ranks, samples, STEP)
    assert not got["steady"] and got["at_seconds"] is None and got["windows"] > 1
    # the best window is the last: a slope of 20 MB/s per s over a mean near 460
    assert got["figure_pct"] == pytest.approx(20 / 460 * 100, rel=0.05)
    assert steady.text(got).startswith("never steady: the smallest bw_slope")


def test_an_iteration_shorter_than_one_window_says_so():
    ranks, samples = _iteration(lambda t: np.full_like(t, 500.0), 2)
    got = steady.detect(steady.parse("bw:5%:10s"), ranks, samples, STEP)
    assert not got["steady"] and got["windows"] == 0
    assert "shorter than one 10s window" in steady.text(got)


@pytest.mark.parametrize("bad", ["bw_slope", "slope:1%", "bw:0%", "bw:150", "bw:1%:0s",
                                 "bw:1%:soon", "bw:-1"])
def test_a_criterion_that_is_not_fios_is_refused(bad):
    with pytest.raises(ValueError):
        steady.parse(bad)


def test_a_rank_whose_ramp_ended_with_its_last_write_makes_the_run_not_valid():
    from mpiwrite.formats import validity
    from mpiwrite.records.model import RunRecord

    ranks = np.zeros(2, RANK_DTYPE)
    ranks["rank"] = [0, 1]
    ranks["bytes"] = ranks["ramp_bytes"] = [128 << 20, 128 << 20]
    ranks["ramp_bytes"][1] = 64 << 20
    ranks["t_write_start"], ranks["t_ramp"], ranks["t_close_end"] = 0.0, 0.5, 1.0
    rec = RunRecord(attrs={"status": "complete", "params": {"ramp": 0.1}}, ranks=ranks)
    got = validity.assess(rec)
    assert not got["valid"] and got["reasons"] == [
        "rank(s) 0 wrote nothing after the 0.1s ramp in iteration 0 (its end came with the "
        "last write: give more --size or --time)"]


def test_a_stretch_no_sample_saw_is_no_window_however_flat_its_line():
    """Between two samples far apart (a writer held in a ramp's fsync) the rate is a straight
    line, which meets any slope: no window over it counts; a window of real samples after it
    still can."""
    # a rate that keeps climbing: steady nowhere, but straight across the unseen 2 s to 8 s
    ranks, samples = _iteration(lambda t: 100 + 20 * t, 20)
    held = samples[(samples["t"] < 2) | (samples["t"] > 8)]
    got = steady.detect(steady.parse("bw_slope:0.0001%:3s"), ranks, held, STEP)
    assert not got["steady"] and got["unobserved"] > 0, got
    assert "window(s) left out: a writer went more than 2 samples without one" in \
        steady.text(got)
    # a rate that holds from 6 s: steady from real samples after the gap, never inside it
    ranks, samples = _iteration(lambda t: np.where(t < 6, 100 + 80 * t, 500.0), 20)
    held = samples[(samples["t"] < 2) | (samples["t"] > 8)]
    seen = steady.detect(steady.parse("bw_slope:0.5%:3s"), ranks, held, STEP)
    assert seen["steady"] and seen["at_seconds"] > 8 + 3, seen
    assert steady.detect(steady.parse("bw_slope:0.5%:3s"), ranks, samples, STEP)[
        "at_seconds"] <= 9.5
