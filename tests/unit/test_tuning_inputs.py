"""tune's own inputs, checked like every other input: a tunable's file is written only as a
regular file reached without a link (a FIFO never waited on, a link swapped in after the
resolve never written through), names that reach gluster are names, and its command line
from the environment is parsed with a refusal, not a traceback."""

import os

import pytest

from mpiwrite.clients import tuning
from mpiwrite.sysroot import Reader


def _tunable(name="vm.dirty_ratio"):
    from mpiwrite.clients import registry

    return registry.get("local").tunables[name]


def _where(root, source="/dev/sda1"):
    return tuning.Where(target=str(root), sysroot=str(root),
                        fs={"mount_source": source, "mount_point": "/"}, client={})


def _sysroot(tmp_path):
    vm = tmp_path / "root" / "proc" / "sys" / "vm"
    vm.mkdir(parents=True)
    (vm / "dirty_ratio").write_text("20\n")
    return tmp_path / "root", vm


def test_a_value_is_written_into_the_regular_file(tmp_path):
    root, vm = _sysroot(tmp_path)
    assert tuning.write(_tunable(), "5", _where(root)) == ""
    assert (vm / "dirty_ratio").read_text() == "5\n"
    assert tuning.read(_tunable(), _where(root)) == ("5", "")


@pytest.mark.timeout(20)
def test_a_fifo_in_its_place_is_refused_at_once(tmp_path):
    root, vm = _sysroot(tmp_path)
    os.remove(vm / "dirty_ratio")
    os.mkfifo(vm / "dirty_ratio")
    why = tuning.write(_tunable(), "5", _where(root))
    assert "not a regular file" in why


def test_a_link_swapped_in_after_the_resolve_is_not_written_through(tmp_path, monkeypatch):
    root, vm = _sysroot(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "dirty_ratio").write_text("precious\n")
    reader = Reader(str(root))
    real, _ = reader.resolve("proc/sys/vm/dirty_ratio")
    # between the resolve and the open, the folder becomes a link out of the sysroot
    os.rename(vm, tmp_path / "moved")
    os.symlink(outside, vm)
    monkeypatch.setattr(Reader, "resolve", lambda self, rel: (real, ""))
    fd, why = Reader(str(root)).open_write("proc/sys/vm/dirty_ratio")
    assert fd is None and "link" in why, why
    assert (outside / "dirty_ratio").read_text() == "precious\n"


def test_a_link_out_of_the_sysroot_is_refused(tmp_path):
    root, vm = _sysroot(tmp_path)
    (tmp_path / "secret").write_text("x\n")
    os.remove(vm / "dirty_ratio")
    os.symlink(tmp_path / "secret", vm / "dirty_ratio")
    assert "leaves the sysroot" in tuning.write(_tunable(), "5", _where(root))
    assert (tmp_path / "secret").read_text() == "x\n"


@pytest.mark.parametrize("source", ["server1:/--help", "-x:/vol", "server1:/vol;rm"])
def test_a_gluster_name_that_is_no_name_never_reaches_gluster(source, tmp_path):
    vol, why = tuning._gluster_volume(_where(tmp_path, source))
    assert vol is None and "is not a name gluster takes" in why


def test_an_unbalanced_quote_in_the_gluster_command_is_said(monkeypatch):
    monkeypatch.setenv(tuning.GLUSTER_CLI, "ssh 'storage1 gluster")
    text, why = tuning._gluster(("s", "v"), "get", "v", "all")
    assert text is None and tuning.GLUSTER_CLI in why and "not a command line" in why
