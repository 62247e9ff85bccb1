//! B3: one launch, through the library (built-in and user kernels) against
//! raw `cuLaunchKernel` and cudarc's own tracked launch.

use super::*;

pub(crate) fn b3_launch(c: &mut Criterion) {
    let rt = rt();
    let t = rt.begin_task().unwrap();
    let n = 256usize;
    let x = t.from_host(&vec![1.0f32; n]).unwrap();
    let mut y = t.zeros::<f32>(n).unwrap();
    let mut sums = t.zeros::<f32>(1).unwrap();
    let scan_block = &k::SCAN_BLOCK_F32;
    let mut g = c.benchmark_group("B3");
    // scan_block(in: read, out: write, block_sums: write, n): 3 buffers, 2 written.
    g.bench_function("tracked", |b| {
        let mut i = 0;
        b.iter(|| {
            // SAFETY: the kernel touches only the buffers passed, within their
            // lengths (its length arguments are theirs), or the launch is refused
            // before anything is submitted.
            unsafe {
                scan_block.launch(
                    &t,
                    LaunchConfig::linear(1, k::BLOCK),
                    (&x, &mut y, &mut sums, n),
                )
            }
            .unwrap();
            drain(&t, i, 1024);
            i += 1;
        })
    });
    // The same kernel as a user's module: the built-in PTX text loaded with
    // `load_ptx` (a module of its own, apart from the built-in one), looked
    // up as a typed kernel and launched through `Kernel::launch`, on the
    // same buffers with the same configuration as `tracked`. The host
    // implementation (what the host backend runs; unused on CUDA) is the
    // kernel's single tile, since `n <= SCAN_TILE`.
    assert!(n <= k::SCAN_TILE as usize);
    let user = rt
        .load_ptx(k::KERNELS_PTX.to_owned())
        .unwrap()
        .kernel::<(In<f32>, Out<f32>, Out<f32>, u64)>(k::SCAN_BLOCK_F32.name())
        .unwrap()
        .with_host(|inp: &[f32], out: &mut [f32], sums: &mut [f32], n: u64| {
            let n = n as usize;
            k::host::inclusive_scan(&inp[..n], &mut out[..n]);
            sums[0] = out[n - 1];
        });
    // Once, checked, before timing: x is all ones, so y is 1..=n.
    // SAFETY: as in the timed launches below.
    unsafe {
        user.launch(
            &t,
            LaunchConfig::linear(1, k::BLOCK),
            (&x, &mut y, &mut sums, n),
        )
    }
    .unwrap();
    let want: Vec<f32> = (1..=n).map(|i| i as f32).collect();
    assert_eq!(
        t.to_vec(&y).unwrap(),
        want,
        "B3/user: scan_block_f32's output"
    );
    assert_eq!(
        t.to_vec(&sums).unwrap(),
        [n as f32],
        "B3/user: its tile total"
    );
    g.bench_function("user", |b| {
        let mut i = 0;
        b.iter(|| {
            // SAFETY: scan_block_f32(const float* in, float* out, float*
            // block_sums, u64 n) with one block of BLOCK threads and n <=
            // SCAN_TILE reads n elements of `x`, writes n of `y` and one of
            // `sums`: within the buffers passed, `&mut` ones for the writes.
            unsafe {
                user.launch(
                    &t,
                    LaunchConfig::linear(1, k::BLOCK),
                    (&x, &mut y, &mut sums, n),
                )
            }
            .unwrap();
            drain(&t, i, 1024);
            i += 1;
        })
    });
    if cuda() {
        let f = rt.cu_function(scan_block).unwrap();
        // Kept alive for the whole benchmark: the raw launches read them.
        let mut x2 = t.from_host(&vec![1.0f32; n]).unwrap();
        let mut y2 = t.zeros::<f32>(n).unwrap();
        let mut s2 = t.zeros::<f32>(1).unwrap();
        let mut args = [
            t.raw_ptr(&mut x2).unwrap(),
            t.raw_ptr(&mut y2).unwrap(),
            t.raw_ptr(&mut s2).unwrap(),
            n as u64,
        ];
        g.bench_function("raw", |b| {
            let mut i = 0;
            b.iter(|| {
                raw::launch(f, t.cu_stream(), 1, k::BLOCK, &mut args);
                drain(&t, i, 1024);
                i += 1;
            })
        });
        cudarc_tracked(&mut g, n);
    }
    g.finish();
    t.synchronize().unwrap();
}

/// cudarc's own tracked launch (its per-slice events on), same kernel.
fn cudarc_tracked(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    n: usize,
) {
    use cudarc::driver::{CudaContext, LaunchConfig as CuCfg, PushKernelArg};
    let ctx = CudaContext::new(0).unwrap();
    let stream = ctx.new_stream().unwrap();
    let module = ctx
        .load_module(cudarc::nvrtc::Ptx::from_src(k::KERNELS_PTX))
        .unwrap();
    let f = module.load_function("scan_block_f32").unwrap();
    let x = stream.clone_htod(&vec![1.0f32; n]).unwrap();
    let mut y = stream.alloc_zeros::<f32>(n).unwrap();
    let mut s = stream.alloc_zeros::<f32>(1).unwrap();
    let nn = n as u64;
    let cfg = CuCfg {
        grid_dim: (1, 1, 1),
        block_dim: (k::BLOCK, 1, 1),
        shared_mem_bytes: 0,
    };
    g.bench_function("cudarc", |b| {
        let mut i = 0u64;
        b.iter(|| {
            let mut l = stream.launch_builder(&f);
            l.arg(&x).arg(&mut y).arg(&mut s).arg(&nn);
            // SAFETY: scan_block_f32(const float*, float*, float*, u64)
            // matches the arguments; the buffers hold n and 1 elements.
            unsafe { l.launch(cfg) }.unwrap();
            if i % 1024 == 1023 {
                stream.synchronize().unwrap();
            }
            i += 1;
        })
    });
    stream.synchronize().unwrap();
}
