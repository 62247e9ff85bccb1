//! Benchmarks B1-B8, B10, B13 and B14 (DESIGN.md §7, §12), each measured side by side with
//! what it is compared to, in the same process run. `cargo xtask bench` runs them
//! on the GPU machine and turns criterion's medians into the results table
//! and `ratio/B*` rows. On the host backend the raw-driver rows are skipped.
#![allow(missing_docs)] // criterion_group! generates undocumented items

use criterion::{criterion_group, criterion_main, Criterion};
use gpu::{BackendKind, Buffer, In, LaunchConfig, Out, Runtime, TaskContext};
use gpu_kernels as k;
use std::hint::black_box;
use std::time::{Duration, Instant};

use gpu_testkit::b13;

fn rt() -> &'static Runtime {
    gpu::runtime().expect("runtime")
}

fn cuda() -> bool {
    rt().backend() == BackendKind::Cuda
}

mod raw {
    //! Raw driver calls through cudarc, no tracking: what B1-B3 and B8
    //! compare against.
    use cudarc::driver::sys;

    pub(crate) fn record(ev: u64, s: u64) {
        // SAFETY: both are live handles of the runtime's context, which is
        // current on this thread (the runtime made it so).
        let r = unsafe { sys::cuEventRecord(ev as sys::CUevent, s as sys::CUstream) };
        assert_eq!(r, sys::CUresult::CUDA_SUCCESS);
    }

    pub(crate) fn wait(s: u64, ev: u64) {
        // SAFETY: as above.
        let r = unsafe { sys::cuStreamWaitEvent(s as sys::CUstream, ev as sys::CUevent, 0) };
        assert_eq!(r, sys::CUresult::CUDA_SUCCESS);
    }

    /// cuStreamQuery; true when the stream is idle.
    pub(crate) fn stream_query(s: u64) -> bool {
        // SAFETY: as above.
        let r = unsafe { sys::cuStreamQuery(s as sys::CUstream) };
        r == sys::CUresult::CUDA_SUCCESS
    }

    /// cuEventQuery; true when the event's record is done.
    pub(crate) fn event_query(e: u64) -> bool {
        // SAFETY: as above.
        let r = unsafe { sys::cuEventQuery(e as sys::CUevent) };
        r == sys::CUresult::CUDA_SUCCESS
    }

