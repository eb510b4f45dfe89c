"""lib.py - what every reproduction in results.py shares: running a sweep,
reading its cells back, grouping seeds, checks, tables and gnuplot figures.

Standard library only (the machines that run `make test` have python3 and
nothing else of Python's).
"""
import json
import math
import os
import statistics
import subprocess
import sys


class Cell:
    """One finished cell of a sweep: its run object (the log's first
    record, defaults filled in), its axes, metrics and log records."""

    def __init__(self, path):
        with open(path) as f:
            d = json.load(f)
        self.name = d["cell"]
        self.label = d["label"]
        self.axes = d["axes"]
        self.metrics = d["metrics"]
        if "step_flops" not in self.metrics:  # a cell from before step_flops: its bwd_flops counted
            self.metrics["step_flops"] = self.metrics.get("bwd_flops")  # the forward too
            self.metrics["bwd_flops"] = None
        self.log_path = path[:-len(".json")] + ".jsonl"
        self._records = None
        self.run = self.records[0]
        self.seed = self.run["seed"]
        self.variant = self.value("variant")

    @property
    def records(self):
        if self._records is None:
            with open(self.log_path) as f:
                self._records = [json.loads(line) for line in f if line.strip()]
        return self._records

    @property
    def evals(self):
        """the evaluation records, in order (those without an "event")"""
        return [e for e in self.records[1:] if "event" not in e and "test_acc" in e]

    @property
    def end(self):
        return next(e for e in reversed(self.records) if e.get("event") == "end")

    def value(self, key):
        """an axis value from the label (variant, seed, dotted keys)"""
        for part in self.label.split(","):
            k, _, v = part.partition("=")
            if k == key:
                return v
        return None

    def group(self):
        """the cell's label without its seed: the key its seeds share"""
        return ",".join(p for p in self.label.split(",") if not p.startswith("seed="))


def sweep(stalelab, spec, out, jobs):
    """run (or resume) a sweep; every cell must finish"""
    cmd = [stalelab, "sweep", spec, "--out", out, "--force"]
    if jobs:
        cmd += ["--jobs", str(jobs)]
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.exit("results: %s failed (exit %d):\n%s" % (" ".join(cmd), r.returncode, r.stderr))


def cells(out):
    """the cells of the sweep's current grid (results.csv), in grid order"""
    import csv
    with open(os.path.join(out, "results.csv"), newline="") as f:
        names = [r["cell"] for r in csv.DictReader(f)]
    return [Cell(os.path.join(out, "cells", n + ".json")) for n in names]


def by_group(cs):
    g = {}
    for c in cs:
        g.setdefault(c.group(), []).append(c)
    return g


def mean(xs):
    xs = [x for x in xs if x is not None]
    return statistics.fmean(xs) if xs else None


def sd(xs):
    xs = [x for x in xs if x is not None]
    return statistics.stdev(xs) if len(xs) > 1 else 0.0


# ---- intervals over seeds, and the verdicts they decide ------------------
#
# A claim is that a difference (or one quantity) lies in a region (lo, hi):
# (0, inf) "larger", (-inf, 0) "smaller", (-m, m) "the same within m",
# (-tol, inf) "no worse than by tol". Its 95% interval over seeds decides:
# inside the region, agrees; outside it, differs; across a boundary, not
# resolved at N seeds. With the same seeds on both sides the interval is a
# t-interval over the per-seed paired differences, else Welch's.

LEVEL = 0.95


def _betacf(a, b, x):
    """the continued fraction of the incomplete beta function (Lentz)"""
    tiny, c, d = 1e-300, 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def betainc(a, b, x):
    """the regularised incomplete beta function I_x(a, b)"""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    ln = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(ln) * _betacf(a, b, x) / a
    return 1.0 - math.exp(ln) * _betacf(b, a, 1.0 - x) / b


def t_cdf(t, df):
    """P(T <= t) for Student's t with df (> 0, not necessarily whole) degrees of freedom"""
    tail = 0.5 * betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


def t_quantile(p, df):
    """the t with P(T <= t) = p, by bisection on t_cdf"""
    if not 0.0 < p < 1.0:
        raise ValueError("t_quantile: p = %r" % p)
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        lo, hi = hi, 2.0 * hi
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * hi:
            break
    return 0.5 * (lo + hi)


