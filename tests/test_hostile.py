"""Hostile candidates (tests/hostile/): each is contained, classified, and leaves nothing behind.
Every payload is bounded in time and size, so a failed containment cannot harm the machine. Each
payload file stands alone (the sandbox holds only that file), so the hook-switching helper is
repeated in each rather than imported."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from conftest import run_cli
from nnrag.validator.gate import Gate
from nnrag.validator.record import Limits

HOSTILE = Path(__file__).parent / "hostile"


def _left_behind() -> list[int]:
    """Live forks of this process's validation workers: a candidate's processes run the worker's
    program and descend from a worker (or were left to init once it was gone). A worker's own
    parent is the process that started it; forks of another build's workers are that build's."""
    def read(pid: str) -> tuple[bytes, str, str] | None:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            state, ppid = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[:2]
        except OSError:
            return None
        return cmdline, state, ppid

    procs = {e.name: info for e in Path("/proc").iterdir() if e.name.isdigit() and (info := read(e.name)) is not None}
    workers = {pid for pid, (cmd, _, ppid) in procs.items() if b"nnrag.validator.server" in cmd and ppid == str(os.getpid())}

    def of_ours(pid: str) -> bool:
        for _ in range(16):
            pid = procs[pid][2] if pid in procs else "0"
            if pid in workers or pid == "1":
                return True
            if pid not in procs or b"nnrag.validator.server" not in procs[pid][0]:
                return False
        return False

    return [int(pid) for pid, (cmd, state, _) in procs.items()
            if b"nnrag.validator.server" in cmd and state != "Z" and pid not in workers and of_ours(pid)]


@pytest.fixture(scope="module")
def gate() -> Gate:
    with Gate(1, Limits(timeout_s=15.0, memory_mb=500)) as g:
        yield g  # type: ignore[misc]


@pytest.mark.parametrize("payload, code", [
    ("daemon.py", "sandbox-violation"),
    ("fork_bomb.py", "sandbox-violation"),
    ("grandchildren_memory.py", "memory"),
    ("patches_torch.py", "sandbox-violation"),
    ("forges_record.py", "sandbox-violation"),
])
def test_a_hostile_candidate_is_classified_and_leaves_no_process(gate: Gate, payload: str, code: str) -> None:
    record = gate.check_file(HOSTILE / payload)
    assert (record.ok, record.code) == (False, code), record.message
    assert not _left_behind()
    if payload == "daemon.py":  # it returned normally: only the look for stray processes after the check found it
        assert "still running after the check" in record.message
    if payload == "patches_torch.py":
        assert "integrity: the candidate replaced Module.__call__" in record.message
    if payload == "forges_record.py":
        assert "result records arrived where the harness writes one" in record.message


def test_a_candidate_sees_no_other_process_and_cannot_trace_mount_or_unshare(gate: Gate) -> None:
    record = gate.check_file(HOSTILE / "looks_around.py")
    assert (record.ok, record.code) == (False, "runtime-error"), record.message
    if record.isolation.get("process") != "pidns+own-proc" or record.isolation.get("syscalls") != "seccomp":
        pytest.skip(f"this machine gave {record.isolation}: no PID namespace with its own /proc, or no seccomp")
    assert "others=0 ptrace=-1/1 unshare=-1/1 mount=-1/1" in record.message, record.message  # EPERM from seccomp


def test_a_candidate_sees_no_secret_and_cannot_lift_its_limits(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-value")
    monkeypatch.setenv("NNRAG_HOME", str(tmp_path))
    with Gate(1) as fresh:  # started with the secrets in its environment
        leaks = fresh.check_file(HOSTILE / "reads_secrets.py")
        lifts = fresh.check_file(HOSTILE / "lifts_limits.py")
    assert not leaks.ok and "key=absent home=absent" in leaks.message
    assert "sk-secret" not in json.dumps(leaks.to_dict()) and str(tmp_path) not in json.dumps(leaks.to_dict())
    assert not lifts.ok and lifts.message.count("held") == 4, lifts.message


def test_a_file_that_is_not_text_is_a_failed_record(tmp_path: Path) -> None:
    binary = tmp_path / "latin.py"
    binary.write_bytes(b"x = '\xff\xfe'\n")
    proc = run_cli("validate", str(binary), "--json", check=False)
    assert proc.returncode == 1 and json.loads(proc.stdout)["code"] == "syntax-error" and "Traceback" not in proc.stderr


def test_a_build_over_hostile_blocks_among_good_ones_validates_the_good_and_classifies_the_rest(tmp_path: Path) -> None:
    import shutil

    import nnrag

    repo = tmp_path / "mixed"
    (repo / "mixed").mkdir(parents=True)
    (repo / "mixed" / "__init__.py").write_text("")
    for name in ("daemon.py", "fork_bomb.py", "patches_torch.py", "reads_secrets.py", "links_worker_files.py",
                 "floods_results.py"):
        shutil.copy(HOSTILE / name, repo / "mixed" / name)
    (repo / "mixed" / "good.py").write_text(
        "import torch.nn as nn\n\n\nclass Good(nn.Module):\n    def __init__(self, dim: int = 8):\n        super().__init__()\n"
        "        self.fc = nn.Linear(dim, dim)\n\n    def forward(self, x):\n        return self.fc(x)\n")
    home = tmp_path / "home"
    # the clock generous enough for what each payload does before its limit: the 64 MB the flood
    # sends took 5 s in a fresh worker alone here and 21 s beside other candidates
    report = nnrag.build([str(repo)], home=home, limits=Limits(timeout_s=45.0, memory_mb=500), search=False)
    verdicts = {str(e["id"]).rsplit(".", 1)[-1]: (e["status"], e["code"]) for e in nnrag.library_entries(home=home)}
    assert verdicts == {
        "Good": ("validated", None),
        "Daemon": ("failed", "sandbox-violation"),
        "ForkBomb": ("failed", "sandbox-violation"),
        "Broken": ("failed", "runtime-error"),  # its closure leaves the module-level patch out
        "Leaks": ("failed", "runtime-error"),
        "LinksWorkerFiles": ("validated", None),  # what it did stayed in its own folder
        "FloodsResults": ("failed", "sandbox-violation"),
    }, verdicts
    assert report.passed == 2 and not _left_behind()


@pytest.mark.parametrize("payload", ["writes_outside.py", "writes_outside_unhooked.py"])
def test_writes_outside_the_folder_fail(gate: Gate, payload: str) -> None:
    markers = [Path("/tmp/nnrag-hostile-marker.libc"), Path("/tmp/nnrag-hostile-marker.sqlite3")]
    for marker in markers:
        marker.unlink(missing_ok=True)
    record = gate.check_file(HOSTILE / payload)
    if payload == "writes_outside.py":  # the audit hook sees libc reached through ctypes
        assert (record.ok, record.code) == (False, "sandbox-violation") and "open() of the C library" in record.message
    elif record.isolation.get("filesystem") == "audit-hook":
        pytest.skip("this kernel refused a mount namespace: only the audit hook guards writes")
    assert not any(m.exists() for m in markers)  # with the hook switched off, the kernel refused them


WRITES_HERE = '''
import os
import torch.nn as nn


class CachesBeside(nn.Module):
    """Keeps a cache in the working directory, as some libraries do with their downloads."""

    def __init__(self):
        super().__init__()
        os.makedirs(".hub", exist_ok=True)
        with open(os.path.join(".hub", "index.txt"), "w") as f:
            f.write(os.getcwd())
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        return self.proj(x)
'''


def test_a_candidate_writes_relative_paths_into_its_own_folder(gate: Gate) -> None:
    record = gate.check_code(WRITES_HERE, "CachesBeside")
    assert record.ok, record.message  # the working directory is the writable folder, not a read-only view of it


def test_a_worker_removes_the_folders_of_workers_that_died_mid_check() -> None:
    stale = Path(tempfile.gettempdir()) / "nnrag-sandbox-4194000-left"
    stale.mkdir(exist_ok=True)
    (stale / "candidate.py").write_text("x = 1\n")
    with Gate(1) as fresh:
        fresh.check_code("import torch.nn as nn\n\nclass Id(nn.Module):\n    def forward(self, x):\n        return x\n", "Id")
    assert not stale.exists()


def test_the_users_home_and_other_temporary_folders_are_not_visible(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    home = tmp_path / "user"
    home.mkdir()
    (home / "secret.txt").write_text("sk-secret-value")
    other = Path(tempfile.mkdtemp(prefix="another-home-"))
    (other / "index.sqlite3").write_text("not yours")
    code = f"""
