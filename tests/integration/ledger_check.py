#!/usr/bin/env python3
"""Recompute every job's cost from its events and the known rates, and
compare with what tenbind's ledger says (GET /v1/jobs/{id} "cost") and
with the report's total.  Independent of the C code: its own cutting at
rate changes and UTC midnights, its own rounding (down, per piece).

usage: ledger_check.py URL TOKEN RATES.json
RATES.json: {"SITE": {"kind": "rented", "min_ms": 60000,
                      "periods": [[from_ms, micro_per_gpu_hour], ...]}
             | {"kind": "owned", "sunk": [[from, r]...],
                "marginal": [[from, r]...]}}
Prints one line per disagreement and "checked N jobs, total T" at the
end; exits 1 on any disagreement.
"""
import calendar
import json
import sys
import time
import urllib.request

DAY = 86400000


def get(url, token, path):
    req = urllib.request.Request(url + path)
    if token:
        req.add_header("Authorization", "Bearer " + token)
    with urllib.request.urlopen(req) as r:
        return json.load(r)


def rate_at(periods, t):
    rate = -1
    for start, r in periods:
        if start <= t:
            rate = r
    return rate


def bill(series, t0, t1, gpus, min_ms):
    """Sum of each series' charges over [t0, t1), cut at changes and
    midnights, the minimum's shortfall at the last piece's rates."""
    cuts = sorted({s for periods in series for s, _ in periods
                   if t0 < s < t1} |
                  {d for d in range((t0 // DAY + 1) * DAY, t1, DAY)})
    bounds = [t0] + cuts + [max(t1, t0)]
    pieces = [[a, b, b - a] for a, b in zip(bounds, bounds[1:])]
    if t1 - t0 < min_ms:
        pieces[-1][2] += min_ms - (t1 - t0)
    totals = [0] * len(series)
    for a, _, billed in pieces:
        for k, periods in enumerate(series):
            r = rate_at(periods, a)
            if r > 0:
                totals[k] += r * gpus * billed // 3600000
    return totals


def iso_ms(stamp):
    """'2026-11-27T01:53:57.608Z' into milliseconds since the epoch."""
    secs, frac = stamp.rstrip("Z").split(".")
    return (calendar.timegm(time.strptime(secs, "%Y-%m-%dT%H:%M:%S")) *
            1000 + int(frac))


def main():
    url, token, rates_file = sys.argv[1:4]
    rates = json.load(open(rates_file))
    jobs = get(url, token, "/v1/jobs?limit=1000")["jobs"]
    bad = 0
    first = None
    total = {"billed": 0, "sunk": 0, "marginal": 0, "gpu_ms": 0}
    for listed in jobs:
        job = get(url, token, "/v1/jobs/%d" % listed["id"])
        events = get(url, token, "/v1/jobs/%d/events" % job["id"])["events"]
        start = end = None
        for ev in events:
            if ev["to"] == "running" and start is None:
                start = iso_ms(ev["at"])
            if ev["to"] in ("succeeded", "failed", "cancelled", "lost"):
                end = iso_ms(ev["at"])
        if start is not None:
            first = start if first is None else min(first, start)
        want = {"billed": 0, "sunk": 0, "marginal": 0, "gpu_ms": 0}
        if start is not None and end is not None and job["gpus"] > 0:
            site = rates.get(job["site"], {"kind": "unpriced"})
            want["gpu_ms"] = (end - start) * job["gpus"]
            if site["kind"] == "rented":
                want["billed"], = bill([site["periods"]], start, end,
                                       job["gpus"], site["min_ms"])
            elif site["kind"] == "owned":
                want["sunk"], want["marginal"] = bill(
                    [site["sunk"], site["marginal"]], start, end,
                    job["gpus"], 0)
        elif start is not None:
            print("job %d has not ended" % job["id"])
            bad += 1
        got = job.get("cost", {})
        for k in want:
            g = got.get(k if k == "gpu_ms" else k + "_micro", 0)
            if g != want[k]:
                print("job %d (%s at %s): %s is %d, recomputed %d" %
                      (job["id"], job["state"], job["site"], k, g, want[k]))
                bad += 1
            total[k] += want[k]
    day = time.strftime("%Y-%m-%d", time.gmtime((first or 0) // 1000))
    report = get(url, token, "/v1/reports/usage?from=" + day)["total"]
    for k in ("billed", "sunk", "marginal"):
        if report[k + "_micro"] != total[k]:
            print("report total %s is %d, jobs add up to %d" %
                  (k, report[k + "_micro"], total[k]))
            bad += 1
    print("checked %d jobs, total %d %d %d" %
          (len(jobs), total["billed"], total["sunk"], total["marginal"]))
    sys.exit(1 if bad else 0)


main()
