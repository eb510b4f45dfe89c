#!/usr/bin/env python3
"""philly_jobs.py - Microsoft's public Philly trace (its cluster_job_log)
as a jobs.csv for `stalelab cluster` (docs/cluster.md, "The Philly trace").

  python3 tools/philly_jobs.py cluster_job_log --profiles PROFILES.csv \\
      [--max-gpus G] [--min-minutes M] [--max-minutes M] [--status S,...] \\
      [--seed S] > jobs.csv

Each job of the log (a JSON array of {"jobid", "status", "submitted_time",
"attempts": [{"start_time", "end_time", "detail": [{"ip", "gpus": [...]}]}]})
becomes one row:

  arrival_s   its submitted_time less the earliest kept one (the times are
              naive strings: only differences are used)
  num_gpus    the GPUs of its largest attempt (summed over the attempt's
              machines)
  duration_s  the sum of its attempts' end - start (an attempt without
              both times, or not longer than 0, is left out)
  model       drawn uniformly from the profiles' models with --seed (the
              trace names no model)

A job with no usable attempt, no GPU, more than --max-gpus, a duration
outside [--min-minutes, --max-minutes] or a status not in --status is left
out; the header's comment lines count each reason. Standard library only.
"""

import argparse
import csv
import datetime
import json
import random
import sys

TIME_FORMAT = "%Y-%m-%d %H:%M:%S"


def parse_time(s):
    if s is None or s == "None":
        return None
    try:
        return datetime.datetime.strptime(s, TIME_FORMAT)
    except (TypeError, ValueError):
        return None


def profile_models(path):
    with open(path, newline="") as f:
        rows = [line for line in f if not line.startswith("#")]
    models = []
    for r in csv.DictReader(rows):
        m = r.get("model")
        if m and m not in models:
            models.append(m)
    if not models:
        raise SystemExit(f"philly_jobs: {path}: no models (expected a profiles.csv with a model column)")
    return models


def job_row(job):
    """(submitted, gpus, duration_s) of a job, or the reason it is left out"""
    sub = parse_time(job.get("submitted_time"))
    if sub is None:
        return "no submitted_time"
    total, gpus = 0.0, 0
    for a in job.get("attempts") or []:
        start, end = parse_time(a.get("start_time")), parse_time(a.get("end_time"))
        if start is None or end is None or end <= start:
            continue
        total += (end - start).total_seconds()
        gpus = max(gpus, sum(len(d.get("gpus") or []) for d in a.get("detail") or []))
    if total <= 0:
        return "no attempt with a start and a later end"
    if gpus == 0:
        return "no GPU"
    return sub, gpus, total


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("log", help="the trace's cluster_job_log (a JSON array)")
    ap.add_argument("--profiles", required=True, help="profiles.csv: its models are drawn for the jobs")
    ap.add_argument("--max-gpus", type=int, default=None, help="leave out jobs wanting more GPUs")
    ap.add_argument("--min-minutes", type=float, default=0, help="leave out shorter jobs (Gandiva, Blox: 10^1.5)")
    ap.add_argument("--max-minutes", type=float, default=float("inf"), help="leave out longer jobs (10^4)")
    ap.add_argument("--status", default="Pass,Killed,Failed", help="the statuses kept (default all three)")
    ap.add_argument("--seed", type=int, default=1, help="the models' draw (default 1)")
    o = ap.parse_args(argv)
    models = profile_models(o.profiles)
    keep_status = {s.strip() for s in o.status.split(",") if s.strip()}
    try:
        with open(o.log) as f:
            jobs = json.load(f)
    except (OSError, ValueError) as e:
        raise SystemExit(f"philly_jobs: {o.log}: {e}")
    if not isinstance(jobs, list):
        raise SystemExit(f"philly_jobs: {o.log}: expected a JSON array of jobs")
    left = {}
    kept = []
    for j in jobs:
        if not isinstance(j, dict):
            left["not a job object"] = left.get("not a job object", 0) + 1
            continue
        why = None
        if j.get("status") not in keep_status:
            why = f"status {j.get('status')}"
        r = job_row(j) if why is None else why
        if isinstance(r, str):
            why = r
        else:
            sub, gpus, dur = r
            if o.max_gpus is not None and gpus > o.max_gpus:
                why = f"more than {o.max_gpus} GPUs"
            elif not (o.min_minutes * 60 <= dur <= o.max_minutes * 60):
                why = "duration outside the minutes kept"
        if why is not None:
            left[why] = left.get(why, 0) + 1
            continue
        kept.append((sub, j.get("jobid", ""), gpus, dur))
    kept.sort(key=lambda k: k[0])  # stable: the log's order among equal times
    rng = random.Random(o.seed)
    out = sys.stdout
    out.write(f"# the Philly trace's {o.log}: {len(kept)} of {len(jobs)} jobs, converted by "
              f"tools/philly_jobs.py (statuses {','.join(sorted(keep_status))}, "
              f"minutes {o.min_minutes:g} to {o.max_minutes:g}"
              f"{f', at most {o.max_gpus} GPUs' if o.max_gpus is not None else ''}, "
              f"models drawn from {o.profiles} with seed {o.seed})\n")
    for why in sorted(left):
        out.write(f"# left out: {left[why]} ({why})\n")
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["job_id", "arrival_s", "num_gpus", "model", "duration_s", "philly_jobid"])
    t0 = kept[0][0] if kept else None
    for i, (sub, jobid, gpus, dur) in enumerate(kept, 1):
        w.writerow([i, f"{(sub - t0).total_seconds():.0f}", gpus, rng.choice(models), f"{dur:.0f}", jobid])
    if not kept:
        print("philly_jobs: no job kept", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