def _welch_df(va, na, vb, nb):
    """Welch-Satterthwaite degrees of freedom from the two variances of the mean"""
    num = (va + vb) ** 2
    den = (va * va / (na - 1) if va else 0.0) + (vb * vb / (nb - 1) if vb else 0.0)
    return num / den if den else float("inf")


class Interval:
    """the LEVEL interval of a difference over seeds: diff, lo, hi, method,
    n (seeds: pairs, or the smaller side) and what seeds_to_resolve needs
    (sd_a, sd_b: the spreads; paired or one-sample use sd_a only)"""

    def __init__(self, diff, lo, hi, method, n, sd_a, sd_b=None):
        self.diff, self.lo, self.hi, self.method, self.n = diff, lo, hi, method, n
        self.sd_a, self.sd_b = sd_a, sd_b

    def halfwidth(self, n):
        """the interval's half-width with n seeds (a side), the same spread"""
        q = 0.5 + LEVEL / 2
        if self.sd_b is None:
            return t_quantile(q, n - 1) * self.sd_a / math.sqrt(n) if self.sd_a else 0.0
        va, vb = self.sd_a ** 2 / n, self.sd_b ** 2 / n
        if not va + vb:
            return 0.0
        return t_quantile(q, _welch_df(va, n, vb, n)) * math.sqrt(va + vb)


def _values(x):
    """{seed: value} or a list: (seeds or None, values), every value finite"""
    seeds, vals = (list(x), list(x.values())) if isinstance(x, dict) else (None, list(x))
    if any(v is None or not math.isfinite(v) for v in vals):
        raise ValueError("interval: a value is missing or not finite: %r" % (vals,))
    return seeds, vals


def interval(a, b=None):
    """the LEVEL interval of mean(a) - mean(b) (of mean(a) without b).
    a, b: {seed: value} (or lists). The same seeds on both sides, two at
    least: a t-interval over the per-seed differences (paired); else
    Welch's. One value a side leaves the whole line (no spread to judge)."""
    sa, va = _values(a)
    q = 0.5 + LEVEL / 2
    if b is not None:
        sb, vb = _values(b)
        if sa is not None and sb is not None and sorted(sa) == sorted(sb) and len(sa) > 1:
            d = [a[s] - b[s] for s in sa]
            iv = interval(d)
            iv.method = "paired t"
            return iv
        if min(len(va), len(vb)) < 2:
            return Interval(mean(va) - mean(vb), -math.inf, math.inf, "one seed a side", min(len(va), len(vb)),
                            None)
        d = statistics.fmean(va) - statistics.fmean(vb)
        iv = Interval(d, d, d, "Welch", min(len(va), len(vb)), statistics.stdev(va), statistics.stdev(vb))
        va_m, vb_m = iv.sd_a ** 2 / len(va), iv.sd_b ** 2 / len(vb)
        if va_m + vb_m:
            h = t_quantile(q, _welch_df(va_m, len(va), vb_m, len(vb))) * math.sqrt(va_m + vb_m)
            iv.lo, iv.hi = d - h, d + h
        return iv
    m = statistics.fmean(va)
    if len(va) < 2:
        return Interval(m, -math.inf, math.inf, "one seed", len(va), None)
    s = statistics.stdev(va)
    iv = Interval(m, m, m, "t", len(va), s)
    h = iv.halfwidth(len(va))
    iv.lo, iv.hi = m - h, m + h
    return iv


AGREES, DIFFERS, OPEN = "agrees", "differs", "not resolved"


def decide(iv, lo=0.0, hi=math.inf):
    """the verdict on the claim lo < difference < hi"""
    if lo < iv.lo and iv.hi < hi:
        return AGREES
    if iv.hi <= lo or iv.lo >= hi:
        return DIFFERS
    return OPEN


