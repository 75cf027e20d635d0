"""The tile padding of a varlen batch: how much of the work of whole
tiles is kept scores, for bench_varlen.py's batches (the same lengths:
uniform in [1, 2 * mean], seeded as there) and for its fixed-length batch
of `mean`-row sequences. If a tile costs the same however few of its rows
and keys are real, varlen / fixed TFLOP/s (counted on kept scores, as
bench_varlen.py does) is at most the ratio of the two kept fractions.

    python3 bench/model_varlen_padding.py [--tokens 16384] [--means 512,2048]
        [--head-dims 64,128] [--tiles 128x128]

No GPU; a bound from the tile counts, not a timing.
"""

import argparse
import math
import random

from varlen_batches import lengths_for


def kept(n, causal):
    return n * (n + 1) // 2 if causal else n * n


def tile_work(n, block_m, block_n, causal):
    """Scores of the whole tiles an n-row sequence's programs visit."""
    tiles = 0
    for i in range(math.ceil(n / block_m)):
        last_row = min(n, (i + 1) * block_m)
        tiles += math.ceil((last_row if causal else n) / block_n)
    return tiles * block_m * block_n


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=16384)
    parser.add_argument("--means", default="512,2048")
    parser.add_argument("--head-dims", default="64,128")
    parser.add_argument("--tiles", default="128x128")
    args = parser.parse_args()
    block_m, block_n = (int(x) for x in args.tiles.split("x"))
    print(f"{'D':>4} {'mean':>5} {'seqs':>5} {'causal':>6} "
          f"{'varlen kept':>11} {'fixed kept':>10} {'bound':>6}")
    for d in (int(x) for x in args.head_dims.split(",")):
        for mean in (int(x) for x in args.means.split(",")):
            lengths = lengths_for(args.tokens, mean,
                                  random.Random(mean * 7 + d))
            for causal in (False, True):
                varlen = (sum(kept(n, causal) for n in lengths) /
                          sum(tile_work(n, block_m, block_n, causal)
                              for n in lengths))
                fixed = (kept(mean, causal) /
                         tile_work(mean, block_m, block_n, causal))
                print(f"{d:>4} {mean:>5} {len(lengths):>5} "
                      f"{str(causal):>6} {varlen:>11.3f} {fixed:>10.3f} "
                      f"{varlen / fixed:>6.3f}")


if __name__ == "__main__":
    main()
