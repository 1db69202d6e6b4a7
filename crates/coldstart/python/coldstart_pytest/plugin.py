"""The ``coldstart`` fixture (registered through the ``pytest11`` entry point).

Standard library and pytest only, so that importing the plugin costs a test
run nothing: every check runs in a ``coldstart`` process of its own, which
starts the workers itself. That also makes it safe under pytest-xdist: each
xdist worker runs its own checks, nothing is shared between them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Iterable, Optional, Sequence

import pytest

#: Environment variable naming the ``coldstart`` binary to run; when unset the
#: plugin runs the one installed beside it (see :func:`find_binary`).
BINARY_ENV = "COLDSTART_BIN"


class CheckFailed(Exception):
    """``coldstart`` could not do its job (exit 2): a wrong target, a worker
    that never became ready, a config error. Its text is coldstart's own."""


def find_binary() -> str:
    """The ``coldstart`` command to run.

    ``$COLDSTART_BIN`` if set; else the ``coldstart`` script of the running
    interpreter's environment (where ``pip install`` of the wheel put it,
    beside this plugin); else the first ``coldstart`` on ``PATH``.
    """
    named = os.environ.get(BINARY_ENV)
    if named:
        return named
    exe = "coldstart.exe" if os.name == "nt" else "coldstart"
    for scheme_dir in {sysconfig.get_path("scripts"), str(Path(sys.executable).parent)}:
        if scheme_dir:
            candidate = Path(scheme_dir) / exe
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return str(candidate)
    found = shutil.which("coldstart")
    if found:
        return found
    raise CheckFailed(
        "no coldstart command found: install the coldstart wheel into this "
        f"environment ({sys.executable}), put coldstart on PATH, or set ${BINARY_ENV}"
    )


class Coldstart:
    """What the ``coldstart`` fixture gives a test: :meth:`check` and :meth:`module`.

    ``rootdir`` is where coldstart looks for its config (the nearest
    ``coldstart.toml`` or ``pyproject.toml`` with ``[tool.coldstart]`` from
    there up); the fixture passes pytest's rootdir.
    """

    def __init__(self, rootdir: Path, binary: Optional[str] = None) -> None:
        self.rootdir = Path(rootdir)
        self._binary = binary

    @property
    def binary(self) -> str:
        """The ``coldstart`` command this fixture runs."""
        if self._binary is None:
            self._binary = find_binary()
        return self._binary

    def check(self, target: str, *, forbid: Optional[Iterable[str]] = None,
              processes: Optional[int] = None) -> str:
        """Checks one target of the project's config; fails the test with the
        report when a forbidden module is imported at start-up. Returns the
        report's text when the check passes."""
        args = ["check", "--target", target]
        return self._run(args + _policy(forbid, processes), what=f"target {target!r}")

    def module(self, package: str, *, forbid: Optional[Iterable[str]] = None,
               python: Optional[str] = None) -> str:
        """Checks ``import package`` alone in a fresh interpreter (this test
        run's own, unless ``python`` names another); fails the test with the
        report when it imports a forbidden module. Returns the report's text
        when the check passes."""
        args = ["check", "--module", package, "--python", python or sys.executable]
        return self._run(args + _policy(forbid, None), what=f"import {package}")

    def _run(self, args: Sequence[str], what: str) -> str:
        cmd = [self.binary, *args]
        try:
            done = subprocess.run(
                cmd,
                cwd=self.rootdir,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                errors="replace",
            )
        except OSError as err:
            raise CheckFailed(
                f"could not run {cmd[0]}: {err}; install the coldstart wheel or set ${BINARY_ENV}"
            ) from err
        if done.returncode == 0:
            return done.stdout
        if done.returncode == 1:
            pytest.fail(
                f"coldstart: {what} imports a forbidden module at start-up\n\n{done.stdout.rstrip()}",
                pytrace=False,
            )
        raise CheckFailed(
            f"coldstart could not check {what} (exit {done.returncode}) in {self.rootdir}:\n"
            f"{(done.stderr or done.stdout).rstrip()}"
        )


def _policy(forbid: Optional[Iterable[str]], processes: Optional[int]) -> list:
    args = []
    if forbid is not None:
        if isinstance(forbid, str):
            forbid = [forbid]
        names = [name.strip() for name in forbid if name.strip()]
        if not names:
            raise ValueError("forbid= names no package; leave it out for the config's policy")
        args += ["--forbid", ",".join(names)]
    if processes is not None:
        args += ["--processes", str(int(processes))]
    return args


@pytest.fixture
def coldstart(request: pytest.FixtureRequest) -> Coldstart:
    """coldstart's import-boundary check from a test: ``coldstart.check("target")``
    for a target of the config found from the rootdir, ``coldstart.module("pkg",
    forbid=["torch"])`` for ``import pkg`` alone."""
    return Coldstart(Path(str(request.config.rootpath)))
