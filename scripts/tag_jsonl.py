"""Copies the JSON lines of a `qlm ... --json` run from stdin to stdout with two fields added: the run's
variant name and its environment settings (the A/B scripts: bench_decode_ab.sh, bench_attention.sh).
Other lines (progress, notes) are dropped.

Usage: qlm ... --json | python3 scripts/tag_jsonl.py VARIANT "SETTINGS" >> OUT.jsonl"""
import json
import sys


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    for line in sys.stdin:
        if line.startswith("{"):
            print(json.dumps(dict(json.loads(line), variant=sys.argv[1], settings=sys.argv[2].strip())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
