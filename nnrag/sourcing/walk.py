"""List the Python files of a folder without reading them.

Directory symlinks are followed (repositories use them) but each real directory is entered once,
so symlink loops end with a recorded issue instead of a hang. A link, to a file or a folder, whose
real path is outside the source's root is skipped with the reason ``outside-root``: a repository
carrying ``x.py -> /etc/shadow`` must not get that file read, hashed or discovered.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from .globs import PathFilter
from .spec import REASON_OUTSIDE_ROOT, REASON_SYMLINK_LOOP, REASON_TOO_LARGE, REASON_UNREADABLE, SourceFile, WalkIssue


def walk_tree(root: Path, path_filter: PathFilter, max_file_bytes: int) -> tuple[list[SourceFile], list[WalkIssue]]:
    files: list[SourceFile] = []
    issues: list[WalkIssue] = []
    seen: set[tuple[int, int]] = set()
    root_st = os.stat(root)
    seen.add((root_st.st_dev, root_st.st_ino))
    real_root = os.path.realpath(root)
    stack: list[tuple[str, str]] = [(str(root), "")]
    while stack:
        absdir, reldir = stack.pop()
        try:
            entries = sorted(os.scandir(absdir), key=lambda e: e.name)
        except OSError as exc:
            issues.append(WalkIssue(reldir or ".", REASON_UNREADABLE, f"cannot list folder: {exc.strerror}"))
            continue
        for entry in entries:
            rel = f"{reldir}/{entry.name}" if reldir else entry.name
            try:
                is_dir = entry.is_dir(follow_symlinks=True)
            except OSError:
                is_dir = False
            if is_dir:
                if path_filter.excludes_dir(rel):
                    continue
                if entry.is_symlink() and not _inside(real_root, entry.path):
                    issues.append(WalkIssue(rel, REASON_OUTSIDE_ROOT, f"link to a folder outside the source: {rel}"))
                    continue
                try:
                    st = entry.stat(follow_symlinks=True)
                except OSError as exc:
                    issues.append(_issue_for(rel, exc))
                    continue
                key = (st.st_dev, st.st_ino)
                if key in seen:
                    if entry.is_symlink():
                        issues.append(WalkIssue(rel, REASON_SYMLINK_LOOP, f"symlink to an already visited folder: {rel}"))
                    continue
                seen.add(key)
                stack.append((entry.path, rel))
                continue
            if not entry.name.endswith(".py") or not path_filter.keeps(rel):
                continue
            _admit(rel, entry.path, max_file_bytes, files, issues, real_root)
    files.sort(key=lambda f: f.path)
    return files, issues


def list_files(root: Path, relpaths: list[str], path_filter: PathFilter, max_file_bytes: int) -> tuple[list[SourceFile], list[WalkIssue]]:
    """Stat an explicit list of files (an installed distribution's RECORD)."""
    files: list[SourceFile] = []
    issues: list[WalkIssue] = []
    real_root = os.path.realpath(root)
    for rel in sorted(set(relpaths)):
        if not rel.endswith(".py") or rel.startswith("../") or not path_filter.keeps(rel):
            continue
        abspath = os.path.join(root, rel)
        if os.path.lexists(abspath):  # RECORD may list files removed since: nothing to index
            _admit(rel, abspath, max_file_bytes, files, issues, real_root)
    return files, issues


def _inside(real_root: str, path: str) -> bool:
    real = os.path.realpath(path)
    return real == real_root or real.startswith(real_root.rstrip(os.sep) + os.sep)


def _admit(rel: str, abspath: str, max_file_bytes: int, files: list[SourceFile], issues: list[WalkIssue],
           real_root: str) -> None:
    """Stat one candidate file and add it to ``files``, or the reason it is skipped to ``issues``."""
    if os.path.islink(abspath) and not _inside(real_root, abspath):
        issues.append(WalkIssue(rel, REASON_OUTSIDE_ROOT, f"link to a file outside the source: {rel}"))
        return
    try:
        st = os.stat(abspath)
    except OSError as exc:
        issues.append(_issue_for(rel, exc))
        return
    if st.st_size > max_file_bytes:
        issues.append(WalkIssue(rel, REASON_TOO_LARGE, f"{st.st_size} bytes exceeds the limit of {max_file_bytes}"))
        return
    files.append(SourceFile(rel, abspath, st.st_size, st.st_mtime_ns))


def _issue_for(rel: str, exc: OSError) -> WalkIssue:
    if exc.errno == errno.ELOOP:
        return WalkIssue(rel, REASON_SYMLINK_LOOP, f"symlink loop: {rel}")
    if exc.errno == errno.ENOENT:
        return WalkIssue(rel, REASON_UNREADABLE, f"broken symlink: {rel}")
    return WalkIssue(rel, REASON_UNREADABLE, f"{exc.strerror}: {rel}")
