#!/usr/bin/env python3
"""PyTorch (CPU) peer benchmark: plain SGD on Fashion-MNIST.

Usage:
  python3 bench/peers/torch_fmnist.py --model mlp --mode single --epochs 1
  python3 bench/peers/torch_fmnist.py --model cnn --mode hogwild --procs 2 --epochs 3
  python3 bench/peers/torch_fmnist.py --model resnet20 --optimizer momentum --momentum 0.9 \
      --weight-decay 1e-4 --lr 0.1 --schedule cosine --epochs 10

Models
  mlp : 784-256-128-10, ReLU
  cnn : LeNet-5-like: conv 5x5x6 (pad 2) -> ReLU -> maxpool 2
                      conv 5x5x16        -> ReLU -> maxpool 2
                      fc 400-120 -> ReLU -> fc 120-84 -> ReLU -> fc 84-10
  resnet20 : He et al. 2016 section 4.2 on 28x28x1 (stalelab's resnet20): conv 3x3x16,
             BN, ReLU; 3 stages of 3 basic blocks (16, 32, 64 channels, stride 2 at
             stages 2 and 3, option-A shortcuts: subsample, zero-pad the channels);
             global average pooling; fc 64-10; convs without bias, Kaiming-normal
             (fan_in) init; BN momentum 0.1, eps 1e-5
Training
  cross-entropy, SGD lr 0.05, batch 64, momentum 0 (default), pixels / 255,
  no other normalisation, per-epoch shuffle from --seed, last partial batch kept.
  --optimizer sgd (heavy ball when --momentum > 0), momentum, nesterov, adam, adamw;
  --weight-decay (adamw: decoupled, weights of 2 or more dimensions only, as
  stalelab); --schedule constant or cosine (to 0.1 x lr at the last update, after
  --warmup updates of linear warm-up), as stalelab's lr_schedule.
Modes
  single  : one process, torch.set_num_threads(--threads)
  hogwild : --procs processes share one model (model.share_memory(), fork),
            as in pytorch/examples mnist_hogwild, each with --threads threads.  Unlike mnist_hogwild, one epoch here is
            ONE pass over the 60000 training samples in total: each epoch's
            permutation is split into --procs disjoint shards, one per process.
Measurement
  The data set is read once from the gz IDX files (gzip + numpy) before timing.
  Training time excludes evaluation: every --eval-every samples (all processes
  together) and at each epoch end, processes meet at a barrier, the clock stops,
  process 0 evaluates on the 10000 test images, and the clock restarts after a
  second barrier.  samples/s per epoch = 60000 / training seconds of that epoch.
  time_to_target_s = training seconds at the first evaluation whose test
  accuracy >= --target (resolution: --eval-every samples).
  OpenBLAS has its own thread pool (Debian's torch calls libblas = OpenBLAS), so
  OPENBLAS_NUM_THREADS is set before torch is imported: to --blas-threads if
  given, else kept if already set, else the default below.  One JSON line with all results is printed at the end.
"""
import argparse
import os
import sys


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=["mlp", "cnn", "resnet20"], default="mlp")
    ap.add_argument("--optimizer", choices=["sgd", "momentum", "nesterov", "adam", "adamw"],
                    default="sgd")
    ap.add_argument("--weight-decay", type=float, default=0.0)
    ap.add_argument("--schedule", choices=["constant", "cosine"], default="constant")
    ap.add_argument("--warmup", type=int, default=0, help="updates of linear warm-up")
    ap.add_argument("--samples", type=int, default=0,
                    help="train on this many samples of each epoch (0: all); samples/s counts them")
    ap.add_argument("--mode", choices=["single", "hogwild"], default="single")
    ap.add_argument("--procs", type=int, default=2, help="processes in hogwild mode")
    ap.add_argument("--threads", type=int, default=0,
                    help="torch.set_num_threads per process; 0 = default below")
    ap.add_argument("--blas-threads", type=int, default=0,
                    help="OpenBLAS threads per process (sets OPENBLAS_NUM_THREADS); "
                         "0 = keep OPENBLAS_NUM_THREADS if set, else default below")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.0)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--eval-every", type=int, default=6400,
                    help="evaluate every N training samples (all processes together); 0 = epoch ends only")
    ap.add_argument("--target", type=float, default=0.85, help="test accuracy for time_to_target")
    ap.add_argument("--data-dir", default=os.environ.get("FASHION_MNIST_DIR",
                                                         "/usr/share/datasets/fashion-mnist"))
    ap.add_argument("--quiet", action="store_true", help="only the final JSON line")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                    help="cuda: model and data on the GPU (single mode), FP32 as stalelab's "
                         "cuda backend runs (no TF32 unless --tf32)")
    ap.add_argument("--tf32", action="store_true", help="with --device cuda: let cuDNN and "
                    "matmuls use TF32 tensor cores")
    return ap.parse_args()


