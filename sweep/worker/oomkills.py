"""Whether the kernel's out-of-memory killer killed a process: its memory cgroup's count.

A process killed by the kernel's OOM killer dies by SIGKILL, as one killed by a user does. The
kernel counts its kills per memory cgroup: ``oom_kill`` in ``memory.events`` (cgroup v2) or in
``memory.oom_control`` (cgroup v1, Linux >= 4.13). A batch job's processes, a capped child
included, sit in the job's cgroup, whose limit is the job's memory. :class:`OomWatch` reads the
count of a child's cgroup when the child starts and again when it dies by SIGKILL: a higher
count says the OOM killer struck in that cgroup (the child, or a process it started). Where
no count is readable (no memory controller, another mount) nothing is told apart: the death
stays a plain SIGKILL. Costs two small file reads per child, none per job.
"""

from __future__ import annotations

from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")


def memory_cgroup(pid: int, root: Path = CGROUP_ROOT) -> Path | None:
    """The folder of the memory cgroup of process ``pid``, or None when it can't be found."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        rel = path.lstrip("/")
        if "memory" in controllers.split(","):  # cgroup v1
            return root / "memory" / rel
        if controllers == "":  # cgroup v2 (unified), mounted at the root or under unified/
            for base in (root, root / "unified"):
                if (base / rel / "memory.events").exists():
                    return base / rel
    return None


def oom_kills(cgroup: Path) -> int | None:
    """The OOM killer's kill count in ``cgroup``, or None when it is not readable."""
    for name in ("memory.events", "memory.oom_control"):
        try:
            text = (cgroup / name).read_text()
        except OSError:
            continue
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
    return None


class OomWatch:
    """The OOM kill count of one process's memory cgroup, read at its start."""

    def __init__(self, pid: int) -> None:
        self.cgroup = memory_cgroup(pid)
        self.count = oom_kills(self.cgroup) if self.cgroup is not None else None

    def struck(self) -> bool:
        """Whether the OOM killer killed in the cgroup since the last look (the count rose)."""
        if self.cgroup is None or self.count is None:
            return False
        now = oom_kills(self.cgroup)
        if now is None:
            return False
        rose, self.count = now > self.count, now
        return rose
