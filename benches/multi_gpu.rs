//! Multi-GPU rows of `cargo xtask bench --multi-gpu` (DESIGN "Benchmarks added"): the
//! bandwidth of a tracked peer copy ([`TaskContext::copy_peer`]) against a
//! raw `cuMemcpyPeerAsync` of the same bytes between the same buffers on
//! the same stream. Not a criterion bench (`harness = false`): it prints
//! one JSON row a line on stdout, `{"name": ..., "value": ..., "unit":
//! ...}`, which xtask reads, and what it did on stderr.
//!
//! ```text
//! cargo bench -p gpu-benches --bench multi_gpu -- [--quick] [--mib N] [--reps N]
//! ```
//!
//! Rows: `peer/library-0to1`, `peer/raw-0to1` and the same `1to0` (GB/s,
//! the median of `--reps` copies of `--mib` MiB, default 1 GiB; `--quick`:
//! 16 MiB). Each copy is timed on the host from its submission to the end
//! of a stream synchronize, library and raw copies interleaved. On the host
//! backend (two simulated devices) the "raw" copy is a `copy_from_slice`
//! between two host vectors: a stand-in, so that the rows and their ratio
//! exist.
//!
//! B12 (NCCL all-reduce through the library against raw NCCL calls) joins
//! here or in a bench of its own: rows `B12/library-<size>` and
//! `B12/raw-<size>` (ns) become `ratio/B12-<size>` in xtask.

use gpu::raw::RawTask;
use gpu::{BackendKind, Buffer, Runtime, RuntimeOptions, TaskContext};
use std::time::Instant;

/// What to measure.
struct Args {
    mib: usize,
    reps: usize,
}

fn args() -> Args {
    let mut a = Args {
        mib: 1024,
        reps: 10,
    };
    let mut it = std::env::args().skip(1);
    while let Some(s) = it.next() {
        let mut num = |what: &str| -> usize {
            it.next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{what} takes a number"))
        };
        match s.as_str() {
            "--quick" => a.mib = 16,
            "--mib" => a.mib = num("--mib"),
            "--reps" => a.reps = num("--reps").max(1),
            // cargo bench passes --bench; a criterion-style filter is ignored.
            _ => {}
        }
    }
    a
}

