"""A ceph-fuse client's facts and counters through its admin socket, without a Ceph: a fake
socket in this process speaks the protocol (the real one: tests/cluster/test_ceph.py), and sysroots
model where the socket is found."""

import json
import os
import socket
import struct
import threading
import time

import pytest
import synth
import sysroots
from common import cli, read_record

from mpiwrite.clients import ceph
from mpiwrite.clients import registry as fsclients
from mpiwrite.sysroot import Reader

pytestmark = pytest.mark.timeout(60)

# Ceph 16.2.15's answers (abridged from the testbed's ceph-fuse)
VERSION = {"version": "16.2.15", "release": "pacific", "release_type": "stable"}
CONFIG_SHOW = {"client_oc": "true", "client_oc_size": "209715200",
               "client_oc_max_dirty": "104857600", "client_oc_target_dirty": "8388608",
               "client_oc_max_dirty_age": "5.000000", "client_oc_max_objects": "1000",
               "fuse_big_writes": "true", "fuse_max_write": "0",
               "objecter_inflight_op_bytes": "104857600", "objecter_inflight_ops": "1024",
               "mon_host": "[v2:10.0.0.7:3300]"}
CONFIG_DIFF = {"diff": {
    "client_mount_timeout": {"default": "300", "file": "30", "final": "30"},
    "client_oc_max_dirty": {"default": "104857600", "override": "0", "final": "0"},
    "chdir": {"default": "/", "final": "/"},  # listed, but not changed
    "mon_data_avail_warn": {"default": 30, "file": 2, "final": 2},  # the mon's, not ours
    "log_file": {"default": "/var/log/ceph/$cluster-$name.log", "final": "/x/ceph.log"},
    "client_key_secret_thing": {"default": "", "final": "AQBsecret=="},  # never kept
    "ms_crc_data": {"default": True, "final": False},
}}


def perf(op_w=10, sent=33554432, blocked=0, wrlat=(256, 0.1)):
    return {"objecter": {"op": op_w, "op_w": op_w, "op_send_bytes": sent},
            "objectcacher-libcephfs": {"data_written": sent, "data_flushed": sent,
                                       "write_ops_blocked": blocked,
                                       "write_bytes_blocked": blocked * 131072,
                                       "write_time_blocked": 0.5 * blocked},
            "client": {"wrlat": {"avgcount": wrlat[0], "sum": wrlat[1], "avgtime": 0.0},
                       "fsync": {"avgcount": 1, "sum": 0.06, "avgtime": 0.06}}}


class FakeDaemon:
    """A UNIX socket in this process answering admin socket commands as Ceph does: the
    request is JSON then NUL, the answer a 4-byte big-endian length and the text."""

    def __init__(self, path, answers):
        self.path, self.answers, self.requests = str(path), answers, []  # live: tests edit
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(self.path)
        self.sock.listen(8)
        self.sock.settimeout(0.1)
        self.stop = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while not self.stop:
            try:
                conn, _ = self.sock.accept()
            except (socket.timeout, OSError):
                continue
            with conn:
                conn.settimeout(2)
                data = b""
                while not data.endswith(b"\0"):
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    data += chunk
                self.requests.append(data)
                try:
                    prefix = json.loads(data[:-1])["prefix"]
                except (ValueError, KeyError):
                    prefix = None
                answer = self.answers.get(prefix, b"ERROR: (22) Invalid argument\n"
                                                  b"unknown command prefix x")
                if callable(answer):
                    answer = answer()
                if answer == "silent":
                    time.sleep(1.2)
                    continue
                if isinstance(answer, (dict, list)):
                    answer = json.dumps(answer).encode()
                raw = answer if isinstance(answer, tuple) else None
                try:
                    if raw:  # (claimed length, bytes)
                        conn.sendall(struct.pack(">I", raw[0]) + raw[1])
                    else:
                        conn.sendall(struct.pack(">I", len(answer)) + answer)
                except OSError:
                    pass

    def close(self):
        self.stop = True
        self.thread.join(5)
        self.sock.close()


@pytest.fixture
def daemon(tmp_path):
    made = []

    def make(answers, name="ceph-client.h0.asok"):
        d = FakeDaemon(tmp_path / name, answers)
        made.append(d)
        return d
    yield make
    for d in made:
        d.close()


def test_the_protocol_is_json_then_nul_and_a_length_prefixed_answer(daemon):
    d = daemon({"version": VERSION})
    answer, why = ceph.ask(d.path, {"prefix": "version"}, os.getpid())
    assert why == "" and answer == VERSION
    assert d.requests == [b'{"prefix": "version"}\0']  # what `ceph --admin-daemon` sends


