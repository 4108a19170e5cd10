"""A run you can watch: the live view per node, stalls named as they happen, a
hung filesystem client named at the time-out.  docs/measurement.md, "Watching a run"."""

import fcntl
import os
import re
import shutil
import signal
import struct
import subprocess
import termios
import threading
import time

import pytest
from common import (
    MPIEXEC,
    MPIWRITE,
    clean_env,
    cli,
    kill_group,
    mpirun,
    needs_root,
    only_record,
    records_in,
)

from mpiwrite.run import live

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _report(node, nbytes, ranks, done=0, stalled=()):
    return {"n": node, "b": nbytes, "d": done, "k": ranks, "slow": [node * ranks, 1e6],
            "ns": len(stalled), "st": [list(s) for s in stalled], "w": None}


def test_a_thousand_nodes_fold_into_one_screen():
    hosts = [f"node{i:04d}" for i in range(1000)]
    node_of = [i // 4 for i in range(4000)]
    board = live.Board(hosts, node_of, size=2**30, time_limit=None, t0=0.0)
    for n in range(1000):
        board.add(_report(n, 4 * 2**20 * (1 + n % 50), 4), 5.0)
    new = board.add(_report(617, 4 * 2**20, 4, stalled=[(2469, 12.0, "D", "request_wait_answer")]),
                    10.0)
    assert new == [[2469, 12.0, "D", "request_wait_answer"]]
    for n in range(1000):
        if n != 617:
            board.add(_report(n, 8 * 2**20 * (1 + n % 50), 4), 10.0)
    lines = live.render(board, 10.0, width=120, height=40)
    assert len(lines) <= 40 and all(len(ln) <= 120 for ln in lines)
    assert lines[1].startswith("node0617") and "STALLED rank 2469" in lines[1]
    assert "request_wait_answer" in lines[1]
    folded = [ln for ln in lines if ln.startswith("...")]
    assert len(folded) == 1 and "more nodes" in folded[0], lines
    assert lines[-2].startswith("all 1000 nodes") and "4000" in lines[-2]
    assert "nan" not in " ".join(lines).lower()
    assert board.missing()[:4] == [0, 1, 2, 3] and len(board.missing()) == 4000
    text = live.line(board, 10.0)
    assert "written" in text and "1 stalled" in text, text


def test_a_stall_that_ends_is_named_again_when_it_comes_back():
    board = live.Board(["a", "b"], [0, 1], size=None, time_limit=10.0, t0=0.0)
    stall = [(1, 3.0, "T", "do_signal_stop")]
    assert board.add(_report(1, 100, 1, stalled=stall), 4.0)
    assert not board.add(_report(1, 100, 1, stalled=stall), 5.0)
    assert not board.add(_report(1, 200, 1), 6.0)
    assert board.add(_report(1, 200, 1, stalled=stall), 9.0)
    assert "eta 1.00s" in live.render(board, 9.0)[-2]


def test_a_node_whose_leader_is_stopped_is_named_silent():
    board = live.Board(["a", "b"], [0, 1, 1], size=2**20, time_limit=None, t0=0.0)
    board.add(_report(0, 100, 1), 1.0)
    board.add(_report(1, 100, 2), 1.0)
    board.add(_report(0, 200, 1), 2.0)
    assert board.newly_silent(2.4, 1.5) == []
    assert board.newly_silent(2.6, 1.5) == [1]
    assert board.newly_silent(3.0, 1.5) == []  # named once
    assert "no report for 2s" in live.render(board, 3.0, silent_after=1.5)[2]


def _on_a_terminal(cmd, cwd, env, rows=40, cols=120):
    """Start cmd with a pseudo-terminal as its output; returns (proc, chunks [(t, text)])."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=slave,
                            stderr=slave, start_new_session=True)
    os.close(slave)
    chunks = []

    def read():
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:
                break
            if not data:
                break
            chunks.append((time.monotonic(), data.decode(errors="replace")))
        os.close(master)

    threading.Thread(target=read, daemon=True).start()
    return proc, chunks


def _pids_of(cwd, host_env, timeout=30):
    """{world rank: pid} of the ranks running in cwd, with MPIWRITE_HOSTNAME per rank."""
    from common import rank_pids

    return rank_pids(cwd, host_env, timeout)


@pytest.mark.mpi
@pytest.mark.timeout(120)
def test_live_view_on_a_terminal_marks_the_stopped_host(tmp_path):
    """Three emulated hosts on a pseudo-terminal; host c's rank is SIGSTOPped: one row per
    host, c marked, the stall named within --stall + one interval, the run ended at
    --timeout naming it, and nothing left running."""
    if MPIEXEC is None:
        pytest.skip("no mpiexec")
    args = [MPIWRITE, "run", "d", "-s", "300M", "-b", "64k", "--progress-interval", "0.5",
            "--stall", "1.5", "--timeout", "9", "--results", "r"]
    cmd = [MPIEXEC]
    for host, n in (("a", 1), ("b", 1), ("c", 2)):  # rank 3: c's, not its leader
        cmd += ["-n", str(n), "-env", "MPIWRITE_HOSTNAME", host, *args] + ([":"] if host != "c"
                                                                           else [])
    proc, chunks = _on_a_terminal(cmd, tmp_path, clean_env({"MPIWRITE_GRACE": "3"}))
    pids = {}
    try:
        from common import rank_pids, wait_for_bytes

        pids = rank_pids(tmp_path, 4)
        wait_for_bytes(tmp_path / "d", 4 * 2**20, timeout=40)
        os.kill(pids[3], signal.SIGSTOP)
        stopped = time.monotonic()
        proc.wait(timeout=60)
        ended = time.monotonic()
    finally:
        for pid in pids.values():
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        kill_group(proc)
    time.sleep(0.2)
    text = "".join(c for _, c in chunks)
    plain = ANSI.sub("", text)
    assert proc.returncode == 1, plain[-3000:]
    named = [t for t, c in chunks if "rank 3 on c stalled" in c]
    assert named, plain[-3000:]
    assert named[0] - stopped < 1.5 + 0.5 + 1.5, named[0] - stopped  # + a loaded machine
    assert "state T (stopped) in do_signal_stop" in plain, plain[-3000:]
    assert "\x1b[" in text  # redrawn in place
    rows = [ln for ln in plain.splitlines() if re.match(r"^[abc] +[12] ", ln)]
    assert {ln[0] for ln in rows} == {"a", "b", "c"}, plain[-3000:]
    assert any(ln.startswith("c ") and "STALLED rank 3" in ln for ln in rows), rows[-6:]
    assert not any(ln.startswith(("a ", "b ")) and "STALLED" in ln for ln in rows)
    assert "timed out" in plain and "rank 3 on c" in plain
    assert ended - stopped < 9 + 3 + 10
    rec = only_record(tmp_path / "r")
    assert rec.status == "timeout"
    phases = {(e["phase"], e["rank"]) for e in rec.errors}
    assert ("stall", 3) in phases and ("timeout", 3) in phases, rec.errors
    stall = next(e for e in rec.errors if e["phase"] == "stall")
    assert stall["host"] == "c" and stall["state"] == "T" and stall["t"] > 0
    shown = cli(["show", records_in(tmp_path / "r")[0]], cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "nan" not in shown.stdout.lower(), shown.stdout  # a timed-out run: '-', and why
    assert "clock offset - (not measured" in shown.stdout


@pytest.mark.mpi
@pytest.mark.slow
@needs_root
@pytest.mark.timeout(180)
def test_a_writer_held_by_a_stopped_fuse_daemon_is_named_in_d_state(tmp_path):
    """bindfs (FUSE) over a folder; its daemon SIGSTOPped, so the writers wait in the
    kernel (a FUSE wait channel): the stall names that, the time-out says the filesystem
    client is hung, and the command ends (the daemon is freed at the end)."""
    if shutil.which("bindfs") is None or MPIEXEC is None:
        pytest.skip("needs bindfs (apt-get install bindfs) and mpiexec")
    under, mnt = tmp_path / "under", tmp_path / "mnt"
    under.mkdir()
    mnt.mkdir()
    subprocess.run(["bindfs", "--no-allow-other", str(under), str(mnt)], check=True)
    daemon = None
    proc = None
    try:
        out = subprocess.run(["pgrep", "-f", f"bindfs --no-allow-other {under}"],
                             capture_output=True, text=True).stdout.split()
        daemon = int(out[0])
        cmd = [MPIEXEC, "-n", "2", MPIWRITE, "run", str(mnt / "d"), "-s", "1G", "-b", "64k",
               "--progress-interval", "0.5", "--stall", "1.5", "--timeout", "8",
               "--results", "r", "--no-live"]
        proc = subprocess.Popen(cmd, cwd=tmp_path, env=clean_env({"MPIWRITE_GRACE": "3"}),
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        from common import wait_for_bytes

        wait_for_bytes(under / "d", 2**20, timeout=40)
        os.kill(daemon, signal.SIGSTOP)
        try:
            out, _ = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.kill(daemon, signal.SIGCONT)
            out, _ = proc.communicate(timeout=30)
            raise AssertionError(f"hung until the daemon was freed:\n{out[-3000:]}") from None
    finally:
        if daemon is not None:
            os.kill(daemon, signal.SIGCONT)
        if proc is not None:
            kill_group(proc)
        subprocess.run(["umount", "-l", str(mnt)], check=False)
    assert proc.returncode == 1, out[-3000:]
    # FUSE waits interruptibly (S) for a request its daemon has not read, killably (D) once
    # a signal came or the daemon took it: either way in request_wait_answer
    assert re.search(r"rank \d on \S+ stalled: .*state [SD] .*in request_wait_answer", out), \
        out[-3000:]
    assert "the filesystem client is hung, not mpiwrite" in out, out[-3000:]
    rec = only_record(tmp_path / "r")
    assert rec.status == "timeout"
    assert any(e["phase"] == "stall" and e.get("wchan") == "request_wait_answer"
               for e in rec.errors)
    timeouts = [e for e in rec.errors if e["phase"] == "timeout"]
    assert {e["rank"] for e in timeouts} == {0, 1}, timeouts
    assert "request_wait_answer" in rec.attrs["error"]


@pytest.mark.mpi
@pytest.mark.timeout(120)
def test_the_progress_streams_as_json_lines_to_a_file_or_standard_output(tmp_path):
    """--live-jsonl: one JSON object a progress interval, each line valid alone, for a
    dashboard (elbencho's --livecsv): to a new file, or to standard output with the console's
    lines on standard error; the times on the record's common timeline."""
    import json

    out = mpirun(2, ["run", str(tmp_path / "d"), "-t", "1.5", "-b", "64k", "--fsync-every",
                     "16", "--progress-interval", "0.2", "--live-jsonl",
                     str(tmp_path / "live.jsonl"), "--results", str(tmp_path / "r")],
                 cwd=str(tmp_path))
    assert out.returncode == 0, out.stderr
    lines = (tmp_path / "live.jsonl").read_text().splitlines()
    docs = [json.loads(ln) for ln in lines]  # every line whole and valid
    assert len(docs) >= 4, lines
    ts = [d["t"] for d in docs]
    assert ts == sorted(ts) and all(d["phase"] == "write" and d["ranks"] == 2 for d in docs)
    assert [d["bytes"] for d in docs] == sorted(d["bytes"] for d in docs) and docs[-1]["bytes"]
    assert all(len(d["nodes"]) == 1 and d["nodes"][0]["ranks"] == 2 for d in docs)
    assert any(d["MB_per_s_now"] for d in docs) and "record" in out.stdout  # the console
    assert docs[-1]["ranks_done"] == 2 and docs[-1]["fraction"] == 1.0  # the phase's end
    # a phase shorter than one interval still says its end, once
    out = mpirun(2, ["run", str(tmp_path / "d"), "-s", "1M", "--progress-interval", "5",
                     "--live-jsonl", str(tmp_path / "short.jsonl"), "--no-record"],
                 cwd=str(tmp_path))
    assert out.returncode == 0, out.stderr
    (only,) = [json.loads(ln) for ln in (tmp_path / "short.jsonl").read_text().splitlines()]
    assert only["ranks_done"] == 2 and only["bytes"] == 2 * 2**20, only
    # to standard output: only JSON there, the console on standard error
    out = mpirun(2, ["run", str(tmp_path / "d"), "-t", "1", "-b", "64k", "--progress-interval",
                     "0.2", "--live-jsonl", "-", "--results", str(tmp_path / "r")],
                 cwd=str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert [json.loads(ln)["iteration"] for ln in out.stdout.splitlines()] \
        and "record" in out.stderr
    # refused before any data: an existing file, and both streams on standard output
    for args, says in ((["--live-jsonl", str(tmp_path / "live.jsonl")], "cannot create"),
                       (["--live-jsonl", "-", "--json", "-"], "would share standard output"),
                       (["--live-jsonl", "x", "--progress-interval", "0"], "needs progress")):
        got = cli(["run", str(tmp_path / "e"), "-s", "1M", "--no-record"] + args,
                  cwd=str(tmp_path))  # rank 0's checks: one process says as much as two
        assert got.returncode == 2 and says in got.stderr, got.stderr
        assert not (tmp_path / "e").exists() or not os.listdir(tmp_path / "e")
