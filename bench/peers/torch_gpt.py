#!/usr/bin/env python3
"""PyTorch (CPU) twin of stalelab's gpt:L<layers>-H<heads>-E<width>-T<context>.

Usage:
  python3 bench/peers/torch_gpt.py --bench 4                 # training tokens/s
  python3 bench/peers/torch_gpt.py --iters 2000 --eval-every 250   # nanoGPT's CPU run

The model (stalelab's gpt_nodes, engine/nn/model.c; nanoGPT's model.py with
bias=True and dropout 0): token and learned position embeddings; per block
x += proj(attn(qkv(ln1 x))), x += proj2(gelu(fc(ln2 x))) with one fused QKV
projection, causal softmax attention (1/sqrt(head width)) and GELU in its tanh
form (GPT-2's and llm.c's, as stalelab); a final layer norm (eps 1e-5); the
head tied to the token table. Init: every matrix and table normal(0, 0.02),
the two residual projections normal(0, 0.02 / sqrt(2 L)), biases 0, norm
gains 1.

The data (stalelab's ds_text, engine/data/dataset_text.c): the file's bytes
(gzip read through, as dict-gcide's .dz); the vocabulary is the bytes that
occur, in increasing order; the last tenth is held out. Training contexts of
T + 1 bytes start at uniform offsets of the first nine tenths (a fresh batch
of offsets from --seed each iteration, as nanoGPT's get_batch); the held-out
loss is the mean cross-entropy per token over the same 256 contexts stalelab
evaluates (evenly spaced over the tail, first and last included).

Modes
  --bench S : plain SGD (lr 0.05, as `stalelab bench`), 20 warm-up steps, then
              training tokens/s in windows of 0.25 s for about S seconds; the
              median is reported.
  --iters N : AdamW (betas 0.9/--beta2, eps 1e-8, decoupled --weight-decay on
              matrices and tables only, nanoGPT's groups), gradient clipping
              to --clip, lr with --warmup updates of linear warm-up
              ((it + 1) / (warmup + 1)) then cosine to --min-lr at update
              --decay (stalelab's lr_schedule, nanoGPT's get_lr); the held-out
              loss every --eval-every iterations and at the end.
Threads: --threads (torch's pool) and --blas-threads (OpenBLAS's pool; Debian's
torch does its matrix products there). Never both above 1 (they fight over
the cores); the default is torch 1 thread, OpenBLAS all cores.
One JSON line with the results is printed at the end.
"""
import argparse
import os
import sys


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--text", default="/usr/share/dictd/gcide.dict.dz",
                    help="the text (plain or gzip); default dict-gcide's Webster's 1913 "
                         "(stalelab's text:webster)")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--width", type=int, default=128)
    ap.add_argument("--context", type=int, default=64)
    ap.add_argument("--batch", type=int, default=12)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--bench", type=float, default=0.0,
                    help="measure training tokens/s for about this many seconds")
    ap.add_argument("--iters", type=int, default=0, help="train this many iterations (AdamW)")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--min-lr", type=float, default=1e-4)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--decay", type=int, default=0,
                    help="the update the cosine reaches --min-lr at (0: --iters)")
    ap.add_argument("--beta2", type=float, default=0.99)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--eval-every", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1, help="torch's threads (0: all cores)")
    ap.add_argument("--blas-threads", type=int, default=0,
                    help="OpenBLAS's threads (0: all cores)")
    ap.add_argument("--quiet", action="store_true", help="only the final JSON line")
    a = ap.parse_args()
    if (a.bench > 0) == (a.iters > 0):
        ap.error("give one of --bench SECONDS or --iters N")
    if a.width % a.heads:
        ap.error("--width must be a multiple of --heads")
    return a


ARGS = parse_args()
NCORES = len(os.sched_getaffinity(0))
os.environ["OPENBLAS_NUM_THREADS"] = str(ARGS.blas_threads or NCORES)
ARGS.threads = ARGS.threads or NCORES
os.environ["OMP_NUM_THREADS"] = str(ARGS.threads)

try:
    import torch
