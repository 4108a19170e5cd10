"""The table of run keys (vocab/keys.py): every list that names keys is read from it, a node
fact's value comes from its entry's flattening, and a tag cannot take a built-in key's name."""

import pytest
import synth

from mpiwrite.clients import registry
from mpiwrite.errors import ConfigError
from mpiwrite.formats import nodekeys, runkeys
from mpiwrite.importers import base as importers
from mpiwrite.records import h5
from mpiwrite.run import config
from mpiwrite.vocab import keys


def test_the_lists_of_keys_are_the_tables():
    names = [k.name for k in keys.TABLE]
    assert len(names) == len(set(names)), "a key declared twice"
    assert config.RUN_KEYS == keys.BUILTIN
    assert h5.NODE_COLUMNS == keys.NODE_COLUMNS
    assert nodekeys.SUMMARY_KEYS == keys.COMMON
    assert importers.FACT_KEYS == keys.FACT_KEYS and importers.NOT_FACTS == keys.FILE_DECIDES
    assert runkeys.IMPORT_DECIDED == importers.DECIDED_KEYS == keys.STATED
    assert keys.DURABILITY_KEYS == tuple(k.name for k in keys.TABLE
                                         if k.kind == keys.DURABILITY)
    for client in keys.owners():  # a client's own keys are the ones the table gives it
        assert registry.get(client).own_keys == keys.owned(client)
    # every node column flattens facts (client: facts/nodeinfo derives old records' value)
    assert all(keys.BY_NAME[k].node for k in keys.NODE_COLUMNS if k != "client")


def test_a_node_facts_values_come_from_the_table():
    facts = synth.node(host="h1", lustre="2.15.5", checksums="on", kernel="6.1")
    got = {k: nodekeys.summary_value(facts, k) for k in keys.NODE_COLUMNS}
    assert got == {"host": "h1", "kernel": "6.1", "lustre": "2.15.5", "lustre_kernel": "patchless",
                   "checksums": "on", "checksum_type": "adler", "fstype": "lustre",
                   "client": "lustre 2.15.5"}
    bare = {"host": "h2", "fs": {"fstype": "ext4"}}
    assert nodekeys.summary_value(bare, "lustre") == "none"
    assert nodekeys.summary_value(bare, "lustre_kernel") == "n/a"
    assert nodekeys.summary_value(bare, "client") == "none"  # a local filesystem
    with pytest.raises(KeyError):
        nodekeys.summary_value(facts, "block_size")  # a key, but no node fact


@pytest.mark.parametrize("name", keys.BUILTIN)
def test_a_tag_cannot_take_a_built_in_keys_name(name):
    with pytest.raises(ConfigError, match="built-in run key"):
        config.parse_tags([f"{name}=x"])


def test_every_option_key_is_made_by_its_entry_and_read_by_its_unit():
    """A run option's key is its table entry's `value` (formats/runkeys.run_keys holds no
    key of its own): every option key but the ones named only when used, or part of
    another's value, or counted from the record, has one; filters read sizes, durations
    and counts by the entry's unit."""
    made = {k.name for k in keys.FROM_PARAMS}
    options = {k.name for k in keys.TABLE if k.source == keys.OPTION and not k.when_used
               and not k.part_of and k.name != "iterations"}
    assert made == options
    p = {"engine": "mpiio", "collective": True, "mpiio_hints": {"b": 2, "a": 1},
         "size": 2**20, "block_size": 4096, "fsync": True, "fsync_every": 8}
    got = {k.name: k.value(p, False) for k in keys.FROM_PARAMS}
    assert got["collective"] == "on" and got["mpiio_hints"] == "a=1,b=2"
    assert got["fsync"] == "every 8" and got["size"] == "1MiB" and got["block_size"] == "4KiB"
    assert got["seed"] is keys.ABSENT and got["pattern"] == "sequential"
    assert keys.BY_NAME["engine"].value({}, False) == "posix"
    posix = {k.name: k.value({"time_limit": 5.0}, True) for k in keys.FROM_PARAMS}
    assert posix["collective"] is keys.ABSENT and posix["size"] == "time"
    assert keys.BY_NAME["size"].value({}, True) == "unknown"  # an import that names none
    assert set(keys.of_unit(keys.SIZE)) == {"block_size", "size"}
    assert set(keys.of_unit(keys.COUNT)) >= {"nodes", "ranks", "iterations"}
