#!/usr/bin/env python3
"""Static instruction counts of the MMA loops of CUDA kernels, from `cuobjdump -sass` output.

For each kernel whose (mangled) name contains one of the given substrings: the innermost loops (a backward
branch and its target) that hold tensor-core instructions (HMMA, HGMMA, IMMA, ...), each with its instruction
count, MMA count, instructions per MMA and the most frequent opcodes. A loop body is counted as written, so
a branch inside it counts both arms: read the opcode mix, not only the total. Local-memory traffic (LDL / STL: spills)
inside a loop is named on its line. With --runs, also the runs of MMAs outside any loop analysis: maximal stretches
whose consecutive MMAs lie at most GAP instructions apart (fully unrolled stage bodies show up only there), each with
the same counts. Used to compare kernel versions without a GPU (docs/w4a16-kernel-notes.md); the time a kernel takes
still comes from the device.

usage: sass_loop_stats.py SASS_FILE [NAME_SUBSTRING ...] [--top N] [--runs [GAP]]
"""
import argparse
import collections
import re
import subprocess

MMA = re.compile(r"^(HMMA|HGMMA|IMMA|IGMMA|QGMMA|DMMA|HFMA2\.MMA)")
INSTR = re.compile(r"^\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
BRANCH = re.compile(r"\bBRA\b(?:\.\w+)*\s+(?:`?\(?\.?L?_?x?_?\w*\)?\s*)?(0x[0-9a-f]+)")


def opcode(text):
    text = re.sub(r"^@!?U?P[T\d]+\s+", "", text)  # predicate guard
    return text.split()[0] if text.split() else ""


def functions(path):
    name, body = None, []
    with open(path) as f:
        for line in f:
            if "Function :" in line:
                if name:
                    yield name, body
                name, body = line.split("Function :", 1)[1].strip(), []
                continue
            m = INSTR.match(line)
            if m and name:
                body.append((int(m.group(1), 16), m.group(2)))
    if name:
        yield name, body


def demangle(names):
    try:
        out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True, check=True).stdout
        return out.splitlines()
    except (OSError, subprocess.CalledProcessError):
        return names


def mma_loops(body):
    index = {addr: i for i, (addr, _) in enumerate(body)}
    loops = []
    for i, (addr, text) in enumerate(body):
        if opcode(text).startswith("BRA"):
            m = re.search(r"(0x[0-9a-f]+)\s*$", text)
            if m:
                target = int(m.group(1), 16)
                if target <= addr and target in index:
                    loops.append((index[target], i))
    with_mma = [(s, e) for s, e in loops if any(MMA.match(opcode(t)) for _, t in body[s:e + 1])]
    # innermost: no other MMA loop strictly inside
    return [(s, e) for s, e in with_mma
            if not any((s2, e2) != (s, e) and s <= s2 and e2 <= e for s2, e2 in with_mma)]


def mma_runs(body, gap):
    """(start, end) index pairs of the stretches whose consecutive MMAs are at most `gap` instructions apart."""
    at = [i for i, (_, t) in enumerate(body) if MMA.match(opcode(t))]
    runs = []
    for i in at:
        if runs and i - runs[-1][1] <= gap:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return [(s, e) for s, e in runs]


def describe(body, s, e, top):
    """Instructions, MMAs, instructions per MMA, the opcode mix and any spill traffic of body[s..e]."""
    ops = collections.Counter(opcode(t).split(".")[0] for _, t in body[s:e + 1])
    n_mma = sum(1 for _, t in body[s:e + 1] if MMA.match(opcode(t)))
    mix = " ".join(f"{k}:{v}" for k, v in ops.most_common(top))
    spill = " ".join(f"{k}:{ops[k]}" for k in ("LDL", "STL") if ops[k])
    return (f"{body[s][0]:#07x}-{body[e][0]:#07x}: {e - s + 1} instructions, {n_mma} MMA "
            f"({(e - s + 1) / n_mma:.1f} per MMA)  {mix}" + (f"  [spills {spill}]" if spill else ""))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sass")
    ap.add_argument("names", nargs="*")
    ap.add_argument("--top", type=int, default=12, help="opcodes listed per loop")
    ap.add_argument("--runs", type=int, nargs="?", const=60, default=None, metavar="GAP",
                    help="also list runs of MMAs at most GAP instructions apart (default 60)")
    args = ap.parse_args()
    found = [(n, b) for n, b in functions(args.sass) if not args.names or any(s in n for s in args.names)]
    for (name, body), pretty in zip(found, demangle([n for n, _ in found])):
        print(f"{pretty}\n  {len(body)} instructions")
        for s, e in mma_loops(body):
            print(f"  loop {describe(body, s, e, args.top)}")
        if args.runs is not None:
            for s, e in mma_runs(body, args.runs):
                print(f"  run  {describe(body, s, e, args.top)}")


if __name__ == "__main__":
    main()
