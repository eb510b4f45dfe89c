#!/usr/bin/env python3
"""results.py - the seeds' results, reproduced with our engine.

    python3 experiments/results.py [--quick] [--jobs N] [--out DIR] [--only r1,r4]
                                   [--device ref]

Runs each experiment's sweep (experiments/NAME.json, or with --quick the small
experiments/quick/NAME.json), reads the cells back and decides each claim of
the source it reproduces by its 95% interval over the seeds (lib.py: agrees,
differs, or not resolved at N seeds; checks of our model against itself are
identities, never counted as agreement). The full run writes docs/results.md
(from experiments/results.md.in) and its figures under docs/results/;
--quick checks, renders its page and figures into its out dir, and exits 1 when a claim differs or leans the wrong way
or an identity fails (make test runs it). `make results` is the full run.
See docs/results.md.
"""
import argparse
import json
import math
import os
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib import (LEVEL, Report, by_group, cells, first_at, fmt, gnuplot, isclose,  # noqa: E402
                 lines, mean, sd, sweep, table, tally, tv_distance)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STEP_MS = 6.4455  # one MLP 784-256-128-10 step of batch 64 on the virtual clock (the sweeps' unit)
MLP_BYTES = 940584  # the MLP 784-256-128-10's 235,146 floats (r5's links are set from it)
NOMINAL_FLOPS = 10e9  # the virtual clock's FLOP/s (docs/rules.md, "Clocks")
NEVER = "never: the run's length, a lower bound"


def by_seed(l, f):
    """{seed: f(cell)} over a group's cells"""
    return {c.seed: f(c) for c in l}


def logs(d):
    return {k: math.log(v) for k, v in d.items()}


def to_target(c, key, test, field="v"):
    """(field at the first evaluation whose key passes test, True), or, for
    a run that never passes, (field at its end, False): a lower bound"""
    x = first_at(c, key, test, field)
    return (x, True) if x is not None else (c.end[field], False)


def step_s(c):
    """one step's compute on the virtual clock: its FLOPs at the nominal rate"""
    return c.metrics["step_flops"] / c.metrics["samples"] * c.run["batch"] / NOMINAL_FLOPS


def loss_spikes(c, skip=10):
    """evaluations whose train loss is over 1.2 times the lowest so far
    (a non-finite loss counts), after the first `skip`"""
    n, low = 0, float("inf")
    for i, e in enumerate(c.evals):
        x = e.get("train_loss")
        if i >= skip and (x is None or x > 1.2 * low):
            n += 1
        if x is not None:
            low = min(low, x)
    return n


