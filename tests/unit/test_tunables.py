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


def test_every_tunable_is_of_a_kind_the_kinds_table_reads():
    """A tunable's kind is one entry of tunables.KINDS (how its values are read, compared
    and shown), never a string the reading code compares: a new kind is one class there."""
    from mpiwrite.clients import registry, tuning
    from mpiwrite.clients.tunables import KINDS

    seen = set()
    for client in registry.every():
        for t in client.tunables.values():
            assert t.kind in KINDS, (client.name, t.name, t.kind)
            seen.add(t.kind)
            for value, _ in t.candidates:  # each candidate is a value of its kind
                assert tuning.normal(t, value)[0] is not None, (t.name, value)
    assert seen == set(KINDS)  # no kind is unused
    size = KINDS["size"]
    assert size.normal("1MB", "gluster") == "1MB" and size.normal("1MiB", "") == "1048576"
    assert size.show(4 * 2**20) == "4MiB" and KINDS["choice"].normal("a [b] c", "") == "b"
    assert not KINDS["choice"].numeric and KINDS["int"].number("7", "") == 7.0
