#!/usr/bin/env python3
"""Kernel-by-kernel comparison of two builds of one CUDA source (scripts/sass_diff.sh).

Each side is a stem: STEM.sass (`cuobjdump -sass` of the cubin) and STEM.ptxas (nvcc --resource-usage output).
Kernels are matched by mangled name, with the anonymous namespace's per-file hash removed (in names and in the
instructions that name symbols). The SASS of a kernel is compared instruction by instruction, immediates, constant-bank
offsets and branch targets (offsets inside the kernel) included. Prints each kernel that differs or exists on one side
only, with both sides' instruction counts, registers and spills, then a summary; exits 1 if any kernel differs.

A change that adds a defaulted template parameter renames every kernel; RENAME (`REGEX=>REPLACEMENT`, Python re syntax,
applied to the new side's mangled names) maps them back, e.g. `(stream_kernelI(?:L[^E]+E){4})Lb0E=>\\1` drops a fifth
`bool` argument that is false.

usage: sass_diff.py BASE_STEM NEW_STEM [RENAME]
"""
import re
import subprocess
import sys

ANON = re.compile(r"GLOBAL__N__[0-9a-f]+_")
RAW = {}  # matched name -> a mangled name as compiled (for c++filt)


def per_kernel(path, header, read, rename=None):
    """{kernel: value}: `header` (a regex whose group 1 is the mangled name) starts a kernel's lines, read(line, value)
    folds each of its lines into the value (a fresh dict); rename (pattern, replacement) maps the names."""
    out, name = {}, None
    with open(path) as f:
        for line in f:
            m = re.search(header, line)
            if m:
                name = ANON.sub("GLOBAL__N__", m.group(1))
                if rename:
                    name = re.sub(rename[0], rename[1], name)
                RAW.setdefault(name, m.group(1))
                out[name] = {}
            elif name:
                read(line, out[name])
    return out


def kernel_code(path, rename=None):
    def read(line, value):
        m = re.search(r"/\*[0-9a-f]{4,}\*/\s+(.*?);", line)
        if m:
            value.setdefault("code", []).append(ANON.sub("GLOBAL__N__", m.group(1)))

    return {k: v.get("code", []) for k, v in per_kernel(path, r"^\s+Function : (\S+)", read, rename).items()}


def kernel_resources(path, rename=None):
    def read(line, value):
        m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m:
            value["spills"] = f"{m.group(1)}/{m.group(2)}"
        m = re.search(r"Used (\d+) registers", line)
        if m:
            value["registers"] = int(m.group(1))

    return per_kernel(path, r"Function properties for (\S+)", read, rename)


def readable(name):
    raw = RAW.get(name, name)
    try:
        out = subprocess.run(["c++filt", raw], capture_output=True, text=True, check=False).stdout.strip()
    except OSError:
        return raw
    out = (out or raw).replace("(anonymous namespace)::", "")
    return re.sub(r"\(.*$", "", out).replace("void ", "", 1)


def describe(code, res, name):
    r = res.get(name, {})
    return f"{len(code)} instructions, {r.get('registers', '?')} registers, spills {r.get('spills', '?')}"


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    base_stem, new_stem = sys.argv[1:3]
    rename = tuple(sys.argv[3].split("=>", 1)) if len(sys.argv) == 4 and sys.argv[3] else None
    if rename is not None and len(rename) != 2:
        sys.exit("RENAME must be REGEX=>REPLACEMENT")
    base, new = kernel_code(base_stem + ".sass"), kernel_code(new_stem + ".sass", rename)
    base_res, new_res = kernel_resources(base_stem + ".ptxas"), kernel_resources(new_stem + ".ptxas", rename)
    identical = differ = 0
    for name in sorted(set(base) | set(new)):
        if name not in new or name not in base:
            differ += 1
            print(f"  only in {'base' if name in base else 'new'}: {readable(name)}")
        elif base[name] == new[name]:
            identical += 1
        else:
            differ += 1
            changed = sum(1 for a, b in zip(base[name], new[name]) if a != b) + abs(len(base[name]) - len(new[name]))
            print(f"  differs: {readable(name)}\n    base: {describe(base[name], base_res, name)}\n"
                  f"    new:  {describe(new[name], new_res, name)} ({changed} instructions changed or moved)")
    print(f"  {identical} kernels identical, {differ} differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