    /// cuLaunchKernel with pointer and u64 arguments.
    pub(crate) fn launch(f: u64, s: u64, grid: u32, block: u32, args: &mut [u64]) {
        // On the stack, as a hand-written launch would: no allocation in
        // the baseline.
        let mut params = [std::ptr::null_mut::<std::ffi::c_void>(); 8];
        assert!(args.len() <= params.len());
        for (p, a) in params.iter_mut().zip(args.iter_mut()) {
            *p = a as *mut u64 as *mut _;
        }
        // SAFETY: `f` is a loaded function whose parameters are 8-byte
        // pointers and integers, matching `args`; the context is current.
        let r = unsafe {
            sys::cuLaunchKernel(
                f as sys::CUfunction,
                grid,
                1,
                1,
                block,
                1,
                1,
                0,
                s as sys::CUstream,
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        };
        assert_eq!(r, sys::CUresult::CUDA_SUCCESS);
    }
}

/// Syncs `t`'s stream every `every` iterations so the queue stays short and
/// the CPU cost, not the device's backlog, is measured.
fn drain(t: &TaskContext, i: u64, every: u64) {
    if i % every == every - 1 {
        t.synchronize().expect("sync");
    }
}

type Group<'a> = criterion::BenchmarkGroup<'a, criterion::measurement::WallTime>;

/// Benchmarks `op`, synchronizing `t` every `every` iterations (see
/// [`drain`]).
fn bench_drained(g: &mut Group<'_>, name: &str, t: &TaskContext, every: u64, mut op: impl FnMut()) {
    g.bench_function(name, |b| {
        let mut i = 0;
        b.iter(|| {
            op();
            drain(t, i, every);
            i += 1;
        })
    });
}

fn b1_b2_record_wait(c: &mut Criterion) {
    let rt = rt();
    let t = rt.begin_task().unwrap();
    let ev = rt.event().unwrap();
    let mut g = c.benchmark_group("B1");
    bench_drained(&mut g, "tracked", &t, 4096, || {
        t.record(&ev).unwrap();
    });
    if cuda() {
        bench_drained(&mut g, "raw", &t, 4096, || {
            raw::record(ev.cu_event(), t.cu_stream());
        });
    }
    g.finish();
    let other = rt.begin_task().unwrap();
    other.record(&ev).unwrap();
    let mut g = c.benchmark_group("B2");
    bench_drained(&mut g, "tracked", &t, 4096, || {
        t.wait(&ev).unwrap();
    });
    if cuda() {
        bench_drained(&mut g, "raw", &t, 4096, || {
            raw::wait(t.cu_stream(), ev.cu_event());
        });
    }
    g.finish();
    t.synchronize().unwrap();
}

fn b3_launch(c: &mut Criterion) {
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

/// B4: the seed's hand-off. The parent fills `a`, spawns a child that adds
/// to `a` and takes a host-sync pointer, and runs 20x the child's work on
/// `b`. Returns the child's latency from the spawn.
fn handoff_once(
    a: &mut Buffer<f32>,
    b: &mut Buffer<f32>,
    parent_work: Option<Duration>,
) -> Duration {
    let mut lat = Duration::ZERO;
    let queued = std::sync::atomic::AtomicBool::new(false);
    gpu::scope(|s| {
        k::fill(s, a, 1.0)?;
        let (lat, queued) = (&mut lat, &queued);
        let t0 = Instant::now();
        s.spawn(move |t| {
            while !queued.load(std::sync::atomic::Ordering::Acquire) {
                std::hint::spin_loop();
            }
            k::add_scalar(t, a, 1.0)?;
            black_box(t.host_sync_ptr(a)?);
            *lat = t0.elapsed();
            Ok(())
        });
        if let Some(w) = parent_work {
            k::spin_touch(s, b, w)?;
        }
        queued.store(true, std::sync::atomic::Ordering::Release);
        Ok(())
    })
    .unwrap();
    gpu::synchronize().unwrap();
    lat
}

fn b4_handoff(c: &mut Criterion) {
    let rt = rt();
    let n = if cuda() { 1 << 24 } else { 1 << 16 };
    let mut a = Buffer::<f32>::zeros(n).unwrap();
    let mut b = Buffer::<f32>::zeros(4096).unwrap();
    // The child's own work, alone on an idle device.
    let own = {
        let t = rt.begin_task().unwrap();
        let mut best = Duration::MAX;
        for _ in 0..20 {
            t.synchronize().unwrap();
            let t0 = Instant::now();
            k::add_scalar(&t, &mut a, 1.0).unwrap();
            black_box(t.host_sync_ptr(&mut a).unwrap());
            best = best.min(t0.elapsed());
        }
        best
    };
    let parent_work = own * 20;
    let mut g = c.benchmark_group("B4");
    g.sample_size(20);
    g.bench_function("child-own-work", |bch| {
        let t = rt.begin_task().unwrap();
        bch.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                t.synchronize().unwrap();
                let t0 = Instant::now();
                k::add_scalar(&t, &mut a, 1.0).unwrap();
                black_box(t.host_sync_ptr(&mut a).unwrap());
                total += t0.elapsed();
            }
            total
        })
    });
    // The baseline: the same scope, the parent doing no later work. The
    // child's latency then includes waiting for the parent's fill, which
    // it needs; what B4 measures is what the parent's *later* work adds.
    for (name, facts, work) in [
        ("child-latency-alone", true, None),
        ("child-latency", true, Some(parent_work)),
        ("child-latency-wait-all", false, Some(parent_work)),
    ] {
        rt.set_facts(facts);
        g.bench_function(name, |bch| {
            bch.iter_custom(|iters| (0..iters).map(|_| handoff_once(&mut a, &mut b, work)).sum())
        });
    }
    rt.set_facts(true);
    g.finish();
}