except ImportError:
    # `python3` may be an interpreter without Debian's python3-torch
    if os.path.exists("/usr/bin/python3") and \
            os.path.realpath(sys.executable) != os.path.realpath("/usr/bin/python3") \
            and not os.environ.get("PEER_TORCH_REEXEC"):
        os.environ["PEER_TORCH_REEXEC"] = "1"
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    raise

import gzip
import json
import math
import statistics
import time

import torch.nn as nn
import torch.nn.functional as F

TEXT_EVAL = 256   # stalelab's DS_TEXT_EVAL
MAX_BYTES = 256 << 20  # DS_TEXT_MAX_BYTES


def log(*a):
    if not ARGS.quiet:
        print(*a, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- data

def read_text(path):
    with open(path, "rb") as f:
        magic = f.read(2)
    opener = gzip.open if magic == b"\x1f\x8b" else open
    with opener(path, "rb") as f:
        buf = f.read(MAX_BYTES + 1)
    if len(buf) > MAX_BYTES:
        raise SystemExit("%s: larger than %d bytes" % (path, MAX_BYTES))
    return buf


def split(buf, ctx):
    vocab = sorted(set(buf))
    lut = torch.zeros(256, dtype=torch.long)
    lut[torch.tensor(vocab)] = torch.arange(len(vocab))
    ids = lut[torch.frombuffer(bytearray(buf), dtype=torch.uint8).long()]
    tail = len(buf) // 10
    head = len(buf) - tail
    ntest = min(TEXT_EVAL, tail - ctx)
    span = tail - ctx - 1
    offs = [head + (i * span // (ntest - 1) if ntest > 1 else 0) for i in range(ntest)]
    idx = torch.tensor(offs).unsqueeze(1) + torch.arange(ctx + 1)
    test = ids[idx]
    return ids[:head], test, len(vocab)


# ---------------------------------------------------------------- model

class Block(nn.Module):
    def __init__(self, e, h):
        super().__init__()
        self.h = h
        self.ln1 = nn.LayerNorm(e)
        self.qkv = nn.Linear(e, 3 * e)
        self.proj = nn.Linear(e, e)
        self.ln2 = nn.LayerNorm(e)
        self.fc = nn.Linear(e, 4 * e)
        self.proj2 = nn.Linear(4 * e, e)

    def forward(self, x, mask):
        b, t, e = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(e, dim=2)
        q = q.view(b, t, self.h, e // self.h).transpose(1, 2)
        k = k.view(b, t, self.h, e // self.h).transpose(1, 2)
        v = v.view(b, t, self.h, e // self.h).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(e // self.h))
        att = att.masked_fill(mask[:t, :t], float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, e)
        x = x + self.proj(y)
        return x + self.proj2(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, vocab, layers, heads, width, ctx):
        super().__init__()
        self.wte = nn.Embedding(vocab, width)
        self.wpe = nn.Embedding(ctx, width)
        self.blocks = nn.ModuleList([Block(width, heads) for _ in range(layers)])
        self.lnf = nn.LayerNorm(width)
        self.register_buffer("mask", torch.triu(torch.ones(ctx, ctx, dtype=torch.bool), 1))
        for name, p in self.named_parameters():
            if p.dim() >= 2:
                sd = 0.02 / math.sqrt(2 * layers) if name.endswith(("proj.weight", "proj2.weight")) \
                    else 0.02
                nn.init.normal_(p, 0.0, sd)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, x, y):
        t = x.shape[1]
        h = self.wte(x) + self.wpe(torch.arange(t))
        for blk in self.blocks:
            h = blk(h, self.mask)
        logits = self.lnf(h) @ self.wte.weight.t()
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), y.reshape(-1))


# ---------------------------------------------------------------- training

def main():
    torch.set_num_threads(ARGS.threads)
    torch.manual_seed(ARGS.seed)
    t0 = time.time()
    train, test, vocab = split(read_text(ARGS.text), ARGS.context)
    log("text %s: %d training bytes, %d held-out contexts, vocabulary %d (%.1f s)"
        % (ARGS.text, len(train), len(test), vocab, time.time() - t0))
    model = GPT(vocab, ARGS.layers, ARGS.heads, ARGS.width, ARGS.context)
    nparams = sum(p.numel() for p in model.parameters())
    T, B = ARGS.context, ARGS.batch
    gen = torch.Generator().manual_seed(ARGS.seed)
    ar = torch.arange(T + 1)

    def batch():
        o = torch.randint(0, len(train) - T, (B,), generator=gen)
        c = train[o.unsqueeze(1) + ar]
        return c[:, :-1], c[:, 1:]

    def held_out():
        model.eval()
        with torch.no_grad():
            tot = 0.0
            for i in range(0, len(test), 64):
                c = test[i:i + 64]
                tot += model(c[:, :-1], c[:, 1:]).item() * len(c)
        model.train()
        return tot / len(test)

    out = {"peer": "torch_gpt", "torch": torch.__version__,
           "model": "gpt:L%d-H%d-E%d-T%d" % (ARGS.layers, ARGS.heads, ARGS.width, T),
           "batch": B, "threads": ARGS.threads,
           "blas_threads": int(os.environ["OPENBLAS_NUM_THREADS"]), "vocab": vocab,
           "params": nparams}
    if ARGS.bench > 0:
        opt = torch.optim.SGD(model.parameters(), lr=0.05)

        def step():
            x, y = batch()
            loss = model(x, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        for _ in range(20):
            step()
        rates, t_end = [], time.time() + ARGS.bench
        while len(rates) < 64 and (len(rates) < 3 or time.time() < t_end):
            n, w0 = 0, time.time()
            while True:
                step()
                n += 1
                w = time.time() - w0
                if w >= 0.25:
                    break
            rates.append(n * B * T / w)
        out["tokens_per_s_median"] = round(statistics.median(rates), 1)
        out["windows"] = len(rates)
        print(json.dumps(out), flush=True)
        return

    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": ARGS.weight_decay},
                             {"params": rest, "weight_decay": 0.0}],
                            lr=ARGS.lr, betas=(0.9, ARGS.beta2), eps=1e-8)
    dec = ARGS.decay or ARGS.iters
    floor = ARGS.min_lr / ARGS.lr

    def lr_at(it):
        if it < ARGS.warmup:
            return ARGS.lr * (it + 1) / (ARGS.warmup + 1)
        span = dec - ARGS.warmup
        if it >= dec or span <= 0:
            return ARGS.lr * floor
        c = 0.5 * (1 + math.cos(math.pi * (it - ARGS.warmup) / span))
        return ARGS.lr * (floor + c * (1 - floor))

    curve = [[0, held_out()]]
    log("iter 0: held-out loss %.4f" % curve[0][1])
    train_s, losses = 0.0, []
    for it in range(ARGS.iters):
        w0 = time.time()
        for g in opt.param_groups:
            g["lr"] = lr_at(it)
        x, y = batch()
        loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if ARGS.clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), ARGS.clip)
        opt.step()
        train_s += time.time() - w0
        losses.append(loss.item())
        if (ARGS.eval_every and (it + 1) % ARGS.eval_every == 0) or it + 1 == ARGS.iters:
            curve.append([it + 1, held_out()])
            log("iter %d: train loss %.4f, held-out loss %.4f (%.0f tokens/s)"
                % (it + 1, statistics.mean(losses[-50:]), curve[-1][1],
                   (it + 1) * B * T / train_s))
    out.update({"iters": ARGS.iters, "lr": ARGS.lr, "min_lr": ARGS.min_lr,
                "warmup": ARGS.warmup, "decay": dec, "beta2": ARGS.beta2,
                "weight_decay": ARGS.weight_decay, "clip": ARGS.clip,
                "held_out_loss": round(curve[-1][1], 5),
                "held_out_curve": [[i, round(v, 5)] for i, v in curve],
                "bits_per_byte": round(curve[-1][1] / math.log(2), 5),
                "train_tokens_per_s": round(ARGS.iters * B * T / train_s, 1),
                "train_s": round(train_s, 1)})
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
