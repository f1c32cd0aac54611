from bench.interleave import interleaved


def test_abab_order():
    order = [(r, c) for r, _, c in interleaved(["A", "B"], 3)]
    assert order == [(1, "A"), (1, "B"), (2, "A"), (2, "B"), (3, "A"), (3, "B")]


def test_points_inside_rounds_configs_innermost():
    order = list(interleaved(["A", "B"], 2, points=[1, 4]))
    assert order[:4] == [(1, 1, "A"), (1, 1, "B"), (1, 4, "A"), (1, 4, "B")]
    assert len(order) == 8
    # every configuration measured equally often at every point
    for p in (1, 4):
        assert [c for _, q, c in order if q == p].count("A") == 2