def seeds_to_resolve(iv, lo=0.0, hi=math.inf, most=100000):
    """the seeds (a side) at which an interval around the same difference,
    with the same spread, would lie wholly inside or wholly outside
    (lo, hi): the observed effect taken as the true one, so about an even
    chance to resolve there. None: no spread to go on, the difference on
    a boundary, or more than `most`."""
    if iv.sd_a is None:
        return None
    d = iv.diff
    gap = min(d - lo, hi - d) if lo < d < hi else (lo - d if d <= lo else d - hi)
    if not gap > 0:
        return None
    sd2 = iv.sd_a ** 2 + (iv.sd_b ** 2 if iv.sd_b is not None else 0.0)
    z = statistics.NormalDist().inv_cdf(0.5 + LEVEL / 2)
    n = max(2, math.ceil((z / gap) ** 2 * sd2))  # the t quantile is larger: start here
    while n <= most:
        if iv.halfwidth(n) < gap:
            return n
        n += 1
    return None


def slope(xs, ys):
    """the least-squares slope of ys on xs (two distinct xs at least)"""
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    if not den:
        raise ValueError("slope: the xs are all equal: %r" % (xs,))
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den


def seed_slopes(points):
    """points {x: {seed: y}}: {seed: the slope of y on x}, over the seeds
    present at every x (the per-seed trend an interval then judges)"""
    xs = sorted(points)
    seeds = sorted(set.intersection(*(set(points[x]) for x in xs))) if xs else []
    return {s: slope(xs, [points[x][s] for x in xs]) for s in seeds}


def seed_argmin(points):
    """points {x: {seed: y}}: {seed: the x with the least y}, over the seeds
    present at every x; a tie goes to the smallest x"""
    xs = sorted(points)
    seeds = sorted(set.intersection(*(set(points[x]) for x in xs))) if xs else []
    return {s: min(xs, key=lambda x: (points[x][s], x)) for s in seeds}


def first_at(c, key, test, field="v"):
    """the field of the first evaluation whose key passes test"""
    for e in c.evals:
        if e.get(key) is not None and test(e[key]):
            return e[field]
    return None


def fmt(x, digits=3):
    if x is None:
        return "never"
    if isinstance(x, str):
        return x
    if isinstance(x, int) or (isinstance(x, float) and abs(x) >= 100 and math.isfinite(x)):
        return "{:,}".format(int(round(x)))
    return "{:.{d}g}".format(x, d=digits)


def table(head, rows):
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    cell = lambda x: (fmt(x) if not isinstance(x, str) else x).replace("|", "\\|")  # noqa: E731
    out += ["| " + " | ".join(cell(x) for x in r) + " |" for r in rows]
    return "\n".join(out)


HOLDS, FAILS = "identity holds", "identity fails"


def signed(x, digits=3):
    return ("+" if x > 0 else "") + fmt(x, digits) if math.isfinite(x) else ("-∞" if x < 0 else "+∞")


def describe(iv, ratio=False):
    """the difference and its interval as the page prints them; ratio: the
    values are logs, printed as the ratio they stand for"""
    if ratio:
        r = lambda x: "%.3g" % math.exp(x) if x < 700 else "∞"  # noqa: E731
        text = "×%s [%s, %s]" % (r(iv.diff), r(iv.lo), r(iv.hi))
    else:
        text = "%s [%s, %s]" % (signed(iv.diff), signed(iv.lo), signed(iv.hi))
    return "%s (%s, %d seed%s)" % (text, iv.method, iv.n, "" if iv.n == 1 else "s")


class Check:
    """one verdict: a claim decided by an interval over seeds, or an
    identity of our model or code (exact, and never counted as agreement)"""

    def __init__(self, what, source, measured, verdict, iv=None, lo=0.0, hi=math.inf, finding=False,
                 ratio=False):
        self.what, self.source, self.measured, self.verdict = what, source, measured, verdict
        self.iv, self.lo, self.hi, self.finding, self.ratio = iv, lo, hi, finding, ratio
        self.need = seeds_to_resolve(iv, lo, hi) if verdict == OPEN else None

    @property
    def identity(self):
        return self.verdict in (HOLDS, FAILS)

    @property
    def ok(self):
        return self.verdict in (AGREES, HOLDS)

    @property
    def leaning(self):
        """an open claim whose difference lies in the claimed region (the
        direction --quick checks)"""
        return self.verdict == OPEN and self.lo < self.iv.diff < self.hi

    def interval_text(self):
        return describe(self.iv, self.ratio) if self.iv else "exact (no seed noise)"

    def verdict_text(self, md=True):
        if self.verdict == OPEN:
            return "not resolved at %d seed%s%s" % (self.iv.n, "" if self.iv.n == 1 else "s",
                                                   "; about %s would resolve it" % fmt(self.need)
                                                   if self.need else "")
        bold = "**%s**" if md and self.verdict in (DIFFERS, FAILS) else "%s"
        return bold % self.verdict


