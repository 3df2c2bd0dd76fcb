"""What a source declares it requires, read from the files it ships without running any."""

from __future__ import annotations

from pathlib import Path

from nnrag.sourcing.declared import declared_requirements


def test_a_repository_declares_its_requirements_in_the_files_it_ships(tmp_path: Path) -> None:
    (tmp_path / "requirements").mkdir()
    (tmp_path / "requirements.txt").write_text("-r requirements/runtime.txt\n-r requirements/tests.txt\n"
                                               "einops>=0.6  # tensors\ngit+https://github.com/x/y.git#egg=y\n"
                                               "-e .\ntimm; python_version < '3'\n")
    (tmp_path / "requirements" / "runtime.txt").write_text("numpy\nscipy==1.10\n")
    (tmp_path / "requirements" / "tests.txt").write_text("pytest\n")
    (tmp_path / "setup.py").write_text("from setuptools import setup\nREQS = ['yacs', 'fvcore']\n"
                                       "setup(name='x', install_requires=REQS)\nimport os; os.system('echo never run')\n")
    (tmp_path / "setup.cfg").write_text("[options]\ninstall_requires =\n    simplejson\n    termcolor\n")
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\ndependencies = ['pyyaml', 'tqdm[notebook]']\n")
    # runtime requirements, by name; not the tests', not a URL, not one whose marker excludes this Python
    assert declared_requirements(tmp_path) == ["einops", "fvcore", "numpy", "pyyaml", "scipy", "simplejson",
                                               "termcolor", "tqdm", "yacs"]


def test_a_requirements_file_that_links_out_of_the_source_is_not_read(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("secret-package\n")
    root = tmp_path / "repo"
    root.mkdir()
    (root / "requirements.txt").symlink_to(outside)
    (root / "requirements-extra.txt").write_text("-r ../outside.txt\nnumpy\n")
    assert declared_requirements(root) == ["numpy"]
