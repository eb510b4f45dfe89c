#!/usr/bin/env python3
"""test_lib.py - the intervals and verdicts of lib.py, without a sweep.

    python3 experiments/test_lib.py      (tests/integration/results.sh runs it)

Standard library only. Student's t is checked against its closed forms
(df 1 and 2) and published quantiles; the intervals against hand-worked
examples; the verdict rule in each direction, for regions one-sided and
two-sided; the seeds that would resolve an open claim against the
half-widths they stand for; the page's tally against identities.
"""
import math
import os
import sys
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib import (AGREES, DIFFERS, FAILS, HOLDS, OPEN, Interval, Report, decide, interval,  # noqa: E402
                 seed_argmin, seed_slopes, seeds_to_resolve, slope, t_cdf, t_quantile, tally)


class StudentT(unittest.TestCase):
    def test_closed_forms(self):
        for t in (-7.0, -1.0, -0.3, 0.0, 0.4, 1.0, 2.5, 30.0):
            self.assertAlmostEqual(t_cdf(t, 1), 0.5 + math.atan(t) / math.pi, places=12)
            self.assertAlmostEqual(t_cdf(t, 2), 0.5 + t / (2 * math.sqrt(2 + t * t)), places=12)

    def test_quantiles(self):
        # two-sided 95% critical values, as every t table prints them
        for df, want in ((1, 12.7062047), (2, 4.3026527), (3, 3.1824463), (4, 2.7764451),
                         (9, 2.2621572), (30, 2.0422725), (1000, 1.9623391)):
            self.assertAlmostEqual(t_quantile(0.975, df), want, places=6)
        self.assertAlmostEqual(t_quantile(0.025, 4), -2.7764451, places=6)
        for df in (1.3, 2.5, 4.0755, 17.2):  # Welch's fractional degrees of freedom
            self.assertAlmostEqual(t_cdf(t_quantile(0.975, df), df), 0.975, places=10)
        self.assertGreater(t_quantile(0.975, 4.0755), t_quantile(0.975, 5))
        self.assertLess(t_quantile(0.975, 4.0755), t_quantile(0.975, 4))


class Intervals(unittest.TestCase):
    def test_paired_by_seed(self):
        iv = interval({1: 1.0, 2: 2.0, 3: 4.0}, {3: 2.0, 1: 0.0, 2: 1.0})
        # differences 1, 1, 2: mean 4/3, sd 1/sqrt(3), t(0.975, 2) = 4.3026527
        h = 4.3026527 * (1 / math.sqrt(3)) / math.sqrt(3)
        self.assertEqual((iv.method, iv.n), ("paired t", 3))
        self.assertAlmostEqual(iv.diff, 4 / 3)
        self.assertAlmostEqual(iv.lo, 4 / 3 - h, places=6)
        self.assertAlmostEqual(iv.hi, 4 / 3 + h, places=6)

    def test_welch(self):
        # means 2 and 7; variances of the mean 1/3 and 20/3/4 (sum 2);
        # Welch-Satterthwaite df = 4 / ((1/3)^2/2 + (5/3)^2/3) = 4.0755
        iv = interval([1.0, 2.0, 3.0], [4.0, 6.0, 8.0, 10.0])
        h = t_quantile(0.975, 4 / ((1 / 3) ** 2 / 2 + (5 / 3) ** 2 / 3)) * math.sqrt(2)
        self.assertEqual((iv.method, iv.n), ("Welch", 3))
        self.assertAlmostEqual(iv.diff, -5.0)
        self.assertAlmostEqual(iv.lo, -5.0 - h, places=9)
        self.assertAlmostEqual(iv.hi, -5.0 + h, places=9)
        self.assertAlmostEqual(h, 3.897975, places=5)

    def test_unmatched_seeds_are_welch(self):
        self.assertEqual(interval({1: 1.0, 2: 2.0}, {1: 1.5, 3: 2.5}).method, "Welch")
        self.assertEqual(interval({1: 1.0, 2: 2.0}, {1: 1.5, 2: 2.5}).method, "paired t")

    def test_one_sample(self):
        iv = interval({1: 0.0, 2: 1.0, 3: 2.0})
        self.assertEqual(iv.method, "t")
        self.assertAlmostEqual(iv.hi - iv.diff, 4.3026527 / math.sqrt(3), places=6)

    def test_one_seed_leaves_it_open(self):
        iv = interval({1: 0.5}, {1: 0.1})
        self.assertEqual((iv.lo, iv.hi), (-math.inf, math.inf))
        self.assertEqual(decide(iv), OPEN)
        self.assertIsNone(seeds_to_resolve(iv))

    def test_no_spread(self):
        iv = interval({1: 0.0, 2: 0.0, 3: 0.0})
        self.assertEqual((iv.lo, iv.hi), (0.0, 0.0))
        self.assertEqual(decide(iv, -math.inf, 1e-4), AGREES)
        # exactly on the boundary of an open region: not in it
        self.assertEqual(decide(iv, 0.0), DIFFERS)
        self.assertEqual(decide(iv, -math.inf, 0.0), DIFFERS)
        self.assertIsNone(seeds_to_resolve(iv, 0.0))

    def test_not_finite_refused(self):
        for bad in (float("inf"), float("nan"), None):
            with self.assertRaises(ValueError):
                interval({1: 1.0, 2: bad})


