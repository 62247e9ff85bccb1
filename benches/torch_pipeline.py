"""B7's PyTorch counterpart (and B14's: torch.sum, at the end): the same host -> device -> host pipeline
(copy in, y = 2 * x, copy out) over pinned memory (and pageable memory), chunked over several CUDA
streams with events, as a PyTorch user would write it. Prints one JSON row
per variant: {"name": ..., "value": median ns, "unit": "ns"}.

Run: python3 benches/torch_pipeline.py [n_floats] [chunk] [lanes]
"""
import json
import statistics
import sys
import time

import torch


def pipeline(src, dst, chunk, lanes):
    streams = [torch.cuda.Stream() for _ in range(lanes)]
    dev_in = [torch.empty(chunk, device="cuda") for _ in range(lanes)]
    dev_out = [torch.empty(chunk, device="cuda") for _ in range(lanes)]
    done = [None] * lanes
    n = src.numel()
    for i, start in enumerate(range(0, n, chunk)):
        lane = i % lanes
        s = streams[lane]
        end = min(start + chunk, n)
        m = end - start
        with torch.cuda.stream(s):
            if done[lane] is not None:
                s.wait_event(done[lane])
            dev_in[lane][:m].copy_(src[start:end], non_blocking=True)
            torch.mul(dev_in[lane][:m], 2.0, out=dev_out[lane][:m])
            dst[start:end].copy_(dev_out[lane][:m], non_blocking=True)
            ev = torch.cuda.Event()
            ev.record(s)
            done[lane] = ev
    for s in streams:
        s.synchronize()


def rows(src, dst, chunk, name, reps):
    """Times the pipeline over 4 and 8 lanes; one row each."""
    for lanes in (4, 8):
        pipeline(src, dst, chunk, lanes)  # warm up
        times = []
        for _ in range(reps):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            pipeline(src, dst, chunk, lanes)
            times.append(time.perf_counter() - t0)
        assert dst[999].item() == 1998.0
        print(json.dumps({"name": f"B7/{name}-{lanes}", "value": statistics.median(times) * 1e9, "unit": "ns"}))


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1 << 28
    chunk = int(sys.argv[2]) if len(sys.argv) > 2 else 1 << 22
    src = (torch.arange(n, dtype=torch.float32) % 1000).pin_memory()
    dst = torch.empty(n, dtype=torch.float32).pin_memory()
    rows(src, dst, chunk, "torch", 10)
    # The same pipeline from and to pageable tensors (issue 16): the driver
    # stages each copy itself.
    src = torch.arange(n, dtype=torch.float32) % 1000
    dst = torch.zeros(n, dtype=torch.float32)
    rows(src, dst, chunk, "pageable-torch", 5)


def sum_rows():
    """B14's PyTorch counterpart: torch.sum of 1 GiB of f32 on the device."""
    n = 1 << 28
    x = (torch.arange(n, dtype=torch.float32, device="cuda") % 1000) * 1e-3
    torch.sum(x)  # warm up
    times = []
    for _ in range(20):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        s = torch.sum(x)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    assert abs(s.item() - 1.340e8) / 1.340e8 < 1e-2, s.item()
    print(json.dumps({"name": "B14/torch-sum", "value": statistics.median(times) * 1e9, "unit": "ns"}))


if __name__ == "__main__":
    main()
    sum_rows()
