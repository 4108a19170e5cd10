"""rows.py and the figures it feeds, without MPI: packing, tables, clocks, CPU, first-done."""

import numpy as np
import pytest

from mpiwrite.engines.posix import StreamResult
from mpiwrite.formats import summary
from mpiwrite.run import rows
from mpiwrite.vocab.status import Status


def _res(**kw):
    base = dict(path="f", t_open_start=0.0, t_write_start=0.1, t_write_end=1.0,
                t_fsync_end=1.1, t_close_end=1.2, bytes=100, blocks=1, fsyncs=1)
    base.update(kw)
    return StreamResult(**base)


def test_pack_row_and_rank_table_round_trip_onto_the_common_timeline():
    rows_ = np.stack([rows.pack_row(_res()), rows.pack_row(_res(bytes=50))])
    node_of = np.array([0, 1])
    offsets = np.array([[0.0, 0.0], [100.0, 0.001]])  # node 1's clock is 100 s behind
    ranks = rows.rank_table(0, rows_, node_of, offsets, origin=0.0)
    assert ranks["t_write_start"].tolist() == [0.1, 100.1]
    assert ranks["MB_per_s"] == pytest.approx([100 / 1.1 / 1e6, 50 / 1.1 / 1e6])
    assert ranks["clock_uncertainty_seconds"].tolist() == [0.0, 0.001]


def test_a_read_that_found_mismatches_packs_as_the_verify():
    from mpiwrite.engines.base import ReadResult
    from mpiwrite.vocab.pattern import Mismatch

    read = ReadResult(path="g", t_open_start=1.3, t_write_start=1.4, t_write_end=1.9,
                      t_fsync_end=1.9, t_close_end=2.0, bytes=100, blocks=1, mismatches=1,
                      first=Mismatch(64, "0x01", "0x00"))
    fields = dict(zip(rows.ROW_FIELDS, rows.pack_row(_res(), None, False, read=read,
                                                      read_source=1)))
    assert fields["verify_mismatches"] == 1 and np.isnan(fields["verify_seconds"])
    assert "mismatched" in rows.rank_error(0, 0, "h", _res(), None, read)["message"]


def test_a_failed_stream_has_no_end_times():
    res = _res()
    res.error_phase, res.error_errno = "write", 28
    row = rows.pack_row(res)
    fields = dict(zip(rows.ROW_FIELDS, row))
    assert fields["status"] == Status.FAILED and np.isnan(fields["t_close_end"])
    entry = rows.rank_error(2, 5, "h1", res)
    assert entry["rank"] == 5 and entry["host"] == "h1" and entry["errno"] == 28


def test_node_cpu_comes_from_the_leader_row_for_every_rank_of_the_node():
    r = [rows.pack_row(_res(), node_cpu=(0.5, 0.1)), rows.pack_row(_res()),
         rows.pack_row(_res(), node_cpu=(0.9, 0.0))]
    ranks = rows.rank_table(0, np.stack(r), np.array([0, 0, 1]), np.zeros((2, 2)), 0.0)
    assert ranks["node_cpu_busy"].tolist() == [0.5, 0.5, 0.9]


def test_cpu_fractions_from_two_proc_stat_lines():
    before = [100, 0, 50, 800, 50, 0, 0, 0]
    after = [200, 0, 100, 1000, 100, 0, 50, 0]  # +100 user, +50 sys, +200 idle, +50 io, +50 si
    busy, iowait = rows.cpu_fractions(before, after)
    assert busy == pytest.approx(200 / 450) and iowait == pytest.approx(50 / 450)
    assert np.isnan(rows.cpu_fractions(None, after)[0])
    assert np.isnan(rows.cpu_fractions(before, before)[0])


def test_clock_outliers_are_ranks_outside_the_window():
    r = np.stack([rows.pack_row(_res()), rows.pack_row(_res(t_write_start=5000.1,
                                                             t_close_end=5001.2,
                                                             t_open_start=5000.0))])
    ranks = rows.rank_table(0, r, np.array([0, 0]), np.zeros((1, 2)), 0.0)
    assert rows.clock_outliers(ranks, (-0.01, 1.3), 0.005).tolist() == [1]
    assert rows.clock_outliers(ranks[:1], (-0.01, 1.3), 0.005).tolist() == []


def _two_ranks():
    ranks = np.zeros(2, dtype=summary.RANK_DTYPE)
    ranks["rank"] = [0, 1]
    ranks["bytes"] = [100e6, 100e6]
    ranks["t_open_start"] = [-0.5, -0.5]
    ranks["t_write_start"] = [0.0, 0.0]
    ranks["t_close_end"] = [1.0, 2.0]
    ranks["node_cpu_busy"] = np.nan
    summary.fill_rates(ranks)
    return ranks


def test_first_done_from_durable_samples_is_a_step_not_a_line():
    ranks = _two_ranks()
    s = np.array([(0, 1, 0.5, 40e6, 0), (0, 1, 1.5, 90e6, 0)], dtype=summary.SAMPLE_DTYPE)
    row = summary.iteration_summary(ranks, s, first_done="durable")
    assert row["first_done_MB_per_s"] == pytest.approx(140.0)  # 100 MB + 40 known at t=1
    row = summary.iteration_summary(ranks, s, first_done="interpolate")
    assert row["first_done_MB_per_s"] == pytest.approx(165.0)  # 100 + 65 interpolated
    assert np.isnan(summary.iteration_summary(ranks, s, first_done="unknown")
                    ["first_done_MB_per_s"])
    late = np.array([(0, 1, 1.5, 90e6, 0)], dtype=summary.SAMPLE_DTYPE)  # nothing known by t=1
    assert np.isnan(summary.iteration_summary(ranks, late, first_done="durable")
                    ["first_done_MB_per_s"])


def test_ior_figure_includes_the_open():
    row = summary.iteration_summary(_two_ranks())
    assert row["aggregate_MB_per_s"] == pytest.approx(100.0)
    assert row["aggregate_with_open_MB_per_s"] == pytest.approx(200 / 2.5)


def test_statuses_are_written_once_and_keep_the_codes_records_store():
    """Records store these integers and strings: changing one would misread every record."""
    from mpiwrite.vocab.status import RunStatus, iteration_run_status

    assert [int(s) for s in Status] == [0, 1, 2, 3, 4, 5]
    assert [s.label for s in Status] == ["ok", "failed", "aborted", "interrupted", "missing",
                                         "clock"]
    assert Status.label_of(9) == "?" and Status.label_of(np.int32(5)) == "clock"
    assert [s.value for s in RunStatus] == ["running", "complete", "failed", "interrupted",
                                            "timeout", "unsettled"]
    assert RunStatus.COMPLETE == "complete" and f"{RunStatus.FAILED}" == "failed"
    assert [s.exit_code for s in RunStatus] == [1, 0, 1, 1, 1, 0]
    assert iteration_run_status(Status.CLOCK) is RunStatus.COMPLETE  # the run goes on
    assert iteration_run_status(Status.FAILED) is RunStatus.FAILED
    assert iteration_run_status(Status.INTERRUPTED) is RunStatus.INTERRUPTED


def test_the_row_names_the_latency_fields_the_record_has():
    """rows.py names the latency fields itself (formats/summary loads numpy, which ranks
    other than the node leaders never do): the same names, in the same order."""
    assert rows.LATENCY_RANK_FIELDS == summary.LATENCY_RANK_FIELDS
    assert rows.ROW_FIELDS[-len(rows.LATENCY_RANK_FIELDS):] == summary.LATENCY_RANK_FIELDS