def test_errors_and_garbage_are_reasons_not_exceptions(daemon):
    deep = b"[" * 100000 + b"]" * 100000
    d = daemon({"version": b"\x1b[31mnot json", "status": deep,
                "config show": (10 * 2**20, b"{}"), "config diff": (1000, b"{}")})
    assert ceph.ask(d.path, {"prefix": "nosuch"}, os.getpid()) == (
        None, f"{d.path}: ERROR: (22) Invalid argument")
    assert "is not JSON" in ceph.ask(d.path, {"prefix": "version"}, os.getpid())[1]
    assert "is not JSON" in ceph.ask(d.path, {"prefix": "status"}, os.getpid())[1]
    why = ceph.ask(d.path, {"prefix": "config show"}, os.getpid())[1]
    assert "an answer of 10485760 bytes, more than 1048576: not read" in why
    assert "ended after 2 of 1000 bytes" in ceph.ask(d.path, {"prefix": "config diff"},
                                                    os.getpid())[1]


def test_a_daemon_that_does_not_answer_costs_the_timeout_only(daemon):
    d = daemon({"perf dump": "silent"})
    t0 = time.monotonic()
    answer, why = ceph.ask(d.path, {"prefix": "perf dump"}, os.getpid(), timeout=0.3)
    assert answer is None and "no answer within 0.3 s" in why
    assert time.monotonic() - t0 < 1.5


def test_a_planted_symlink_a_foreign_owner_or_another_process_is_refused(daemon, tmp_path):
    d = daemon({"version": VERSION})
    link = tmp_path / "planted.asok"
    link.symlink_to(d.path)
    assert "not a socket (a symlink" in ceph.ask(str(link), {"prefix": "version"},
                                                  os.getpid())[1]
    plain = tmp_path / "file.asok"
    plain.write_text("x")
    assert "not a socket" in ceph.ask(str(plain), {"prefix": "version"}, os.getpid())[1]
    assert ceph.ask(str(tmp_path / "gone.asok"), {"prefix": "version"}, 1)[1].endswith("absent")
    # the socket is ours, but the process behind it is not the daemon we found
    why = ceph.ask(d.path, {"prefix": "version"}, os.getpid() + 1)[1]
    assert f"served by pid {os.getpid()}" in why and "not used" in why
    if os.geteuid() == 0:
        os.chown(d.path, 54321, 54321)
        why = ceph.ask(d.path, {"prefix": "version"}, os.getpid())[1]
        assert "owned by uid 54321, not root or us: not used" in why
    assert set(d.requests) <= {b""}  # connected to check the peer, but nothing was sent


def _proc(path, mount="/mnt/cephfs"):
    return {"pid": os.getpid(), "name": "ceph-fuse",
            "argv": ["ceph-fuse", "--id", "h0", "--admin-socket", path, mount]}


def test_client_facts_from_the_running_daemon(daemon):
    d = daemon({"version": VERSION, "config show": CONFIG_SHOW, "config diff": CONFIG_DIFF,
                "status": {"metadata": {"entity_id": "h0", "pid": str(os.getpid())},
                           "id": 4136, "fs_name": "cephfs"}})
    reader = Reader("/")
    info = ceph.fuse_client(reader, _proc(d.path))
    assert reader.unknown == {}
    assert info["admin_socket"] == d.path  # rule 1: the socket this process listens on
    assert info["admin_socket_source"] == "the socket the daemon listens on"
    assert (info["version"], info["release"]) == ("16.2.15", "pacific")
    assert (info["entity"], info["global_id"], info["fs_name"]) == ("client.h0", 4136, "cephfs")
    config = info["config"]
    assert config["client_oc_max_dirty"] == "0"  # the override, from config diff
    assert config["client_oc_size"] == "209715200" and config["fuse_big_writes"] == "true"
    assert config["client_mount_timeout"] == "30" and config["ms_crc_data"] == "false"
    for name in ("chdir", "mon_data_avail_warn", "log_file", "client_key_secret_thing",
                 "mon_host"):
        assert name not in config
    assert "AQBsecret" not in json.dumps(info)


