import pytest

from mpiwrite.units import format_size, mbps, parse_size, parse_time


@pytest.mark.parametrize("text,value", [
    ("4k", 4096), ("4K", 4096), ("1M", 2**20), ("1MiB", 2**20), ("2G", 2 * 2**30),
    ("1MB", 10**6), ("1GB", 10**9), ("1kB", 1000), ("100", 100), ("1.5G", 3 * 2**29),
    ("64KiB", 65536), (" 8m ", 8 * 2**20),
])
def test_sizes(text, value):
    assert parse_size(text) == value


@pytest.mark.parametrize("text", ["1Q", "-5M", "1.5.3G", "", "M", "1.5B", "1Mb", "1 2"])
def test_bad_sizes(text):
    with pytest.raises(ValueError):
        parse_size(text)


@pytest.mark.parametrize("text,value", [("30", 30), ("30s", 30), ("5min", 300), ("1h", 3600),
                                        ("500ms", 0.5), ("2.5", 2.5)])
def test_times(text, value):
    assert parse_time(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["", "-3", "5x", "1.2.3s"])
def test_bad_times(text):
    with pytest.raises(ValueError):
        parse_time(text)


@pytest.mark.parametrize("text", ["1m", "5M", "2.5m"])
def test_bare_m_is_ambiguous(text):
    """IOR's -t 1m is a 1 MiB transfer; mpiwrite's -t is a time: refuse, name both readings."""
    with pytest.raises(ValueError, match="ambiguous.*min"):
        parse_time(text)


def test_rates_are_decimal_megabytes():
    assert mbps(832e6, 1.0) == pytest.approx(832.0)
    assert format_size(2**20) == "1MiB"


def test_a_ratio_past_the_largest_float_is_infinite_not_a_traceback():
    """compare of crafted rates (1e-320 against 900 MB/s) died of OverflowError in exp()."""
    from mpiwrite import stats

    got = stats.compare([1e-320, 2e-320], [900.0, 950.0], 0.95)
    assert got.pct == float("inf") and got.pct_hi == float("inf")