ARGS = parse_args()
NCORES = len(os.sched_getaffinity(0))
if ARGS.mode == "single":
    ARGS.procs = 1
# Defaults = the fastest settings measured on a 2-core machine (see bench/README.md):
#   single mlp: torch 1 thread, OpenBLAS all cores (the MLP is all GEMM);
#   single cnn: torch all cores (oneDNN/OpenMP convolutions), OpenBLAS 1;
#   hogwild:    cores // procs for both.
# Never both > 1: torch's OpenMP pool and OpenBLAS's pthread pool then fight
# over the cores (3-4x slower measured).
if ARGS.mode == "single":
    d_threads, d_blas = (1, NCORES) if ARGS.model == "mlp" else (NCORES, 1)  # cnn, resnet20
else:
    d_threads = d_blas = max(1, NCORES // ARGS.procs)
if ARGS.threads <= 0:
    ARGS.threads = d_threads
if ARGS.blas_threads > 0:
    os.environ["OPENBLAS_NUM_THREADS"] = str(ARGS.blas_threads)
os.environ.setdefault("OPENBLAS_NUM_THREADS", str(d_blas))
os.environ.setdefault("OMP_NUM_THREADS", str(ARGS.threads))

try:
    import numpy as np
    import torch
except ImportError:
    # `python3` may be a pyenv/venv interpreter without Debian's python3-torch.
    if os.path.exists("/usr/bin/python3") and os.path.realpath(sys.executable) != os.path.realpath("/usr/bin/python3") \
            and not os.environ.get("PEER_TORCH_REEXEC"):
        os.environ["PEER_TORCH_REEXEC"] = "1"
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    raise

import gzip
import json
import math
import platform
import time

import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F


DEV = torch.device(ARGS.device)
if DEV.type == "cuda" and ARGS.mode != "single":
    raise SystemExit("--device cuda runs in single mode only")


def log(*a):
    if not ARGS.quiet:
        print(*a, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- data
def read_idx_gz(path):
    """Read an IDX file (optionally gzip-compressed) into a numpy array."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    zero, dtype_code, ndim = data[0] * 256 + data[1], data[2], data[3]
    if zero != 0 or dtype_code != 0x08:
        raise ValueError(f"{path}: not an unsigned-byte IDX file")
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    off = 4 + 4 * ndim
    arr = np.frombuffer(data, dtype=np.uint8, count=int(np.prod(dims)), offset=off)
    return arr.reshape(dims)


def load_split(d, prefix):
    x = read_idx_gz(os.path.join(d, f"{prefix}-images-idx3-ubyte.gz"))
    y = read_idx_gz(os.path.join(d, f"{prefix}-labels-idx1-ubyte.gz"))
    assert x.shape[0] == y.shape[0]
    x = torch.from_numpy(x.astype(np.float32) / 255.0).reshape(-1, 1, 28, 28).contiguous()
    y = torch.from_numpy(y.astype(np.int64))
    return x, y


# ---------------------------------------------------------------- models
class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 256)
        self.fc2 = nn.Linear(256, 128)
        self.fc3 = nn.Linear(128, 10)

    def forward(self, x):
        x = x.reshape(x.shape[0], 784)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


class Block(nn.Module):
    """A basic block: conv-BN-ReLU-conv-BN, plus the option-A shortcut, ReLU."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.stride, self.pad = stride, cout - cin

    def forward(self, x):
        y = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
        s = x[:, :, ::self.stride, ::self.stride] if self.stride > 1 else x
        if self.pad:
            s = F.pad(s, (0, 0, 0, 0, self.pad // 2, self.pad - self.pad // 2))
        return F.relu(y + s)


class ResNet20(nn.Module):
    def __init__(self, n=3):
        super().__init__()
        self.conv = nn.Conv2d(1, 16, 3, 1, 1, bias=False)
        self.bn = nn.BatchNorm2d(16)
        blocks, cin = [], 16
        for i, c in enumerate((16, 32, 64)):
            for j in range(n):
                blocks.append(Block(cin, c, 2 if i > 0 and j == 0 else 1))
                cin = c
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(64, 10)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_in", nonlinearity="relu")

    def forward(self, x):
        x = self.blocks(F.relu(self.bn(self.conv(x))))
        return self.fc(x.mean((2, 3)))


def make_optimizer(model):
    lr, mu, wd = ARGS.lr, ARGS.momentum, ARGS.weight_decay
    if ARGS.optimizer in ("sgd", "momentum", "nesterov"):
        return torch.optim.SGD(model.parameters(), lr=lr, momentum=mu, weight_decay=wd,
                               nesterov=ARGS.optimizer == "nesterov")
    if ARGS.optimizer == "adam":
        return torch.optim.Adam(model.parameters(), lr=lr, weight_decay=wd)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": wd},
                              {"params": rest, "weight_decay": 0.0}], lr=lr)


def lr_at(it, total):
    """stalelab's lr_schedule: warm-up, then cosine to 0.1 x lr at `total`"""
    if it < ARGS.warmup:
        return ARGS.lr * (it + 1) / (ARGS.warmup + 1)
    if ARGS.schedule == "constant" or it >= total:
        return ARGS.lr if ARGS.schedule == "constant" else 0.1 * ARGS.lr
    r = (it - ARGS.warmup) / max(1, total - ARGS.warmup)
    return ARGS.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * r)))


