"""The order in which measurements run: every configuration once per
round, rounds repeated, so slow drifts of the machine (page cache, thermal
state, background work) hit every configuration alike.

Within a round the order alternates (ABBA): odd rounds run A B C, even
rounds C B A.  Running first (a cold page cache, a CPU that has just
throttled, the burst before a background job) is then shared: over an even
number of rounds every configuration runs first, and last, equally often,
and a linear drift across a pair of rounds costs every configuration the
same."""


def round_order(configs, rep):
    """The configurations in the order round rep (1-based) runs them."""
    configs = list(configs)
    return configs if rep % 2 == 1 else configs[::-1]


def interleaved(configs, repetitions, points=(None,), first=1):
    """Yield (round, point, config) with configurations innermost:
    for each round, for each point (e.g. client count), A B C in odd
    rounds and C B A in even ones.  Rounds are numbered from first, so
    extra rounds added later (first = repetitions + 1) continue both the
    numbering and the alternation."""
    for rep in range(first, first + repetitions):
        for point in points:
            for config in round_order(configs, rep):
                yield rep, point, config
