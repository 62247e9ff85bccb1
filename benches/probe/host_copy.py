"""Probe (issue 16): what bounds a pageable host -> device -> host pipeline on
this machine. Host copy bandwidth by thread count (pageable -> pinned and
pinned -> pageable), cudaHostRegister/Unregister cost, and H2D/D2H from
registered pageable memory. Prints one JSON row per measurement."""
import json, os, statistics, threading, time
import torch

GiB = 1 << 30
N = GiB // 4  # f32


def row(name, secs, extra=None):
    r = {"name": name, "ms": round(secs * 1e3, 3)}
    if extra:
        r.update(extra)
    print(json.dumps(r), flush=True)


def med(f, reps=5):
    ts = []
    for _ in range(reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        f()
        torch.cuda.synchronize()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


src = torch.arange(N, dtype=torch.float32) % 1000  # pageable
dst = torch.zeros(N, dtype=torch.float32)
pin_in = torch.empty(N, dtype=torch.float32).pin_memory()
pin_out = torch.empty(N, dtype=torch.float32).pin_memory()
pin_out.copy_(src)
dev = torch.empty(N, dtype=torch.float32, device="cuda")


def threaded_copy(pairs, threads):
    # each thread copies its slice of each (dst, src) pair; torch's copy_ of a
    # CPU tensor runs in C with the GIL released (torch's own threads: 1, set
    # below)
    def work(i):
        for d, s in pairs:
            n = s.numel()
            a, b = n * i // threads, n * (i + 1) // threads
            d[a:b].copy_(s[a:b])
    ts = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    [t.start() for t in ts]
    [t.join() for t in ts]


torch.set_num_threads(1)
for threads in (1, 2, 4, 8, 16):
    row(f"copy-in pageable->pinned 1GiB t={threads}", med(lambda: threaded_copy([(pin_in, src)], threads)))
    row(f"copy-out pinned->pageable 1GiB t={threads}", med(lambda: threaded_copy([(dst, pin_out)], threads)))
    row(f"both 2x1GiB t={threads}", med(lambda: threaded_copy([(pin_in, src), (dst, pin_out)], threads)))
    row(f"pageable->pageable 1GiB t={threads}", med(lambda: threaded_copy([(dst, src)], threads)))

# DMA alone and DMA concurrent with host copies
s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
dev2 = torch.empty(N, dtype=torch.float32, device="cuda")
def duplex(h_in=pin_in, h_out=pin_out):
    """1 GiB in from h_in and out to h_out at once, on two streams."""
    with torch.cuda.stream(s1):
        dev.copy_(h_in, non_blocking=True)
    with torch.cuda.stream(s2):
        h_out.copy_(dev2, non_blocking=True)
row("dma duplex pinned 1GiB each way", med(duplex))
def duplex_plus_copies():
    duplex()
    threaded_copy([(dst, src)], 8)
row("dma duplex + pageable->pageable t=8 concurrently", med(duplex_plus_copies))

cudart = torch.cuda.cudart()
def reg(t, off, nbytes):
    p = t.data_ptr() + off
    e = cudart.cudaHostRegister(p, nbytes, 0)
    assert int(e) == 0, e
    return p
def unreg(p):
    e = cudart.cudaHostUnregister(p)
    assert int(e) == 0, e

for mib in (16, 256, 1024):
    nb = mib << 20
    ts_r, ts_u = [], []
    for _ in range(3):
        t0 = time.perf_counter(); p = reg(src, 0, nb); t1 = time.perf_counter(); unreg(p); t2 = time.perf_counter()
        ts_r.append(t1 - t0); ts_u.append(t2 - t1)
    row(f"register {mib} MiB", statistics.median(ts_r), {"GB/s": round(nb / statistics.median(ts_r) / 1e9, 1)})
    row(f"unregister {mib} MiB", statistics.median(ts_u))

# register 1 GiB as 64 chunks of 16 MiB on t threads
for threads in (1, 8):
    def regs():
        chunk = 16 << 20
        def work(i):
            ps = [reg(src, c * chunk, chunk) for c in range(i, 64, threads)]
            [unreg(p) for p in ps]
        ts = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
        [t.start() for t in ts]; [t.join() for t in ts]
    row(f"register+unregister 1GiB in 16MiB chunks t={threads}", med(regs, 3))

# DMA from registered pageable memory (both ways)
p_in = reg(src, 0, GiB); p_out = reg(dst, 0, GiB)
row("dma duplex from registered pageable 1GiB each way", med(lambda: duplex(src, dst)))
unreg(p_in); unreg(p_out)
# plain pageable DMA (the driver stages it)
row("dma duplex pageable (driver-staged) 1GiB each way", med(lambda: duplex(src, dst), 3))
row("cpus", 0, {"n": os.cpu_count()})
