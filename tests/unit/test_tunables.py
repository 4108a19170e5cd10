"""What `tune list` and `tune plan` suggest trying: the catalogue's candidates as they stand
beside the value a node has now (clients/tunables.Tunable.worth_trying)."""

from mpiwrite.clients.tunables import BLOCK


def test_a_larger_request_is_no_suggestion_where_the_device_already_takes_a_larger_one():
    t = BLOCK["max_sectors_kb"]
    assert [v for v, _ in t.worth_trying("4096")] == ["128"]  # once: "try 1280: large ones"
    assert [v for v, _ in t.worth_trying("512")] == ["128", "1280"]
    assert [v for v, _ in t.worth_trying("64")] == ["1280"]
    assert [v for v, _ in t.worth_trying("1280")] == ["128"]  # never the value it has
    assert [v for v, _ in t.worth_trying(None)] == ["128", "1280"]  # unread: all of them


def test_a_queue_deeper_than_the_deep_one_is_offered_the_short_one_only():
    assert [v for v, _ in BLOCK["nr_requests"].worth_trying("2048")] == ["64"]
