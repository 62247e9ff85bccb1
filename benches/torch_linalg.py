"""B15's vendor counterparts: the fp64 Cholesky of the matrix that
`examples/common/cholesky.rs` builds (A(i, j) = 1 / (1 + |i - j|) off the
diagonal, 3 + 2 ln n on it), in one call of cuSOLVER's potrf through
`torch.linalg.cholesky` and `cupy.linalg.cholesky`, at n = 32768 and 8192.

Prints one JSON row per variant: {"name": "B15/torch-32768", "value":
median ns, "unit": "ns"} (and cupy-, and -8192); timing with CUDA events
around the call alone (the matrix is made once and copied, untimed, before
each call: the factorization may be in place). Each factor is checked:
||A x - L L^T x|| / ||A x|| < 1e-12 for a random x. Exits non-zero (an
exception) if a result is wrong or a library is missing.

Run: python3 benches/torch_linalg.py [--reps N]
"""
import argparse
import json
import math
import statistics

import cupy
import torch


def matrix(n):
    i = torch.arange(n, device="cuda", dtype=torch.float64)
    a = 1.0 / (1.0 + (i[:, None] - i[None, :]).abs())
    a.diagonal().fill_(3.0 + 2.0 * math.log(n))
    return a


def check(a, l):
    x = torch.rand(a.shape[0], 1, device="cuda", dtype=torch.float64) - 0.5
    ax = a @ x
    err = torch.linalg.norm(ax - l @ (l.T @ x)) / torch.linalg.norm(ax)
    assert err.item() < 1e-12, f"factor off by {err.item()}"


def timed(reps, prep, call):
    times = []
    for _ in range(reps):
        arg = prep()
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        out = call(arg)
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) * 1e6)
    return statistics.median(times), out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--reps", type=int, default=7)
    args = p.parse_args()
    for n in (32768, 8192):
        a = matrix(n)
        # One call first of each (library load, workspace), untimed.
        torch.linalg.cholesky(a[:64, :64])
        ns, l = timed(args.reps, lambda: a, torch.linalg.cholesky)
        check(a, l)
        del l
        print(json.dumps({"name": f"B15/torch-{n}", "value": ns, "unit": "ns"}), flush=True)
        ca = cupy.asarray(a)
        cupy.linalg.cholesky(ca[:64, :64])
        cupy.cuda.Device().synchronize()
        # CuPy runs on its current stream; torch's events time the default
        # stream, which CuPy's default (legacy) stream is.
        ns, cl = timed(args.reps, lambda: ca, cupy.linalg.cholesky)
        cupy.cuda.Device().synchronize()
        check(a, torch.as_tensor(cl, device="cuda"))
        del cl, ca
        print(json.dumps({"name": f"B15/cupy-{n}", "value": ns, "unit": "ns"}), flush=True)
        del a
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
