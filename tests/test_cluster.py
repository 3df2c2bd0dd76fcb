"""Validation on a Dask cluster: a real scheduler and worker process on 127.0.0.1."""

from __future__ import annotations

import shutil
import socket
from pathlib import Path

import pytest

from conftest import FIXTURES, run_cli, search_limits

distributed = pytest.importorskip("distributed", reason="Dask is not installed (pip install 'nnrag[cluster]')")


@pytest.fixture(scope="module")
def cluster() -> object:
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=True, host="127.0.0.1",
                                  dashboard_address=None, protocol="tcp") as c:
        yield c


def _verdicts(home: Path, source: str) -> dict[str, tuple[str, str | None]]:
    import nnrag

    return {e["id"]: (e["status"], e["code"]) for e in nnrag.library_entries(home=home)
            if e["source"] == source}


def test_a_build_validates_on_the_cluster_with_the_same_verdicts(cluster: object, search_lib: dict[str, object],
                                                                  tmp_path: Path) -> None:
    import nnrag

    src = tmp_path / "search_repo"
    shutil.copytree(FIXTURES / "search_repo", src)
    home = tmp_path / "home"
    report = nnrag.build([str(src)], home=home, limits=search_limits(), search=False,
                         scheduler=cluster.scheduler_address)

    local = _verdicts(search_lib["home"], "search_repo")
    remote = _verdicts(home, "search_repo")
    assert remote and remote == local
    served = report.cluster["served"]
    # the one Dask worker process answered every candidate
    assert len(served) == 1 and sum(served.values()) >= len(remote)
    assert report.to_dict()["cluster"]["scheduler"] == cluster.scheduler_address


def test_an_unreachable_scheduler_is_a_clear_error(tmp_path: Path) -> None:
    from nnrag.errors import NnragError
    from nnrag.validator.cluster import ClusterGate

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(NnragError, match="cannot reach the Dask scheduler.*dask scheduler"):
        ClusterGate(f"tcp://127.0.0.1:{port}", timeout_s=2.0)


def test_the_scheduler_comes_from_the_flag_the_environment_or_the_config(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from nnrag.config import build_config
    from nnrag.errors import ConfigError
    from nnrag.workspace import Workspace

    monkeypatch.delenv("NNRAG_SCHEDULER", raising=False)
    home.mkdir()
    ws = Workspace.resolve(home)
    assert build_config(ws).scheduler is None
    (home / "config.toml").write_text('[build]\nscheduler = "tcp://10.1.2.3:8786"\n')
    assert build_config(ws).scheduler == "tcp://10.1.2.3:8786"
    monkeypatch.setenv("NNRAG_SCHEDULER", "tcp://127.0.0.1:9")
    assert build_config(ws).scheduler == "tcp://127.0.0.1:9"
    assert build_config(ws, "tcp://127.0.0.1:8").scheduler == "tcp://127.0.0.1:8"
    (home / "config.toml").write_text('[build]\nschedular = "tcp://x:1"\n')
    with pytest.raises(ConfigError, match=r"unknown \[build\] keys \['schedular'\]"):
        build_config(ws)


def test_build_on_an_unreachable_scheduler_says_so(home: Path, tmp_path: Path) -> None:
    src = tmp_path / "search_repo"
    shutil.copytree(FIXTURES / "search_repo", src)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = run_cli("build", str(src), "--home", str(home), "--no-search-index", "--scheduler",
                   f"tcp://127.0.0.1:{port}", check=False)
    assert proc.returncode == 1
    assert f"cannot reach the Dask scheduler at tcp://127.0.0.1:{port}" in proc.stderr


def _set_version(version: str) -> str:
    import nnrag._version

    old, nnrag._version.__version__ = nnrag._version.__version__, version
    return old


def test_workers_with_another_nnrag_are_refused(cluster: object) -> None:
    from distributed import Client

    from nnrag.errors import NnragError
    from nnrag.validator.cluster import ClusterGate

    with Client(cluster.scheduler_address, set_as_default=False) as client:
        old = next(iter(client.run(_set_version, "0.0.1").values()))
        try:
            with pytest.raises(NnragError, match=r"runs nnrag 0\.0\.1 .*install the same on every worker"):
                ClusterGate(cluster.scheduler_address)
        finally:
            client.run(_set_version, old)
