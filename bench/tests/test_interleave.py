from collections import Counter

import pytest

from bench.interleave import interleaved, round_order


def test_abba_order():
    order = [(r, c) for r, _, c in interleaved(["A", "B"], 4)]
    assert order == [(1, "A"), (1, "B"), (2, "B"), (2, "A"), (3, "A"), (3, "B"), (4, "B"), (4, "A")]


def test_three_configs_reverse_in_even_rounds():
    assert round_order(["A", "B", "C"], 1) == ["A", "B", "C"]
    assert round_order(["A", "B", "C"], 2) == ["C", "B", "A"]
    assert round_order(("A", "B", "C"), 3) == ["A", "B", "C"]


@pytest.mark.parametrize(
    "configs, rounds, points",
    [
        (["A", "B"], 2, [None]),
        (["A", "B"], 6, [1, 4]),
        (["A", "B", "C"], 2, [None]),
        (["A", "B", "C"], 4, [("select-only", 2), ("tpcb-like", 2)]),
        (["stock", "stock-2", "pgcipher-off", "aes-128", "aes-256"], 8, [1, 2, 4, 8, 16]),
    ],
)
def test_every_config_first_and_last_equally_often(configs, rounds, points):
    order = list(interleaved(configs, rounds, points))
    assert len(order) == len(configs) * rounds * len(points)
    for p in points:
        at_p = [(r, c) for r, q, c in order if q == p]
        by_round = {}
        for r, c in at_p:
            by_round.setdefault(r, []).append(c)
        firsts = Counter(cs[0] for cs in by_round.values())
        lasts = Counter(cs[-1] for cs in by_round.values())
        # the two ends of the order: each runs first (and last) in half the rounds
        assert firsts[configs[0]] == firsts[configs[-1]] == rounds // 2
        assert lasts[configs[0]] == lasts[configs[-1]] == rounds // 2
        # mean position of every configuration is the same: the middle
        pos = Counter()
        for cs in by_round.values():
            for i, c in enumerate(cs):
                pos[c] += i
        assert len(set(pos.values())) == 1
        # every configuration measured once per round at every point
        assert Counter(c for _, c in at_p) == {c: rounds for c in configs}


def test_points_inside_rounds_configs_innermost():
    order = list(interleaved(["A", "B"], 2, points=[1, 4]))
    assert order == [
        (1, 1, "A"),
        (1, 1, "B"),
        (1, 4, "A"),
        (1, 4, "B"),
        (2, 1, "B"),
        (2, 1, "A"),
        (2, 4, "B"),
        (2, 4, "A"),
    ]


@pytest.mark.parametrize(
    "first, expected",
    [
        (3, [(3, "A"), (3, "B"), (3, "C"), (4, "C"), (4, "B"), (4, "A")]),
        (4, [(4, "C"), (4, "B"), (4, "A"), (5, "A"), (5, "B"), (5, "C")]),
    ],
)
def test_extra_rounds_continue_numbering_and_alternation(first, expected):
    assert [(r, c) for r, _, c in interleaved(["A", "B", "C"], 2, first=first)] == expected
