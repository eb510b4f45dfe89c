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


class Report:
    """an experiment's checks, tables and figures"""

    def __init__(self, name):
        self.name = name
        self.checks = []   # (what, source, measured, ok, kind)
        self.values = {}   # name -> text, for the template
        self.figures = []

    def check(self, what, source, measured, ok, kind="direction"):
        self.checks.append((what, source, measured, bool(ok), kind))
        return ok

    def set(self, key, value, digits=3):
        self.values[self.name + "." + key] = value if isinstance(value, str) else fmt(value, digits)

    def checks_table(self):
        rows = [(w, s, m, "agrees" if ok else "**differs**") for w, s, m, ok, _ in self.checks]
        return table(["claim", "the source", "measured here", ""], rows)


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
