"""Measure how fast training jobs run when two share one GPU, beside the interference model.

On a machine with one CUDA GPU (torch, torchvision and nvidia-ml-py; shapeshift is not
needed there):

    python scripts/measure_colocation.py measure --out DIR

trains six models on synthetic data, each in its own process, first alone and then in
every pair. The GPU is shared however the machine shares it: time-slicing between
processes by default, concurrent kernels where an MPS server runs (say which with
``--sharing``, written to ``env.txt``). Alone, it samples NVML's GPU and
memory utilisation (what nvidia-smi prints, the features of the model); in a pair, each
job's speed is its iterations per second over its rate alone. It writes ``DIR/solo.csv``,
``DIR/pairs.csv`` (``model_a,model_b,speed_a,speed_b``: the table
``RunSpec(interference=...)`` reads) and ``DIR/env.txt``. Each job runs alone twice, at
the start and at the end, so drift shows. Then, here:

    python scripts/measure_colocation.py compare DIR

prints the measured speeds beside ``UtilisationInterference`` (``shapeshift.perf.colocation``,
fitted to the Lucid artifact's RTX 3090 pairs) fed the measured utilisations, with the
RMSE of each and of the best constant. ``--device cpu`` runs tiny stand-ins briefly, to
check the harness without a GPU.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import math
import multiprocessing as mp
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: (the job model's name in the catalog, batch size), so the pair table written applies to
#: jobs of these models (``PairTable`` matches names). Image models at 224 x 224;
#: mobilenetv2 is not in the catalog. In Lucid's profiles: ResNet18, ResNet50,
#: MobileNetV2, LSTM, NeuMF, BERT.
MODELS = [("resnet18", 64), ("resnet50", 32), ("mobilenetv2", 64), ("lstm", 64), ("ncf", 1024), ("bert-base", 16)]


@dataclass
class Training:
    """A model on its device with its optimizer, and one training step (forward, backward,
    optimizer step, synchronised)."""

    model: Any
    optimizer: Any
    step: Callable[[], None]


def check_model_names(models: list[str]) -> None:
    """Refuses names not in ``MODELS`` (``ValueError`` naming ``--models``); empty means all."""
    unknown = sorted(set(models) - {name for name, _ in MODELS})
    if unknown:
        raise ValueError(f"--models: unknown {', '.join(unknown)}; known: {', '.join(n for n, _ in MODELS)}")


def write_environment(out: Path, device: str, script: str, arguments: tuple[str, ...]) -> None:
    """``out/env.txt``: the device's name, torch and Python versions, and the command line
    (``script`` and its ``arguments``) of a measurement."""
    import torch

    gpu = torch.cuda.get_device_name(torch.device(device)) if device != "cpu" else "cpu"
    env = [f"device: {gpu}", f"torch: {torch.__version__}", f"python: {sys.version.split()[0]}",
           "command: " + " ".join([f"python scripts/{script}", *arguments])]
    (out / "env.txt").write_text("\n".join(env) + "\n")


def build_training(name: str, batch: int, device: str) -> Training:
    """The model ``name`` of ``MODELS`` at ``batch``, on synthetic data; tiny stand-ins on
    the CPU (``device="cpu"``), to check a harness without a GPU."""
    import torch
    from torch import nn

    tiny = device == "cpu"
    if name in ("resnet18", "resnet50", "mobilenetv2"):
        if tiny:
            model = nn.Sequential(
                nn.Conv2d(3, 8, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10)
            )
            x, y = torch.randn(4, 3, 32, 32), torch.randint(0, 10, (4,))
        else:
            import torchvision

            model = getattr(torchvision.models, name.replace("mobilenetv2", "mobilenet_v2"))(num_classes=1000)
            x, y = torch.randn(batch, 3, 224, 224), torch.randint(0, 1000, (batch,))
        loss_of = lambda m, x, y: nn.functional.cross_entropy(m(x), y)  # noqa: E731
    elif name == "lstm":  # word-level language model, 2 x 512, 35 tokens
        vocab, width = (100, 16) if tiny else (10_000, 512)

        class Lm(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.embed, self.rnn = nn.Embedding(vocab, width), nn.LSTM(width, width, 2, batch_first=True)
                self.out = nn.Linear(width, vocab)

            def forward(self, x):
                return self.out(self.rnn(self.embed(x))[0])

        model = Lm()
        x, y = torch.randint(0, vocab, (batch, 35)), torch.randint(0, vocab, (batch, 35))
        loss_of = lambda m, x, y: nn.functional.cross_entropy(m(x).reshape(-1, vocab), y.reshape(-1))  # noqa: E731
    elif name == "ncf":  # NeuMF: GMF + MLP on user and item embeddings, implicit feedback
        users, dim = (100, 4) if tiny else (100_000, 64)

        class NeuMF(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.gu, self.gi = nn.Embedding(users, dim), nn.Embedding(users, dim)
                self.mu, self.mi = nn.Embedding(users, dim), nn.Embedding(users, dim)
                self.mlp = nn.Sequential(nn.Linear(2 * dim, dim), nn.ReLU(), nn.Linear(dim, dim // 2), nn.ReLU())
                self.out = nn.Linear(dim + dim // 2, 1)

            def forward(self, x):
                u, i = x[:, 0], x[:, 1]
                mlp = self.mlp(torch.cat([self.mu(u), self.mi(i)], 1))
                return self.out(torch.cat([self.gu(u) * self.gi(i), mlp], 1)).squeeze(1)

        model = NeuMF()
        x, y = torch.randint(0, users, (batch, 2)), torch.randint(0, 2, (batch,)).float()
        loss_of = lambda m, x, y: nn.functional.binary_cross_entropy_with_logits(m(x), y)  # noqa: E731
    else:  # BERT-base-like encoder: 12 layers, 768 wide, 128 tokens
        layers, width, heads, vocab = (1, 16, 2, 100) if tiny else (12, 768, 12, 30_522)

        class Encoder(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.embed = nn.Embedding(vocab, width)
                layer = nn.TransformerEncoderLayer(width, heads, 4 * width, batch_first=True)
                self.body, self.out = nn.TransformerEncoder(layer, layers), nn.Linear(width, vocab)

            def forward(self, x):
                return self.out(self.body(self.embed(x)))

        model = Encoder()
        x, y = torch.randint(0, vocab, (batch, 128)), torch.randint(0, vocab, (batch, 128))
        loss_of = lambda m, x, y: nn.functional.cross_entropy(m(x).reshape(-1, vocab), y.reshape(-1))  # noqa: E731
    model, x, y = model.to(device), x.to(device), y.to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    sync = torch.cuda.synchronize if device != "cpu" else (lambda: None)

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        loss_of(model, x, y).backward()
        optimizer.step()
        sync()

    return Training(model, optimizer, step)


def _worker(name: str, batch: int, device: str, conn) -> None:
    """Builds the model, warms it up, then runs windows on request: ('go', start, seconds)."""
    import torch

    torch.manual_seed(0)
    step = build_training(name, batch, device).step
    warm_until = time.monotonic() + (0.2 if device == "cpu" else 3.0)
    while time.monotonic() < warm_until:
        step()
    mem = torch.cuda.max_memory_reserved() / 2**30 if device != "cpu" else 0.0
    conn.send(("ready", mem))
    while True:
        message = conn.recv()
        if message[0] == "stop":
            return
        _, start, seconds = message
        time.sleep(max(start - time.monotonic(), 0.0))
        done, end = 0, start + seconds
        while (now := time.monotonic()) < end:
            step()
            done += 1
        conn.send(("done", done / (now - start)))


class _Nvml:
    """Samples NVML's GPU and memory utilisation every 50 ms while ``sampling``."""

    def __init__(self) -> None:
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nvml, self._handle = pynvml, pynvml.nvmlDeviceGetHandleByIndex(0)
        except Exception:  # no GPU (the CPU check): utilisation unknown
            self._nvml = None
        self.samples: list[tuple[float, float]] = []
        self.sampling = False

    def name(self) -> str:
        if self._nvml is None:
            return "no NVML"
        return f"{self._nvml.nvmlDeviceGetName(self._handle)}, driver {self._nvml.nvmlSystemGetDriverVersion()}"

    def during(self, seconds: float, skip: float) -> threading.Thread:
        self.samples = []

        def run() -> None:
            time.sleep(skip)
            end = time.monotonic() + seconds - skip
            while self._nvml is not None and time.monotonic() < end:
                rates = self._nvml.nvmlDeviceGetUtilizationRates(self._handle)
                self.samples.append((rates.gpu / 100, rates.memory / 100))
                time.sleep(0.05)

        thread = threading.Thread(target=run)
        thread.start()
        return thread

    def means(self) -> tuple[float, float]:
        if not self.samples:
            return math.nan, math.nan
        return tuple(sum(s[i] for s in self.samples) / len(self.samples) for i in (0, 1))  # type: ignore[return-value]


