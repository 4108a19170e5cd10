"""What kind of thing each run key is, written once.

A run's keys (formats/runkeys.py: built-in keys, node facts, tags) are not all settings.  The
answers that look for causes (`explain`'s factors, `compare`'s "also different") read this
table instead of keeping lists of names of their own:

- `setting`: chosen before the run, may change the figure (nodes, fsync, a tuning tag);
- `durability`: a setting that decides what the figure means (report never pools them);
- `fact`: what the nodes were (kernel, client version, checksums); may change the figure;
- `outcome`: what the run measured or what follows from it (bytes written, durations, rates);
  never a cause.  `size` is an outcome in a time-limited run (the bytes are the rate times
  the time) and a setting otherwise: `outcome_keys` decides per run;
- `label`: names a run or a group of runs (run and job ids, a study's point, repeat, hash);
  explains nothing, however the runs are split by it;
- `identity`: a run's own name and state (never listed).

Keys not in the table are settings or facts (tags, dotted node facts), unless their name says
they are labels or outcomes (LABEL_NAMES, OUTCOME_WORDS).
"""

from __future__ import annotations

from typing import Dict, Iterable, Mapping

SETTING, DURABILITY, FACT, OUTCOME, LABEL, IDENTITY = (
    "setting", "durability", "fact", "outcome", "label", "identity")

KINDS: Dict[str, str] = {
    "run_id": IDENTITY, "status": IDENTITY, "start_time": IDENTITY,
    "engine": DURABILITY, "fsync": DURABILITY, "direct": DURABILITY, "layout": DURABILITY,
    "block_size": DURABILITY,
    # where the blocks go and how MPI-IO writes them: a strided or random write, or a
    # collective one, is not the same measurement as a sequential independent stream
    "pattern": DURABILITY, "collective": DURABILITY,
    "mpiio_hints": SETTING, "seed": SETTING, "stonewall": SETTING, "preset": LABEL,
    # fio's access pattern (imported fio runs have them): a random or mixed job, or one
    # with a queue depth, is not a sequential single-stream write
    "rw": DURABILITY, "rwmixread": DURABILITY, "iodepth": DURABILITY, "ioengine": DURABILITY,
    "nodes": SETTING, "ranks": SETTING, "ranks_per_node": SETTING, "size": SETTING,
    "time_limit": SETTING, "iterations": SETTING, "mpi": FACT, "host": FACT,
    "mpiio": FACT,  # the MPI-IO implementation of an mpiio run: ROMIO (driver) or OMPIO
    "tool": SETTING, "tool_version": FACT,
    "kernel": FACT, "lustre": FACT, "checksums": FACT, "checksum_type": FACT, "fstype": FACT,
    "client": FACT, "lustre_kernel": FACT,
    # what a run measured (imported records and tags may carry them)
    "bytes": OUTCOME, "seconds": OUTCOME, "duration": OUTCOME, "elapsed": OUTCOME,
    "MB_per_s": OUTCOME, "rate": OUTCOME, "bandwidth": OUTCOME, "bw": OUTCOME,
    # labels: a study's own tags (study/execute.py), ids of runs and jobs
    "study": LABEL, "study_point": LABEL, "study_repeat": LABEL, "study_hash": LABEL,
    "study_key": LABEL, "study_generation": LABEL, "study_order": LABEL, "study_seed": LABEL,
    "study_seq": LABEL, "study_prev_key": LABEL,
    # what settling before a study's run took and left (study/settle.py): measured
    "settle_seconds": OUTCOME, "settle_dirty_bytes": OUTCOME,
    "job": LABEL, "job_id": LABEL, "jobid": LABEL, "slurm_job_id": LABEL,
    "SLURM_JOB_ID": LABEL, "rep": LABEL, "repeat": LABEL, "repetition": LABEL,
}

# The order in which durability keys are named (report's DURABILITY_KEYS).
DURABILITY_KEYS = tuple(k for k, v in KINDS.items() if v == DURABILITY)

# Any key (a tag, `tag.NAME`) whose last part is one of these words is of that kind.
OUTCOME_WORDS = ("bytes", "seconds", "secs", "duration", "elapsed", "mb_per_s", "mbps",
                 "rate", "bandwidth", "bw", "throughput")


def kind(key: str) -> str:
    """The kind of a run key (the table, then the name's last part: `tag.job` is a label)."""
    if key in KINDS:
        return KINDS[key]
    last = key.rsplit(".", 1)[-1]  # `tag.job`, `slurm.job_id`: the name's last part
    if KINDS.get(last) in (LABEL, OUTCOME):
        return KINDS[last]
    if last.lower() in OUTCOME_WORDS or last.lower().endswith(("_bytes_written", "_seconds")):
        return OUTCOME
    return FACT if "." in key else SETTING


def time_limited(keys: Mapping[str, object]) -> bool:
    """Whether a run ended by a time limit (its bytes are an outcome, not a setting)."""
    limit = keys.get("time_limit")
    return keys.get("size") == "time" or limit not in (None, "", "None", "-", 0, "0")


def outcome_keys(keys: Mapping[str, object]) -> Iterable[str]:
    """The keys of one run that are outcomes there: OUTCOME kinds, and `size` when the run
    was time-limited."""
    out = [k for k in keys if kind(k) == OUTCOME]
    if "size" in keys and time_limited(keys):
        out.append("size")
    return out


# Identifiers a client makes up per mount or process (GlusterFS's graph: process-uuid,
# volfile-checksum, client-version): they differ between any two runs and change no rate.
VOLATILE_ENDINGS = ("uuid", "-checksum", "_checksum", "client-version", "-pid", "_pid",
                    "process-name", "-id", "_id", "graph-id", "mount-time")


def volatile(key: str) -> bool:
    """Whether a key is an identifier that changes from mount to mount (not a setting)."""
    last = key.rsplit(".", 1)[-1].lower()
    return last.endswith(VOLATILE_ENDINGS) or last in ("pid", "uuid", "id")


def relevance(key: str) -> tuple:
    """How a difference between two groups of runs is ranked: settings that decide what a
    rate means first, then other settings and facts, then what is not known to matter,
    volatile identifiers last (a sort key: smaller first)."""
    k = kind(key)
    order = {DURABILITY: 0, SETTING: 1, FACT: 2}.get(k, 4)
    return (3 if volatile(key) else order, key.count("."), key)
