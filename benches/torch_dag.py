"""B13's PyTorch counterparts: a task graph of 10,000 small tasks over 256
buffers of 1024 f32 (the graph `benches/b13.rs` runs through gpu::scope):

- torch-serial: every task on one stream, in program order;
- torch-8-streams: task i on stream i % 8, each waiting by hand for the
  events of the tasks it depends on (on other streams);
- cuda-graph: the 8-stream version captured once as one CUDA graph and
  replayed (the floor for launching this graph);
- torch-spin-alone: one spin, back to back on one stream (to set against
  B13/spin-alone, the library's).

Prints one JSON row per variant: {"name": ..., "value": median ns, "unit":
"ns"}; the calibration and checks go to stderr. Exits non-zero (an
exception) if a result is wrong.

The graph (identical to b13.rs's; both check its fingerprint):
- SplitMix64, state starting at the seed (13): state += 0x9e3779b97f4a7c15;
  z = state; z = (z ^ z >> 30) * 0xbf58476d1ce4e5b9;
  z = (z ^ z >> 27) * 0x94d049bb133111eb; return z ^ z >> 31 (mod 2^64);
- task i in order: own = next() % 256; k = 1 + next() % 3; then next() % 256
  drawn until k distinct buffers other than own are found (a draw equal to
  own or to an earlier read is dropped);
- task i spins ~10 us on one device thread, then adds each read buffer into
  its own in the order drawn (w += r, one kernel each). Its adds depend on
  the last earlier writer of what it reads and on the last earlier writer
  and the readers since of what it writes; the spin depends on nothing (as
  in b13.rs, where the runtime inserts its waits at the adds).
- buffer b starts as x[e] = ((b + e) % 4 + 1) / 4.

The spin: torch.cuda._sleep(cycles) counts SM clock cycles, b13.rs's spin
counts nanoseconds of the global timer (10 us). The cycle count for 10 us is
calibrated here on a long sleep timed with CUDA events (about 20,000 cycles
at 1.98 GHz); --sleep-cycles N sets it instead.

Run: python3 benches/torch_dag.py [--tasks N] [--sleep-cycles N]
     python3 benches/torch_dag.py --fingerprint [--tasks N]   (no torch needed)
"""
import argparse
import json
import statistics
import sys
import time

SEED = 13
BUFFERS = 256
LEN = 1024
TASKS = 10_000
SPIN_NS = 10_000
LANES = 8
M64 = (1 << 64) - 1
# fingerprint() of the first TASKS and 500 tasks (b13.rs checks the same).
FINGERPRINTS = {TASKS: 0x5DFB66A8346CD022, 500: 0xC3CC2F1BCDEF6C5A}


def dag(seed=SEED, tasks=TASKS, buffers=BUFFERS):
    """The graph: a list of (own, [reads]) in program order."""
    state = seed & M64

    def next_u64():
        nonlocal state
        state = (state + 0x9E3779B97F4A7C15) & M64
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        return z ^ (z >> 31)

    out = []
    for _ in range(tasks):
        own = next_u64() % buffers
        k = 1 + next_u64() % 3
        reads = []
        while len(reads) < k:
            c = next_u64() % buffers
            if c != own and c not in reads:
                reads.append(c)
        out.append((own, reads))
    return out


def fingerprint(tasks):
    """FNV-1a over 64-bit words of own, k and the reads of each task."""
    h = 0xCBF29CE484222325
    for own, reads in tasks:
        for x in [own, len(reads)] + reads:
            h = ((h ^ x) * 0x100000001B3) & M64
    return h


def check_fingerprint(tasks):
    want = FINGERPRINTS.get(len(tasks))
    got = fingerprint(tasks)
    if want is not None and got != want:
        raise SystemExit(f"B13: the graph's fingerprint is {got:#018x}, expected {want:#018x}")


