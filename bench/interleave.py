"""The order in which measurements run: every configuration once per
round, rounds repeated (A B A B ...), so slow drifts of the machine (page
cache, thermal state, background work) hit every configuration alike."""


def interleaved(configs, repetitions, points=(None,)):
    """Yield (round, point, config) with configurations innermost:
    for each round, for each point (e.g. client count), A B C ..."""
    for rep in range(1, repetitions + 1):
        for point in points:
            for config in configs:
                yield rep, point, config
