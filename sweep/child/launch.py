"""``python -m sweep.child.launch PPID COMMAND...``: run COMMAND (an MPI launcher) tied to the
worker: it is SIGKILLed when the worker's spawning thread dies (``PR_SET_PDEATHSIG``, kept
across ``exec``), and it adopts what its children orphan (``PR_SET_CHILD_SUBREAPER``), so an
MPI point's ranks can't outlive the worker. Standard library only."""

import os
import sys

from sweep.child.bootstrap import _adopt_orphans, _die_with_parent


def main(argv: list[str]) -> int:
    ppid, *command = argv
    _die_with_parent(int(ppid))
    _adopt_orphans()
    os.execvp(command[0], command)
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