fn row(name: &str, value: f64, unit: &str) {
    println!("{{\"name\": \"{name}\", \"value\": {value:.4}, \"unit\": \"{unit}\"}}");
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

mod raw {
    //! `cuMemcpyPeerAsync` through cudarc's driver API, untracked.
    use cudarc::driver::sys;

    /// The primary contexts of two devices (the runtime's own: it retains
    /// the same ones), released on drop.
    pub(crate) struct Contexts {
        pub(crate) ctx: [u64; 2],
        dev: [i32; 2],
    }

    fn ok(r: sys::CUresult, what: &str) {
        assert_eq!(r, sys::CUresult::CUDA_SUCCESS, "{what}");
    }

    impl Contexts {
        pub(crate) fn retain(a: usize, b: usize) -> Contexts {
            let mut c = Contexts {
                ctx: [0; 2],
                dev: [a as i32, b as i32],
            };
            for i in 0..2 {
                let mut ctx: sys::CUcontext = std::ptr::null_mut();
                // SAFETY: the driver was initialized by the runtime; `ctx`
                // is a valid out-pointer; the device ordinal exists (the
                // runtime opened it).
                ok(
                    unsafe { sys::cuDevicePrimaryCtxRetain(&mut ctx, c.dev[i]) },
                    "cuDevicePrimaryCtxRetain",
                );
                c.ctx[i] = ctx as usize as u64;
            }
            c
        }

        /// Makes device `i`'s context current on this thread, until
        /// [`Contexts::pop`] (which restores the runtime's, as it expects:
        /// it remembers which context it made current).
        pub(crate) fn push(&self, i: usize) {
            // SAFETY: a context retained by `retain`, alive until drop.
            ok(
                unsafe { sys::cuCtxPushCurrent_v2(self.ctx[i] as usize as sys::CUcontext) },
                "cuCtxPushCurrent",
            );
        }

        /// Undoes [`Contexts::push`].
        pub(crate) fn pop(&self) {
            let mut old: sys::CUcontext = std::ptr::null_mut();
            // SAFETY: `push` pushed a context on this thread; `old` is a
            // valid out-pointer.
            ok(
                unsafe { sys::cuCtxPopCurrent_v2(&mut old) },
                "cuCtxPopCurrent",
            );
        }

        /// Copies `bytes` from `src` (memory of context `from`) to `dst`
        /// (of context `to`) on `stream`, then synchronizes the stream.
        ///
        /// # Safety
        ///
        /// `src` and `dst` are live allocations of those contexts of at
        /// least `bytes`, with no other work on them queued or running;
        /// `stream` is a live stream of the current context.
        pub(crate) unsafe fn copy(
            &self,
            dst: u64,
            to: usize,
            src: u64,
            from: usize,
            bytes: usize,
            stream: u64,
        ) {
            // SAFETY: this function's contract.
            let r = unsafe {
                sys::cuMemcpyPeerAsync(
                    dst,
                    self.ctx[to] as usize as sys::CUcontext,
                    src,
                    self.ctx[from] as usize as sys::CUcontext,
                    bytes,
                    stream as usize as sys::CUstream,
                )
            };
            ok(r, "cuMemcpyPeerAsync");
            // SAFETY: as above: a live stream of the current context.
            ok(
                unsafe { sys::cuStreamSynchronize(stream as usize as sys::CUstream) },
                "cuStreamSynchronize",
            );
        }
    }

    impl Drop for Contexts {
        fn drop(&mut self) {
            for d in self.dev {
                // SAFETY: retained once each in `retain`.
                let _ = unsafe { sys::cuDevicePrimaryCtxRelease_v2(d) };
            }
        }
    }
}

/// One direction: the library's and the raw copy's GB/s over `reps`
/// interleaved copies from `src` (of `from`) to `dst` (of `to`), issued on
/// a task of `from`'s device.
#[allow(clippy::too_many_arguments)]
fn direction(
    t: &TaskContext,
    t_dst: &TaskContext,
    src: &mut Buffer<f32>,
    dst: &mut Buffer<f32>,
    (from, to): (usize, usize),
    reps: usize,
    cuda: bool,
) -> gpu::Result<(f64, f64)> {
    let bytes = src.len() * 4;
    let gbs = |secs: f64| bytes as f64 / secs / 1e9;
    // The buffers' addresses for the raw copies: `raw_ptr` hands each to
    // its device's task (the pointers are used only while both are
    // synchronized, below).
    let (ps, pd) = (t.raw_ptr(src)?, t_dst.raw_ptr(dst)?);
    t_dst.synchronize()?;
    let ctx = cuda.then(|| raw::Contexts::retain(from, to));
    let stream = t.cu_stream();
    let (mut host_src, mut host_dst) = if cuda {
        (Vec::new(), Vec::new())
    } else {
        (vec![1.0f32; src.len()], vec![0.0f32; src.len()])
    };
    let mut raw_copy = || {
        if let Some(c) = &ctx {
            c.push(0);
        }
        let start = Instant::now();
        if let Some(c) = &ctx {
            // SAFETY: `ps` and `pd` are live buffers (`src`, `dst`,
            // borrowed here) of the two devices' primary contexts, of
            // `bytes` each; every earlier copy on them was synchronized
            // (the library's below, and this one before returning), and
            // `stream` is this task's stream of device `from`, whose
            // context `c.push(0)` made current.
            unsafe { c.copy(pd, 1, ps, 0, bytes, stream) };
        } else {
            host_dst.copy_from_slice(&host_src);
            host_src[0] += 1.0;
        }
        let secs = start.elapsed().as_secs_f64();
        if let Some(c) = &ctx {
            c.pop();
        }
        secs
    };
    let mut lib_copy = || -> gpu::Result<f64> {
        let start = Instant::now();
        t.copy_peer(&*src, dst)?;
        t.synchronize()?;
        Ok(start.elapsed().as_secs_f64())
    };
    // Warm up both (peer mappings, first-touch costs).
    lib_copy()?;
    raw_copy();
    let (mut lib, mut raw) = (Vec::new(), Vec::new());
    for _ in 0..reps {
        lib.push(lib_copy()?);
        raw.push(raw_copy());
    }
    eprintln!(
        "peer {from}->{to}: {} MiB, library {:.3} ms, raw {:.3} ms (medians of {reps})",
        bytes >> 20,
        median(lib.clone()) * 1e3,
        median(raw.clone()) * 1e3
    );
    Ok((gbs(median(lib)), gbs(median(raw))))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let a = args();
    let rt = Runtime::new(RuntimeOptions {
        host_devices: 2,
        ..RuntimeOptions::default()
    })?;
    if rt.device_count() < 2 {
        return Err(format!(
            "multi_gpu: needs two devices; the {} backend has {}",
            rt.backend(),
            rt.device_count()
        )
        .into());
    }
    let cuda = rt.backend() == BackendKind::Cuda;
    let (d0, d1) = (rt.device(0)?, rt.device(1)?);
    eprintln!(
        "multi_gpu: backend {}; {} / {}",
        rt.backend(),
        d0.device_name(),
        d1.device_name()
    );
    if !cuda {
        eprintln!("multi_gpu: host backend: the raw rows are host memcpys (a stand-in)");
    }
    let n = a.mib << 18; // f32s in `mib` MiB
    let (t0, t1) = (d0.begin_task()?, d1.begin_task()?);
    let pattern: Vec<f32> = (0..n).map(|i| (i % 1000) as f32).collect();
    let mut x0 = t0.from_host(&pattern)?;
    let mut x1 = t1.zeros::<f32>(n)?;
    let (lib, raw) = direction(&t0, &t1, &mut x0, &mut x1, (0, 1), a.reps, cuda)?;
    row("peer/library-0to1", lib, "GB/s");
    row("peer/raw-0to1", raw, "GB/s");
    let got = t1.to_vec(&x1.slice(n - 1000..)?)?;
    assert_eq!(got, pattern[n - 1000..], "the copy to device 1 is wrong");
    let (lib, raw) = direction(&t1, &t0, &mut x1, &mut x0, (1, 0), a.reps, cuda)?;
    row("peer/library-1to0", lib, "GB/s");
    row("peer/raw-1to0", raw, "GB/s");
    let races = rt.races();
    if !races.is_empty() {
        return Err(format!("the race detector found {races:?}").into());
    }
    Ok(())
}
