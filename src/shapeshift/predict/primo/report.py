"""Writing a Primo model's explanations to a directory: JSON for programs, PNG for people.

``write_explanations(model, out, x=None)`` writes

* ``global.json`` and ``global.png``: PrAM's shape functions (one panel per feature, most
  important first, at most ``max_panels``; category codes shown as ``value_names`` when
  given) or PrDT's feature importance and top of the tree;
* with rows ``x``: ``local.json`` (every row's base, prediction and contributions) and
  ``local.png`` (the first ``max_local`` rows' top contributions as bars).

Plots use matplotlib's Agg canvas directly (no display, no global pyplot state).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from shapeshift.predict.primo.base import PrimoModel
from shapeshift.predict.primo.explanation import GlobalExplanation, LocalExplanation


def _figure(width: float, height: float) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    return fig


def _tree_lines(node: dict[str, Any], depth: int, limit: int, prefix: str = "") -> list[str]:
    if "leaf" in node:
        return [f"{prefix}-> {node['leaf']:.4g}  (n={node['samples']:.0f})"]
    if depth >= limit:
        return [f"{prefix}... {node['value']:.4g}  (n={node['samples']:.0f})"]
    lines = [f"{prefix}if {node['split']}:"]
    lines += _tree_lines(node["left"], depth + 1, limit, prefix + "  ")
    lines.append(f"{prefix}else:")
    lines += _tree_lines(node["right"], depth + 1, limit, prefix + "  ")
    return lines


def _value_name(names: list[str] | None, label: str) -> str:
    """A category code's original value when the caller knows it (``user`` 3 -> ``alice``)."""
    try:
        return names[int(float(label))][:16] if names is not None else label
    except (ValueError, IndexError):
        return label


def plot_global(
    explanation: GlobalExplanation,
    path: Path,
    title: str,
    max_panels: int = 9,
    value_names: dict[str, list[str]] | None = None,
) -> None:
    if explanation.kind == "prdt":
        fig = _figure(12, 6)
        left, right = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1, 2]})
        items = sorted(explanation.feature_importance.items(), key=lambda kv: (-kv[1], kv[0]))
        left.barh([k for k, _ in items][::-1], [v for _, v in items][::-1], color="tab:blue")
        left.set_xlabel("share of squared-error reduction")
        right.axis("off")
        lines = _tree_lines(explanation.tree or {}, 0, 4)[:40]
        right.text(0, 1, "\n".join(lines), family="monospace", fontsize=7, va="top", transform=right.transAxes)
        fig.suptitle(f"{title}: PrDT, complexity {explanation.complexity:.0f} (leaves x depth)", fontsize=10)
    else:
        shapes = sorted(explanation.shapes, key=lambda s: (-s.importance, s.term))[:max_panels]
        cols = min(3, max(1, len(shapes)))
        rows = max(1, math.ceil(len(shapes) / cols))
        fig = _figure(4 * cols, 2.8 * rows)
        axes = fig.subplots(rows, cols, squeeze=False).ravel()
        for ax, shape in zip(axes, shapes, strict=False):
            if shape.lefts and len(shape.lefts) > 1:
                xs = list(shape.lefts[1:])
                ax.step(xs, list(shape.scores[1:]), where="post", color="tab:blue")
                if min(xs) >= 0 and max(xs) > 1e3 * max(min(xs), 1.0):  # durations, GPU counts: log-like
                    ax.set_xscale("symlog")
            else:
                names = (value_names or {}).get(shape.term)
                labels = [_value_name(names, label) for label in shape.labels]
                ax.bar(range(len(shape.scores)), shape.scores, color="tab:blue")
                ax.set_xticks(range(len(labels)), labels, fontsize=6, rotation=90)
            ax.axhline(0, color="grey", linewidth=0.6)
            ax.set_title(f"{shape.term} (importance {shape.importance:.3g})", fontsize=8)
            ax.grid(True, linestyle=":")
        for ax in axes[len(shapes) :]:
            ax.axis("off")
        pairs = ", ".join(name for name, _ in explanation.interactions[:5]) or "none"
        fig.suptitle(f"{title}: PrAM shape functions (pairs: {pairs})", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, format="png")


def plot_local(explanations: list[LocalExplanation], path: Path, title: str, k: int = 5) -> None:
    shown = explanations[: min(6, len(explanations))]
    fig = _figure(10, 1.6 + 1.4 * len(shown))
    axes = fig.subplots(len(shown), 1, squeeze=False).ravel()
    for i, (ax, local) in enumerate(zip(axes, shown, strict=True)):
        top = list(local.top(k))[::-1]
        ax.barh(
            [c.term for c in top],
            [c.value for c in top],
            color=["tab:red" if c.value > 0 else "tab:green" for c in top],
        )
        ax.axvline(0, color="grey", linewidth=0.6)
        ax.set_title(f"row {i}: base {local.base:.3g} -> prediction {local.prediction:.3g}", fontsize=8)
        ax.tick_params(labelsize=7)
    fig.suptitle(f"{title}: top contributions", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, format="png")


def write_explanations(
    model: PrimoModel,
    out: str | Path,
    x: Any = None,
    *,
    title: str = "model",
    extra: dict[str, Any] | None = None,
    max_local: int = 6,
    value_names: dict[str, list[str]] | None = None,
) -> list[Path]:
    """Write global (and, with ``x``, local) explanations; returns the files written."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    explanation = model.explain()
    assert isinstance(explanation, GlobalExplanation)
    data = {**explanation.to_dict(), **(extra or {})}
    written = [out / "global.json", out / "global.png"]
    written[0].write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    plot_global(explanation, written[1], title, value_names=value_names)
    if x is not None:
        local = model.explain(x)
        assert isinstance(local, list)
        (out / "local.json").write_text(json.dumps([e.to_dict() for e in local], indent=1) + "\n")
        plot_local(local[:max_local], out / "local.png", title)
        written += [out / "local.json", out / "local.png"]
    return written