def test_hostile_answers_are_typed_bounded_and_escaped(daemon):
    diff = {"diff": {f"client_opt_{i}": {"default": "0", "final": str(i)} for i in range(500)}}
    diff["diff"]["client_evil"] = {"default": "", "final": "\x1b]0;owned\x07" + "x" * 5000}
    diff["diff"]["Client-Bad Name"] = {"default": "", "final": "1"}
    diff["diff"]["client_list"] = {"default": "", "final": ["a", "b"]}
    d = daemon({"version": {"version": "16.2.15; rm -rf /", "release": "\x1b[2J"},
                "status": {"metadata": {"entity_id": "h0\nforged line", "pid": os.getpid()},
                           "id": "4136", "fs_name": 7},
                "config show": {"client_oc": {"nested": True}, "client_oc_size": 12},
                "config diff": diff})
    info = ceph.fuse_client(Reader("/"), _proc(d.path))
    assert "version" not in info and "release" not in info
    assert info["entity"] is None and info["global_id"] is None and info["fs_name"] is None
    config = info["config"]
    assert "client_oc" not in config and config["client_oc_size"] == "12"
    assert "Client-Bad Name" not in config and "client_list" not in config
    assert len(config) <= len(ceph.WRITE_OPTIONS) + ceph.MAX_CHANGED
    assert all(len(v) <= ceph.MAX_VALUE and "\x1b" not in v and "\x07" not in v
               for v in config.values())


def test_status_of_another_process_is_not_taken(daemon):
    d = daemon({"status": {"metadata": {"entity_id": "h1", "pid": "1"}, "id": 5}})
    reader = Reader("/")
    info = ceph.fuse_client(reader, _proc(d.path))
    assert "entity" not in info and "status names pid 1" in reader.unknown["ceph.status"]


def test_a_hung_daemon_is_asked_once(daemon, monkeypatch):
    monkeypatch.setattr(ceph, "ASK_TIMEOUT", 0.3)
    d = daemon({"version": "silent"})
    reader = Reader("/")
    t0 = time.monotonic()
    ceph.fuse_client(reader, _proc(d.path))
    assert time.monotonic() - t0 < 1.5 and len(d.requests) == 1
    assert "no answer within" in reader.unknown["ceph.version"]


def test_no_socket_is_asked_with_mpiwrite_no_commands(daemon, monkeypatch):
    d = daemon({"version": VERSION})
    monkeypatch.setenv("MPIWRITE_NO_COMMANDS", "1")
    reader = Reader("/")
    info = ceph.fuse_client(reader, _proc(d.path))
    assert info["admin_socket"] == d.path and "version" not in info and not d.requests
    assert reader.unknown["ceph.admin_socket"] == "MPIWRITE_NO_COMMANDS is set"


# ---- where the socket is: the rule, in sysroots (never asked there) ----

UNIX_HEAD = "Num       RefCount Protocol Flags    Type St Inode Path\n"


def _fuse_root(tmp_path, files):
    f = sysroots.ceph_fuse()
    f.update(files)
    return sysroots.make(tmp_path / "root", f)


def test_socket_rule_1_the_daemons_own_listening_socket(tmp_path):
    root = _fuse_root(tmp_path, {
        "proc/4711/fd/3": sysroots.Link("socket:[444753]"),
        "proc/4711/fd/4": sysroots.Link("socket:[444754]"),
        "proc/4711/fd/5": sysroots.Link("/var/log/ceph/ceph-client.admin.log"),
        "proc/4711/net/unix": UNIX_HEAD
        + "0000000087190778: 00000002 00000000 00010000 0001 01 444753 /run/ceph/x.asok\n"
        + "0000000087190779: 00000003 00000000 00000000 0001 03 444754\n"
        + "000000008719077a: 00000002 00000000 00010000 0001 01 999 /run/other.asok\n"})
    reader = Reader(root)
    info = ceph.fuse_client(reader, {"pid": 4711, "argv": ["ceph-fuse", "/mnt/cephfs"]})
    assert info == {"admin_socket": "/run/ceph/x.asok",
                    "admin_socket_source": "the socket the daemon listens on"}
    assert reader.unknown["ceph.admin_socket"] == "not asked in a sysroot"


@pytest.mark.parametrize("argv,conf,expect,how", [
    (["--admin-socket", "/s/a.asok"], None, "/s/a.asok", "--admin-socket on its command line"),
    (["--admin_socket=/s/b.asok", "-c", "/etc/ceph/x.conf"], None, "/s/b.asok", "--admin"),
    (["-c", "/etc/site.conf", "--id", "hpc"],
     "[global]\nadmin socket = /g/$cluster-$name.asok\nrun dir = /rd\n[client]\n"
     "admin_socket = $run_dir/$name.asok  ; a comment\n[client.other]\nadmin socket = /no\n",
     "/rd/client.hpc.asok", "`admin socket` in /etc/site.conf"),
    (["--cluster", "ceph2", "-n", "client.bench"],
     "[client.bench]\nadmin socket = /var/run/ceph/${cluster}-${id}.asok\n",
     "/var/run/ceph/ceph2-bench.asok", "`admin socket` in /etc/ceph/ceph2.conf"),
])
def test_socket_rules_2_and_3_command_line_then_conf(tmp_path, argv, conf, expect, how):
    files = {"etc/site.conf": conf, "etc/ceph/ceph2.conf": conf} if conf else {}
    reader = Reader(_fuse_root(tmp_path, files))
    proc = {"pid": 4711, "argv": ["ceph-fuse"] + argv + ["/mnt/cephfs"]}
    path, found = ceph.find_socket(reader, proc)
    assert path == expect and found.startswith(how)