import torch.nn as nn


class Peeks(nn.Module):
    def forward(self, x):
        seen = []
        for path in ({str(home / "secret.txt")!r}, {str(other / "index.sqlite3")!r}):
            try:
                seen.append(open(path).read())
            except OSError as e:
                seen.append(type(e).__name__)
        raise RuntimeError("|".join(seen))
"""
    monkeypatch.setenv("HOME", str(home))
    try:
        with Gate(1) as fresh:  # a worker of a user whose home holds a secret
            record = fresh.check_code(code, "Peeks")
    finally:
        shutil.rmtree(other)
    if record.isolation.get("filesystem") == "audit-hook":
        pytest.skip("this kernel refused a mount namespace")
    assert "sk-secret" not in record.message and "not yours" not in record.message, record.message
    assert record.message.count("FileNotFoundError") == 2, record.message


def test_code_from_a_model_runs_only_under_the_kernels_confinement(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from nnrag.tools.functions import Toolbox
    from nnrag.validator import sandbox

    good = "import torch.nn as nn\n\nclass Id(nn.Module):\n    def forward(self, x):\n        return x * 2\n"
    monkeypatch.setenv(sandbox.NAMESPACES_ENV, "0")  # as on a kernel that refuses user namespaces
    sandbox.kernel_confinement.cache_clear()
    try:
        refused = Toolbox(tmp_path / "home").validate_code(good)
        assert refused["kind"] == "ConfigError" and "--allow-weak-sandbox" in refused["error"]
        allowed = Toolbox(tmp_path / "home", allow_weak_sandbox=True).validate_code(good)
        assert allowed["ok"] and allowed["isolation"]["network"] == "audit-hook"  # the record says what confined it
        assert allowed["isolation"]["filesystem"] == "audit-hook"
    finally:
        sandbox.kernel_confinement.cache_clear()
    monkeypatch.delenv(sandbox.NAMESPACES_ENV)
    assert sandbox.kernel_confinement() == _userns_allowed()  # the probe agrees with unshare(1)


def _userns_allowed() -> bool:
    """What unshare(1) of util-linux says, or a child of this process where it is not installed."""
    import os
    import shutil
    import subprocess
    import sys

    if shutil.which("unshare"):
        return subprocess.run(["unshare", "--user", "--net", "true"], capture_output=True).returncode == 0
    probe = "import ctypes, sys; sys.exit(ctypes.CDLL(None).unshare(0x10000000 | 0x40000000) != 0)"
    return subprocess.run([sys.executable, "-c", probe], env=dict(os.environ)).returncode == 0


def test_a_huge_file_is_refused_before_anything_compiles_it(gate: Gate) -> None:
    from nnrag.validator.static import MAX_SOURCE_CHARS

    huge = "x = 1\n" * (MAX_SOURCE_CHARS // 6 + 1)
    record = gate.check_code(huge + "import torch.nn as nn\nclass Big(nn.Module):\n    pass\n", "Big")
    assert (record.ok, record.code, record.stage) == (False, "too-large", "parse")


def test_with_the_hook_off_no_way_out_gets_through(gate: Gate) -> None:
    import glob
    import socket
    import threading

    received: list[bytes] = []
    listeners = []
    for address in ("/tmp/nnrag-hostile.sock", "\0nnrag-hostile"):
        if not address.startswith("\0"):
            Path(address).unlink(missing_ok=True)
        s = socket.socket(socket.AF_UNIX)
        s.bind(address)
        s.listen(1)
        s.settimeout(20)
        listeners.append(s)

        def accept(server: socket.socket = s) -> None:
            try:
                conn, _ = server.accept()
                received.append(conn.recv(100))
                conn.close()
            except OSError:
                pass

        threading.Thread(target=accept, daemon=True).start()
    markers = [Path("/tmp/nnrag-hostile-escape.dirfd"), Path("/tmp/nnrag-hostile-escape.shell"),
               Path("/dev/shm/nnrag-hostile-escape")]
    for marker in markers:
        marker.unlink(missing_ok=True)
    try:
        record = gate.check_file(HOSTILE / "escapes_unhooked.py")
    finally:
        for s in listeners:
            s.close()
        Path("/tmp/nnrag-hostile.sock").unlink(missing_ok=True)
    if record.isolation.get("filesystem") == "audit-hook":
        pytest.skip("this kernel refused the namespaces: only the audit hook guards")
    assert (record.ok, record.code) == (False, "runtime-error"), record.message
    assert "escaped=[]" in record.message, record.message
    assert not any(m.exists() for m in markers) and not glob.glob(tempfile.gettempdir() + "/nnrag-sandbox-*-x")
    assert received == [] and not _left_behind()


# Classes of attack on what the worker trusts. Each payload stands for its class: every file of the
# folder the worker might read, every way of holding memory a resident set does not show, every
# way of writing a record the harness did not write.

def test_files_the_candidate_links_or_blocks_are_never_read_by_the_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = Path("/tmp/nnrag-hostile-secret")
    secret.write_text("sk-root-only-secret")
    secret.chmod(0o600)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-environment-secret")
    try:
        with Gate(1, Limits(timeout_s=15.0, memory_mb=500)) as fresh:  # started with the key in its environment
            record = fresh.check_file(HOSTILE / "links_worker_files.py")
            after = fresh.check_code("import torch.nn as nn\n\nclass Id(nn.Module):\n    def forward(self, x):\n"
                                     "        return x\n", "Id")
    finally:
        secret.unlink()
    text = json.dumps(record.to_dict())
    assert "sk-root-only-secret" not in text and "sk-environment-secret" not in text, text
    # a FIFO or /dev/zero in its folder neither blocks the worker nor grows it: the verdict comes
    # within the gate's clock (a worker held past it says `timeout`; the wall clock of a check
    # beside other work on 2 CPUs says nothing), and the worker goes on
    assert record.ok and "linked" in record.output, record  # what it printed, read from the worker's own file
    assert after.ok, after.message
    assert not _left_behind()


@pytest.mark.parametrize("cgroup", ["1", "0"])
def test_memory_no_resident_set_shows_is_counted_or_refused(monkeypatch: pytest.MonkeyPatch, cgroup: str) -> None:
    monkeypatch.setenv("NNRAG_SANDBOX_CGROUP", cgroup)
    with Gate(1, Limits(timeout_s=30.0, memory_mb=500, disk_mb=256)) as fresh:
        record = fresh.check_file(HOSTILE / "holds_memory_unseen.py")
    memory = record.isolation.get("memory", "")
    if cgroup == "1" and not memory.startswith("cgroup"):
        pytest.skip(f"this machine offers no memory cgroup to the worker ({memory or record.message})")
    assert not record.ok
    if memory.startswith("cgroup"):  # memfd pages, detached segments and tmpfs pages are charged to the group
        assert record.code == "memory", record.message
    elif record.isolation.get("filesystem") == "audit-hook":
        pytest.skip("this kernel refused the namespaces: no folder of its own")
    else:  # refused where nothing would count them, and the folder is full at its size
        assert record.code == "runtime-error", record.message
        assert "memfd=refused:1 sysv=refused:1 folder=refused:28" in record.message, record.message
    assert not _left_behind()
    import glob  # what it wrote stayed in its own file system: nothing of it in the worker's folders

    assert not glob.glob(tempfile.gettempdir() + "/nnrag-sandbox-*/fill*.bin")


def test_a_flood_of_the_result_channel_is_cut_off() -> None:
    # the clock the payload needs to send the 64 MB cap: 5 s in a fresh worker, past 15 s beside
    # other work on 2 CPUs, where the module's 15 s gate says `timeout` before the violation
    with Gate(1, Limits(timeout_s=45.0, memory_mb=500)) as gate:
        record = gate.check_file(HOSTILE / "floods_results.py")
        assert (record.ok, record.code) == (False, "sandbox-violation"), record.message
        assert "MB arrived on the result channel" in record.message
        assert gate.check_code("import torch.nn as nn\n\nclass Id(nn.Module):\n    def forward(self, x):\n"
                               "        return x\n", "Id").ok  # the worker goes on


def test_a_record_written_by_code_at_import_is_not_a_verdict(gate: Gate) -> None:
    record = gate.check_file(HOSTILE / "forges_at_import.py")
    assert (record.ok, record.code) == (False, "sandbox-violation"), record
    assert "does not carry this run's token" in record.message


def test_a_record_followed_by_a_timeout_is_a_timeout() -> None:
    with Gate(1, Limits(timeout_s=6.0, memory_mb=500)) as fresh:
        record = fresh.check_file(HOSTILE / "forges_then_hangs.py")
    assert (record.ok, record.code) == (False, "timeout"), record
    assert not _left_behind()


def test_a_home_anywhere_is_hidden_from_candidates_and_private(tmp_path: Path) -> None:
    import nnrag
    from nnrag.db import connect
    from nnrag.workspace import Workspace

    base = Path("/opt") if os.access("/opt", os.W_OK) else tmp_path
    home = Path(tempfile.mkdtemp(prefix="nnrag-hostile-home-", dir=base)) / "home"
    try:
        workspace = Workspace.resolve(home).ensure()
        with connect(workspace, create=True):
            pass
        (home / "config.toml").write_text('[llm]\napi_key = "sk-config-secret"\n')
        assert (home.stat().st_mode & 0o777, workspace.index_path.stat().st_mode & 0o777) == (0o700, 0o600)
        code = f"""
import torch.nn as nn


class Peeks(nn.Module):
    def forward(self, x):
        seen = []
        for path in ({str(home / "config.toml")!r}, {str(workspace.index_path)!r}):
            try:
                seen.append(open(path, "rb").read(64).decode(errors="replace"))
            except OSError as e:
                seen.append(type(e).__name__)
        raise RuntimeError("|".join(seen))
"""
        record = nnrag.validate(code=code, class_name="Peeks")
    finally:
        shutil.rmtree(home.parent)
    if record.isolation.get("filesystem") == "audit-hook":
        pytest.skip("this kernel refused a mount namespace")
    assert "sk-config-secret" not in record.message and "SQLite" not in record.message, record.message
    assert record.message.count("FileNotFoundError") == 2, record.message


def test_descriptors_used_up_by_the_candidate_leave_the_harness_its_verdict(gate: Gate) -> None:
    """Written after the rest, as an attack the change was not shaped on: socket buffers, which no
    resident set shows, held until the candidate runs out of descriptors (4,096: ~450 MB here)."""
    record = gate.check_file(HOSTILE / "holds_socket_buffers.py")
    assert not record.ok and "Too many open files" in record.message and record.code != "crash", record
    assert not _left_behind()
