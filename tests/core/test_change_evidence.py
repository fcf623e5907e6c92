"""How much of a candidate's diff a row keeps: the cut, its marker, and text that is not ASCII."""

from __future__ import annotations

from crucible_core.contract.change_evidence import DIFF_CAP_BYTES, bounded_diff


def test_a_diff_within_the_cap_is_kept_whole() -> None:
    diff = "diff --git a/x b/x\n+" + "a" * 100 + "\n"
    assert bounded_diff(diff) == diff


def test_a_long_diff_is_cut_on_a_line_boundary_with_a_marker() -> None:
    lines = [f"+line {i} é\n" for i in range(20000)]
    diff = "".join(lines)
    cut = bounded_diff(diff)
    body, marker = cut.rsplit("[crucible: diff truncated: ", 1)
    assert len(body.encode()) <= DIFF_CAP_BYTES
    assert body.endswith("\n") and diff.startswith(body)
    assert marker == f"{len(body.encode())} of {len(diff.encode())} bytes shown]\n"


def test_a_single_line_longer_than_the_cap_leaves_only_the_marker() -> None:
    cut = bounded_diff("+" + "é" * 10, cap=8)
    assert cut == "[crucible: diff truncated: 0 of 21 bytes shown]\n"
