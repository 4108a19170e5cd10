"""The wait sampler's thread (run/waits.py) stops at once: a rank's iteration of a few
microseconds must not wait out the sampler's interval (300 iterations took 35 s so)."""

import time

from mpiwrite.run import waits


def test_stopping_the_sampler_waits_for_no_interval():
    s = waits.Sampler(interval=1.0)
    s.start()
    time.sleep(0.01)
    t0 = time.monotonic()
    s.stop()
    s.close()
    assert time.monotonic() - t0 < 0.2
    assert s.n == 0 and s.text().startswith('{"n":0,')


def test_the_sampler_counts_a_running_thread_as_running():
    s = waits.Sampler(interval=0.01)
    s.start()
    end = time.monotonic() + 0.3
    while time.monotonic() < end:  # the main thread runs: R
        pass
    s.stop()
    s.close()
    assert s.n >= 5 and s.counts.get("R", 0) / s.n > 0.5, s.counts
