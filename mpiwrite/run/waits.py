"""Where a rank's write stream spent its time: its main thread's state and kernel wait channel,
sampled by a thread of the rank itself (docs/measurement.md, "Where the time went").

Every INTERVAL (0.1 s) the sampler reads the writer's (the process's main thread's)
`/proc/self/stat` state and `/proc/self/wchan` through descriptors opened once (two preads):
`R` is running, a
sleep counts under its wait channel (`balance_dirty_pages`, `folio_wait_bit_common`,
`request_wait_answer`, ...), a sleep whose channel the kernel does not say under its state
(`D:?`).  The counts go to rank 0 as one short JSON text per rank and iteration (the most
frequent channels, the rest as `other`); what a channel means (dirty-page throttling,
writeback, the client's network or FUSE requests) is read from them where they are shown
(answers/waits.py), so a rank needs no client's table.  Pure standard library: every rank
loads it.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Dict, Optional

INTERVAL = 0.1  # seconds between samples: 10 a second, two preads each
KEEP = 12  # channels kept a rank (the rest: `other`)
# benchmarks/bench_waits.py only: the same run without the sampler, to measure its cost
OFF = os.environ.get("MPIWRITE_WAIT_SAMPLES") == "off"


class Sampler:
    """Samples this process's main thread from a thread of its own, from start() to stop()."""

    def __init__(self, interval: float = INTERVAL):
        self.interval = interval
        self.counts: Dict[str, int] = {}
        self.n = 0
        self.seconds = 0.0
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._fds = []
        try:
            self._fds = [os.open("/proc/self/stat", os.O_RDONLY | os.O_CLOEXEC),
                         os.open("/proc/self/wchan", os.O_RDONLY | os.O_CLOEXEC)]
        except OSError:  # no /proc, or no wchan (a kernel without it): nothing is sampled
            self.close()

    def start(self) -> None:
        if len(self._fds) != 2 or self._thread is not None or OFF:
            return
        self._t0 = time.monotonic()
        self._thread = threading.Thread(target=self._loop, name="mpiwrite-waits", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._thread is None:
            return
        self._stop.set()  # wakes the sampler at once: a short stream waits for no sleep
        self._thread.join(timeout=1.0)
        self.seconds = time.monotonic() - self._t0
        self._thread = None

    def close(self) -> None:
        for fd in self._fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self._fds = []

    def _loop(self) -> None:
        stat_fd, wchan_fd = self._fds
        counts = self.counts
        while not self._stop.wait(self.interval):
            try:
                stat = os.pread(stat_fd, 512, 0)
                state = stat[stat.rindex(b")") + 2:stat.rindex(b")") + 3].decode("ascii")
                if state == "R":
                    key = "R"
                else:
                    wchan = os.pread(wchan_fd, 128, 0).strip().decode("ascii", "replace")
                    key = wchan if wchan and wchan != "0" else f"{state}:?"
            except (OSError, ValueError):
                continue
            counts[key] = counts.get(key, 0) + 1
            self.n += 1

    def text(self) -> str:
        """The counts as one short JSON text: {"n", "interval", "seconds", "counts"}, the
        KEEP most frequent channels and the rest as `other`."""
        top = sorted(self.counts.items(), key=lambda kv: -kv[1])
        kept = dict(top[:KEEP])
        rest = sum(v for _k, v in top[KEEP:])
        if rest:
            kept["other"] = kept.get("other", 0) + rest
        return json.dumps({"n": self.n, "interval": self.interval,
                           "seconds": round(self.seconds, 4), "counts": kept},
                          separators=(",", ":"))
