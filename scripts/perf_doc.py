"""The one way the generators (scripts/gen_*_perf.py, gen_perf_tables.py) write their table into
docs/performance.md: the text between <!-- name:begin --> and <!-- name:end --> is replaced, the
markers kept; a document without the markers gets them appended (a missing document is created)."""
import os


def replace_region(doc, begin, end, body):
    """Writes `body` (without the markers) between `begin` and `end` in `doc`."""
    text = open(doc).read() if os.path.exists(doc) else "# Performance\n"
    if begin not in text or end not in text:
        text = text.rstrip("\n") + f"\n\n{begin}\n{end}\n"
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    os.makedirs(os.path.dirname(doc) or ".", exist_ok=True)
    with open(doc, "w") as f:
        f.write(head + f"{begin}\n{body}\n{end}" + tail)
    print(f"updated {doc}")


def emit(text, begin, end, doc=None, stdout=False):
    """The generators' last step: print `text` (--stdout) or write it into the region of `doc`
    (default docs/performance.md)."""
    if stdout:
        print(text)
    else:
        replace_region(doc or "docs/performance.md", begin, end, text)
    return 0