def iv_of(lo, hi):
    return Interval(0.5 * (lo + hi), lo, hi, "t", 3, 1.0)


class Verdicts(unittest.TestCase):
    def test_one_sided(self):
        self.assertEqual(decide(iv_of(0.1, 0.5)), AGREES)        # larger, claimed larger
        self.assertEqual(decide(iv_of(-0.5, -0.1)), DIFFERS)     # smaller, claimed larger
        self.assertEqual(decide(iv_of(-0.1, 0.5)), OPEN)
        self.assertEqual(decide(iv_of(-0.5, -0.1), -math.inf, 0.0), AGREES)  # claimed smaller
        self.assertEqual(decide(iv_of(0.1, 0.5), -math.inf, 0.0), DIFFERS)
        self.assertEqual(decide(iv_of(-0.004, 0.3), -0.005), AGREES)  # no worse than by 0.005

    def test_two_sided(self):
        self.assertEqual(decide(iv_of(-0.5, 0.5), -1.0, 1.0), AGREES)
        self.assertEqual(decide(iv_of(1.5, 2.0), -1.0, 1.0), DIFFERS)
        self.assertEqual(decide(iv_of(-2.0, -1.5), -1.0, 1.0), DIFFERS)
        self.assertEqual(decide(iv_of(0.5, 1.5), -1.0, 1.0), OPEN)

    def test_seeds_to_resolve(self):
        # mean 1, sd 1: t(0.975, n-1)/sqrt(n) < 1 first at n = 7 (6: 1.049)
        iv = interval([0.0, 1.0, 2.0])
        self.assertEqual(decide(iv), OPEN)
        n = seeds_to_resolve(iv, 0.0)
        self.assertEqual(n, 7)
        self.assertLess(iv.halfwidth(n), 1.0)
        self.assertGreater(iv.halfwidth(n - 1), 1.0)
        # the other way: resolving "differs" for a claim of smaller
        self.assertEqual(seeds_to_resolve(iv, -math.inf, 0.0), 7)
        # inside a two-sided region the nearer boundary counts: gap 0.5
        n2 = seeds_to_resolve(iv, -0.2, 1.5)
        self.assertLess(iv.halfwidth(n2), 0.5)
        self.assertGreater(iv.halfwidth(n2 - 1), 0.5)
        # Welch: n a side, the two spreads added
        w = interval([0.0, 1.0, 2.0], [-1.0, 0.0, 1.0, 2.0])
        nw = seeds_to_resolve(w, 0.0)
        self.assertLess(w.halfwidth(nw), w.diff)
        self.assertGreater(w.halfwidth(nw - 1), w.diff)


