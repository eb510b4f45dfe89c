#!/usr/bin/env python3
"""results.py - the seeds' results, reproduced with our engine.

    python3 experiments/results.py [--quick] [--jobs N] [--out DIR] [--only r1,r4]

Runs each experiment's sweep (experiments/NAME.json, or with --quick the small
experiments/quick/NAME.json), reads the cells back and checks each claim of
the source it reproduces. The full run writes docs/results.md (from
experiments/results.md.in) and its figures under docs/results/; --quick only
checks, and exits 1 when a check fails (make test runs it). `make results`
is the full run. See docs/results.md.
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib import (Report, by_group, cells, first_at, fmt, gnuplot, isclose,  # noqa: E402
                 lines, mean, sd, sweep, table, tv_distance)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STEP_MS = 6.4455  # one MLP 784-256-128-10 step of batch 64 on the virtual clock


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
        w = c0.run["workers"]
        d = c0.run["delay"].get("mean_ms", 0) if c0.run["delay"]["dist"] != "none" else 0
        name = {"sequential": "sequential", "sync": "sync %d" % w}.get(
            c0.variant, "async %d, d=%g" % (w, round(d / STEP_MS, 2)))
        b = [first_at(c, "train_loss", lambda x: x <= 0.6, "samples") for c in l]
        b = [x / c0.run["batch"] if x is not None else None for x in b]
        u = [first_at(c, "train_loss", lambda x: x <= 0.6) for c in l]
        rows.append((name, c0.variant, w, d / STEP_MS, mean(b), sum(x is None for x in b),
                     mean([loss_spikes(c) for c in l]), mean([c.metrics["stale_mean"] for c in l]),
                     mean([c.end["test_acc"] for c in l]), mean([late_loss(c) for c in l]), mean(u), len(l)))
        curves[name] = seed_curve(l, "samples", "train_loss", c0.run["batch"])
    rep.set("table", table(
        ["run", "delay (steps)", "batches to train loss 0.6", "updates to it", "seeds never",
         "loss spikes", "mean staleness", "final test acc"],
        [(r[0], r[3], r[4], r[10], r[5], r[6], r[7], r[8]) for r in rows]))

    def get(var, w, d):
        for r in rows:
            if r[1] == var and (w is None or r[2] == w) and (d is None or abs(r[3] - d) < 1e-6):
                return r
        return None

    dmax = max(r[3] for r in rows)
    big = lambda r: r[4] if r[4] is not None and not r[5] else float("inf")  # noqa: E731
    for w in (2, 3):
        a0, s, amax = get("async", w, 0), get("sync", w, None), get("async", w, dmax)
        if a0 and s:
            ratio = a0[4] / s[4]
            rep.check("sync and async alike at delay 0 (%d workers)" % w,
                      "sync ≈ async at delay 0 (Figs. 5, 6)",
                      "batches to loss 0.6: async %s, sync %s (%.2fx); updates: %s, %s" % (
                          fmt(a0[4]), fmt(s[4]), ratio, fmt(a0[10]), fmt(s[10])),
                      0.8 <= ratio <= 1.25, "finding")
        if a0 and amax:
            rep.check("slower with the delay (%d workers)" % w, "slower convergence as the delay grows",
                      "batches to loss 0.6: %s at d=0, %s at d=%g" % (
                          fmt(a0[4]), fmt(amax[4]) if not amax[5] else "never (%d of %d seeds)" % (amax[5], amax[11]), dmax),
                      big(amax) > 1.5 * a0[4])
            rep.check("spikes grow with the delay (%d workers)" % w, "spikes and instability grow with the delay",
                      "loss spikes: %s at d=0, %s at d=%g" % (fmt(a0[6]), fmt(amax[6]), dmax),
                      amax[6] > a0[6])
    a2, a3 = get("async", 2, dmax), get("async", 3, dmax)
    if a2 and a3:
        rep.check("3 workers worse than 2", "3 workers worse than 2",
                  "median train loss over the second half at d=%g: %s (2), %s (3)" % (
                      dmax, fmt(a2[9]), fmt(a3[9])), a3[9] > a2[9])
    if figs:
        for w in (2, 3):
            data = [(k, v) for k, v in curves.items()
                    if k == "sequential" or k == "sync %d" % w or k.startswith("async %d," % w)]
            rep.figures.append(gnuplot(figs, "r1-loss-%dworkers" % w,
                                       "set xlabel 'processed batches'\nset ylabel 'train loss'\n"
                                       "set logscale y\nset yrange [0.25:3]\n" + lines(data), data))


# ---- 2. Staleness in the manner of Dai et al. 2019 ------------------------

TARGET = {"logreg": 0.78, "lenet5": 0.80}


def target_of(model):
    return TARGET.get(model, 0.80)


def slowdowns(cs, by):
    """{group-without-s: {s: (mean updates to target, seeds never, n)}}"""
    out = {}
    for g, l in by_group(cs).items():
        c0 = l[0]
        s = c0.run["delay"]["s"]
        t = target_of(c0.run["model"])
        u = [first_at(c, "test_acc", lambda x: x >= t) for c in l]
        out.setdefault(by(c0), {})[s] = ([x for x in u if x is not None], sum(x is None for x in u), l)
    return out


def r2(rep, cs, figs, quick, extra=()):
    def key(c):
        return "%s, %s" % (c.run["model"].replace("mlp:784-", "mlp "), c.variant)
    sl = slowdowns(cs, key)
    for more in extra:
        sl.update(slowdowns(more, key))
    rows, data = [], []
    for k, per in sl.items():
        base = mean(per[0][0]) if 0 in per and per[0][0] else None
        pts = []
        for s in sorted(per):
            u, never, l = per[s]
            r = mean(u) / base if base and u and not never else None
            pts.append((s, r, never))
            rows.append((k, s, mean(u) if not never else "never (%d/%d seeds)" % (never, len(l)),
                         r if r else "> %s" % fmt(l[0].end["v"] / base) if base else "",
                         mean([c.end["test_acc"] for c in l])))
        data.append((k, [(s, r) for s, r, _ in pts if r is not None]))
        rep.values["r2.%s" % k] = pts
    rep.set("table", table(["model, optimiser", "s", "updates to target", "over s=0", "final acc"], rows))

    def ratio(k, s):
        per = sl.get(k, {})
        if s not in per or 0 not in per or not per[0][0]:
            return None
        u, never, l = per[s]
        return float("inf") if never or not u else mean(u) / mean(per[0][0])

    ks = list(sl)
    for k in ks:
        ss = sorted(sl[k])
        rs = [ratio(k, s) for s in ss]
        mono = all(b >= a * 0.9 for a, b in zip(rs, rs[1:]) if a is not None and b is not None)
        rep.check("slow-down grows with s: %s" % k, "staleness slows convergence, more as s grows",
                  "updates to target over s=0: " + ", ".join(
                      "s=%d %s" % (s, "never" if r == float("inf") else fmt(r)) for s, r in zip(ss, rs)),
                  rs[-1] is not None and rs[-1] > 1.2 and mono)
    s_cmp = 16
    for k in ks:
        if k.endswith("momentum"):
            ksgd = k[:-len("momentum")] + "sgd"
            a, b = ratio(ksgd, s_cmp), ratio(k, s_cmp)
            if a is not None and b is not None:
                rep.check("momentum suffers more: %s" % k.split(",")[0],
                          "momentum is more sensitive to staleness than SGD",
                          "slow-down at s=%d: sgd %s, momentum %s" % (s_cmp, fmt(a), fmt(b)), b >= a)
    deep, shallow = "mlp 256-256-256-10, sgd", "logreg, sgd"
    a, b = ratio(shallow, s_cmp), ratio(deep, s_cmp)
    if a is not None and b is not None:
        rep.check("deeper models suffer more", "deeper networks suffer more",
                  "slow-down at s=%d: logreg %s, 3-hidden-layer MLP %s" % (s_cmp, fmt(a), fmt(b)), b >= a)
    # gradient coherence: early against late, where it is measured
    co = []
    for g, l in by_group(cs).items():
        c0 = l[0]
        if c0.run["delay"]["s"] == 0 or c0.variant != "sgd":
            continue
        vals = [[e["coherence"] for e in c.evals if e.get("coherence") is not None] for c in l]
        n = min(len(v) for v in vals)
        if n < 6:
            continue
        third = n // 3
        early = mean([mean(v[:third]) for v in vals])
        late = mean([mean(v[n - third:n]) for v in vals])
        co.append((key(c0), c0.run["delay"]["s"], early, late))
    rep.set("coherence", table(["model, optimiser", "s", "coherence, first third", "last third"], co))
    if co:
        up = sum(late > early for _, _, early, late in co)
        rep.check("gradient coherence rises during training", "coherence is low early in training and rises",
                  "higher in the last third than in the first in %d of %d cells (s > 0, sgd)" % (up, len(co)),
                  up >= 0.75 * len(co))
    if figs:
        rep.figures.append(gnuplot(figs, "r2-slowdown",
                                   "set xlabel 'staleness bound s'\nset ylabel 'updates to target / at s=0'\n"
                                   "set logscale x 2\nset xrange [0.8:80]\n" +
                                   lines([(t, [(max(s, 1) if s else 0.8, r) for s, r in d]) for t, d in data],
                                         style="linespoints lw 1.5"),
                                   [(t, [(s if s else 0.8, r) for s, r in d]) for t, d in data]))


def r2w(rep, cs, figs, quick):
    sl = slowdowns(cs, lambda c: "%d workers" % c.run["workers"])
    rows = []
    for k, per in sl.items():
        for s in sorted(per):
            u, never, l = per[s]
            rows.append((k, s, mean([c.metrics["stale_mean"] for c in l]),
                         mean(u) if not never else "never (%d/%d seeds)" % (never, len(l)),
                         mean([c.end["test_acc"] for c in l])))
    rep.set("table", table(["workers (asgd)", "s", "mean staleness", "updates to 0.80", "final acc"], rows))
    s0 = {k: mean(per[0][0]) for k, per in sl.items() if 0 in per and per[0][0]}
    if "1 workers" in s0 and "8 workers" in s0:
        rep.check("more workers, slower at s=0", "the number of workers matters as well as s",
                  "updates to 0.80 at s=0: 1 worker %s, 8 workers %s" % (
                      fmt(s0["1 workers"]), fmt(s0["8 workers"])),
                  s0["8 workers"] > s0["1 workers"])


# ---- 3. n-softsync, Zhang, Gupta, Lian, Liu 2016 --------------------------

def r3s(rep, cs, figs, quick):
    rows, data = [], {}
    for c in cs:
        n, lam = c.run["rule_params"]["n"], c.run["workers"]
        h = c.end["staleness"]["hist"]
        N = sum(h)
        csize = max(1, lam // n)
        over = sum(h[2 * n + 1:]) / N
        st = c.end["staleness"]
        rows.append((c.variant, n, csize, st["mean"], (lam - 1) / csize, st["max"], over))
        data.setdefault(c.variant, []).append((n, [(i, x / N) for i, x in enumerate(h[:-1]) if x]))
        if c.variant == "homogeneous":
            rep.check("mean staleness close to n (n=%d)" % n, "⟨τ⟩ ≈ n (§2.4, Fig. 1)",
                      "mean τ %.3f; (λ−1)/c = %.3f" % (st["mean"], (lam - 1) / csize),
                      abs(st["mean"] - n) <= 0.05 * n and isclose(st["mean"], (lam - 1) / csize, 0.01),
                      "quantitative")
            rep.check("rarely over 2n (n=%d)" % n, "P(τ > 2n) < 0.0001",
                      "P(τ > 2n) = %s over %s gradients" % (fmt(over), fmt(N)), over < 1e-4, "quantitative")
            if n == 1:
                rep.check("1-softsync: τ in {0, 1, 2}", "1-softsync gives τ ∈ {0, 1, 2}",
                          "max τ %d" % st["max"], st["max"] <= 2, "quantitative")
    rep.set("table", table(["compute times", "n", "gradients per update c", "mean τ", "(λ−1)/c",
                            "max τ", "P(τ > 2n)"], rows))
    ex = [r for r in rows if r[0] == "exponential" and r[1] == max(x[1] for x in rows)]
    ho = [r for r in rows if r[0] == "homogeneous" and r[1] == max(x[1] for x in rows)]
    if ex and ho:
        rep.check("the bound needs workers of equal speed", "learners of similar speed (homogeneous nodes)",
                  "P(τ > 2n) at n=%d: %s homogeneous, %s exponential" % (ex[0][1], fmt(ho[0][6]), fmt(ex[0][6])),
                  ex[0][6] > 100 * max(ho[0][6], 1e-5))
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
        a = mean([c.end["test_acc"] for c in l])
        acc[v] = a
        rows.append((v, l[0].run["rule"], l[0].run["workers"], l[0].run["batch"], l[0].run["lr"],
                     mean([c.metrics["stale_mean"] for c in l]), a, min(c.end["test_acc"] for c in l)))
    rep.set("table", table(["variant", "rule", "λ", "µ", "lr", "mean τ", "final acc (mean)",
                            "worst seed"], rows))
    for lam, half in ((16, 8), (30, 15)):
        p = "l%d-" % lam
        if p + "ssgd" not in acc:
            continue
        ss = acc[p + "ssgd"]
        a_full = acc.get("%sn%d-a0" % (p, lam))
        if a_full is not None:
            rep.check("fixed α0 fails at n=λ (λ=%d)" % lam,
                      "with α0, 15- and 30-softsync fail to converge (90%% error, Fig. 3)",
                      "final acc: ssgd %s, %d-softsync α0 %s" % (fmt(ss), lam, fmt(a_full)), a_full < ss - 0.2)
        worst = [(n, acc.get("%sn%d-scaled" % (p, n))) for n in (half, lam)]
        worst = [(n, a) for n, a in worst if a is not None] + [(1, acc.get(p + "n1"))]
        if all(a is not None for _, a in worst):
            gap = max(ss - a for _, a in worst)
            tol = 0.05 if quick else 0.02  # half an epoch in --quick, two in full
            rep.check("α0/n recovers SSGD's accuracy (λ=%d)" % lam,
                      "with α0/τ all n-softsync curves virtually indistinguishable (Fig. 3)",
                      "final acc: ssgd %s; " % fmt(ss) + ", ".join(
                          "n=%d %s" % (n, fmt(a)) for n, a in sorted(worst)) + " (tolerance %g)" % tol,
                      gap <= tol, "tolerance")


# ---- 4. Asynchrony begets momentum, Mitliagkas et al. 2016 -----------------

def r4g(rep, cs, figs, quick):
    rows, data = [], []
    for c in cs:
        M = c.run["workers"]
        h = c.end["staleness"]["hist"]
        N = sum(h)
        p = [x / N for x in h]
        q = [(1 / M) * (1 - 1 / M) ** l for l in range(len(h) - 1)]
        q.append(max(0.0, 1 - sum(q)))  # the last bin holds 64 and above
        tv = tv_distance(p, q)
        m = c.end["staleness"]["mean"]
        rows.append((M, N, m, M - 1, tv))
        rep.check("mean staleness M−1 (M=%d)" % M, "geometric staleness, mean M−1 (Theorem 5)",
                  "mean τ %.4f over %s updates" % (m, fmt(N)),
                  m == 0 if M == 1 else abs(m - (M - 1)) <= 0.02 * (M - 1), "quantitative")
        rep.check("geometric distribution (M=%d)" % M, "q_l = (1−1/M)^l / M",
                  "total-variation distance %.4f" % tv, tv < 0.02, "quantitative")
        if M > 1:
            data.append(("M=%d measured" % M, [(l, x) for l, x in enumerate(p[:-1]) if x]))
            data.append(("M=%d (1-1/M)^l/M" % M, [(l, x) for l, x in enumerate(q[:-1])]))
    rep.set("table", table(["workers M", "updates", "mean τ", "M−1", "TV distance to geometric"], rows))
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
    for M in (2, 4, 8):
        a, b = "asgd%d" % M, "hb%d" % M
        if a in g and b in g:
            dh, ds = dist(a, b), dist(a, "sgd")
            rows.append((M, dh, ds, spread[a], spread[b]))
            rep.check("asgd with M=%d tracks momentum 1−1/M" % M,
                      "asgd ≈ momentum SGD with µ = 1−1/M, step α/M (Theorems 5, 6)",
                      "mean |Δ train loss|: to momentum %s, to plain SGD %s; seed spread %s" % (
                          fmt(dh), fmt(ds), fmt(spread[a])), dh <= 2 * spread[a], "finding")
    rep.set("table", table(["M", "asgd to momentum 1−1/M", "asgd to plain SGD", "seed sd, asgd",
                            "seed sd, momentum"], rows))
    if figs:
        for M in (2, 4, 8):
            d = [(v, curve[v]) for v in ("sgd", "asgd%d" % M, "hb%d" % M) if v in curve]
            rep.figures.append(gnuplot(figs, "r4-momentum-%d" % M,
                                       "set xlabel 'updates'\nset ylabel 'train loss (mean of the seeds)'\n"
                                       "set logscale y\n" + lines(d), d))


# ---- 5. OD-SGD against SSGD and ASGD, with the communication model -----------

def r5(rep, cs, figs, quick):
    rows, per = [], {}
    for g, l in by_group(cs).items():
        c0 = l[0]
        bw = (c0.run.get("link") or {}).get("bandwidth_mbps", 0)
        rho = 0.0 if not bw else round(2 * 940584 * 8 / (bw * 1e6) / (STEP_MS / 1000), 3)
        r = dict(rule=c0.run["rule"], M=c0.run["workers"], rho=rho,
                 acc=mean([c.end["test_acc"] for c in l]),
                 t=mean([c.metrics["virtual_s_to_target"] for c in l]),
                 never=sum(c.metrics["virtual_s_to_target"] is None for c in l),
                 per_update=mean([c.metrics["virtual_s"] / c.metrics["updates"] for c in l]),
                 sps=mean([c.metrics["samples"] / c.metrics["virtual_s"] for c in l]))
        per[(r["rule"], r["M"], rho)] = r
        rows.append((r["rule"], r["M"], rho, r["acc"], r["t"] if not r["never"] else "never",
                     1000 * r["per_update"], r["sps"]))
    rep.set("table", table(["rule", "workers", "ρ = comm / compute", "final acc", "virtual s to target",
                            "ms per update", "samples per virtual s"], rows))
    for (rule, M, rho), r in sorted(per.items()):
        if rule != "odsgd":
            continue
        s, a = per.get(("ssgd", M, rho)), per.get(("asgd", M, rho))
        if s:
            rep.check("OD-SGD's accuracy near SSGD's (M=%d, ρ=%g)" % (M, rho),
                      "similar or even slightly better accuracy than SSGD",
                      "final acc: odsgd %s, ssgd %s" % (fmt(r["acc"]), fmt(s["acc"])),
                      r["acc"] >= s["acc"] - 0.005, "tolerance")
        if a and rho >= 1:
            rep.check("OD-SGD at least as fast as ASGD (M=%d, ρ=%g)" % (M, rho),
                      "training speed even exceeds ASGD's",
                      "samples per virtual s: odsgd %s, asgd %s" % (fmt(r["sps"]), fmt(a["sps"])),
                      r["sps"] >= a["sps"])
    for M in sorted({k[1] for k in per}):
        s0 = per.get(("ssgd", M, 0.0))
        for rho in sorted({k[2] for k in per if k[2] > 0}):
            s = per.get(("ssgd", M, rho))
            if s0 and s:
                want = s0["per_update"] * (1 + rho)
                rep.check("SSGD pays compute plus communication (M=%d, ρ=%g)" % (M, rho),
                          "our model: a round costs Tc + Tm",
                          "%.3f ms per update, Tc(1+ρ) = %.3f ms" % (1000 * s["per_update"], 1000 * want),
                          isclose(s["per_update"], want, 0.01), "quantitative")
    if figs:
        for M in sorted({k[1] for k in per}):
            d = [(rule, [(rho, per[(rule, M, rho)]["sps"]) for rho in sorted({k[2] for k in per})
                         if (rule, M, rho) in per]) for rule in ("ssgd", "asgd", "odsgd")]
            rep.figures.append(gnuplot(figs, "r5-throughput-%d" % M,
                                       "set xlabel 'communication / computation ρ'\n"
                                       "set ylabel 'samples per virtual second'\nset yrange [0:*]\n" +
                                       lines(d, style="linespoints lw 1.5"), d))


# ---- 6. DC-ASGD against ASGD, Zheng et al. 2017 ---------------------------------

def r6(rep, cs, figs, quick):
    per = {}
    for g, l in by_group(cs).items():
        per[(l[0].variant, l[0].run["workers"])] = [1 - c.end["test_acc"] for c in l]
    Ms = sorted({k[1] for k in per})
    def cell(v, M):
        e = per.get((v, M))
        return "%.4f ± %.4f" % (mean(e), sd(e)) if e else ""
    rows = [(M,) + tuple(cell(v, M) for v in ("asgd", "dc-const", "dc-adaptive")) for M in Ms]
    rep.set("table", table(["workers", "asgd test error (mean ± sd of seeds)", "dc-asgd λ=0.04",
                            "dc-asgd adaptive λ0=2"], rows))
    for M in Ms:
        a, d = mean(per.get(("asgd", M))), mean(per.get(("dc-adaptive", M)))
        if a is not None and d is not None and (not quick or M >= 16):
            rep.check("DC-ASGD-a no worse than ASGD (M=%d)" % M,
                      "DC-ASGD-a 8.19% error vs ASGD 9.27% (ResNet-20, CIFAR-10, M=4, Table 1)",
                      "test error: dc-asgd-a %.4f, asgd %.4f" % (d, a), d <= a)
    if figs:
        d = [(v, [(M, mean(per[(v, M)])) for M in Ms if (v, M) in per])
             for v in ("asgd", "dc-const", "dc-adaptive")]
        rep.figures.append(gnuplot(figs, "r6-dcasgd", "set xlabel 'workers'\nset ylabel 'final test error'\n"
                                   "set logscale x 2\n" + lines(d, style="linespoints lw 1.5"), d))


# ---- 7. Partial backprop ----------------------------------------------------------

def r7(rep, cs, figs, quick):
    rows, per = [], {}
    for g, l in by_group(cs).items():
        c0 = l[0]
        m = c0.metrics
        per[c0.variant] = dict(acc=mean([c.end["test_acc"] for c in l]), bytes=m["bytes_sent"],
                               push=m["bytes_sent"] / m["updates"], flops=m["bwd_flops"],
                               saved=m["bwd_flops_saved"], model=c0.run["model"])
        rows.append((c0.variant, per[c0.variant]["acc"], m["bytes_sent"], per[c0.variant]["push"],
                     m["bwd_flops"], m["bwd_flops_saved"] / (m["bwd_flops"] + m["bwd_flops_saved"])))
    rep.set("table", table(["schedule", "final acc", "bytes sent", "bytes per push", "backward FLOPs",
                            "backward saved"], rows))
    for p, layers in (("mlp", [(128 * 10 + 10), (256 * 128 + 128)]),):
        if p + "-top1" in per:
            rep.check("top-1 sends the last layer only", "partial backprop sends fewer layers",
                      "bytes per push %s = 4 x %d parameters" % (fmt(per[p + "-top1"]["push"]), layers[0]),
                      per[p + "-top1"]["push"] == 4 * layers[0], "quantitative")
        if p + "-top2" in per:
            rep.check("top-2 sends the two last layers", "partial backprop sends fewer layers",
                      "bytes per push %s = 4 x %d parameters" % (fmt(per[p + "-top2"]["push"]), sum(layers)),
                      per[p + "-top2"]["push"] == 4 * sum(layers), "quantitative")
    for m in ("mlp", "lenet5"):
        if m + "-full" in per and m + "-top1" in per:
            f, t = per[m + "-full"], per[m + "-top1"]
            rep.check("%s: fewer backward FLOPs, some accuracy lost" % m,
                      "partial backprop frees compute per iteration",
                      "top-1 computes %s of the full backward pass, accuracy %s against %s" % (
                          fmt(t["flops"] / f["flops"]), fmt(t["acc"]), fmt(f["acc"])),
                      t["flops"] < f["flops"] and t["acc"] <= f["acc"] + 0.01)


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
        rep.check(claim.get(a, "one worker: %s is sgd" % a[4:]), "an identity",
                  "final weights %s over %d seeds" % ("identical" if ok else "differ", len(seeds)), ok,
                  "exact")
    ok = same("one-easgd", "one-sgd")
    rows.append(("one-easgd", "one-sgd", ("identical" if ok else "differ") + " (the elastic pull is not sgd)"))
    for suffix, kind in (("", "tolerance"), ("-exp", "finding")):
        a = [by[("four-ssp0" + suffix, s)] for s in seeds]
        b = [by[("four-ssgd" + suffix, s)] for s in seeds]
        dl = max(abs(x.end["test_acc"] - y.end["test_acc"]) for x, y in zip(a, b))
        dloss = max(abs(x.metrics["test_loss"] - y.metrics["test_loss"]) for x, y in zip(a, b))
        delays = "equal delays" if not suffix else "exponential delays"
        rows.append(("four-ssp0%s (lr/4)" % suffix, "four-ssgd%s" % suffix,
                     "%s: test acc within %s, test loss within %s" % (delays, fmt(dl), fmt(dloss))))
        rep.check("ssp with s=0 is ssgd up to rounding (%s)" % delays, "ssp with s = 0 is bulk-synchronous",
                  "|Δ acc| %s, |Δ test loss| %s (ssp at lr/N, the gradients applied one by one)" % (
                      fmt(dl), fmt(dloss)), dl <= 0.0005 and dloss <= 1e-5, kind)
    rep.set("table", table(["run", "against", "result"], rows))


EXPERIMENTS = [
    ("r1-testbed", r1), ("r2-lenet5", None), ("r2-staleness", r2), ("r2-workers", r2w),
    ("r3-softsync-staleness", r3s), ("r3-softsync-lr", r3l), ("r4-geometric", r4g),
    ("r4-momentum", r4m), ("r5-odsgd", r5), ("r6-dcasgd", r6), ("r7-spb", r7),
    ("r8-identities", r8),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="the small sweeps; checks only")
    ap.add_argument("--jobs", type=int, default=0, help="cells side by side (default: the sweep's)")
    ap.add_argument("--out", help="where the sweeps go (default build/results or build/results-quick)")
    ap.add_argument("--only", help="comma-separated experiment names (no docs written)")
    ap.add_argument("--stalelab", default=os.path.join(ROOT, "build", "stalelab"))
    ap.add_argument("--no-run", action="store_true", help="analyse what --out holds")
    a = ap.parse_args()
    out = a.out or os.path.join(ROOT, "build", "results-quick" if a.quick else "results")
    spec_dir = os.path.join(ROOT, "experiments", "quick" if a.quick else "")
    figs = None if a.quick or a.only else os.path.join(ROOT, "docs", "results")
    only = set(a.only.split(",")) if a.only else None
    reports, held, failed = {}, {}, 0
    started = time.time()
    for name, fn in EXPERIMENTS:
        spec = os.path.join(spec_dir, name + ".json")
        if (only and name not in only) or not os.path.exists(spec):
            continue
        t0 = time.time()
        if not a.no_run:
            sweep(a.stalelab, spec, os.path.join(out, name), a.jobs)
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
        for what, _, measured, ok, kind in rep.checks:
            noted = not ok and kind == "finding"
            print("  %s %s: %s" % ("ok  " if ok else "note" if noted else "DIFF", what, measured))
            failed += not ok and not noted
    if figs:
        timing = os.path.join(out, "timing.json")
        if not a.no_run:
            with open(timing, "w") as f:
                json.dump({"seconds": time.time() - started}, f)
        secs = json.load(open(timing))["seconds"] if os.path.exists(timing) else None
        write_docs(reports, held, secs)
    print("%d checks, %d differ (findings that differ from the source are notes)" % (
        sum(len(r.checks) for r in reports.values()), failed))
    return 1 if a.quick and failed else 0


def machine(cs):
    """the CPU's name and the BLAS kernel the cells ran"""
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    blas = cs[0].run.get("blas", {}).get("kernel") if cs else None
    return "%s, %d cores, OpenBLAS kernel %s" % (cpu, os.cpu_count() or 0, blas or "unknown")


def write_docs(reports, held, secs):
    src = os.path.join(ROOT, "experiments", "results.md.in")
    with open(src) as f:
        text = f.read()
    vals = {"cells": fmt(sum(len(c) for c in held.values())),
            "minutes": "%.1f" % (secs / 60) if secs else "(not timed)",
            "cpu": machine(next(iter(held.values()), []))}
    for r in reports.values():
        vals.update({k: v for k, v in r.values.items() if isinstance(v, str)})
        vals[r.name + ".checks"] = r.checks_table()
    for k, v in vals.items():
        text = text.replace("{{%s}}" % k, v)
    left = [m for m in text.split("{{")[1:]]
    if left:
        sys.exit("results: results.md.in names what no experiment produced: %s" % ", ".join(
            m.split("}}")[0] for m in left))
    dst = os.path.join(ROOT, "docs", "results.md")
    with open(dst + ".tmp", "w") as f:
        f.write(text)
    os.replace(dst + ".tmp", dst)
    print("wrote %s" % dst)


if __name__ == "__main__":
    sys.exit(main())
