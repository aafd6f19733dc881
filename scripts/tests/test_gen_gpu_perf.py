"""The targets table of scripts/gen_gpu_perf.py on small made-up records (standard library only)."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import gen_gpu_perf  # noqa: E402  (scripts/, the directory above)

QKV, O = (8192, 10240), (8192, 8192)  # two llama3-70b shapes


def table(peer, ours, floor=lambda key, k, n, m: None):
    """The data rows of the targets table."""
    return [line for line in gen_gpu_perf.render_targets(peer, ours, floor)
            if line.startswith("| ") and not line.startswith("| issue ")]


def row(lines, target, m):
    hits = [line for line in lines if f"| {target} |" in line and f"| {m} |" in line]
    assert len(hits) == 1, (target, m, lines)
    return [cell.strip() for cell in hits[0].strip("|").split("|")]


class TargetsTable(unittest.TestCase):
    def test_a_shape_below_the_bound_is_named_with_the_digit_that_shows_it(self):
        # int4 at M = 1024: 0.897x on qkv (rounds to 0.90x, the bound), 1.20x on o.
        peer = {("torch_bf16", *QKV, 1024): 100.0, ("torch_bf16", *O, 1024): 120.0}
        ours = {("int4", *QKV, 1024): 100.0 / 0.897, ("int4", *O, 1024): 100.0}
        cells = row(table(peer, ours), "int4 g128 >= 0.9x cuBLAS bf16", 1024)
        self.assertEqual(cells[4:], ["0.897x", "1.20x", "1 of 2", "70b.qkv 0.897x"])

    def test_every_shape_meeting_the_bound(self):
        peer = {("torch_scaled_mm_fp8", *QKV, 256): 50.0, ("torch_scaled_mm_fp8", *O, 256): 30.0}
        ours = {("fp8", *QKV, 256): 50.0, ("fp8", *O, 256): 25.0}
        cells = row(table(peer, ours), "fp8 W8A8 incl. quantization >= 1.0x torch._scaled_mm", 256)
        self.assertEqual(cells[4:], ["1.00x", "1.20x", "2 of 2", "—"])

    def test_percent_of_the_floor(self):
        ours = {("int4", *QKV, 1): 10.0, ("int4", *O, 1): 10.0}
        floor = {QKV: 8.496, O: 9.0}
        cells = row(table({}, ours, lambda key, k, n, m: floor.get((k, n))), "int4 g128 >= 85 % of the int4 floor", 1)
        self.assertEqual(cells[4:], ["84.96 %", "90 %", "1 of 2", "70b.qkv 84.96 %"])

    def test_targets_without_records_are_left_out(self):
        self.assertEqual(table({}, {}), [])


if __name__ == "__main__":
    unittest.main()
