"""The ``ferrocuda`` command: ``ferrocuda new NAME``, ``ferrocuda build [PATH]``,
``ferrocuda doctor [--install]`` (also ``python -m ferrocuda …``). ``ferrocuda --help`` lists
the options.

The command is ferrocuda's Rust builder, compiled into the extension: it runs the cargo and
rustup of this machine, and builds kernel crates against the ferrocuda crates of this
version (written once under ``$FERROCUDA_HOME``, default ``~/.cache/ferrocuda``).
"""

from __future__ import annotations

import sys

from . import _ferrocuda


def main(argv: list[str] | None = None) -> int:
    """Runs the command with ``argv`` (default: the process's arguments); returns its exit
    status (0 done, 1 failed, 2 bad usage, 130 interrupted: Ctrl-C stops a build, its child
    cargo killed)."""
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        return _ferrocuda._cli(sys.argv[1:] if argv is None else list(argv))
    except KeyboardInterrupt:
        print("ferrocuda: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