/// B5: 8 sibling tasks, each a small long kernel; against the same on one
/// stream, and one kernel alone (the ideal).
fn b5_siblings(c: &mut Criterion) {
    let rt = rt();
    let work = Duration::from_millis(if cuda() { 2 } else { 5 });
    let mut g = c.benchmark_group("B5");
    g.sample_size(20);
    let t = rt.begin_task().unwrap();
    g.bench_function("one-kernel", |b| {
        b.iter(|| {
            k::spin(&t, work).unwrap();
            t.synchronize().unwrap();
        })
    });
    g.bench_function("one-stream", |b| {
        b.iter(|| {
            for _ in 0..8 {
                k::spin(&t, work).unwrap();
            }
            t.synchronize().unwrap();
        })
    });
    for (name, facts) in [("siblings", true), ("siblings-wait-all", false)] {
        rt.set_facts(facts);
        g.bench_function(name, |b| {
            b.iter(|| {
                gpu::scope(|s| {
                    for _ in 0..8 {
                        s.spawn(move |t| k::spin(t, work));
                    }
                    Ok(())
                })
                .unwrap();
                rt.synchronize().unwrap();
            })
        });
    }
    rt.set_facts(true);
    g.finish();
}

/// B6: `par_chunks_mut` map over 2 GiB against one launch over it all.
fn b6_par_chunks(c: &mut Criterion) {
    let rt = rt();
    let n = if cuda() { 1 << 29 } else { 1 << 20 };
    let mut buf = Buffer::<f32>::zeros(n).unwrap();
    let t = rt.begin_task().unwrap();
    let mut g = c.benchmark_group("B6");
    g.sample_size(20);
    g.bench_function("one-launch", |b| {
        b.iter(|| {
            k::scale(&t, &mut buf, 1.0).unwrap();
            t.synchronize().unwrap();
        })
    });
    g.bench_function("par-chunks", |b| {
        b.iter(|| {
            gpu::par_chunks_mut(&mut buf, n / 8)
                .for_each(|t, chunk| k::scale(t, chunk, 1.0))
                .unwrap();
            rt.synchronize().unwrap();
        })
    });
    g.finish();
}

/// B14: `par_chunks(&x, n / 8).map(sum).sum()` over 1 GiB of f32 against
/// one device reduction of it all (`torch.sum` of the same data is in
/// `torch_pipeline.py`). Each chunk is a task that reduces its chunk on the
/// device and reads the sum back; the sums are added on the host.
fn b14_reduce(c: &mut Criterion) {
    let rt = rt();
    let n: usize = if cuda() { 1 << 28 } else { 1 << 20 };
    let host: Vec<f32> = (0..n).map(|i| (i % 1000) as f32 * 1e-3).collect();
    let want: f64 = host.iter().map(|&v| f64::from(v)).sum();
    let x = Buffer::from_host(&host).unwrap();
    drop(host);
    let t = rt.begin_task().unwrap();
    let par_sum = || -> f32 {
        gpu::par_chunks(&x, n / 8)
            .map(|t, chunk| k::reduce::sum(t, &chunk))
            .sum()
            .unwrap()
    };
    // Both are right before either is timed (f32 accumulators: 1e-5).
    let one = f64::from(k::reduce::sum(&t, &x).unwrap());
    let par = f64::from(par_sum());
    assert!((one - want).abs() / want < 1e-5, "{one} vs {want}");
    assert!((par - want).abs() / want < 1e-5, "{par} vs {want}");
    let mut g = c.benchmark_group("B14");
    g.sample_size(20);
    g.bench_function("one-reduction", |b| {
        b.iter(|| black_box(k::reduce::sum(&t, &x).unwrap()))
    });
    g.bench_function("par-chunks-sum", |b| b.iter(|| black_box(par_sum())));
    g.finish();
}

