"""The varlen benchmarks' batches: sequence lengths uniform in
[1, 2 * mean], drawn until their total reaches `tokens` (the last one cut
to fit), from the caller's seeded random.Random. bench_varlen.py times
them; model_varlen_padding.py counts their tiles."""


def lengths_for(tokens, mean, rng):
    lengths = []
    while sum(lengths) < tokens:
        lengths.append(rng.randint(1, 2 * mean))
    lengths[-1] -= sum(lengths) - tokens
    if lengths[-1] == 0:
        lengths.pop()
    return lengths