def test_socket_rule_3_cephs_default_name_must_match_one_file(tmp_path):
    one = {"var/run/ceph/ceph-client.admin.4711.94269374110224.asok": ""}
    reader = Reader(_fuse_root(tmp_path, one))
    path, how = ceph.find_socket(reader, {"pid": 4711, "argv": ["ceph-fuse", "/mnt/cephfs"]})
    assert path == "/var/run/ceph/ceph-client.admin.4711.94269374110224.asok"
    assert how.startswith("Ceph's default (/etc/ceph/ceph.conf: absent")
    two = dict(one, **{"var/run/ceph/ceph-client.admin.4711.1.asok": ""})
    reader = Reader(_fuse_root(tmp_path / "2", two))
    path, why = ceph.find_socket(reader, {"pid": 4711, "argv": ["ceph-fuse", "/mnt/cephfs"]})
    assert path is None and why.startswith("2 files match /var/run/ceph/ceph-client.admin.4711")


def test_a_conf_with_a_key_is_not_kept_raw(tmp_path):
    conf = "[client.admin]\nkey = AQBsecretsecret==\nadmin socket = /s/$name.asok\n"
    f = nodeinfo_facts(tmp_path, {"etc/ceph/ceph.conf": conf})
    assert f["client"]["admin_socket"] == "/s/client.admin.asok"
    assert "AQBsecret" not in json.dumps(f)


def nodeinfo_facts(tmp_path, files):
    from mpiwrite.facts import nodeinfo

    return nodeinfo.collect("/mnt/cephfs", _fuse_root(tmp_path, files))


# ---- counters around the timed phase ----

def test_snapshot_and_delta_of_a_ceph_fuse_client(daemon):
    answers = {"perf dump": perf()}
    d = daemon(answers)
    fs = {"fstype": "fuse.ceph-fuse", "mount_source": "ceph-fuse", "mount_point": "/mnt"}
    client = {"admin_socket": d.path, "daemon": {"pid": os.getpid()}}
    before = fsclients.snapshot("/", fs, client)
    answers["perf dump"] = perf(op_w=266, sent=2 * 33554432, blocked=3, wrlat=(512, 2.5))
    delta = fsclients.delta(before, fsclients.snapshot("/", fs, client))
    assert delta["kind"] == "ceph" and delta["seconds"] >= 0
    assert delta["write_bytes"] == 33554432 and delta["write_rpcs"] == 256
    assert delta["objecter"] == {"op_w": 256, "op_send_bytes": 33554432}
    assert delta["objectcacher"]["write_ops_blocked"] == 3
    assert delta["objectcacher"]["write_bytes_blocked"] == 3 * 131072
    assert delta["client"]["wrlat"] == {"avgcount": 256, "sum": pytest.approx(2.4)}
    assert delta["client"]["fsync"] == {"avgcount": 0, "sum": 0.0}
    answers["perf dump"] = perf(op_w=5)  # a remounted client: counters went backwards
    later = fsclients.delta(before, fsclients.snapshot("/", fs, client))
    assert later["write_rpcs"] is None and later["objecter"]["op_send_bytes"] == 0


def test_counters_that_cannot_be_read_say_why(daemon, tmp_path):
    fs = {"fstype": "fuse.ceph-fuse", "mount_source": "ceph-fuse"}
    gone = {"admin_socket": str(tmp_path / "gone.asok"), "daemon": {"pid": os.getpid()}}
    snap = fsclients.snapshot("/", fs, gone)
    delta = fsclients.delta(snap, snap)
    assert delta["kind"] == "ceph" and delta["write_bytes"] is None
    assert delta["why"].endswith("gone.asok: absent")
    d = daemon({"perf dump": {"objecter": {"op_w": "12", "op_send_bytes": -1}}})
    ours = {"admin_socket": d.path, "daemon": {"pid": os.getpid()}}
    snap = fsclients.snapshot("/", fs, ours)
    assert snap["data"]["objecter"] == {"op_w": None, "op_send_bytes": None}
    assert fsclients.snapshot(str(tmp_path), fs, ours)["data"] == {}  # never in a sysroot
    assert not any(b"perf" not in r for r in d.requests) and len(d.requests) == 1