/// B7: host -> device -> host over pinned memory: `par_map` against
/// copy-all/compute/copy-back on one stream, and the transfer bound (both
/// directions at once).
fn b7_pipeline(c: &mut Criterion) {
    let rt = rt();
    let n: usize = if cuda() { 1 << 28 } else { 1 << 20 }; // 1 GiB of f32 on the GPU
    let input: Vec<f32> = (0..n).map(|i| (i % 1000) as f32).collect();
    let mut output = vec![0.0f32; n];
    let mut g = c.benchmark_group("B7");
    g.sample_size(10);
    let t = rt.begin_task().unwrap();
    let mut stage_in = gpu::Staging::<f32>::new(rt, n).unwrap();
    let mut stage_out = gpu::Staging::<f32>::new(rt, n).unwrap();
    let mut d_in = t.zeros::<f32>(n).unwrap();
    let mut d_out = t.zeros::<f32>(n).unwrap();
    g.bench_function("copy-compute-copy", |b| {
        b.iter(|| {
            stage_in.upload(&t, &input, &mut d_in).unwrap();
            k::scale_into(&t, &d_in, &mut d_out, 2.0).unwrap();
            stage_out.download(&t, &d_out, &mut output).unwrap();
        })
    });
    // The transfer bound: the same bytes in and out at once, pinned to
    // pinned, no compute, no host staging copies.
    g.bench_function("transfer-bound", |b| {
        let up = rt.begin_task().unwrap();
        let down = rt.begin_task().unwrap();
        let mut src = gpu::Staging::<f32>::new(rt, n).unwrap();
        let mut dst = gpu::Staging::<f32>::new(rt, n).unwrap();
        let mut d_a = up.zeros::<f32>(n).unwrap();
        let d_b = down.zeros::<f32>(n).unwrap();
        up.synchronize().unwrap();
        down.synchronize().unwrap();
        b.iter(|| {
            src.send(&up, &mut d_a).unwrap();
            dst.receive(&down, &d_b).unwrap();
            up.synchronize().unwrap();
            down.synchronize().unwrap();
        })
    });
    let mut pinned_in = gpu::Staging::<f32>::new(rt, n).unwrap();
    pinned_in.as_mut_slice().unwrap().copy_from_slice(&input);
    let mut pinned_out = gpu::Staging::<f32>::new(rt, n).unwrap();
    // Check the pipeline once, outside the timing.
    gpu::par_map_pinned(
        &mut pinned_in,
        &mut pinned_out,
        gpu::PipelineOptions::default(),
        |t, x, y| k::scale_into(t, x, y, 2.0),
    )
    .unwrap();
    assert_eq!(pinned_out.as_slice().unwrap()[999], 1998.0);
    for (lanes, chunk) in [
        (4usize, 1usize << 22),
        (4, 1 << 21),
        (8, 1 << 21),
        (4, 1 << 23),
    ] {
        g.bench_function(format!("par-map-pinned-{lanes}x{}M", chunk >> 20), |b| {
            let opts = gpu::PipelineOptions { chunk, lanes };
            b.iter(|| {
                gpu::par_map_pinned(&mut pinned_in, &mut pinned_out, opts, |t, x, y| {
                    k::scale_into(t, x, y, 2.0)
                })
                .unwrap()
            })
        });
    }
    let opts = gpu::PipelineOptions {
        chunk: 1 << 22,
        lanes: 8,
    };
    // Checked once, outside the timing (which a filter may skip).
    output.fill(0.0);
    gpu::par_map(&input, &mut output, opts, |t, x, y| {
        k::scale_into(t, x, y, 2.0)
    })
    .unwrap();
    assert_eq!(output[999], 1998.0);
    g.bench_function("par-map-pageable-8", |b| {
        b.iter(|| {
            gpu::par_map(&input, &mut output, opts, |t, x, y| {
                k::scale_into(t, x, y, 2.0)
            })
            .unwrap()
        })
    });
    // The host copies of that pipeline alone, as `Staging` makes them
    // (`gpu::par_copy`: all of `input` into pinned memory, then a pinned
    // buffer out into `output`), no device work: the floor of any pipeline
    // that stages pageable memory this way.
    let pin_in = pinned_in.as_mut_slice().unwrap();
    let pin_out = pinned_out.as_slice().unwrap();
    g.bench_function("host-copies", |b| {
        b.iter(|| {
            gpu::par_copy(pin_in, &input);
            gpu::par_copy(&mut output, pin_out);
        })
    });
    g.finish();
}

