"""A step model of the deterministic backward's dQ turns with a document
block mask: how long the K/V programs wait for each other, by turn order.

    python3 bench/model_deterministic_turns.py [--seq 16384] [--sms 132]

Each K/V tile's program visits the query tiles that share a document with
it, first to last, one unit of work each; at each query tile the programs
add dQ in a fixed turn order, a turn starting `handoff` units after the
previous one's ended. Programs take SMs in launch order (a program may wait
only for programs launched before it, so the turn order at every query
tile follows the launch order). Prints the makespan against the no-wait
time (the default mode's, work / SMs) for first-to-last and last-to-first
orders. No GPU; a model of the schedule, not of the kernels.
"""

import argparse
import heapq
import random


def document_ids(seq, mean, seed=1):
    generator = random.Random(seed)
    ids, position, doc = [], 0, 0
    while position < seq:
        length = generator.randint(1, 2 * mean - 1)
        ids += [doc] * min(length, seq - position)
        position += length
        doc += 1
    return ids


def makespan(visits, turn_order, launch, heads, sms, handoff):
    before = {}
    for i, order in turn_order.items():
        for k, j in enumerate(order):
            before[(i, j)] = order[k - 1] if k else None
    finished, free = {}, [0.0] * sms
    for head in range(heads):
        for j in launch:
            time = heapq.heappop(free)
            for i in visits[j]:
                previous = before[(i, j)]
                if previous is not None:
                    # launched earlier, so already simulated
                    time = max(time, finished[(head, i, previous)] + handoff)
                time += 1.0
                finished[(head, i, j)] = time
            heapq.heappush(free, time)
    return max(free)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seq", type=int, default=16384)
    parser.add_argument("--block-m", type=int, default=64)
    parser.add_argument("--block-n", type=int, default=128)
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--sms", type=int, default=132)
    parser.add_argument("--mean-document", type=int, default=1024)
    args = parser.parse_args()
    ids = document_ids(args.seq, args.mean_document)
    query_tiles = args.seq // args.block_m
    key_tiles = args.seq // args.block_n
    query_docs = [set(ids[i * args.block_m:(i + 1) * args.block_m])
                  for i in range(query_tiles)]
    key_docs = [set(ids[j * args.block_n:(j + 1) * args.block_n])
                for j in range(key_tiles)]
    visits = {j: [i for i in range(query_tiles) if query_docs[i] & key_docs[j]]
              for j in range(key_tiles)}
    takers = {i: [j for j in range(key_tiles) if query_docs[i] & key_docs[j]]
              for i in range(query_tiles)}
    work = sum(len(v) for v in visits.values()) * args.heads
    no_wait = work / args.sms
    print(f"{work / args.heads / key_tiles:.1f} visits a program; "
          f"no-wait time {no_wait:.1f} units")
    orders = {
        "first to last": (takers, list(range(key_tiles))),
        "last to first": ({i: t[::-1] for i, t in takers.items()},
                          list(range(key_tiles))[::-1]),
    }
    for name, (turn_order, launch) in orders.items():
        for handoff in (0.0, 0.3, 1.0):
            time = makespan(visits, turn_order, launch, args.heads, args.sms,
                            handoff)
            print(f"{name}, hand-off {handoff}: {time:.1f} units "
                  f"({time / no_wait:.2f}x the no-wait time)")


if __name__ == "__main__":
    main()
