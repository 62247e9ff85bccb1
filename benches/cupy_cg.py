"""B16's CuPy counterpart: the time of one conjugate-gradient step of
cupyx.scipy.sparse.linalg.cg on the 2D Poisson matrix (5-point stencil,
Dirichlet: 4 on the diagonal, -1 for each neighbour, the matrix
benches/gpu/cg.rs builds), f64 CSR, b = 1, x0 = 0, run for exactly 200
steps (maxiter=200, tol=0, atol=0: no early stop), timed around the call
with the device synchronized, divided by 200.

- cupy-cg-small: the 1024 x 1024 grid (B16/cg-small's);
- cupy-cg: the 4096 x 4096 grid (B16/cg's).

Prints one JSON row per variant: {"name": ..., "value": median ns per
step, "unit": "ns"}; the checks go to stderr. Exits non-zero if CuPy is
missing or a run did not take 200 steps. Needs CuPy with a CUDA device
(`pip install cupy-cuda13x`, say); `cargo xtask bench --no-torch` skips it.

Run: python3 benches/cupy_cg.py [--repeat N] [--sizes 1024,4096]
"""
import argparse
import json
import statistics
import sys
import time

STEPS = 200


def poisson(cp, sp, n):
    """The 5-point Poisson matrix of an n x n grid, CSR: kron(I, T) + kron(T, I)
    with T = tridiag(-1, 2, -1)."""
    one = cp.ones(n, dtype=cp.float64)
    t = sp.diags([-one[:-1], 2 * one, -one[:-1]], [-1, 0, 1], format="csr")
    i = sp.identity(n, dtype=cp.float64, format="csr")
    return (sp.kron(i, t) + sp.kron(t, i)).tocsr()


def run_cg(cg, a, b):
    """One cg call of exactly STEPS steps; the steps it took."""
    steps = [0]

    def count(_xk):
        steps[0] += 1

    try:
        cg(a, b, tol=0.0, atol=0.0, maxiter=STEPS, callback=count)
    except TypeError:  # newer CuPy: rtol in place of tol
        steps[0] = 0
        cg(a, b, rtol=0.0, atol=0.0, maxiter=STEPS, callback=count)
    return steps[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--sizes", default="1024,4096")
    args = ap.parse_args()
    try:
        import cupy as cp
        import cupyx.scipy.sparse as sp
        from cupyx.scipy.sparse.linalg import cg
    except ImportError as e:
        sys.exit(f"cupy_cg.py: CuPy could not be imported ({e}); B16's CuPy rows need it")
    names = {1024: "B16/cupy-cg-small", 4096: "B16/cupy-cg"}
    for n in (int(s) for s in args.sizes.split(",")):
        a = poisson(cp, sp, n)
        assert a.shape == (n * n, n * n) and a.nnz == 5 * n * n - 4 * n, (a.shape, a.nnz)
        b = cp.ones(n * n, dtype=cp.float64)
        took = run_cg(cg, a, b)  # warm-up (and the count)
        if took != STEPS:
            sys.exit(f"cupy_cg.py: {n}x{n}: cg took {took} steps, not {STEPS}")
        times = []
        for _ in range(args.repeat):
            cp.cuda.Device().synchronize()
            start = time.perf_counter()
            run_cg(cg, a, b)
            cp.cuda.Device().synchronize()
            times.append((time.perf_counter() - start) / STEPS)
        per = statistics.median(times)
        print(f"B16 cupy {n}x{n}: {per * 1e6:.1f} us a step (median of {args.repeat})",
              file=sys.stderr)
        name = names.get(n, f"B16/cupy-cg-{n}")
        print(json.dumps({"name": name, "value": per * 1e9, "unit": "ns"}), flush=True)


if __name__ == "__main__":
    main()