class Trends(unittest.TestCase):
    def test_slope(self):
        self.assertAlmostEqual(slope([0, 1, 2, 3], [1, 3, 5, 7]), 2.0)
        # y = 1, 0, 2 at x = 0, 1, 2: covariance 1, variance 2
        self.assertAlmostEqual(slope([0, 1, 2], [1, 0, 2]), 0.5)
        self.assertRaises(ValueError, slope, [1, 1], [0, 5])

    def test_seed_slopes(self):
        pts = {0: {1: 0.0, 2: 1.0, 3: 9.0}, 2: {1: 4.0, 2: 1.0}, 1: {1: 2.0, 2: 1.0}}
        # seed 3 lacks x = 1 and 2: left out; seed 1 rises by 2, seed 2 is flat
        self.assertEqual(seed_slopes(pts), {1: 2.0, 2: 0.0})
        self.assertEqual(seed_slopes({}), {})

    def test_seed_argmin(self):
        pts = {0.9: {1: 5.0, 2: 1.0}, 0.0: {1: 3.0, 2: 4.0}, 0.5: {1: 3.0, 2: 2.0}}
        # seed 1: 0.0 and 0.5 tie at 3, the smaller x wins; seed 2: 0.9
        self.assertEqual(seed_argmin(pts), {1: 0.0, 2: 0.9})


class Page(unittest.TestCase):
    def test_report_and_tally(self):
        r = Report("x")
        a = r.claim("larger", "src", "m", {1: 2.0, 2: 2.2, 3: 2.1}, {1: 1.0, 2: 1.1, 3: 0.9})
        o = r.claim("smaller", "src", "m", {1: 0.0, 2: 1.0, 3: 2.0}, lo=-math.inf, hi=0.0)
        d = r.claim("ratio", "src", "m", {1: math.log(2), 2: math.log(2.2), 3: math.log(1.8)},
                    lo=math.log(0.8), hi=math.log(1.25), ratio=True, finding=True)
        h = r.identity("same bits", "an identity", "m", True)
        f = r.identity("same bits too", "an identity", "m", False, finding=True)
        self.assertEqual([c.verdict for c in (a, o, d, h, f)], [AGREES, OPEN, DIFFERS, HOLDS, FAILS])
        self.assertFalse(o.leaning)  # its mean, 1, lies outside "smaller"
        self.assertTrue(r.claim("l", "s", "m", {1: -1.0, 2: 0.5, 3: -2.0}, lo=-math.inf, hi=0.0).leaning)
        self.assertEqual(o.verdict_text(), "not resolved at 3 seeds; about 7 would resolve it")
        self.assertTrue(d.interval_text().startswith("×1.99 ["), d.interval_text())
        self.assertIn("(t, 3 seeds)", o.interval_text())
        self.assertEqual(h.interval_text(), "exact (no seed noise)")
        self.assertEqual(f.verdict_text(), "**identity fails**")
        self.assertEqual(tally(r.checks), "4 claims decided by intervals over seeds: 1 agree, 1 differ, "
                         "2 not resolved; 2 identities of our model or code, not counted as agreement: "
                         "1 hold, 1 fail")
        self.assertEqual(tally([a, o]), "2 claims decided by intervals over seeds: 1 agree, 0 differ, "
                         "1 not resolved")
        self.assertEqual(tally([h]), "1 identity of our model or code, not counted as agreement: 1 hold, 0 fail")
        t = r.checks_table()
        self.assertIn("| larger | src | m | +1.1 [", t)
        self.assertIn("| agrees |", t)
        self.assertIn("| **identity fails** |", t)


if __name__ == "__main__":
    sys.exit(0 if unittest.main(exit=False, verbosity=1).result.wasSuccessful() else 1)