class LeNet5(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5, padding=2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = x.reshape(x.shape[0], 400)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


def accuracy(model, x, y):
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, x.shape[0], 1000):
            correct += (model(x[i:i + 1000]).argmax(1) == y[i:i + 1000]).sum().item()
    model.train()
    return correct / x.shape[0]


# ---------------------------------------------------------------- training
def worker(rank, model, data, barrier, queue):
    xtr, ytr, xte, yte = data
    torch.set_num_threads(ARGS.threads)
    torch.manual_seed(ARGS.seed + 1000 * (rank + 1))
    opt = make_optimizer(model)
    n, P, B = xtr.shape[0], ARGS.procs, ARGS.batch
    total_updates = ARGS.epochs * (((min(n, ARGS.samples) if ARGS.samples > 0 else n) // P + B - 1) // B)
    updates = 0
    eval_steps = max(1, ARGS.eval_every // (B * P)) if ARGS.eval_every > 0 else 0

    def sync():
        if barrier is not None:
            barrier.wait()

    evals, epoch_times, epoch_acc = [], [], []
    train_time, seen = 0.0, 0
    t_target, s_target = None, None

    def checkpoint(do_eval):
        # Stop the clock (all processes at the barrier), optionally evaluate.
        nonlocal train_time, t_resume, t_target, s_target
        if DEV.type == "cuda":
            torch.cuda.synchronize()
        sync()
        train_time += time.perf_counter() - t_resume
        acc = None
        if rank == 0 and do_eval:
            acc = accuracy(model, xte, yte)
            evals.append([round(train_time, 4), seen, acc])
            if t_target is None and acc >= ARGS.target:
                t_target, s_target = train_time, seen
        sync()
        t_resume = time.perf_counter()
        return acc

    sync()
    t_resume = time.perf_counter()
    for epoch in range(ARGS.epochs):
        perm = torch.from_numpy(np.random.default_rng(ARGS.seed + epoch).permutation(n)).to(DEV)
        if ARGS.samples > 0:
            perm = perm[:ARGS.samples]
        shard = perm[rank::P]
        steps = (shard.shape[0] + B - 1) // B
        t_epoch0 = train_time
        for s in range(steps):
            idx = shard[s * B:(s + 1) * B]
            xb, yb = xtr[idx], ytr[idx]
            for g in opt.param_groups:
                g["lr"] = lr_at(updates, total_updates)
            updates += 1
            opt.zero_grad()
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            opt.step()
            # samples seen by all processes (processes run in lock-step between barriers)
            seen += idx.shape[0] * P
            if eval_steps and (s + 1) % eval_steps == 0 and s + 1 < steps:
                checkpoint(True)
        acc = checkpoint(True)
        if rank == 0:
            epoch_times.append(train_time - t_epoch0)
            epoch_acc.append(acc)
            log(f"epoch {epoch + 1}: train {epoch_times[-1]:.2f} s, "
                f"{(min(n, ARGS.samples) if ARGS.samples > 0 else n) / epoch_times[-1]:.0f} samples/s, test acc {acc:.4f}")
    if rank == 0:
        queue.put(dict(evals=evals, epoch_times=epoch_times, epoch_acc=epoch_acc,
                       train_time=train_time, t_target=t_target, s_target=s_target,
                       loss_last=float(loss.item())))


def main():
    t0 = time.perf_counter()
    torch.set_num_threads(ARGS.threads)
    xtr, ytr = load_split(ARGS.data_dir, "train")
    xte, yte = load_split(ARGS.data_dir, "t10k")
    t_load = time.perf_counter() - t0
    torch.manual_seed(ARGS.seed)
    model = {"mlp": MLP, "cnn": LeNet5, "resnet20": ResNet20}[ARGS.model]().to(DEV)
    data = tuple(t.to(DEV) for t in (xtr, ytr, xte, yte))
    if DEV.type == "cuda":
        torch.backends.cudnn.allow_tf32 = ARGS.tf32
        torch.backends.cuda.matmul.allow_tf32 = ARGS.tf32
    log(f"loaded {xtr.shape[0]}+{xte.shape[0]} images in {t_load:.2f} s; "
        f"model {ARGS.model}, mode {ARGS.mode}, procs {ARGS.procs}, threads {ARGS.threads}, "
        f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}")

    if ARGS.mode == "single":
        q = mp.SimpleQueue()
        worker(0, model, data, None, q)
        res = q.get()
    else:
        ctx = mp.get_context("fork")
        model.share_memory()
        barrier = ctx.Barrier(ARGS.procs)
        q = ctx.SimpleQueue()
        ps = [ctx.Process(target=worker, args=(r, model, data, barrier, q)) for r in range(ARGS.procs)]
        for p in ps:
            p.start()
        res = q.get()
        for p in ps:
            p.join()
            if p.exitcode != 0:
                raise SystemExit(f"worker exit code {p.exitcode}")

    n = xtr.shape[0]
    per_epoch = min(n, ARGS.samples) if ARGS.samples > 0 else n
    sps = [per_epoch / t for t in res["epoch_times"]]
    out = dict(
        bench="peer_torch", model=ARGS.model, mode=ARGS.mode, procs=ARGS.procs,
        torch_threads=ARGS.threads, openblas_threads=os.environ.get("OPENBLAS_NUM_THREADS"),
        epochs=ARGS.epochs, lr=ARGS.lr, momentum=ARGS.momentum, batch=ARGS.batch, seed=ARGS.seed,
        optimizer=ARGS.optimizer, weight_decay=ARGS.weight_decay, schedule=ARGS.schedule,
        warmup=ARGS.warmup,
        params=sum(p.numel() for p in model.parameters()),
        samples_per_s_median=round(float(np.median(sps)), 1),
        samples_per_s_epochs=[round(v, 1) for v in sps],
        epoch_train_s=[round(v, 3) for v in res["epoch_times"]],
        test_acc_epochs=res["epoch_acc"],
        test_acc_1ep=res["epoch_acc"][0] if res["epoch_acc"] else None,
        test_acc_3ep=res["epoch_acc"][2] if len(res["epoch_acc"]) >= 3 else None,
        target=ARGS.target,
        time_to_target_s=None if res["t_target"] is None else round(res["t_target"], 3),
        samples_to_target=res["s_target"], eval_every=ARGS.eval_every,
        train_time_s=round(res["train_time"], 3), load_s=round(t_load, 3),
        wall_s=round(time.perf_counter() - t0, 3), evals=res["evals"],
        torch=torch.__version__, numpy=np.__version__, python=platform.python_version(),
        cores=NCORES, device=ARGS.device,
        gpu=torch.cuda.get_device_name(0) if DEV.type == "cuda" else None,
        tf32=ARGS.tf32 if DEV.type == "cuda" else None,
    )
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
