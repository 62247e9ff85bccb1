"""B11's PyTorch counterpart: the 2D heat equation of examples/09-multi-gpu-heat.rs
written as a PyTorch user would, on one GPU and with its rows split over two GPUs
of one process, halo rows moved by peer copies; and a 1 GiB peer copy.

The stencil and the edge rule are those of examples/common/heat_parts.rs:
u' = u + k (up + down + left + right - 4 u) inside, the grid's edge cells fixed,
k = 0.2, f32, from the same starting field. Each step is five kernels over
tensor slices (add, add_, add_, sub_, add), no custom kernel. On two GPUs each
device holds its block of rows plus one halo row a side; after a step each
sends its edge row into the neighbour's halo with `copy_(..., non_blocking=True)`
(a peer copy: PyTorch orders it with both devices' current streams).

Prints one JSON row a line, {"name": ..., "value": ..., "unit": ...}:
B11/torch-1-gpu and B11/torch-2-gpu (ns for `steps` steps, the median of
`repeats` runs, after one warm-up step), peer/torch-0to1 (GB/s, a `peer_mib`
MiB copy from device 0 to device 1, median of 10). Checks that the two-GPU
field equals the one-GPU field after the same steps.

Run: python3 benches/torch_multi_gpu.py [--nx 16384] [--ny 16384] [--steps 100]
                                        [--repeats 3] [--peer-mib 1024]
"""
import argparse
import json
import os
import statistics
import sys
import time

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # NVLink multicast stays off

import torch

K = 0.2


def initial(nx, ny, device):
    """The starting field of examples/common/heat.rs (`heat::initial`)."""
    i = torch.arange(ny, dtype=torch.float32, device=device).view(ny, 1)
    j = torch.arange(nx, dtype=torch.float32, device=device).view(1, nx)
    dy = i / ny - 0.6
    dx = j / nx - 0.35
    u = 0.8 * torch.exp(-(dx * dx + dy * dy) / 0.02)
    u[:, 0] = 0.0
    u[:, -1] = 0.0
    u[-1, :] = 0.0
    u[0, :] = 1.0
    return u.contiguous()


def step(u, v, lo, hi):
    """v[lo:hi, 1:-1] = one step from u (rows lo-1 .. hi of u are read).

    Five kernels on slices; v's other cells are left as they are (the
    edges, fixed, hold the same values in u and v)."""
    out = v[lo:hi, 1:-1]
    torch.add(u[lo - 1:hi - 1, 1:-1], u[lo + 1:hi + 1, 1:-1], out=out)
    out.add_(u[lo:hi, :-2])
    out.add_(u[lo:hi, 2:])
    out.sub_(u[lo:hi, 1:-1], alpha=4.0)
    torch.add(u[lo:hi, 1:-1], out, alpha=K, out=out)


class Blocks:
    """The grid's rows split over `devices`: device d holds its rows plus a
    halo row above and below (rows 0 and -1 of its tensors)."""

    def __init__(self, field, devices):
        ny = field.shape[0]
        n = len(devices)
        self.devices = devices
        self.rows = [ny // n + (1 if d < ny % n else 0) for d in range(n)]
        self.g0 = [sum(self.rows[:d]) for d in range(n)]
        self.u, self.v = [], []
        for d, dev in enumerate(devices):
            g0, rows = self.g0[d], self.rows[d]
            lo, hi = max(g0 - 1, 0), min(g0 + rows + 1, ny)
            ext = torch.zeros((rows + 2, field.shape[1]), dtype=torch.float32, device=dev)
            ext[lo - (g0 - 1):hi - (g0 - 1)] = field[lo:hi].to(dev)
            self.u.append(ext)
            self.v.append(ext.clone())
        self.ny = ny

    def step(self):
        n = len(self.devices)
        # Every device's rows (the grid's first and last rows stay fixed).
        for d in range(n):
            rows = self.rows[d]
            lo = 2 if d == 0 else 1
            hi = rows if d == n - 1 else rows + 1
            step(self.u[d], self.v[d], lo, hi)
        # Halos for the next step: peer copies between neighbours.
        for d in range(n - 1):
            rows = self.rows[d]
            self.v[d + 1][0].copy_(self.v[d][rows], non_blocking=True)
            self.v[d][rows + 1].copy_(self.v[d + 1][1], non_blocking=True)
        self.u, self.v = self.v, self.u

    def synchronize(self):
        for dev in self.devices:
            torch.cuda.synchronize(dev)

    def field(self):
        return torch.cat([u[1:r + 1].to("cuda:0") for u, r in zip(self.u, self.rows)])


def heat(nx, ny, steps, repeats, devices):
    """Median ns of `steps` steps over `devices`, and the field after them all."""
    blocks = Blocks(initial(nx, ny, devices[0]), devices)
    blocks.step()  # warm up
    blocks.synchronize()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(steps):
            blocks.step()
        blocks.synchronize()
        times.append(time.perf_counter() - t0)
    print(
        f"torch_multi_gpu: {len(devices)} GPU(s), {nx}x{ny}, {steps} steps: "
        + ", ".join(f"{t * 1e3:.1f} ms" for t in times),
        file=sys.stderr,
    )
    return statistics.median(times) * 1e9, blocks.field()


def peer_copy(mib):
    """GB/s of a `mib` MiB copy from device 0 to device 1 (median of 10)."""
    n = mib * (1 << 20) // 4
    src = torch.ones(n, dtype=torch.float32, device="cuda:0")
    dst = torch.empty(n, dtype=torch.float32, device="cuda:1")
    dst.copy_(src, non_blocking=True)  # warm up (enables peer access)
    times = []
    for _ in range(10):
        torch.cuda.synchronize("cuda:0")
        torch.cuda.synchronize("cuda:1")
        t0 = time.perf_counter()
        dst.copy_(src, non_blocking=True)
        torch.cuda.synchronize("cuda:0")
        torch.cuda.synchronize("cuda:1")
        times.append(time.perf_counter() - t0)
    assert dst[n - 1].item() == 1.0
    return n * 4 / statistics.median(times) / 1e9


def row(name, value, unit):
    print(json.dumps({"name": name, "value": value, "unit": unit}), flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--nx", type=int, default=16384)
    p.add_argument("--ny", type=int, default=16384)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--peer-mib", type=int, default=1024)
    a = p.parse_args()
    if torch.cuda.device_count() < 2:
        sys.exit(f"torch_multi_gpu: needs two CUDA devices, PyTorch sees {torch.cuda.device_count()}")
    t1, one = heat(a.nx, a.ny, a.steps, a.repeats, ["cuda:0"])
    row("B11/torch-1-gpu", t1, "ns")
    t2, two = heat(a.nx, a.ny, a.steps, a.repeats, ["cuda:0", "cuda:1"])
    worst = (one - two).abs().max().item()
    print(f"torch_multi_gpu: two GPUs against one: largest difference {worst:.2e}", file=sys.stderr)
    if worst > 1e-5:
        sys.exit(f"torch_multi_gpu: the two-GPU field differs from the one-GPU field by {worst:e}")
    del one, two
    row("B11/torch-2-gpu", t2, "ns")
    row("peer/torch-0to1", peer_copy(a.peer_mib), "GB/s")


if __name__ == "__main__":
    main()
