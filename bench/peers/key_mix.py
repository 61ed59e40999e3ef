"""The skewed key mix of bench/peers' tiers workload; the twin of
bench/peers/key_mix.h (same ranks, same object per rank)."""
import bisect
import itertools


def zipf_keys(n, theta, rng):
    """A function drawing object indices 0..n-1: Zipf(theta) over ranks,
    rank r naming object (r * 2654435761) % n."""
    cdf = list(itertools.accumulate((r + 1) ** -theta for r in range(n)))
    total = cdf[-1]  # summed in order, as key_mix.h does
    cdf = [c / total for c in cdf]

    def draw():
        rank = min(bisect.bisect_left(cdf, rng.random()), n - 1)
        return rank * 2654435761 % n
    return draw
