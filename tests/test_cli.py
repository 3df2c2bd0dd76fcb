"""The command line, run as a user runs it (a real subprocess)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import run_cli


def test_index_blocks_stats_json(forms_repo: Path, home: Path) -> None:
    proc = run_cli("index", str(forms_repo), "--home", str(home), "--json")
    report = json.loads(proc.stdout)
    assert report["blocks"] == 29 and report["files"] == 9 and report["failures"] == {}
    assert "parse: 9/9" in proc.stderr.splitlines()  # progress as log lines where stderr is a pipe
    rows = json.loads(run_cli("blocks", "*Child", "--home", str(home), "--json").stdout)
    assert len(rows) == 10
    assert {"name", "qualname", "source", "path", "line", "category"} <= set(rows[0])
    stats = json.loads(run_cli("stats", "--home", str(home), "--json").stdout)
    assert stats["blocks"] == 29 and stats["sources"]["forms_repo"]["files"] == 9
    sources = json.loads(run_cli("sources", "--home", str(home), "--json").stdout)
    assert sources[0]["name"] == "forms_repo" and sources[0]["state"] == "complete"


def test_human_output(forms_repo: Path, home: Path) -> None:
    out = run_cli("index", str(forms_repo), "--home", str(home)).stdout
    assert "forms_repo" in out and "29 blocks" in out
    out = run_cli("blocks", "Diamond", "--home", str(home)).stdout
    assert "pkg/abstract.py:" in out and "1 blocks" in out
    out = run_cli("stats", "--home", str(home)).stdout
    assert "Blocks by category" in out


def test_home_from_environment(forms_repo: Path, home: Path) -> None:
    run_cli("index", str(forms_repo), env={"NNRAG_HOME": str(home)})
    rows = json.loads(run_cli("blocks", "--json", env={"NNRAG_HOME": str(home)}).stdout)
    assert len(rows) == 29


def test_errors_are_messages_not_tracebacks(home: Path, tmp_path: Path) -> None:
    proc = run_cli("blocks", "--home", str(home), check=False)
    assert proc.returncode == 1
    assert "no index" in proc.stderr and "Traceback" not in proc.stderr
    proc = run_cli("index", str(tmp_path / "missing"), "--home", str(home), check=False)
    assert proc.returncode == 1 and proc.stderr.count("does not exist") == 1, proc.stderr
    bad = tmp_path / "bad.toml"
    bad.write_text("[[source]\n")
    proc = run_cli("index", "--corpus", str(bad), "--home", str(home), check=False)
    assert proc.returncode == 1 and "invalid TOML" in proc.stderr
    bad.write_bytes(b'[[source]]\nspec = "caf\xe9"\n')  # Latin-1, not UTF-8
    proc = run_cli("index", "--corpus", str(bad), "--home", str(home), check=False)
    assert proc.returncode == 1 and "not UTF-8" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    missing = tmp_path / "nothing.py"
    proc = run_cli("validate", str(missing), check=False)
    assert proc.returncode == 1 and proc.stderr.strip() == f"error: {missing}: no such file", proc.stderr
    # a names file that is missing, malformed or names nothing; a home that is a file; an empty query
    names = tmp_path / "names.json"
    for text, message in ((None, "does not exist"), ('["BlurPool2d",', "not valid JSON"), ("[]", "names no blocks")):
        if text is not None:
            names.write_text(text)
        proc = run_cli("build", "--names", str(names), "--home", str(home), check=False)
        assert proc.returncode == 1 and message in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    a_file = tmp_path / "afile"
    a_file.write_text("")
    proc = run_cli("stats", "--home", str(a_file), check=False)
    assert proc.returncode == 1 and "is a file, not a folder" in proc.stderr
    proc = run_cli("search", "  ", "--home", str(home), check=False)
    assert proc.returncode == 1 and "query is empty" in proc.stderr and "Traceback" not in proc.stderr


def test_import_is_cheap() -> None:
    code = (
        "import sys, nnrag; heavy = [m for m in ('torch', 'libcst', 'chromadb', 'langchain', 'rich', 'typer')"
        " if m in sys.modules]; print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    # the build process plans, extracts and stores; torch (half a gigabyte) is loaded only by the gate's workers
    code = "import sys, nnrag.library.build, nnrag.validator.usage.runs; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_one_bad_source_does_not_stop_the_others(forms_repo: Path, home: Path, tmp_path: Path) -> None:
    proc = run_cli(
        "index", str(forms_repo), f"git+file://{tmp_path}/missing", "--home", str(home), "--json", check=False
    )
    assert proc.returncode == 1
    report = json.loads(proc.stdout)
    assert report["blocks"] == 29
    assert "cannot clone" in report["errors"]["missing"]
    assert "source missing was not indexed" in proc.stderr


def test_corrupted_index(forms_repo: Path, home: Path) -> None:
    home.mkdir()
    (home / "index.sqlite3").write_text("this is not a database, it was damaged\n")
    proc = run_cli("blocks", "--home", str(home), check=False)
    assert proc.returncode == 1 and "cannot be opened" in proc.stderr
    # An index run moves the damaged file aside and rebuilds.
    proc = run_cli("index", str(forms_repo), "--home", str(home), "--json")
    assert json.loads(proc.stdout)["blocks"] == 29
    assert "started a new index" in proc.stderr
    assert len(list(home.glob("index.sqlite3.broken-*"))) == 1


def test_a_full_disk_is_a_one_line_error_and_nothing_is_moved_aside(tmp_path: Path) -> None:
    import shutil
    import subprocess
    import sys

    if not shutil.which("unshare") or subprocess.run(["unshare", "-Urm", "true"], capture_output=True).returncode:
        pytest.skip("needs a user and mount namespace to mount a tiny file system")
    home = tmp_path / "full"
    home.mkdir()
    repo = Path(__file__).parent / "fixtures" / "copies_repo"
    script = (f"mount -t tmpfs -o size=200k tmpfs {home} && "
              f"{sys.executable} -m nnrag index {repo} --home {home}; echo rc=$?; ls {home}")
    proc = subprocess.run(["unshare", "-Urm", "sh", "-c", script], capture_output=True, text=True, timeout=300)
    assert "no space left on the disk" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert "rc=1" in proc.stdout and ".broken-" not in proc.stdout


def test_a_build_whose_stderr_is_a_pipe_prints_plain_progress_lines(tmp_path: Path) -> None:
    repo = Path(__file__).parent / "fixtures" / "copies_repo"
    proc = run_cli("build", str(repo), "--home", str(tmp_path / "home"), "--no-search-index", "--no-harvest")
    lines = proc.stderr.splitlines()
    assert any(line.startswith("validate: 8/8") for line in lines), proc.stderr
    assert not any("\x1b[" in line or "━" in line for line in lines)  # no bars or escapes in a log
    again = run_cli("build", str(repo), "--home", str(tmp_path / "home"), "--no-search-index", "--no-harvest")
    assert "8 verdicts reused, 8 of them without extracting" in " ".join(again.stdout.split()), again.stdout


def test_console_text_keeps_bracketed_words(tmp_path: Path) -> None:
    block = tmp_path / "brackets.py"
    block.write_text("import torch.nn as nn\n\n\nclass Brackets(nn.Module):\n    def forward(self, x):\n"
                     "        raise RuntimeError('set [llm] in config, not [bold]this[/bold]')\n")
    proc = run_cli("validate", str(block), check=False)
    assert proc.returncode == 1 and "set [llm] in config, not [bold]this[/bold]" in " ".join(proc.stdout.split()), proc.stdout


def _stored(home: Path) -> int:
    try:
        with sqlite3.connect(home / "index.sqlite3", timeout=1) as conn:
            return conn.execute("SELECT COUNT(*) FROM library").fetchone()[0]
    except sqlite3.Error:
        return 0


def test_a_build_stopped_while_extracting_keeps_what_it_extracted(tmp_path: Path) -> None:
    n, repo, home = 1200, tmp_path / "many", tmp_path / "home"
    for i in range(n):
        sub = repo / f"m{i // 300}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"f{i}.py").write_text(f"import torch.nn as nn\n\n\nclass Block{i}(nn.Module):\n"
                                      f"    def forward(self, x):\n        return x * {i}\n")
    # a validating build: its extracted blocks wait for the gate until the whole corpus is extracted
    proc = subprocess.Popen(
        [sys.executable, "-m", "nnrag", "build", str(repo), "--home", str(home), "--no-harvest", "--no-search-index",
         "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        # a test run started in the background inherits SIGINT ignored; Ctrl-C must reach the child
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 300
    while _stored(home) < 100 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    stopped = json.loads(proc.communicate(timeout=120)[0])
    assert proc.returncode == 130 and stopped["interrupted"] and stopped["tried"] == 0, stopped
    kept = _stored(home)
    assert 100 <= kept < n and stopped["extracted"] >= kept, (kept, stopped)
    # resumed: what was stored is not extracted again
    resumed = json.loads(run_cli("build", str(repo), "--home", str(home), "--no-validate", "--no-harvest",
                                 "--no-search-index", "--json").stdout)
    assert resumed["extracted"] == n - kept and resumed["not_validated"] == n, (kept, resumed)


def test_a_build_that_does_not_validate_stores_searchable_blocks_and_the_next_build_validates_them(tmp_path: Path) -> None:
    repo, home = Path(__file__).parent / "fixtures" / "copies_repo", str(tmp_path / "home")
    first = json.loads(run_cli("build", str(repo), "--home", home, "--no-validate", "--no-harvest", "--json").stdout)
    assert (first["tried"], first["not_validated"], first["search"]["specs_built"]) == (0, 8, 8)
    spec = json.loads(run_cli("spec", "TokenGate", "--home", home, "--json").stdout)
    assert spec["validation"]["status"] == "not-run"
    hits = json.loads(run_cli("search", "gate tokens with a sigmoid", "--all", "--home", home, "--json").stdout)
    assert "TokenGate" in [h["name"] for h in hits[:3]] and {h["status"] for h in hits} == {"not-run"}, hits
    report = run_cli("report", "--home", home)
    assert "8 blocks extracted and not validated yet" in " ".join(report.stdout.split()), report.stdout
    again = json.loads(run_cli("build", str(repo), "--home", home, "--no-validate", "--no-harvest", "--json",
                               "--no-search-index").stdout)
    assert (again["not_validated"], again["extracted"]) == (8, 0)  # stored unjudged, nothing extracted again
    judged = json.loads(run_cli("build", str(repo), "--home", home, "--no-harvest", "--no-search-index", "--json").stdout)
    # judged from the files stored, not extracted again
    assert (judged["tried"], judged["not_validated"], judged["extracted"]) == (8, 0, 0) and judged["passed"] == 8, judged
    assert json.loads(run_cli("spec", "TokenGate", "--home", home, "--json").stdout)["validation"]["status"] == "validated"
    # verdicts stand through a build that does not validate
    kept = json.loads(run_cli("build", str(repo), "--home", home, "--no-validate", "--no-harvest", "--no-search-index",
                              "--json").stdout)
    assert (kept["not_validated"], kept["cached"], kept["passed"]) == (0, 8, 8), kept
    # so do an older gate's: not forgotten for want of a new verdict
    with sqlite3.connect(Path(home) / "index.sqlite3") as conn:
        conn.execute("UPDATE library SET gate_version='1'")
    older = json.loads(run_cli("build", str(repo), "--home", home, "--no-validate", "--no-harvest", "--no-search-index",
                               "--json").stdout)
    assert (older["not_validated"], older["cached"], older["passed"]) == (0, 8, 8), older
    # and a build that validates judges them again: the gate's code is not the code that judged them
    redone = json.loads(run_cli("build", str(repo), "--home", home, "--no-harvest", "--no-search-index", "--json").stdout)
    assert (redone["tried"], redone["cached"], redone["passed"]) == (8, 0, 8), redone


def test_names_from_a_repository_reach_the_terminal_without_control_characters(tmp_path: Path) -> None:
    repo = tmp_path / "esc_repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "__init__.py").write_text("")
    # a file name that would clear the screen and retitle the terminal, and a class docstring with more
    (repo / "pkg" / "evil\x1b[2J\x1b]0;pwned\x07.py").write_text(
        'import torch.nn as nn\n\n\nclass Evil(nn.Module):\n    """Looks \x1b[31mred\x1b[0m."""\n\n'
        "    def forward(self, x):\n        return x\n")
    home = tmp_path / "home"
    run_cli("index", str(repo), "--home", str(home))
    for args in (("blocks",), ("sources",), ("stats",)):
        shown = run_cli(*args, "--home", str(home))
        assert "\x1b" not in shown.stdout + shown.stderr and "\x07" not in shown.stdout, (args, shown.stdout)
    assert "Evil" in run_cli("blocks", "--home", str(home)).stdout


def test_a_read_only_home_is_a_one_line_error_that_keeps_the_index(forms_repo: Path, tmp_path: Path) -> None:
    import shutil

    home = tmp_path / "home"
    run_cli("index", str(forms_repo), "--home", str(home))
    if os.getuid() == 0:  # root writes through permission bits: a read-only mount, in a mount namespace of its own
        if not shutil.which("unshare"):
            pytest.skip("util-linux's unshare is needed to make a read-only home as root")

        def run(*args: str) -> subprocess.CompletedProcess[str]:
            script = f'mount --bind -o ro "{home}" "{home}" && exec "$@"'
            return subprocess.run(["unshare", "-m", "sh", "-c", script, "sh", sys.executable, "-m", "nnrag", *args],
                                  capture_output=True, text=True, timeout=300)
    else:
        home.chmod(0o555)

        def run(*args: str) -> subprocess.CompletedProcess[str]:
            return run_cli(*args, check=False)
    try:
        for args in (("blocks", "--home", str(home)), ("index", str(forms_repo), "--home", str(home / "inner"))):
            proc = run(*args)
            assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
            assert len(proc.stderr.strip().splitlines()) == 1 and "writ" in proc.stderr, proc.stderr
            assert "delete" not in proc.stderr  # the index is fine
    finally:
        home.chmod(0o700)
    assert run_cli("blocks", "--home", str(home)).stdout.strip()  # the same index, still whole once writable
