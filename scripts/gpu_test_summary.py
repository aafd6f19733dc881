#!/usr/bin/env python3
"""Summary table of GoogleTest JSON reports (scripts/gpu_check.sh): per suite, tests run, passed,
failed, skipped and seconds, then the failed tests by name. A report that is missing (the run was
killed: a hang past its time limit) is rebuilt from the run's log (REPORT with .log for .json): the
tests it finished, and the one that was running, counted as failed. Standard library only.
Usage: python3 scripts/gpu_test_summary.py gpu_tests.json [more.json ...]"""
import json
import os
import re
import sys


def from_json(path):
    """[(suite, [(test, 'passed'|'failed'|'skipped')], seconds)] of a JSON report."""
    report = json.load(open(path))
    suites = []
    for suite in report.get("testsuites", []):
        tests = []
        for t in suite.get("testsuite", []):
            state = "failed" if t.get("failures") else "skipped" if t.get("result") == "SKIPPED" else "passed"
            tests.append((t["name"], state))
        suites.append((suite["name"], tests, float(str(suite.get("time", "0s")).rstrip("s") or 0)))
    return suites


def from_log(path):
    """The same from a gtest log whose run did not finish; the test left running counts as failed."""
    by_suite, running = {}, None
    for line in open(path, errors="replace"):
        m = re.match(r"^\[ +(RUN|OK|FAILED|SKIPPED) +\] (\S+)\.(\S+?)(?: \(\d+ ms\))?$", line.rstrip())
        if not m:
            continue
        kind, suite, test = m.groups()
        if kind == "RUN":
            running = (suite, test)
            continue
        by_suite.setdefault(suite, []).append((test, {"OK": "passed", "FAILED": "failed", "SKIPPED": "skipped"}[kind]))
        running = None
    if running:
        by_suite.setdefault(running[0], []).append((running[1] + " (did not finish: killed at the time limit)",
                                                    "failed"))
    return [(s, tests, 0.0) for s, tests in by_suite.items()]


def main():
    paths = sys.argv[1:]
    if not paths:
        print(__doc__)
        return 2
    suites = []
    for path in paths:
        try:
            suites += from_json(path)
        except (OSError, ValueError) as e:
            log = os.path.splitext(path)[0] + ".log"
            if not os.path.exists(log):
                print(f"no test report ({path}: {e}) and no log ({log})")
                return 1
            print(f"({path} missing: rebuilt from {log})")
            suites += from_log(log)
    print("| suite | tests | passed | failed | skipped | seconds |")
    print("|---|---|---|---|---|---|")
    failed_names = []
    totals = [0, 0, 0, 0, 0.0]
    for name, tests, secs in suites:
        counts = [len(tests)] + [sum(1 for _, s in tests if s == k) for k in ("passed", "failed", "skipped")]
        print(f"| {name} | {counts[0]} | {counts[1]} | {counts[2]} | {counts[3]} | {secs:.1f} |")
        failed_names += [f"{name}.{t}" for t, s in tests if s == "failed"]
        for i, v in enumerate(counts + [secs]):
            totals[i] += v
    print(f"| **all** | {totals[0]} | {totals[1]} | {totals[2]} | {totals[3]} | {totals[4]:.1f} |")
    if failed_names:
        print("\nFailed:\n" + "\n".join(f"- {n}" for n in failed_names))
    return 1 if failed_names else 0


if __name__ == "__main__":
    sys.exit(main())
