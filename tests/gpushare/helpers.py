"""Tiny hand-made openb files for the gpushare tests."""

from __future__ import annotations

from pathlib import Path

NODE_HEADER = "sn,cpu_milli,memory_mib,gpu,model\n"
POD_HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
)


def write(path: Path, header: str, rows: list[str]) -> Path:
    path.write_text(header + "".join(r + "\n" for r in rows))
    return path