def tally(checks):
    """how the verdicts fell: claims and identities apart"""
    n = {v: sum(c.verdict == v for c in checks) for v in (AGREES, DIFFERS, OPEN, HOLDS, FAILS)}
    claims, ids = n[AGREES] + n[DIFFERS] + n[OPEN], n[HOLDS] + n[FAILS]
    parts = ["%d claim%s decided by intervals over seeds: %d agree, %d differ, %d not resolved" % (
        claims, "s" * (claims != 1), n[AGREES], n[DIFFERS], n[OPEN])] if claims else []
    parts += ["%d %s of our model or code, not counted as agreement: %d hold, %d fail" % (
        ids, "identity" if ids == 1 else "identities", n[HOLDS], n[FAILS])] if ids else []
    return "; ".join(parts) or "no verdicts"


class Report:
    """an experiment's checks, tables and figures"""

    def __init__(self, name):
        self.name = name
        self.checks = []   # Check
        self.values = {}   # name -> text, for the template
        self.figures = []

    def claim(self, what, source, measured, a, b=None, lo=0.0, hi=math.inf, finding=False, ratio=False):
        """the claim lo < mean(a) - mean(b) < hi (a alone without b), a and
        b {seed: value}, decided by its interval (see interval, decide);
        ratio: the values are logs. finding: a source's claim we report as
        not reproduced (--quick notes it instead of failing)"""
        iv = interval(a, b)
        c = Check(what, source, measured, decide(iv, lo, hi), iv, lo, hi, finding, ratio)
        self.checks.append(c)
        return c

    def identity(self, what, source, measured, holds, finding=False):
        """a check of our model or code against itself: exact, no interval"""
        c = Check(what, source, measured, HOLDS if holds else FAILS, finding=finding)
        self.checks.append(c)
        return c

    def set(self, key, value, digits=3):
        self.values[self.name + "." + key] = value if isinstance(value, str) else fmt(value, digits)

    def checks_table(self):
        rows = [(c.what, c.source, c.measured, c.interval_text(), c.verdict_text()) for c in self.checks]
        return table(["claim", "the source", "measured here", "estimate, 95% interval over seeds", "verdict"], rows)


def gnuplot(figdir, name, script, data):
    """write NAME.dat (blocks separated by two blank lines: gnuplot's
    `index`) and NAME.gp, render NAME.svg; returns the svg's path"""
    os.makedirs(figdir, exist_ok=True)
    dat = os.path.join(figdir, name + ".dat")
    with open(dat, "w") as f:
        for i, (title, rows) in enumerate(data):
            if i:
                f.write("\n\n")
            f.write("# %s\n" % title)
            for r in rows:
                f.write(" ".join("NaN" if v is None else repr(v) for v in r) + "\n")
    gp = os.path.join(figdir, name + ".gp")
    with open(gp, "w") as f:
        f.write("set terminal svg size 760,440 dynamic noenhanced font 'sans,11'\n")
        f.write("set output '%s.svg'\n" % name)
        f.write("set key outside right top\nset grid\n")
        f.write(script.replace("DAT", "'%s.dat'" % name))
    r = subprocess.run(["gnuplot", name + ".gp"], cwd=figdir, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("results: gnuplot %s failed:\n%s" % (gp, r.stderr))
    return os.path.join(figdir, name + ".svg")


def lines(data, using="1:2", style="lines lw 1.5"):
    """a plot command with a line per block of data"""
    return "plot " + ", \\\n     ".join(
        "DAT index %d using %s with %s title '%s'" % (i, using, style, t)
        for i, (t, _) in enumerate(data)) + "\n"


def tv_distance(p, q):
    return 0.5 * sum(abs(a - b) for a, b in zip(p, q))


def isclose(a, b, rel):
    return a is not None and b is not None and math.isclose(a, b, rel_tol=rel)