/// B8: spawn + join of a task that launches one kernel, against the bare
/// launch.
fn b8_spawn(c: &mut Criterion) {
    let rt = rt();
    let t = rt.begin_task().unwrap();
    let mut a = t.zeros::<f32>(256).unwrap();
    let mut g = c.benchmark_group("B8");
    g.bench_function("bare-launch", |b| {
        let mut i = 0;
        b.iter(|| {
            k::fill(&t, &mut a, 1.0).unwrap();
            drain(&t, i, 1024);
            i += 1;
        })
    });
    if cuda() {
        let f = rt.cu_function(&k::FILL_F32).unwrap();
        let mut x = t.zeros::<f32>(256).unwrap();
        let p = t.raw_ptr(&mut x).unwrap();
        g.bench_function("raw-launch", |b| {
            let mut i = 0;
            let mut args = [p, 1.0f32.to_bits() as u64, 256];
            b.iter(|| {
                raw::launch(f, t.cu_stream(), 1, k::BLOCK, &mut args);
                drain(&t, i, 1024);
                i += 1;
            })
        });
    }
    for (name, facts) in [("spawn-join", true), ("spawn-join-wait-all", false)] {
        rt.set_facts(facts);
        g.bench_function(name, |b| {
            let mut i = 0;
            b.iter(|| {
                gpu::scope(|s| {
                    s.spawn(|t| k::fill(t, &mut a, 1.0));
                    Ok(())
                })
                .unwrap();
                if i % 1024 == 1023 {
                    rt.synchronize().unwrap();
                }
                i += 1;
            })
        });
    }
    rt.set_facts(true);
    // The same from a worker thread of the pool: the spawn goes to the
    // worker's own queue, no wake-up from outside.
    g.bench_function("spawn-join-in-pool", |b| {
        b.iter_custom(|iters| {
            let a = &mut a;
            gpu::install(move || {
                let start = Instant::now();
                for i in 0..iters {
                    gpu::scope(|s| {
                        s.spawn(|t| k::fill(t, a, 1.0));
                        Ok(())
                    })
                    .unwrap();
                    if i % 1024 == 1023 {
                        rt.synchronize().unwrap();
                    }
                }
                start.elapsed()
            })
        })
    });
    // Where spawn + join's time goes: the pieces, each measured alone.
    g.bench_function("part-empty-scope", |b| {
        b.iter(|| gpu::scope(|_s| Ok(())).unwrap())
    });
    g.bench_function("part-spawn-empty-task", |b| {
        b.iter(|| {
            gpu::scope(|s| {
                s.spawn(|_t| Ok(()));
                Ok(())
            })
            .unwrap()
        })
    });
    g.bench_function("part-begin-task", |b| {
        b.iter(|| black_box(rt.begin_task().unwrap()))
    });
    if cuda() {
        // What begin_task pays the driver: one query of an idle stream.
        t.synchronize().unwrap();
        g.bench_function("part-raw-stream-query", |b| {
            b.iter(|| assert!(raw::stream_query(t.cu_stream())))
        });
        // What it pays instead for a stream whose last task submitted work:
        // a query of the event that task recorded as it ended.
        let ev = rt.event().unwrap();
        t.record(&ev).unwrap();
        t.synchronize().unwrap();
        g.bench_function("part-raw-event-query", |b| {
            b.iter(|| assert!(raw::event_query(ev.cu_event())))
        });
    }
    g.bench_function("part-fence-and-wait", |b| {
        let other = rt.begin_task().unwrap();
        let mut i = 0;
        b.iter(|| {
            let f = t.fence().unwrap();
            other.wait_fence(f).unwrap();
            drain(&other, i, 1024);
            i += 1;
        })
    });
    g.finish();
}

