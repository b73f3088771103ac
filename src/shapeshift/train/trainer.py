"""The reference training loop: ``python -m shapeshift.train``.

One process per rank (the backend starts them with ``RANK``/``WORLD_SIZE``/``MASTER_*``).
The plan comes from ``SHAPESHIFT_PLAN`` (or ``--plan``) and is applied as:

* ``dp``: DistributedDataParallel over gloo (CPU works);
* ``ga``: gradient accumulation, with ``no_sync`` on all but the last micro-step;
* ``gc``: ``torch.utils.checkpoint`` around every transformer block;
* ``zero=dp``: ``ZeroRedundancyOptimizer`` (optimizer state sharded over DP ranks).

Checkpoints are plan-independent (unwrapped model weights, consolidated optimizer state,
step, seed), so a job stopped under DP=2 resumes under DP=1,GA=2 at the same global batch
and the same data order. On lease revocation all ranks agree on the stop step (an
all-reduce of the flag), checkpoint, and exit with ``PREEMPTED_EXIT``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any, NoReturn

from shapeshift.client import PREEMPTED_EXIT, Lease, WorkerEnv, flush, report
from shapeshift.client.progress import log_step, should_log
from shapeshift.model import ExecutionPlan, ZeroMode
from shapeshift.train.data import batch_starts, corpus
from shapeshift.train.plans import UnsupportedPlan, check_plan
from shapeshift.train.rendezvous import rendezvous

CHECKPOINT = "trainer.pt"


def _plan_from(args: argparse.Namespace, env: WorkerEnv) -> ExecutionPlan:
    if args.plan:
        return ExecutionPlan.parse(args.plan)
    if env.plan:
        return ExecutionPlan(
            dp=env.plan["dp"],
            tp=env.plan["tp"],
            pp=env.plan["pp"],
            zero=env.plan["zero"],
            grad_accum=env.plan["grad_accum"],
            grad_ckpt=env.plan["grad_ckpt"],
            micro_batches=env.plan["micro_batches"],
        )
    return ExecutionPlan(dp=env.world_size)


def build_model(vocab: int, context: int, width: int, layers: int, heads: int, grad_ckpt: bool) -> Any:
    import torch
    from torch import nn
    from torch.utils.checkpoint import checkpoint

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln1 = nn.LayerNorm(width)
            self.attn = nn.MultiheadAttention(width, heads, batch_first=True)
            self.ln2 = nn.LayerNorm(width)
            self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))
            mask = torch.triu(torch.ones(context, context, dtype=torch.bool), diagonal=1)
            self.register_buffer("mask", mask, persistent=False)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = self.ln1(x)
            n = x.shape[1]
            x = x + self.attn(h, h, h, attn_mask=self.mask[:n, :n], need_weights=False)[0]
            return x + self.mlp(self.ln2(x))

    class TinyGPT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.tok = nn.Embedding(vocab, width)
            self.pos = nn.Embedding(context, width)
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.ln = nn.LayerNorm(width)
            self.head = nn.Linear(width, vocab)

        def forward(self, idx: torch.Tensor) -> torch.Tensor:
            x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
            for block in self.blocks:
                x = checkpoint(block, x, use_reentrant=False) if grad_ckpt and self.training else block(x)
            return self.head(self.ln(x))

    return TinyGPT()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m shapeshift.train", description=__doc__.split("\n")[0])
    parser.add_argument("--iterations", type=int, required=True)
    parser.add_argument("--global-batch", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--plan", default="", help="override the plan (default: $SHAPESHIFT_PLAN, else dp=WORLD_SIZE)")
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--context", type=int, default=32)
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--checkpoint-dir", default="")
    parser.add_argument(
        "--checkpoint-every", type=int, default=0, help="also checkpoint every N steps (0: only on stop)"
    )
    parser.add_argument(
        "--min-iter-time",
        type=float,
        default=0.0,
        help="seconds each step takes at least (sleeps the rest): stands in for a larger model, so a "
        "scheduler sees progress reports before the job ends (0: no pacing)",
    )
    args = parser.parse_args(argv)
    if not (math.isfinite(args.min_iter_time) and args.min_iter_time >= 0):
        parser.error(f"--min-iter-time must be a finite number >= 0, not {args.min_iter_time}")
    env = WorkerEnv.from_env()
    plan = _plan_from(args, env)
    try:
        micro = check_plan(plan, env.world_size, args.global_batch)
    except UnsupportedPlan as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    ckpt_dir = Path(args.checkpoint_dir or env.checkpoint_dir or ".")
    return _train(args, env, plan, micro, ckpt_dir)


def _train(args: argparse.Namespace, env: WorkerEnv, plan: ExecutionPlan, micro: int, ckpt_dir: Path) -> int:
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.distributed.optim import ZeroRedundancyOptimizer
    from torch.nn.parallel import DistributedDataParallel

    torch.set_num_threads(1)
    distributed = env.world_size > 1
    if distributed:
        timeout = timedelta(seconds=60)
        store = rendezvous(env.master_addr, int(env.master_port), env.rank, env.world_size, timeout)
        dist.init_process_group("gloo", store=store, rank=env.rank, world_size=env.world_size, timeout=timeout)
    text = corpus()
    vocab_chars = sorted(set(text))
    data = torch.tensor([vocab_chars.index(c) for c in text], dtype=torch.long)
    context = args.context
    torch.manual_seed(args.seed)
    model = build_model(len(vocab_chars), context, args.width, args.layers, 4, plan.grad_ckpt)
    if plan.zero is ZeroMode.DP and distributed:
        optimizer: Any = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.AdamW, lr=args.lr)
    else:
        optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    step = 0
    path = ckpt_dir / CHECKPOINT
    if path.exists():
        state = torch.load(path, weights_only=False)
        if state["seed"] != args.seed or state["global_batch"] != args.global_batch:
            print("error: checkpoint belongs to a different seed or global batch", file=sys.stderr)
            return 2
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        step = state["step"]
    wrapped = DistributedDataParallel(model) if distributed else model
    lease = Lease(env, poll_interval=0.2)

    def save() -> None:
        if isinstance(optimizer, ZeroRedundancyOptimizer):
            optimizer.consolidate_state_dict(to=0)
        if env.rank == 0:
            ckpt_dir.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            torch.save(
                {
                    "model": model.state_dict(),
                    "optimizer": optimizer.state_dict(),
                    "step": step,
                    "seed": args.seed,
                    "global_batch": args.global_batch,
                    "plan": str(plan),
                },
                tmp,
            )
            os.replace(tmp, path)
        if distributed:
            dist.barrier()

    def agree(flag: int) -> int:
        if not distributed:
            return flag
        tensor = torch.tensor([flag])
        dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
        return int(tensor.item())

    limit = len(data) - context - 1
    while step < args.iterations:
        if lease.agree(agree):  # phase two: every rank stops at this same step
            save()
            flush()
            return _leave_group(PREEMPTED_EXIT) if distributed else PREEMPTED_EXIT
        started = time.perf_counter()
        starts = batch_starts(args.seed, step, args.global_batch, limit)
        optimizer.zero_grad(set_to_none=True)
        total = 0.0
        for m in range(plan.grad_accum):
            chunk = starts[(env.rank * plan.grad_accum + m) * micro : (env.rank * plan.grad_accum + m + 1) * micro]
            x = torch.stack([data[s : s + context] for s in chunk])
            y = torch.stack([data[s + 1 : s + context + 1] for s in chunk])
            sync = not distributed or m == plan.grad_accum - 1
            ctx = wrapped.no_sync() if not sync else _nullcontext()
            with ctx:
                loss = F.cross_entropy(wrapped(x).reshape(-1, len(vocab_chars)), y.reshape(-1)) / plan.grad_accum
                loss.backward()
            total += float(loss.item())
        optimizer.step()
        step += 1
        spare = args.min_iter_time - (time.perf_counter() - started)
        if spare > 0:
            time.sleep(spare)
        iter_time = time.perf_counter() - started
        report(step, loss=total, samples=args.global_batch, iter_time=iter_time)
        if env.rank == 0 and should_log(step, args.iterations):
            log_step(step, args.iterations, total, iter_time, samples=args.global_batch)
        if args.checkpoint_every and step % args.checkpoint_every == 0:
            save()
    save()
    final = _eval_loss(model, data, context, len(vocab_chars)) if env.rank == 0 else math.nan
    if env.rank == 0:
        result = {"final_loss": final, "steps": step, "plan": str(plan), "seed": args.seed}
        (ckpt_dir / "result.json").write_text(json.dumps(result))
        report(step, loss=final)
    flush()
    if distributed:
        dist.barrier()  # rank 0 has written the result: leave the group together
        return _leave_group(0)
    return 0


def _leave_group(code: int) -> NoReturn:
    """Exit with ``code`` at once, without tearing the process group down.

    Every rank has passed the last barrier with everything saved and reported, so nothing
    is left to do together. Tearing gloo down (``destroy_process_group``), or leaving it
    to the interpreter's finalisation, can block for good (pytorch/pytorch#75097), and
    while it blocks in C++ it may hold the GIL, so no timer in Python ends it: in this
    project's CI a rank that had run all its steps, with its peer done and gone, never
    exited, and its job looked running until the test gave up. Exiting here skips the
    teardown; the logs are flushed first, as a normal exit would.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _eval_loss(model: Any, data: Any, context: int, vocab: int) -> float:
    """Loss on a fixed held-out set of sequences: the same yardstick for every plan."""
    import torch
    import torch.nn.functional as F

    model.eval()
    starts = batch_starts(987_654, 0, 64, len(data) - context - 1)
    with torch.no_grad():
        x = torch.stack([data[s : s + context] for s in starts])
        y = torch.stack([data[s + 1 : s + context + 1] for s in starts])
        return float(F.cross_entropy(model(x).reshape(-1, vocab), y.reshape(-1)))


class _nullcontext:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


if __name__ == "__main__":
    sys.exit(main())
