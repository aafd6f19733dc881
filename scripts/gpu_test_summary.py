#!/usr/bin/env python3
"""Summary table of a GoogleTest JSON report (scripts/gpu_check.sh): per suite, tests run, passed,
failed, skipped and seconds, then the failed tests by name. Standard library only.
Usage: python3 scripts/gpu_test_summary.py gpu_tests.json"""
import json
import sys


def main():
    path = sys.argv[1]
    try:
        report = json.load(open(path))
    except (OSError, ValueError) as e:
        print(f"no test report ({path}: {e})")
        return 1
    print("| suite | tests | passed | failed | skipped | seconds |")
    print("|---|---|---|---|---|---|")
    failed_names = []
    totals = [0, 0, 0, 0, 0.0]
    for suite in report.get("testsuites", []):
        tests = suite.get("testsuite", [])
        n = len(tests)
        failed = [t for t in tests if t.get("failures")]
        skipped = [t for t in tests if t.get("result") == "SKIPPED"]
        passed = n - len(failed) - len(skipped)
        secs = float(str(suite.get("time", "0s")).rstrip("s") or 0)
        print(f"| {suite['name']} | {n} | {passed} | {len(failed)} | {len(skipped)} | {secs:.1f} |")
        failed_names += [f"{suite['name']}.{t['name']}" for t in failed]
        for i, v in enumerate((n, passed, len(failed), len(skipped), secs)):
            totals[i] += v
    print(f"| **all** | {totals[0]} | {totals[1]} | {totals[2]} | {totals[3]} | {totals[4]:.1f} |")
    if failed_names:
        print("\nFailed:\n" + "\n".join(f"- {n}" for n in failed_names))
    return 0


if __name__ == "__main__":
    sys.exit(main())
