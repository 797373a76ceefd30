"""The result table the Python benchmark scripts print: one row per measurement, with
``("#", title)`` rows starting a section."""

from __future__ import annotations


def print_table(rows: list[tuple], head: tuple) -> None:
    body = [r for r in rows if r[0] != "#"]
    widths = [max(len(r[i]) for r in body + [head]) for i in range(len(head))]

    def fmt(r):
        cells = [r[0].ljust(widths[0])] + [
            c.rjust(w) for c, w in zip(r[1:], widths[1:], strict=True)
        ]
        return "  ".join(cells)

    print(fmt(head))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print(f"\n[{r[1]}]" if r[0] == "#" else fmt(r))
