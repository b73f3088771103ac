"""Figures of Lucid's learned models: the packing tree and the PrAM shape functions.

    python scripts/lucid_figures.py --out docs/figures

Writes ``lucid_tree.png``, the PrDT that gives sharing scores (Tiny / Medium / Jumbo)
drawn as text boxes, and ``lucid_pram_shapes.png``, the shape functions of the duration
model. That model is trained the way ``lucid`` trains it: on the finished jobs of a
``helios-synthetic`` run (2,000 jobs, 30 jobs/hour, seed 0) on 4 x 8 GPUs, with two jobs
allowed per GPU. The tree leaves name the class each leaf predicts.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from shapeshift.model import ClusterSpec, NodeSpec
from shapeshift.policies.lucid.models import DURATION_FEATURES
from shapeshift.policies.lucid.packing import LABELS, PACKING_FEATURES, fit_packing_model
from shapeshift.policies.lucid.policy import Lucid, LucidParams
from shapeshift.sim.simulator import simulate
from shapeshift.workloads.helios_synth import helios_synthetic


def _tree_lines(form, classes: list[int], node: int = 0, depth: int = 0) -> list[str]:  # type: ignore[no-untyped-def]
    """The fitted tree (``TreeForm``) as indented text; leaves name their majority class."""
    pad = "    " * depth
    if form.left[node] == -1:
        label = LABELS[classes[int(np.argmax(form.value[node]))]]
        return [f"{pad}-> {label}  ({int(form.weight[node])} readings)"]
    name = PACKING_FEATURES[int(form.feature[node])]
    return [
        f"{pad}if {name} <= {float(form.threshold[node]):.3f}:",
        *_tree_lines(form, classes, int(form.left[node]), depth + 1),
        f"{pad}else:",
        *_tree_lines(form, classes, int(form.right[node]), depth + 1),
    ]


def tree_figure(out: Path) -> None:
    model = fit_packing_model(0)
    lines = _tree_lines(model.form_, [int(c) for c in model.classes_])
    fig, ax = plt.subplots(figsize=(8, 0.32 * len(lines) + 1))
    ax.axis("off")
    ax.text(0.0, 1.0, "\n".join(lines), family="monospace", va="top", fontsize=10)
    ax.set_title("Lucid packing analysis model (PrDT): sharing score from profiled features")
    fig.savefig(out / "lucid_tree.png", dpi=120, bbox_inches="tight")
    plt.close(fig)
    print("\n".join(lines))


def shapes_figure(out: Path) -> None:
    nodes = tuple(NodeSpec(f"n{i}", 8, 64, 512, gpu_mem_gb=24.0) for i in range(4))
    jobs = list(helios_synthetic(2000, 30, seed=0, vcs=1, vc_names=[""]).jobs())
    policy = Lucid(LucidParams())
    simulate(jobs, ClusterSpec(nodes, gpu_share_limit=2), policy)
    policy.durations.fit()
    shapes = [s for s in policy.durations.model.explain().shapes if " x " not in s.term]
    fig, axes = plt.subplots(3, 3, figsize=(12, 9))
    for i, (ax, name) in enumerate(zip(axes.flat, DURATION_FEATURES, strict=True)):
        # The model is fitted on arrays, so its terms are named x0, x1, ... in feature order.
        shape = next((s for s in shapes if s.term in (name, f"x{i}")), None)
        if shape is None:
            ax.set_title(f"{name} (no term)")
            continue
        ax.plot(range(len(shape.scores)), shape.scores, drawstyle="steps-mid")
        ax.set_title(f"{name} (importance {shape.importance:.0f})")
        ax.set_xlabel("bin")
        ax.set_ylabel("seconds added")
        ax.grid(alpha=0.3)
    fig.suptitle("Lucid duration model (PrAM): shape functions, helios-synthetic 2,000 jobs, seed 0")
    fig.tight_layout()
    fig.savefig(out / "lucid_pram_shapes.png", dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs/figures"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    tree_figure(args.out)
    shapes_figure(args.out)
    print(f"wrote {args.out / 'lucid_tree.png'} and {args.out / 'lucid_pram_shapes.png'}")


if __name__ == "__main__":
    main()
