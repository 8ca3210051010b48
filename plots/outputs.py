"""Write output files so that a planted symlink can never redirect them: each is created
exclusively as a temporary file in the destination directory (mkstemp) and renamed over the
destination; symlinked output directories are refused."""

from __future__ import annotations

import contextlib
import os
import tempfile
from typing import Callable, IO, Union

from lockline_results import ResultError


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def ensure_dir(path: str) -> str:
    """Create directory `path` unless it exists; ResultError for a symlink or non-directory."""
    if os.path.islink(path):
        raise ResultError(f"{path}: is a symbolic link; refusing to write through it (remove "
                          "it or choose another output directory)")
    os.makedirs(path, exist_ok=True)
    if not os.path.isdir(path) or os.path.islink(path):
        raise ResultError(f"{path}: not a directory")
    return path


def write_atomic(path: str, content: Union[str, bytes, Callable[[IO[bytes]], None]]) -> str:
    """Write `content` (text, bytes, or a function given the open binary file) to `path` through a
    renamed temporary file (mode 0666 minus the umask); on error it is removed and the error
    raised."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix="." + os.path.basename(path) + ".",
                               suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as handle:
            if callable(content):
                content(handle)
            else:
                handle.write(content.encode("utf-8") if isinstance(content, str) else content)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path