/// A join tree of empty tasks, `depth` levels: `2^depth - 1` joins.
fn gpu_tree(s: &gpu::Scope<'_, '_>, depth: u32) -> gpu::Result<()> {
    if depth == 0 {
        return Ok(());
    }
    s.join(|a| gpu_tree(a, depth - 1), |b| gpu_tree(b, depth - 1))?;
    Ok(())
}

/// The same tree through Rayon.
fn rayon_tree(depth: u32) {
    if depth == 0 {
        return;
    }
    rayon_core::join(|| rayon_tree(depth - 1), || rayon_tree(depth - 1));
}

/// B10 (§9, §12): task overhead with no GPU work, against Rayon in the same
/// binary, each from a worker thread of its own pool of the same size: a
/// depth-16 join tree (65,535 joins) and 100,000 empty spawns in one scope.
fn b10_rayon(c: &mut Criterion) {
    let threads = gpu::current_num_threads();
    let rayon = rayon_core::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap();
    let mut g = c.benchmark_group("B10");
    g.sample_size(10);
    g.bench_function("join-tree-gpu", |b| {
        b.iter(|| gpu::install(|| gpu::join(|a| gpu_tree(a, 15), |b| gpu_tree(b, 15))).unwrap())
    });
    g.bench_function("join-tree-rayon", |b| {
        b.iter(|| rayon.install(|| rayon_tree(16)))
    });
    const SPAWNS: usize = 100_000;
    g.bench_function("spawns-gpu", |b| {
        b.iter(|| {
            gpu::install(|| {
                gpu::scope(|s| {
                    for _ in 0..SPAWNS {
                        s.spawn(|_t| Ok(()));
                    }
                    Ok(())
                })
            })
            .unwrap()
        })
    });
    g.bench_function("spawns-rayon", |b| {
        b.iter(|| {
            rayon.install(|| {
                rayon_core::scope(|s| {
                    for _ in 0..SPAWNS {
                        s.spawn(|_| {});
                    }
                })
            })
        })
    });
    g.finish();
}

/// B13 (issue 16): the task graph of `b13.rs` (10,000 tasks over 256
/// buffers; 500 on the host backend) through `gpu::scope` / `spawn`, from
/// the spawns to the end of its GPU work; and one of its spins, back to
/// back, to set against PyTorch's (`torch_dag.py` runs the graph in
/// PyTorch). The buffers are reset before each run, outside the timing.
fn b13_dag(c: &mut Criterion) {
    let rt = rt();
    let n = if cuda() { b13::TASKS } else { b13::HOST_TASKS };
    let tasks = b13::dag(b13::SEED, n, b13::BUFFERS);
    let fp = b13::fingerprint(&tasks);
    for (len, want) in b13::FINGERPRINTS {
        assert!(
            len != n || fp == want,
            "B13: the graph's fingerprint {fp:#x} is not {want:#x}"
        );
    }
    let pristine = b13::pristine().unwrap();
    let mut bufs = b13::buffers().unwrap();
    let t = rt.begin_task().unwrap();
    let reset = |bufs: &mut [std::sync::RwLock<Buffer<f32>>]| {
        b13::reset(&t, &pristine, bufs).unwrap();
        t.synchronize().unwrap();
    };
    // Once, checked against the host model, before timing.
    reset(&mut bufs);
    b13::run(&bufs, &tasks).unwrap();
    gpu::synchronize().unwrap();
    let want = b13::model(&tasks);
    assert!(
        want.iter().flatten().all(|v| v.is_finite()),
        "B13: the model overflowed"
    );
    let check = |bufs: &[std::sync::RwLock<Buffer<f32>>], when: &str| {
        if let Some(b) = b13::first_difference(bufs, &want).unwrap() {
            panic!("B13 ({when}): buffer {b} differs from the host model");
        }
        let races = rt.races();
        assert!(races.is_empty(), "B13 ({when}): races: {races:?}");
    };
    check(&bufs, "the first run");
    let mut g = c.benchmark_group("B13");
    g.sample_size(10);
    g.bench_function("gpu-scope", |bch| {
        bch.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                reset(&mut bufs);
                let t0 = Instant::now();
                b13::run(&bufs, &tasks).unwrap();
                gpu::synchronize().unwrap();
                total += t0.elapsed();
            }
            total
        })
    });
    // When the filter skipped it, this checks the first run again.
    check(&bufs, "the last timed run");
    // The same scope captured into one graph (`gpu::capture`) and replayed:
    // checked once, then the capture and the replay timed apart.
    let graph = b13::capture(&bufs, &tasks).unwrap();
    reset(&mut bufs);
    b13::launch(&t, &graph, &mut bufs).unwrap();
    t.synchronize().unwrap();
    check(&bufs, "the captured scope's first replay");
    g.bench_function("gpu-capture", |bch| {
        bch.iter(|| black_box(b13::capture(&bufs, &tasks).unwrap()))
    });
    g.bench_function("gpu-capture-replay", |bch| {
        bch.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                reset(&mut bufs);
                let t0 = Instant::now();
                b13::launch(&t, &graph, &mut bufs).unwrap();
                t.synchronize().unwrap();
                total += t0.elapsed();
            }
            total
        })
    });
    check(&bufs, "the last timed replay");
    let one = rt.begin_task().unwrap();
    g.bench_function("spin-alone", |bch| {
        bch.iter_custom(|iters| {
            one.synchronize().unwrap();
            let t0 = Instant::now();
            for _ in 0..iters {
                k::spin(&one, b13::SPIN).unwrap();
            }
            one.synchronize().unwrap();
            t0.elapsed()
        })
    });
    if cuda() {
        b13_raw_floor(&mut g, &tasks);
    }
    g.finish();
}