def measure(out: Path, device: str, window: float, sharing: str, same_model: bool = False) -> None:
    """``same_model``: pair each model with a second copy of itself instead of with the
    others (a row ``m,m`` whose two speeds are the copies' mean, as ``PairTable`` keeps
    one speed for a job beside its own model)."""
    import torch

    out.mkdir(parents=True, exist_ok=True)
    context = mp.get_context("spawn")
    workers = {}
    copies = [(name, batch, name) for name, batch in MODELS]
    if same_model:
        copies += [(name, batch, f"{name}#2") for name, batch in MODELS]
    for name, batch, key in copies:
        mine, theirs = context.Pipe()
        process = context.Process(target=_worker, args=(name, batch, device, theirs), daemon=True)
        process.start()
        workers[key] = (process, mine)
    memory = {key: conn.recv()[1] for key, (_, conn) in workers.items()}
    nvml = _Nvml()

    def run(names: tuple[str, ...], sample: bool) -> list[float]:
        start = time.monotonic() + 0.3
        for name in names:
            workers[name][1].send(("go", start, window))
        sampler = nvml.during(window + 0.3, skip=0.8) if sample else None
        rates = [workers[name][1].recv()[1] for name in names]
        if sampler is not None:
            sampler.join()
        return rates

    solo: dict[str, list[tuple[float, float, float]]] = {}
    order = [name for name, _ in MODELS]
    for name in order:
        rate = run((name,), sample=True)[0]
        solo.setdefault(name, []).append((rate, *nvml.means()))
        print(f"alone {name}: {rate:.2f} it/s, utilisation gpu/mem {nvml.means()}", flush=True)
    pairs = []
    if same_model:
        for name in order:
            rate_a, rate_b = run((name, f"{name}#2"), sample=False)
            pairs.append((name, name, (rate_a + rate_b) / 2, (rate_a + rate_b) / 2))
            print(f"pair {name} + its copy: {rate_a:.2f} / {rate_b:.2f} it/s", flush=True)
    for a, b in [] if same_model else itertools.combinations(order, 2):
        rate_a, rate_b = run((a, b), sample=False)
        pairs.append((a, b, rate_a, rate_b))
        print(f"pair {a} + {b}: {rate_a:.2f} / {rate_b:.2f} it/s", flush=True)
    for name in order:
        rate = run((name,), sample=True)[0]
        solo[name].append((rate, *nvml.means()))
        print(f"alone again {name}: {rate:.2f} it/s", flush=True)
    for _, conn in workers.values():
        conn.send(("stop",))
    alone = {name: sum(r[0] for r in runs) / len(runs) for name, runs in solo.items()}
    with (out / "solo.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["model", "batch", "it_per_s_first", "it_per_s_last", "gpu_util", "mem_util", "gpu_mem_gb"])
        for name, batch in MODELS:
            first, last = solo[name]
            util = [(first[i] + last[i]) / 2 for i in (1, 2)]
            w.writerow(
                [
                    name,
                    batch,
                    f"{first[0]:.4f}",
                    f"{last[0]:.4f}",
                    f"{util[0]:.4f}",
                    f"{util[1]:.4f}",
                    f"{memory[name]:.2f}",
                ]
            )
    with (out / "pairs.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["model_a", "model_b", "speed_a", "speed_b"])
        for a, b, rate_a, rate_b in pairs:
            w.writerow([a, b, f"{rate_a / alone[a]:.4f}", f"{rate_b / alone[b]:.4f}"])
    (out / "env.txt").write_text(
        f"{nvml.name()}\ntorch {torch.__version__}\nwindow {window} s, device {device}\n"
        f"sharing: {sharing}\n"
        f"pairs: {'each model beside a copy of itself' if same_model else 'every two different models'}\n"
        f"command: python scripts/measure_colocation.py measure --out DIR --window {window} --sharing '{sharing}'"
        f"{' --same-model' if same_model else ''}\n"
    )


def compare(directory: Path) -> None:
    """The measured pair speeds beside the default interference model's."""
    import numpy as np

    from shapeshift.perf.colocation import UtilisationInterference

    formula = UtilisationInterference()
    solo = {row["model"]: row for row in csv.DictReader((directory / "solo.csv").open())}
    util = {m: (float(r["gpu_util"]), float(r["mem_util"])) for m, r in solo.items()}
    print((directory / "env.txt").read_text().strip())
    print(f"\n{'model':<12} {'it/s first':>10} {'it/s last':>10} {'gpu util':>8} {'mem util':>8} {'GPU GB':>7}")
    for m, r in solo.items():
        print(
            f"{m:<12} {float(r['it_per_s_first']):>10.2f} {float(r['it_per_s_last']):>10.2f} "
            f"{util[m][0]:>8.2f} {util[m][1]:>8.2f} {float(r['gpu_mem_gb']):>7.1f}"
        )
    measured, predicted = [], []
    print(f"\n{'job':<12} {'partner':<12} {'measured':>8} {'model':>6}")
    for row in csv.DictReader((directory / "pairs.csv").open()):
        for me, other, speed in (
            (row["model_a"], row["model_b"], row["speed_a"]),
            (row["model_b"], row["model_a"], row["speed_b"]),
        ):
            model = formula.speed_beside(*util[me], *util[other])
            measured.append(float(speed))
            predicted.append(model)
            print(f"{me:<12} {other:<12} {float(speed):>8.3f} {model:>6.3f}")
    s, p = np.array(measured), np.array(predicted)
    mean = s.mean()
    rmse, constant = np.sqrt(np.mean((p - s) ** 2)), s.std()
    print(f"\n{len(s)} directed pairs; measured speed mean {mean:.3f}, min {s.min():.3f}, max {s.max():.3f}")
    print(
        f"RMSE: model (alpha {formula.alpha}, beta {formula.beta}) {rmse:.3f}; "
        f"best constant ({mean:.3f}) {constant:.3f}"
    )
    spread = p.std() * s.std()
    print(f"correlation of model and measured: {np.corrcoef(p, s)[0, 1]:.3f}" if spread else "correlation: undefined")
    print(f"mean of model - measured: {np.mean(p - s):+.3f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("measure")
    m.add_argument("--out", type=Path, required=True)
    m.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    m.add_argument("--window", type=float, default=5.0, help="seconds each measurement runs (at least 1)")
    m.add_argument("--sharing", default="time-slicing", help="how the GPU is shared, for env.txt (e.g. MPS)")
    m.add_argument("--same-model", action="store_true", help="pair each model with a copy of itself instead")
    c = sub.add_parser("compare")
    c.add_argument("directory", type=Path)
    args = parser.parse_args()
    if args.command == "measure":
        if not (math.isfinite(args.window) and args.window > 0) or (args.device == "cuda" and args.window < 1):
            parser.error("--window must be at least 1 second on a GPU (utilisation is sampled from 0.8 s on)")
        measure(args.out, args.device, args.window, args.sharing, args.same_model)
    else:
        compare(args.directory)
    return 0


if __name__ == "__main__":
    sys.exit(main())