def row(name, seconds):
    print(json.dumps({"name": name, "value": seconds * 1e9, "unit": "ns"}), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", type=int, default=TASKS)
    ap.add_argument("--sleep-cycles", type=int, default=None)
    ap.add_argument("--fingerprint", action="store_true",
                    help="print the graph's fingerprint and exit (no torch)")
    args = ap.parse_args()
    tasks = dag(tasks=args.tasks)
    if args.fingerprint:
        print(f"{fingerprint(tasks):#018x} tasks={len(tasks)} adds={sum(len(r) for _, r in tasks)}")
        return
    check_fingerprint(tasks)

    import torch

    if not torch.cuda.is_available():
        raise SystemExit("B13: torch.cuda.is_available() is False")
    dev = torch.device("cuda")
    cycles = args.sleep_cycles or calibrate(torch)
    print(f"B13: torch.cuda._sleep({cycles}) for a {SPIN_NS} ns spin", file=sys.stderr)

    init = torch.tensor([[((b + e) % 4 + 1) / 4 for e in range(LEN)] for b in range(BUFFERS)],
                        dtype=torch.float32)
    want = init.clone()
    for own, reads in tasks:
        for r in reads:
            want[own].add_(want[r])
    assert torch.isfinite(want).all(), "B13: the model overflowed"
    init = init.to(dev)
    data = torch.empty_like(init)
    bufs = [data[b] for b in range(BUFFERS)]
    streams = [torch.cuda.Stream() for _ in range(LANES)]
    one = torch.cuda.Stream()

    def reset():
        data.copy_(init)
        torch.cuda.synchronize()

    def check(what):
        torch.cuda.synchronize()
        if not torch.equal(data.cpu(), want):
            bad = (data.cpu() != want).any(dim=1).nonzero().flatten().tolist()
            raise SystemExit(f"B13/{what}: wrong values in buffers {bad[:10]}")

    def serial():
        with torch.cuda.stream(one):
            for own, reads in tasks:
                torch.cuda._sleep(cycles)
                w = bufs[own]
                for r in reads:
                    w.add_(bufs[r])

    def timed(name, body, iters=5):
        reset()
        body()  # warm up, and check
        check(name)
        times = []
        for _ in range(iters):
            reset()
            t0 = time.perf_counter()
            body()
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
        check(name)
        row(f"B13/{name}", statistics.median(times))

    timed("torch-serial", serial)
    timed("torch-8-streams", lambda: by_hand(torch, tasks, bufs, streams, cycles))

    # The same 8-stream program captured once: the streams join the capture
    # through an event of the capturing stream and rejoin it at the end.
    capture = torch.cuda.Stream()

    def captured():
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=capture):
            fork = torch.cuda.Event()
            fork.record(capture)
            for s in streams:
                s.wait_event(fork)
            ends = by_hand(torch, tasks, bufs, streams, cycles, wait=False)
            for ev in ends:
                capture.wait_event(ev)
        return graph

    reset()
    graph = captured()
    timed("cuda-graph", graph.replay, iters=10)

    # B13-build's counterpart: a capture and its instantiation (the graph's
    # end of capture instantiates it), the median of three; and B13-iter's:
    # a fresh capture, then 100 replays back to back (values overflow to
    # inf after a few passes; the time does not depend on them), and the
    # 100 replays alone, each the median of three.
    builds, iters, replays = [], [], []
    for _ in range(3):
        reset()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fresh = captured()
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        for _ in range(100):
            fresh.replay()
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        builds.append(t1 - t0)
        iters.append(t2 - t0)
        replays.append(t2 - t1)
        del fresh
    row("B13/cuda-graph-capture", statistics.median(builds))
    row("B13/cuda-graph-capture-100", statistics.median(iters))
    row("B13/cuda-graph-100", statistics.median(replays))

    # One spin, back to back on one stream: what each task's spin takes.
    n = 1000
    with torch.cuda.stream(one):
        torch.cuda._sleep(cycles)
        one.synchronize()
        t0 = time.perf_counter()
        for _ in range(n):
            torch.cuda._sleep(cycles)
        one.synchronize()
    row("B13/torch-spin-alone", (time.perf_counter() - t0) / n)


def calibrate(torch):
    """Cycles of torch.cuda._sleep for SPIN_NS, from long sleeps timed with
    CUDA events (the median of five)."""
    probe = 40_000_000
    torch.cuda._sleep(1000)
    rates = []
    for _ in range(5):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        torch.cuda._sleep(probe)
        b.record()
        b.synchronize()
        rates.append(probe / (a.elapsed_time(b) * 1e6))  # cycles per ns
    rate = statistics.median(rates)
    print(f"B13: _sleep runs at {rate:.3f} cycles/ns (median of {[round(r, 3) for r in rates]})",
          file=sys.stderr)
    return round(SPIN_NS * rate)


def by_hand(torch, tasks, bufs, streams, cycles, wait=True):
    """Task i on streams[i % len(streams)]: its spin, then a wait for the
    newest event it depends on of each other stream, then its adds and an
    event. Returns each stream's last event; with `wait`, waits for them on
    the host."""
    lanes = len(streams)
    last_write = [None] * BUFFERS  # (lane, task, event) of the last writer
    readers = [[] for _ in range(BUFFERS)]  # the same of each reader since
    last = [None] * lanes
    for i, (own, reads) in enumerate(tasks):
        lane = i % lanes
        s = streams[lane]
        deps = [last_write[r] for r in reads] + [last_write[own]] + readers[own]
        newest = {}
        for d in deps:
            if d is not None and d[0] != lane and (d[0] not in newest or d[1] > newest[d[0]][1]):
                newest[d[0]] = d
        with torch.cuda.stream(s):
            torch.cuda._sleep(cycles)
            for d in newest.values():
                s.wait_event(d[2])
            w = bufs[own]
            for r in reads:
                w.add_(bufs[r])
            ev = torch.cuda.Event()
            ev.record(s)
        me = (lane, i, ev)
        last_write[own] = me
        readers[own] = []
        for r in reads:
            readers[r].append(me)
        last[lane] = ev
    for lane, ev in enumerate(last):
        if ev is None:  # a stream with no task (fewer tasks than streams)
            last[lane] = torch.cuda.Event()
            last[lane].record(streams[lane])
    ends = last
    if wait:
        for e in ends:
            e.synchronize()
    return ends


if __name__ == "__main__":
    main()