/// B13's floor for launching the graph kernel by kernel: the same kernels
/// (each task's spin, then one add a read) through raw `cuLaunchKernel`,
/// with no dependences, events or tracking at all, from one thread and from
/// as many threads as the pool has workers (task `i` on thread `i % n`, a
/// stream and two buffers of its own each). Each timed run includes starting
/// the threads and their streams (microseconds). What the driver's
/// submission costs, without which no launch-by-launch scheme can go.
fn b13_raw_floor(g: &mut Group<'_>, tasks: &[b13::Task]) {
    let rt = rt();
    let spin = rt.cu_function(&k::SPIN_NS).unwrap();
    let axpy = rt.cu_function(&k::AXPY_F32).unwrap();
    let spin_ns = b13::SPIN.as_nanos() as u64;
    let grid = (b13::LEN as u32).div_ceil(k::BLOCK);
    let run = |threads: usize| {
        std::thread::scope(|s| {
            for w in 0..threads {
                s.spawn(move || {
                    let t = rt.begin_task().unwrap();
                    let mut x = t.zeros::<f32>(b13::LEN).unwrap();
                    let mut y = t.zeros::<f32>(b13::LEN).unwrap();
                    let px = t.raw_ptr(&mut x).unwrap();
                    let py = t.raw_ptr(&mut y).unwrap();
                    let stream = t.cu_stream();
                    for task in tasks.iter().skip(w).step_by(threads) {
                        raw::launch(spin, stream, 1, 1, &mut [spin_ns]);
                        for _ in task.reads() {
                            let mut args = [1.0f32.to_bits() as u64, px, py, b13::LEN as u64];
                            raw::launch(axpy, stream, grid, k::BLOCK, &mut args);
                        }
                    }
                    t.synchronize().unwrap();
                });
            }
        })
    };
    let workers = gpu::current_num_threads();
    for (name, threads) in [
        ("raw-launches-1-thread".to_string(), 1),
        (format!("raw-launches-{workers}-threads"), workers),
    ] {
        g.bench_function(name, |bch| bch.iter(|| run(threads)));
    }
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
}

criterion_group! {
    name = benches;
    config = config();
    targets = b1_b2_record_wait, b3_launch, b4_handoff, b5_siblings, b6_par_chunks, b7_pipeline, b8_spawn, b10_rayon, b13_dag, b14_reduce
}
criterion_main!(benches);