# ---- what the records, show and compare make of them ----

def _ceph_records(folder, side, max_dirty, op_size, wrlat_ms):
    from mpiwrite.records import h5 as records

    paths = []
    for i in range(2):
        path = folder / f"{side}{i}.h5"
        synth.make(path, [300.0 + i, 310.0 + i] if side == "a" else [40.0 + i, 42.0 + i],
                   f"run-{side}{i}", tags={"oc": side}, nodes=2, ranks_per_node=1)
        rec = read_record(str(path))
        sent = 64 * 2**20
        delta = {"kind": "ceph", "objecter": {"op_w": sent // op_size, "op_send_bytes": sent},
                 "objectcacher": {"data_written": sent, "data_flushed": sent,
                                  "write_ops_blocked": 0, "write_bytes_blocked": 0,
                                  "write_time_blocked": 0.0},
                 "client": {"wrlat": {"avgcount": 512, "sum": 512 * wrlat_ms / 1e3},
                            "fsync": {"avgcount": 2, "sum": 0.4}},
                 "write_bytes": sent, "write_rpcs": sent // op_size, "seconds": 1.5}
        rec.client_counters = [{"iteration": it, "node": n, "delta": delta}
                               for it in (0, 1) for n in (0, 1)]
        for n in rec.nodes:
            n["client"] = {"name": "ceph", "client": "ceph 16.2.15", "version": "16.2.15",
                           "fuse": True, "config": {"client_oc_max_dirty": max_dirty,
                                                    "client_oc_size": "209715200"},
                           "admin_socket": f"/run/ceph/{n['host']}.asok", "global_id": 4100}
        path.unlink()
        records.write(rec, str(path))
        paths.append(str(path))
    return paths


def test_show_prints_each_nodes_ceph_counters(tmp_path):
    path = _ceph_records(tmp_path, "a", "104857600", 4 * 2**20, 0.5)[0]
    out = cli(["show", path], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    lines = [ln for ln in out.stdout.splitlines() if "ceph: sent" in ln]
    assert len(lines) == 2, out.stdout
    assert "ceph: sent 64MiB in 16 OSD write ops (4MiB per op); cache: 64MiB written, " \
           "64MiB flushed, 0 writes blocked on the dirty limit (0B, 0.000 s); write() 512 x " \
           "0.5 ms, fsync 2 x 200 ms" in lines[0]


def test_compare_names_the_ceph_option_and_what_the_client_did_differently(tmp_path):
    from mpiwrite.clients import ceph_fuse

    _ceph_records(tmp_path, "a", "104857600", 4 * 2**20, 0.5)
    _ceph_records(tmp_path, "b", "0", 128 * 1024, 9.0)
    out = cli(["compare", "oc=a", "oc=b", "--in", str(tmp_path), "--json"], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    diff = json.loads(out.stdout)["differing_facts"]
    assert diff["client.config.client_oc_max_dirty"] == {"a": ["104857600"], "b": ["0"]}
    assert diff[ceph_fuse.OP_SIZE] == {"a": ["4194304"], "b": ["131072"]}
    assert diff[ceph_fuse.WRLAT] == {"a": ["0.5 ms"], "b": ["9 ms"]}
    assert ceph_fuse.BLOCKED not in diff  # the same on both sides (none)
    assert not any("admin_socket" in k or "global_id" in k for k in diff)  # names, not settings
    assert "client write RPC size (bytes per RPC, from its counters)" not in diff
    text = cli(["compare", "oc=a", "oc=b", "--in", str(tmp_path)], cwd=tmp_path).stdout
    assert "client.config.client_oc_max_dirty: 104857600 -> 0" in text


def test_tune_asks_the_admin_socket_only_when_the_daemon_found_serves_it(daemon):
    """`tune get`'s reading of a ceph-fuse option: the peer behind the socket must be the
    daemon the facts found (their `daemon.pid`), else nothing is taken from it."""
    from mpiwrite.clients import tuning

    d = daemon({"config get": {"client_oc_max_dirty": "104857600"}})
    t = fsclients.get("ceph-fuse").tunables["client_oc_max_dirty"]

    def where(pid):
        return tuning.Where("/mnt/cephfs", "/", {}, {"admin_socket": d.path,
                                                     "daemon": {"pid": pid}})

    assert tuning.read(t, where(os.getpid())) == ("104857600", "")
    value, why = tuning.read(t, where(os.getpid() + 1))
    assert value is None and f"served by pid {os.getpid()}" in why, why