def late_loss(c):
    """the median train loss of the second half of the run (inf if not finite)"""
    xs = [e.get("train_loss") for e in c.evals[len(c.evals) // 2:]]
    xs = sorted(float("inf") if x is None else x for x in xs)
    return xs[len(xs) // 2] if xs else None


def seed_curve(cs, xkey, ykey, scale=1.0):
    """the seeds' mean of ykey at each evaluation, against xkey / scale"""
    n = min(len(c.evals) for c in cs)
    out = []
    for i in range(n):
        ys = [c.evals[i].get(ykey) for c in cs]
        out.append((cs[0].evals[i][xkey] / scale, mean(ys)))
    return out


# ---- 1. The async test-bed paper (Zhang, Tanimura, Nakada 2018) ----------

def r1(rep, cs, figs, quick):
    rows, curves = [], {}
    for g, l in by_group(cs).items():
        c0 = l[0]
        w, B = c0.run["workers"], c0.run["batch"]
        d = c0.run["delay"].get("mean_ms", 0) if c0.run["delay"]["dist"] != "none" else 0
        name = {"sequential": "sequential", "sync": "sync %d" % w}.get(
            c0.variant, "async %d, d=%g" % (w, round(d / STEP_MS, 2)))
        b = by_seed(l, lambda c: to_target(c, "train_loss", lambda x: x <= 0.6, "samples"))
        never = sum(not hit for _, hit in b.values())
        u = [first_at(c, "train_loss", lambda x: x <= 0.6) for c in l]
        rows.append(dict(name=name, variant=c0.variant, w=w, d=d / STEP_MS, n=len(l), never=never,
                         b={s: x / B for s, (x, _) in b.items()},
                         mb=mean([x / B for x, hit in b.values() if hit]), u=mean(u),
                         spikes=by_seed(l, loss_spikes), late=by_seed(l, late_loss),
                         stale=mean([c.metrics["stale_mean"] for c in l]),
                         acc=mean([c.end["test_acc"] for c in l])))
        curves[name] = seed_curve(l, "samples", "train_loss", B)
    rep.set("table", table(
        ["run", "delay (steps)", "batches to train loss 0.6", "updates to it", "seeds never",
         "loss spikes", "mean staleness", "final test acc"],
        [(r["name"], r["d"], r["mb"], r["u"], r["never"], mean(r["spikes"].values()), r["stale"], r["acc"])
         for r in rows]))

    def get(var, w, d):
        for r in rows:
            if r["variant"] == var and (w is None or r["w"] == w) and (d is None or abs(r["d"] - d) < 1e-6):
                return r
        return None

    def batches(r):
        return fmt(r["mb"]) if not r["never"] else "never (%d of %d seeds)" % (r["never"], r["n"])

    dmax = max(r["d"] for r in rows)
    for w in (2, 3):
        a0, s, amax = get("async", w, 0), get("sync", w, None), get("async", w, dmax)
        if a0 and s:
            rep.claim("sync and async alike at delay 0 (%d workers)" % w,
                      "sync ≈ async at delay 0 (Figs. 5, 6)",
                      "batches to loss 0.6: async %s, sync %s; updates: %s, %s; the ratio async/sync "
                      "within 0.8 to 1.25" % (batches(a0), batches(s), fmt(a0["u"]), fmt(s["u"])),
                      logs(a0["b"]), logs(s["b"]), math.log(0.8), math.log(1.25), finding=True, ratio=True)
        if a0 and amax:
            rep.claim("slower with the delay (%d workers)" % w, "slower convergence as the delay grows",
                      "batches to loss 0.6: %s at d=0, %s at d=%g%s; the ratio d=%g / d=0" % (
                          batches(a0), batches(amax), dmax, " (%s)" % NEVER if amax["never"] else "", dmax),
                      logs(amax["b"]), logs(a0["b"]), ratio=True)
            rep.claim("spikes grow with the delay (%d workers)" % w, "spikes and instability grow with the delay",
                      "loss spikes: %s at d=0, %s at d=%g; the difference" % (
                          fmt(mean(a0["spikes"].values())), fmt(mean(amax["spikes"].values())), dmax),
                      amax["spikes"], a0["spikes"])
    a2, a3 = get("async", 2, dmax), get("async", 3, dmax)
    if a2 and a3:
        # a diverged seed's loss is not finite: counted as the largest finite one (an underestimate)
        top = max(x for r in (a2, a3) for x in r["late"].values() if math.isfinite(x))
        late = [{s: min(x, top) for s, x in r["late"].items()} for r in (a2, a3)]
        rep.claim("3 workers worse than 2", "3 workers worse than 2",
                  "median train loss over the second half at d=%g: %s (2), %s (3); the difference" % (
                      dmax, fmt(mean(late[0].values())), fmt(mean(late[1].values()))), late[1], late[0])
    if figs:
        for w in (2, 3):
            data = [(k, v) for k, v in curves.items()
                    if k == "sequential" or k == "sync %d" % w or k.startswith("async %d," % w)]
            rep.figures.append(gnuplot(figs, "r1-loss-%dworkers" % w,
                                       "set xlabel 'processed batches'\nset ylabel 'train loss'\n"
                                       "set logscale y\nset yrange [0.25:3]\n" + lines(data), data))
    seq = get("sequential", 1, None)
    if seq:
        c = next(c for c in cs if c.variant == "sequential")
        rep.set("step_ms", 1000 * step_s(c), 5)
    rep.set("delays", ", ".join(fmt(r["d"]) for r in rows if r["variant"] == "async" and r["w"] == 2))
    rep.set("delay_ms", dmax * STEP_MS)
    for w in (2, 3):
        if get("async", w, dmax):
            rep.set("stale%d" % w, get("async", w, dmax)["stale"], 2)


# ---- 2. Staleness in the manner of Dai et al. 2019 ------------------------

TARGET = {"logreg": 0.78, "lenet5": 0.80}


def target_of(model):
    return TARGET.get(model, 0.80)


def reach(c):
    """(updates to the target test accuracy, reached): a run that never
    reaches it counts its length, a lower bound"""
    t = target_of(c.run["model"])
    return to_target(c, "test_acc", lambda x: x >= t)


def slowdowns(cs, by):
    """{by(cell): {s: the group's cells}}"""
    out = {}
    for g, l in by_group(cs).items():
        out.setdefault(by(l[0]), {})[l[0].run["delay"]["s"]] = l
    return out


def slope(xs, ys):
    """the least-squares slope of ys on xs"""
    mx, my = mean(xs), mean(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


def r2(rep, cs, figs, quick, extra=()):
    def key(c):
        return "%s, %s" % (c.run["model"].replace("mlp:784-", "mlp "), c.variant)
    sl = slowdowns(cs, key)
    for more in extra:
        sl.update(slowdowns(more, key))
    # per group and s: {seed: (updates or the run's length, reached)}
    up = {k: {s: by_seed(l, reach) for s, l in per.items()} for k, per in sl.items()}

    def hits(k, s):
        return [x for x, hit in up[k][s].values() if hit]

    def never(k, s):
        return sum(not hit for _, hit in up[k][s].values())

    def ratio(k, s):
        """the mean updates at s over those at s=0 (inf: a seed never reached)"""
        if s not in up.get(k, {}) or 0 not in up[k] or never(k, 0):
            return None
        return float("inf") if never(k, s) else mean(hits(k, s)) / mean(hits(k, 0))

    rows, data = [], []
    for k, per in sl.items():
        base = mean(hits(k, 0)) if 0 in per and not never(k, 0) else None
        pts = []
        for s in sorted(per):
            l, n = per[s], never(k, s)
            r = ratio(k, s) if n == 0 else None
            pts.append((s, r, n))
            rows.append((k, s, mean(hits(k, s)) if not n else "never (%d/%d seeds)" % (n, len(l)),
                         r if r else "> %s" % fmt(l[0].end["v"] / base) if base else "",
                         mean([c.end["test_acc"] for c in l])))
        data.append((k, [(s, r) for s, r, _ in pts if r is not None]))
        rep.values["r2.%s" % k] = pts
    rep.set("table", table(["model, optimiser", "s", "updates to target", "over s=0", "final acc"], rows))

    for k in sl:
        ss = sorted(sl[k])
        seeds = set.intersection(*(set(up[k][s]) for s in ss))
        b = {sd: slope([math.log2(1 + s) for s in ss], [math.log2(up[k][s][sd][0]) for s in ss]) for sd in seeds}
        rep.claim("slow-down grows with s: %s" % k, "staleness slows convergence, more as s grows",
                  "updates to target over s=0: " + ", ".join(
                      "s=%d %s" % (s, "never" if ratio(k, s) == float("inf") else fmt(ratio(k, s))) for s in ss) +
                  "; per seed, the slope b of log2(updates to target) on log2(1+s)", b)

    def log_slowdown(k, s):
        return {sd: math.log(up[k][s][sd][0] / up[k][0][sd][0]) for sd in up[k][s]}
    s_cmp = 16
    for k in sl:
        if k.endswith("momentum"):
            ksgd = k[:-len("momentum")] + "sgd"
            a, b = ratio(ksgd, s_cmp), ratio(k, s_cmp)
            if a is not None and b is not None:
                rep.claim("momentum suffers more: %s" % k.split(",")[0],
                          "momentum is more sensitive to staleness than SGD",
                          "slow-down at s=%d: sgd %s, momentum %s; per seed, momentum's slow-down over "
                          "sgd's" % (s_cmp, fmt(a), fmt(b)),
                          log_slowdown(k, s_cmp), log_slowdown(ksgd, s_cmp), ratio=True)
    deep, shallow = "mlp 256-256-256-10, sgd", "logreg, sgd"
    a, b = ratio(shallow, s_cmp), ratio(deep, s_cmp)
    if a is not None and b is not None:
        rep.claim("deeper models suffer more", "deeper networks suffer more",
                  "slow-down at s=%d: logreg %s, 3-hidden-layer MLP %s; per seed, the MLP's slow-down "
                  "over logreg's" % (s_cmp, fmt(a), fmt(b)),
                  log_slowdown(deep, s_cmp), log_slowdown(shallow, s_cmp), ratio=True)
    # gradient coherence: early against late, where it is measured
    co, rise = [], {}
    for g, l in by_group(cs).items():
        c0 = l[0]
        if c0.run["delay"]["s"] == 0 or c0.variant != "sgd":
            continue
        vals = [[e["coherence"] for e in c.evals if e.get("coherence") is not None] for c in l]
        n = min(len(v) for v in vals)
        if n < 6:
            continue
        third = n // 3
        early = [mean(v[:third]) for v in vals]
        late = [mean(v[n - third:n]) for v in vals]
        for c, e, la in zip(l, early, late):
            rise.setdefault(c.seed, []).append(la - e)
        co.append((key(c0), c0.run["delay"]["s"], mean(early), mean(late)))
    rep.set("coherence", table(["model, optimiser", "s", "coherence, first third", "last third"], co))
    if co:
        up_n = sum(late > early for _, _, early, late in co)
        rep.claim("our staleness coherence rises during training", "coherence is low early in training and rises",
                  "higher in the last third than in the first in %d of %d cells (s > 0, sgd); per seed, the "
                  "mean over those cells of last third − first third" % (up_n, len(co)),
                  {s: mean(x) for s, x in rise.items()})
    if figs:
        rep.figures.append(gnuplot(figs, "r2-slowdown",
                                   "set xlabel 'staleness bound s'\nset ylabel 'updates to target / at s=0'\n"
                                   "set logscale x 2\nset xrange [0.8:80]\n" +
                                   lines([(t, [(max(s, 1) if s else 0.8, r) for s, r in d]) for t, d in data],
                                         style="linespoints lw 1.5"),
                                   [(t, [(s if s else 0.8, r) for s, r in d]) for t, d in data]))
    rep.set("targets", "test accuracy %s (logreg) and %s (the rest)" % (fmt(TARGET["logreg"]), fmt(target_of(""))))


def r2w(rep, cs, figs, quick):
    sl = slowdowns(cs, lambda c: "%d workers" % c.run["workers"])
    rows = []
    for k, per in sl.items():
        for s in sorted(per):
            l = per[s]
            u = [reach(c) for c in l]
            n = sum(not hit for _, hit in u)
            rows.append((k, s, mean([c.metrics["stale_mean"] for c in l]),
                         mean([x for x, _ in u]) if not n else "never (%d/%d seeds)" % (n, len(l)),
                         mean([c.end["test_acc"] for c in l])))
    rep.set("table", table(["workers (asgd)", "s", "mean staleness", "updates to 0.80", "final acc"], rows))
    if "1 workers" in sl and "8 workers" in sl and 0 in sl["1 workers"] and 0 in sl["8 workers"]:
        one, eight = (by_seed(sl[k][0], reach) for k in ("1 workers", "8 workers"))
        rep.claim("more workers, slower at s=0", "the number of workers matters as well as s",
                  "updates to 0.80 at s=0: 1 worker %s, 8 workers %s (%s); the ratio" % (
                      fmt(mean([x for x, _ in one.values()])), fmt(mean([x for x, _ in eight.values()])), NEVER),
                  logs({s: x for s, (x, _) in eight.items()}), logs({s: x for s, (x, _) in one.items()}),
                  ratio=True)


# ---- 3. n-softsync, Zhang, Gupta, Lian, Liu 2016 --------------------------

def r3s(rep, cs, figs, quick):
    rows, data, over = [], {}, {}
    for g, l in by_group(cs).items():
        c0 = l[0]
        n, lam = c0.run["rule_params"]["n"], c0.run["workers"]
        csize = max(1, lam // n)
        hist = [c.end["staleness"]["hist"] for c in l]
        N = {c.seed: sum(h) for c, h in zip(l, hist)}
        o = {c.seed: sum(h[2 * n + 1:]) / N[c.seed] for c, h in zip(l, hist)}
        m = {c.seed: c.end["staleness"]["mean"] for c in l}
        over[(c0.variant, n)] = o
        rows.append((c0.variant, n, csize, mean(m.values()), (lam - 1) / csize,
                     max(c.end["staleness"]["max"] for c in l), mean(o.values())))
        total = [sum(col) for col in zip(*hist)]
        data.setdefault(c0.variant, []).append(
            (n, [(i, x / sum(total)) for i, x in enumerate(total[:-1]) if x]))
        if c0.variant == "homogeneous":
            want = (lam - 1) / csize
            rep.claim("mean staleness close to n (n=%d)" % n, "⟨τ⟩ ≈ n (§2.4, Fig. 1)",
                      "mean τ %.3f; mean τ − n within ±5%% of n" % mean(m.values()),
                      {s: x - n for s, x in m.items()}, lo=-0.05 * n, hi=0.05 * n)
            rep.claim("mean staleness (λ−1)/c (n=%d)" % n, "our count: (λ−1)/c (docs/rules.md)",
                      "mean τ %.3f, (λ−1)/c = %.3f; the difference within ±1%% of it" % (mean(m.values()), want),
                      {s: x - want for s, x in m.items()}, lo=-0.01 * want, hi=0.01 * want)
            rep.claim("rarely over 2n (n=%d)" % n, "P(τ > 2n) < 0.0001",
                      "P(τ > 2n) = %s over %s gradients a seed" % (fmt(mean(o.values())), fmt(mean(N.values()))),
                      o, lo=-math.inf, hi=1e-4)
            if n == 1:
                rep.claim("1-softsync: τ in {0, 1, 2}", "1-softsync gives τ ∈ {0, 1, 2}",
                          "max τ %d; per seed, the gradients with τ > 2" % max(c.end["staleness"]["max"] for c in l),
                          {c.seed: sum(h[3:]) for c, h in zip(l, hist)}, lo=-math.inf, hi=1)
    rep.set("table", table(["compute times", "n", "gradients per update c", "mean τ", "(λ−1)/c",
                            "max τ", "P(τ > 2n)"], rows))
    top = max(n for _, n in over)
    if ("exponential", top) in over and ("homogeneous", top) in over:
        ex, ho = over[("exponential", top)], over[("homogeneous", top)]
        rep.claim("the bound needs workers of equal speed", "learners of similar speed (homogeneous nodes)",
                  "P(τ > 2n) at n=%d: %s homogeneous, %s exponential; the difference" % (
                      top, fmt(mean(ho.values())), fmt(mean(ex.values()))), ex, ho)
    rep.set("gradients", mean([sum(c.end["staleness"]["hist"]) for c in cs]))
    if figs:
        for var, per in data.items():
            d = [("n=%d" % n, pts) for n, pts in sorted(per)]
            rep.figures.append(gnuplot(figs, "r3-staleness-%s" % var,
                                       "set xlabel 'staleness τ (versions)'\nset ylabel 'fraction of gradients'\n"
                                       "set logscale y\nset xrange [0:64]\n" +
                                       lines(d, style="steps lw 1.5"), d))


def r3l(rep, cs, figs, quick):
    rows, acc = [], {}
    for g, l in by_group(cs).items():
        v = l[0].variant
        acc[v] = by_seed(l, lambda c: c.end["test_acc"])
        rows.append((v, l[0].run["rule"], l[0].run["workers"], l[0].run["batch"], l[0].run["lr"],
                     mean([c.metrics["stale_mean"] for c in l]), mean(acc[v].values()),
                     min(acc[v].values())))
    rep.set("table", table(["variant", "rule", "λ", "µ", "lr", "mean τ", "final acc (mean)",
                            "worst seed"], rows))
    for lam, half in ((16, 8), (30, 15)):
        p = "l%d-" % lam
        if p + "ssgd" not in acc:
            continue
        ss = acc[p + "ssgd"]
        a_full = acc.get("%sn%d-a0" % (p, lam))
        if a_full is not None:
            rep.claim("fixed α0 fails at n=λ (λ=%d)" % lam,
                      "with α0, 15- and 30-softsync fail to converge (90% error, Fig. 3)",
                      "final acc: ssgd %s, %d-softsync α0 %s; ssgd's lead over 0.2" % (
                          fmt(mean(ss.values())), lam, fmt(mean(a_full.values()))), ss, a_full, lo=0.2)
        tol = 0.05 if quick else 0.02  # half an epoch in --quick, two in full
        for n, v in ((1, p + "n1"), (half, "%sn%d-scaled" % (p, half)), (lam, "%sn%d-scaled" % (p, lam))):
            if v in acc:
                rep.claim("α0/n recovers SSGD's accuracy (λ=%d, n=%d)" % (lam, n),
                          "with α0/τ all n-softsync curves virtually indistinguishable (Fig. 3)",
                          "final acc: ssgd %s, %d-softsync %s; no worse than by %g" % (
                              fmt(mean(ss.values())), n, fmt(mean(acc[v].values())), tol), acc[v], ss, lo=-tol)


# ---- 4. Asynchrony begets momentum, Mitliagkas et al. 2016 -----------------

def r4g(rep, cs, figs, quick):
    rows, data = [], []
    for g, l in by_group(cs).items():
        M = l[0].run["workers"]
        hist = {c.seed: c.end["staleness"]["hist"] for c in l}
        m = {c.seed: c.end["staleness"]["mean"] for c in l}
        q = [(1 / M) * (1 - 1 / M) ** k for k in range(len(l[0].end["staleness"]["hist"]) - 1)]
        q.append(max(0.0, 1 - sum(q)))  # the last bin holds 64 and above
        tv = {s: tv_distance([x / sum(h) for x in h], q) for s, h in hist.items()}
        N = mean([sum(h) for h in hist.values()])
        rows.append((M, N, mean(m.values()), M - 1, mean(tv.values())))
        if M == 1:
            rep.identity("one worker: no staleness", "geometric staleness with M = 1: τ = 0",
                         "mean τ %s, total-variation distance %s over %d seeds" % (
                             fmt(mean(m.values())), fmt(mean(tv.values())), len(l)),
                         all(x == 0 for x in m.values()) and all(x == 0 for x in tv.values()))
            continue
        rep.claim("mean staleness M−1 (M=%d)" % M, "geometric staleness, mean M−1 (Theorem 5)",
                  "mean τ %.4f over %s updates a seed; mean τ − (M−1) within ±2%% of M−1" % (
                      mean(m.values()), fmt(N)), {s: x - (M - 1) for s, x in m.items()},
                  lo=-0.02 * (M - 1), hi=0.02 * (M - 1))
        rep.claim("geometric distribution (M=%d)" % M, "q_l = (1−1/M)^l / M",
                  "total-variation distance %.4f; under 0.02" % mean(tv.values()), tv, lo=-math.inf, hi=0.02)
        total = [sum(col) for col in zip(*hist.values())]
        data.append(("M=%d measured" % M, [(k, x / sum(total)) for k, x in enumerate(total[:-1]) if x]))
        data.append(("M=%d (1-1/M)^l/M" % M, [(k, x) for k, x in enumerate(q[:-1])]))
    rep.set("table", table(["workers M", "updates", "mean τ", "M−1", "TV distance to geometric"], rows))
    rep.set("updates", mean([r[1] for r in rows]))
    rep.set("mean_off", 100 * max(abs(r[2] - r[3]) / r[3] for r in rows if r[3]), 2)
    c = cs[0]
    rep.set("compute_us", 1e6 * step_s(c), 3)
    rep.set("compute_share", 100 * step_s(c) / (step_s(c) + c.run["delay"]["mean_ms"] / 1000), 2)
    if figs:
        script = ("set xlabel 'staleness τ'\nset ylabel 'fraction of updates'\nset logscale y\n"
                  "set xrange [0:64]\nset yrange [1e-5:1]\nplot " + ", \\\n     ".join(
                      "DAT index %d using 1:2 with %s title '%s'" % (
                          i, "points pt 7 ps 0.5" if "measured" in t else "lines lw 1.2 dt 2", t)
                      for i, (t, _) in enumerate(data)) + "\n")
        rep.figures.append(gnuplot(figs, "r4-geometric", script, data))


def r4m(rep, cs, figs, quick):
    g = {l[0].variant: l for l in by_group(cs).values()}
    curve = {v: seed_curve(l, "v", "train_loss") for v, l in g.items()}
    spread = {v: mean([sd([c.evals[i].get("train_loss") for c in l])
                       for i in range(min(len(c.evals) for c in l))]) for v, l in g.items()}
    rows = []

    def dist(a, b):
        n = min(len(curve[a]), len(curve[b]))
        return mean([abs(curve[a][i][1] - curve[b][i][1]) for i in range(n)
                     if curve[a][i][1] is not None and curve[b][i][1] is not None])

    def signed_gap(a, b):
        """per seed: the mean over evaluations of a's train loss − b's"""
        out = {}
        for ca in g[a]:
            cb = next(c for c in g[b] if c.seed == ca.seed)
            n = min(len(ca.evals), len(cb.evals))
            out[ca.seed] = mean([ca.evals[i]["train_loss"] - cb.evals[i]["train_loss"] for i in range(n)
                                 if ca.evals[i].get("train_loss") is not None
                                 and cb.evals[i].get("train_loss") is not None])
        return out
    for M in (2, 4, 8):
        a, b = "asgd%d" % M, "hb%d" % M
        if a in g and b in g:
            dh, ds = dist(a, b), dist(a, "sgd")
            rows.append((M, dh, ds, spread[a], spread[b]))
            rep.claim("asgd with M=%d tracks momentum 1−1/M" % M,
                      "asgd ≈ momentum SGD with µ = 1−1/M, step α/M (Theorems 5, 6)",
                      "mean |Δ train loss|: to momentum %s, to plain SGD %s; seed spread %s; per seed, asgd's "
                      "train loss − momentum's, within twice the spread" % (fmt(dh), fmt(ds), fmt(spread[a])),
                      signed_gap(a, b), lo=-2 * spread[a], hi=2 * spread[a], finding=True)
    rep.set("table", table(["M", "asgd to momentum 1−1/M", "asgd to plain SGD", "seed sd, asgd",
                            "seed sd, momentum"], rows))
    c = cs[0]
    rep.set("compute_ms", 1000 * step_s(c), 3)
    if figs:
        for M in (2, 4, 8):
            d = [(v, curve[v]) for v in ("sgd", "asgd%d" % M, "hb%d" % M) if v in curve]
            rep.figures.append(gnuplot(figs, "r4-momentum-%d" % M,
                                       "set xlabel 'updates'\nset ylabel 'train loss (mean of the seeds)'\n"
                                       "set logscale y\n" + lines(d), d))


# ---- 5. OD-SGD against SSGD and ASGD, with the communication model -----------

def r5(rep, cs, figs, quick):
    rows, per = [], {}
    model_bytes = None
    for g, l in by_group(cs).items():
        c0 = l[0]
        bw = (c0.run.get("link") or {}).get("bandwidth_mbps", 0)
        if c0.run["rule"] == "asgd":  # a push is the whole model's gradient
            model_bytes = c0.metrics["bytes_sent"] / c0.metrics["updates"]
        rho = 0.0 if not bw else round(2 * MLP_BYTES * 8 / (bw * 1e6) / (STEP_MS / 1000), 3)
        r = dict(rule=c0.run["rule"], M=c0.run["workers"], rho=rho,
                 accs=by_seed(l, lambda c: c.end["test_acc"]),
                 t=mean([c.metrics["virtual_s_to_target"] for c in l]),
                 never=sum(c.metrics["virtual_s_to_target"] is None for c in l),
                 per_update=mean([c.metrics["virtual_s"] / c.metrics["updates"] for c in l]),
                 sps=mean([c.metrics["samples"] / c.metrics["virtual_s"] for c in l]))
        r["acc"] = mean(r["accs"].values())
        per[(r["rule"], r["M"], rho)] = r
        rows.append((r["rule"], r["M"], rho, r["acc"], r["t"] if not r["never"] else "never",
                     1000 * r["per_update"], r["sps"]))
    rep.set("table", table(["rule", "workers", "ρ = comm / compute", "final acc", "virtual s to target",
                            "ms per update", "samples per virtual s"], rows))
    Ms = sorted({k[1] for k in per})
    rhos = sorted({k[2] for k in per})
    for M in Ms:
        # the ρ whose runs end with the same accuracies, seed for seed, are one measurement
        same = {}
        for rho in rhos:
            o, s = per.get(("odsgd", M, rho)), per.get(("ssgd", M, rho))
            if o and s:
                same.setdefault((tuple(sorted(o["accs"].items())), tuple(sorted(s["accs"].items()))),
                                []).append(rho)
        for group in same.values():
            o, s = per[("odsgd", M, group[0])], per[("ssgd", M, group[0])]
            at = "ρ=%g" % group[0] if len(group) == 1 else "ρ ∈ {%s}" % ", ".join("%g" % x for x in group)
            rep.claim("OD-SGD's accuracy near SSGD's (M=%d, %s)" % (M, at),
                      "similar or even slightly better accuracy than SSGD",
                      "final acc: odsgd %s, ssgd %s%s; no worse than by 0.005" % (
                          fmt(o["acc"]), fmt(s["acc"]),
                          " (the same at each of these ρ, seed for seed: one measurement)"
                          if len(group) > 1 else ""), o["accs"], s["accs"], lo=-0.005)
    for (rule, M, rho), r in sorted(per.items()):
        a = per.get(("asgd", M, rho))
        if rule == "odsgd" and a and rho >= 1:
            rep.identity("OD-SGD at least as fast as ASGD (M=%d, ρ=%g)" % (M, rho),
                         "training speed even exceeds ASGD's",
                         "samples per virtual s: odsgd %s, asgd %s: our cost model's, by construction (odsgd's "
                         "round costs max(compute, communication), asgd's their sum)" % (
                             fmt(r["sps"]), fmt(a["sps"])), r["sps"] >= a["sps"])
    for M in Ms:
        s0 = per.get(("ssgd", M, 0.0))
        for rho in (x for x in rhos if x > 0):
            s = per.get(("ssgd", M, rho))
            if s0 and s:
                want = s0["per_update"] * (1 + rho)
                rep.identity("SSGD pays compute plus communication (M=%d, ρ=%g)" % (M, rho),
                             "our model: a round costs Tc + Tm",
                             "%.3f ms per update, Tc(1+ρ) = %.3f ms" % (1000 * s["per_update"], 1000 * want),
                             isclose(s["per_update"], want, 0.01))
    rep.set("model_bytes", model_bytes)
    rep.set("rhos", "{%s}" % ", ".join("%g" % x for x in rhos))
    if figs:
        for M in Ms:
            d = [(rule, [(rho, per[(rule, M, rho)]["sps"]) for rho in rhos if (rule, M, rho) in per])
                 for rule in ("ssgd", "asgd", "odsgd")]
            rep.figures.append(gnuplot(figs, "r5-throughput-%d" % M,
                                       "set xlabel 'communication / computation ρ'\n"
                                       "set ylabel 'samples per virtual second'\nset yrange [0:*]\n" +
                                       lines(d, style="linespoints lw 1.5"), d))


# ---- 6. DC-ASGD against ASGD, Zheng et al. 2017 ---------------------------------

def r6(rep, cs, figs, quick):
    per, stale = {}, {}
    for g, l in by_group(cs).items():
        per[(l[0].variant, l[0].run["workers"])] = by_seed(l, lambda c: 1 - c.end["test_acc"])
        stale[l[0].run["workers"]] = mean([c.metrics["stale_mean"] for c in l])
    Ms = sorted({k[1] for k in per})

    def cell(v, M):
        e = per.get((v, M))
        return "%.4f ± %.4f" % (mean(e.values()), sd(e.values())) if e else ""
    rows = [(M, stale[M]) + tuple(cell(v, M) for v in ("asgd", "dc-const", "dc-adaptive")) for M in Ms]
    rep.set("table", table(["workers", "mean staleness", "asgd test error (mean ± sd of seeds)", "dc-asgd λ=0.04",
                            "dc-asgd adaptive λ0=2"], rows))
    for M in Ms:
        a, d = per.get(("asgd", M)), per.get(("dc-adaptive", M))
        if a is not None and d is not None and (not quick or M >= 16):
            rep.claim("DC-ASGD-a no worse than ASGD (M=%d)" % M,
                      "DC-ASGD-a 8.19% error vs ASGD 9.27% (ResNet-20, CIFAR-10, M=4, Table 1)",
                      "test error: dc-asgd-a %.4f, asgd %.4f; the difference" % (
                          mean(d.values()), mean(a.values())), d, a, lo=-math.inf, hi=0.0)
    rep.set("stale_lo", stale[Ms[0]], 2)
    rep.set("stale_hi", stale[Ms[-1]], 2)
    rep.set("M_lo", Ms[0])
    rep.set("M_hi", Ms[-1])
    if figs:
        d = [(v, [(M, mean(per[(v, M)].values())) for M in Ms if (v, M) in per])
             for v in ("asgd", "dc-const", "dc-adaptive")]
        rep.figures.append(gnuplot(figs, "r6-dcasgd", "set xlabel 'workers'\nset ylabel 'final test error'\n"
                                   "set logscale x 2\n" + lines(d, style="linespoints lw 1.5"), d))


# ---- 7. Partial backprop ----------------------------------------------------------

def r7(rep, cs, figs, quick):
    rows, per = [], {}
    for g, l in by_group(cs).items():
        c0 = l[0]
        m = c0.metrics
        if m.get("bwd_flops") is None:
            sys.exit("results: r7-spb's cells come from a stalelab without the step_flops metric "
                     "(its bwd_flops counted the forward too): remove that sweep directory and run it again")
        per[c0.variant] = dict(accs=by_seed(l, lambda c: c.end["test_acc"]), bytes=m["bytes_sent"],
                               push=m["bytes_sent"] / m["updates"], step=m["step_flops"], bwd=m["bwd_flops"],
                               saved=m["bwd_flops_saved"], model=c0.run["model"])
        per[c0.variant]["acc"] = mean(per[c0.variant]["accs"].values())
        rows.append((c0.variant, per[c0.variant]["acc"], m["bytes_sent"], per[c0.variant]["push"],
                     m["step_flops"], m["bwd_flops"], m["bwd_flops_saved"] / (m["bwd_flops"] + m["bwd_flops_saved"])))
    rep.set("table", table(["schedule", "final acc", "bytes sent", "bytes per push",
                            "step FLOPs (forward + backward)", "backward FLOPs", "backward saved"], rows))
    for p, layers in (("mlp", [(128 * 10 + 10), (256 * 128 + 128)]),):
        if p + "-top1" in per:
            rep.identity("top-1 sends the last layer only", "partial backprop sends fewer layers",
                         "bytes per push %s = 4 x %d parameters" % (fmt(per[p + "-top1"]["push"]), layers[0]),
                         per[p + "-top1"]["push"] == 4 * layers[0])
            rep.set("top_params", layers[0])
            rep.set("top_bytes", per[p + "-top1"]["push"])
        if p + "-top2" in per:
            rep.identity("top-2 sends the two last layers", "partial backprop sends fewer layers",
                         "bytes per push %s = 4 x %d parameters" % (fmt(per[p + "-top2"]["push"]), sum(layers)),
                         per[p + "-top2"]["push"] == 4 * sum(layers))
        if p + "-full" in per:
            rep.set("full_bytes", per[p + "-full"]["push"])
    for m in ("mlp", "lenet5"):
        if m + "-full" in per and m + "-top1" in per:
            f, t = per[m + "-full"], per[m + "-top1"]
            rep.identity("%s: top-1 computes fewer FLOPs" % m, "partial backprop frees compute per iteration",
                         "top-1 computes %s of the full step's FLOPs (forward + backward) and %s of its "
                         "backward pass: our FLOP count, by construction" % (
                             fmt(t["step"] / f["step"]), fmt(t["bwd"] / f["bwd"])), t["bwd"] < f["bwd"])
            rep.claim("%s: top-1 loses accuracy" % m, "at some cost in statistical efficiency",
                      "final acc: top-1 %s, full %s; the difference" % (fmt(t["acc"]), fmt(f["acc"])),
                      t["accs"], f["accs"], lo=-math.inf, hi=0.0)


# ---- 8. Identities ------------------------------------------------------------------

def r8(rep, cs, figs, quick):
    by = {}
    for c in cs:
        by[(c.variant, c.seed)] = c
    seeds = sorted({k[1] for k in by})
    rows = []

    def same(a, b):
        return all(by[(a, s)].end["weights"] == by[(b, s)].end["weights"] for s in seeds)
    exact = [("one-%s" % r, "one-sgd") for r in ("ssgd", "softsync", "ssp", "sasgd", "dcasgd", "dcasgd-a",
                                                 "localsgd")]
    exact += [("four-dcasgd0", "four-asgd"), ("four-softsync4", "four-asgd"), ("two-sasgd", "two-asgd")]
    claim = {"four-dcasgd0": "dcasgd with λ=0 is asgd", "four-softsync4": "softsync with n = workers is asgd",
             "two-sasgd": "sasgd with τ ≤ 1 is asgd"}
    for a, b in exact:
        ok = same(a, b)
        rows.append((a, b, "identical weights" if ok else "differ"))
        rep.identity(claim.get(a, "one worker: %s is sgd" % a[4:]), "an identity",
                     "final weights %s over %d seed%s" % (
                         "identical" if ok else "differ", len(seeds), "s" * (len(seeds) > 1)), ok)
    ok = same("one-easgd", "one-sgd")
    rows.append(("one-easgd", "one-sgd", ("identical" if ok else "differ") + " (the elastic pull is not sgd)"))
    for suffix in ("", "-exp"):
        a = [by[("four-ssp0" + suffix, s)] for s in seeds]
        b = [by[("four-ssgd" + suffix, s)] for s in seeds]
        dl = max(abs(x.end["test_acc"] - y.end["test_acc"]) for x, y in zip(a, b))
        dloss = max(abs(x.metrics["test_loss"] - y.metrics["test_loss"]) for x, y in zip(a, b))
        delays = "equal delays" if not suffix else "exponential delays"
        rows.append(("four-ssp0%s (lr/4)" % suffix, "four-ssgd%s" % suffix,
                     "%s: test acc within %s, test loss within %s" % (delays, fmt(dl), fmt(dloss))))
        rep.identity("ssp with s=0 is ssgd up to rounding (%s)" % delays, "ssp with s = 0 is bulk-synchronous",
                     "|Δ acc| %s, |Δ test loss| %s (ssp at lr/N, the gradients applied one by one)" % (
                         fmt(dl), fmt(dloss)), dl <= 0.0005 and dloss <= 1e-5, finding=bool(suffix))
        rep.set("rounds" + suffix, a[0].metrics["updates"] // a[0].run["workers"])
    rep.set("table", table(["run", "against", "result"], rows))


EXPERIMENTS = [
    ("r1-testbed", r1), ("r2-lenet5", None), ("r2-staleness", r2), ("r2-workers", r2w),
    ("r3-softsync-staleness", r3s), ("r3-softsync-lr", r3l), ("r4-geometric", r4g),
    ("r4-momentum", r4m), ("r5-odsgd", r5), ("r6-dcasgd", r6), ("r7-spb", r7),
    ("r8-identities", r8),
]


def on_device(spec, device, out):
    """the sweep file, or a copy of it beside its cells that runs every cell on device"""
    if not device:
        return spec
    with open(spec) as f:
        d = json.load(f)
    d["device"] = device
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "on-%s.json" % device)
    with open(path, "w") as f:
        json.dump(d, f, indent=1)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="the small sweeps; checks only")
    ap.add_argument("--jobs", type=int, default=0, help="cells side by side (default: the sweep's)")
    ap.add_argument("--out", help="where the sweeps go (default build/results or build/results-quick)")
    ap.add_argument("--only", help="comma-separated experiment names (no docs written)")
    ap.add_argument("--stalelab", default=os.path.join(ROOT, "build", "stalelab"))
    ap.add_argument("--no-run", action="store_true", help="analyse what --out holds")
    ap.add_argument("--device", help="every cell on this backend (ref: the same bits on any x86-64, slower; "
                    "default: the sweep files', the cpu backend)")
    a = ap.parse_args()
    out = a.out or os.path.join(ROOT, "build", ("results-quick" if a.quick else "results") +
                                ("-" + a.device if a.device else ""))
    spec_dir = os.path.join(ROOT, "experiments", "quick" if a.quick else "")
    # --quick draws its figures beside its cells (every figure's code runs in make test)
    figs = None if a.only else os.path.join(out, "figures") if a.quick else os.path.join(ROOT, "docs", "results")
    only = set(a.only.split(",")) if a.only else None
    reports, held, failed = {}, {}, 0
    started = time.time()
    for name, fn in EXPERIMENTS:
        spec = os.path.join(spec_dir, name + ".json")
        if (only and name not in only) or not os.path.exists(spec):
            continue
        t0 = time.time()
        if not a.no_run:
            sweep(a.stalelab, on_device(spec, a.device, os.path.join(out, name)), os.path.join(out, name), a.jobs)
        held[name] = cells(os.path.join(out, name))
        if fn is None:
            print("%-22s %5.1f s (analysed with r2-staleness)" % (name, time.time() - t0))
            continue
        rep = Report(name)
        if name == "r2-staleness":
            fn(rep, held[name], figs, a.quick, [held[n] for n in ("r2-lenet5",) if n in held])
        else:
            fn(rep, held[name], figs, a.quick)
        reports[name] = rep
        print("%-22s %5.1f s, %d cells" % (name, time.time() - t0, len(held[name])))
        for c in rep.checks:
            status = "ok  " if c.ok else "note" if c.finding else "open" if c.leaning else "DIFF"
            print("  %s %s: %s; %s: %s" % (status, c.what, c.measured, c.interval_text(),
                                           c.verdict_text(md=False)))
            failed += status == "DIFF"
    if not only:
        timing = os.path.join(out, "timing.json")
        if not a.no_run:
            with open(timing, "w") as f:
                json.dump({"seconds": time.time() - started}, f)
        secs = json.load(open(timing))["seconds"] if os.path.exists(timing) else None
        # --quick renders the page beside its cells (what it lacks marked), never over docs/
        write_docs(reports, held, secs, os.path.join(out, "results.md") if a.quick else None)
    print("%s; %d fail (a claim that differs or leans the wrong way, an identity that fails; "
          "findings that differ from their source are notes)" % (
              tally([c for r in reports.values() for c in r.checks]), failed))
    return 1 if a.quick and failed else 0


def machine(cs):
    """the CPU's name and the BLAS kernel the cells ran"""
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    if cs and cs[0].run.get("device") == "ref":
        return "%s, %d cores, the ref backend (the same bits on any x86-64)" % (cpu, os.cpu_count() or 0)
    blas = cs[0].run.get("blas", {}).get("kernel") if cs else None
    return "%s, %d cores, OpenBLAS kernel %s" % (cpu, os.cpu_count() or 0, blas or "unknown")


def write_docs(reports, held, secs, dst=None):
    """render results.md.in into dst (default docs/results.md, where every
    value must be there; elsewhere a missing one is marked)"""
    src = os.path.join(ROOT, "experiments", "results.md.in")
    with open(src) as f:
        text = f.read()
    vals = {"cells": fmt(sum(len(c) for c in held.values())),
            "minutes": "%.1f" % (secs / 60) if secs else "(not timed)",
            "cpu": machine(next(iter(held.values()), []))}
    vals["tally"] = tally([c for r in reports.values() for c in r.checks])
    vals["level"] = "%g%%" % (100 * LEVEL)
    for name, cs in held.items():
        vals[name + ".seeds"] = fmt(len({c.seed for c in cs}))
    for r in reports.values():
        vals.update({k: v for k, v in r.values.items() if isinstance(v, str)})
        vals[r.name + ".checks"] = r.checks_table()
        vals[r.name + ".tally"] = tally(r.checks)
    for k, v in vals.items():
        text = text.replace("{{%s}}" % k, v)
    left = [m.split("}}")[0] for m in text.split("{{")[1:]]
    if left and not dst:
        sys.exit("results: results.md.in names what no experiment produced: %s" % ", ".join(left))
    for k in left:
        text = text.replace("{{%s}}" % k, "(%s: not in this run)" % k)
    dst = dst or os.path.join(ROOT, "docs", "results.md")
    with open(dst + ".tmp", "w") as f:
        f.write(text)
    os.replace(dst + ".tmp", dst)
    print("wrote %s" % dst)


if __name__ == "__main__":
    sys.exit(main())
