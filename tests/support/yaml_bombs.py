"""YAML documents built to be expensive, for the tests of every place the server reads YAML."""

from __future__ import annotations


def laughs(levels: int) -> str:
    """The "billion laughs": ``levels`` anchors of nine aliases each, over nine strings; about
    100 bytes a level, 9**(levels + 1) strings once every alias is written out."""
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, levels + 1):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"
