//! B17: cuBLAS through the library (`gpu::blas`): a tracked 512 x 512
//! sgemm against raw cuBLAS on the same stream (host-side cost: only the
//! submissions are timed), the alternative binding (`cublasSetStream`
//! before every call on one shared handle), and 16 independent sgemms on
//! 16 sibling tasks against the same on one stream and one strided-batched
//! call of the 16, and the 16 sibling tasks through a graphed scope.

use super::*;
use gpu::blas::{Gemm, Op};
use gpu::foreign::cudarc::cublas::sys as cublas;

const N: usize = 512;
const COUNT: usize = 16;
/// Submissions timed between two (untimed) drains.
const BURST: u64 = 32;

/// Times `submit` alone, `BURST` calls at a time, draining `t`'s stream
/// between bursts outside the timer.
fn submissions(t: &TaskContext, iters: u64, mut submit: impl FnMut()) -> Duration {
    let mut total = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        let burst = left.min(BURST);
        let start = Instant::now();
        for _ in 0..burst {
            submit();
        }
        total += start.elapsed();
        t.synchronize().expect("sync");
        left -= burst;
    }
    total
}

/// A raw cuBLAS handle on `stream` (the library was probed by a tracked
/// call before).
fn raw_handle(stream: u64) -> cublas::cublasHandle_t {
    let mut h = std::ptr::null_mut();
    // SAFETY: cuBLAS is loaded (a tracked gemm ran first); `h` is a valid
    // out-pointer; the runtime's context is current on this thread (the
    // task's calls made it so).
    unsafe {
        assert_eq!(
            cublas::cublasCreate_v2(&mut h),
            cublas::cublasStatus_t::CUBLAS_STATUS_SUCCESS
        );
        assert_eq!(
            cublas::cublasSetStream_v2(h, stream as usize as cublas::cudaStream_t),
            cublas::cublasStatus_t::CUBLAS_STATUS_SUCCESS
        );
    }
    h
}

/// One raw 512 x 512 sgemm `C = A B` on `h`'s stream.
///
/// # Safety
///
/// `a`, `b`, `c` are device pointers of `N * N` floats each.
unsafe fn raw_sgemm(h: cublas::cublasHandle_t, a: u64, b: u64, c: u64) {
    let (one, zero) = (1.0f32, 0.0f32);
    let n = N as i32;
    let op = cublas::cublasOperation_t::CUBLAS_OP_N;
    // SAFETY: the caller's contract; scalars by host pointer (the default
    // mode of a new handle).
    let r = unsafe {
        cublas::cublasSgemm_v2(
            h,
            op,
            op,
            n,
            n,
            n,
            &one,
            a as usize as *const f32,
            n,
            b as usize as *const f32,
            n,
            &zero,
            c as usize as *mut f32,
            n,
        )
    };
    assert_eq!(r, cublas::cublasStatus_t::CUBLAS_STATUS_SUCCESS);
}

/// `outs[i] = ins[i] b`, a sibling task each, on `s`.
fn products<'scope>(
    s: &gpu::Scope<'_, 'scope>,
    gemm: Gemm<f32>,
    ins: &'scope [Buffer<f32>],
    b: &'scope Buffer<f32>,
    outs: &'scope mut [Buffer<f32>],
) -> gpu::Result<()> {
    for (x, y) in ins.iter().zip(outs.iter_mut()) {
        s.spawn(move |t| gemm.run(t, x, b, y));
    }
    Ok(())
}

pub(crate) fn b17_blas(c: &mut Criterion) {
    let rt = rt();
    let t = rt.begin_task().unwrap();
    let a = t.from_host(&vec![1.0f32; N * N]).unwrap();
    let b = t.from_host(&vec![0.5f32; N * N]).unwrap();
    let mut cc = t.zeros::<f32>(N * N).unwrap();
    let gemm = Gemm::<f32>::new(N, N, N);
    // Once, checked: every element is N * 0.5.
    gemm.run(&t, &a, &b, &mut cc).unwrap();
    assert!(
        t.to_vec(&cc).unwrap().iter().all(|&v| v == N as f32 * 0.5),
        "B17: the product"
    );
    let mut g = c.benchmark_group("B17");
    g.bench_function("tracked", |bch| {
        bch.iter_custom(|iters| submissions(&t, iters, || gemm.run(&t, &a, &b, &mut cc).unwrap()))
    });
    if cuda() {
        let h = raw_handle(t.cu_stream());
        // Buffers of their own: a raw pointer marks its buffer escaped (R10).
        let mut ra = t.from_host(&vec![1.0f32; N * N]).unwrap();
        let mut rb = t.from_host(&vec![0.5f32; N * N]).unwrap();
        let mut rc = t.zeros::<f32>(N * N).unwrap();
        let pa = t.raw_ptr(&mut ra).unwrap();
        let pb = t.raw_ptr(&mut rb).unwrap();
        let pc = t.raw_ptr(&mut rc).unwrap();
        t.synchronize().unwrap();
        g.bench_function("raw", |bch| {
            // SAFETY: three live buffers of N * N floats; the handle is on
            // the task's stream.
            bch.iter_custom(|iters| submissions(&t, iters, || unsafe { raw_sgemm(h, pa, pb, pc) }))
        });
        let stream = t.cu_stream() as usize as cublas::cudaStream_t;
        g.bench_function("raw-setstream", |bch| {
            bch.iter_custom(|iters| {
                submissions(&t, iters, || {
                    // SAFETY: as above; rebinding the handle to the same
                    // live stream before each call.
                    unsafe {
                        cublas::cublasSetStream_v2(h, stream);
                        raw_sgemm(h, pa, pb, pc)
                    }
                })
            })
        });
        // SAFETY: the handle's work is done (each burst was drained).
        unsafe { cublas::cublasDestroy_v2(h) };
        black_box((&ra, &rb, &rc));
    }
    // 16 products: on 16 sibling tasks, on one stream, as one batch.
    let ins: Vec<_> = (0..COUNT)
        .map(|_| t.from_host(&vec![1.0f32; N * N]).unwrap())
        .collect();
    let mut outs: Vec<_> = (0..COUNT).map(|_| t.zeros::<f32>(N * N).unwrap()).collect();
    let batch_a = t.from_host(&vec![1.0f32; COUNT * N * N]).unwrap();
    let mut batch_c = t.zeros::<f32>(COUNT * N * N).unwrap();
    t.synchronize().unwrap();
    g.bench_function("siblings", |bch| {
        bch.iter(|| {
            gpu::scope(|s| products(s, gemm, &ins, &b, &mut outs)).unwrap();
            rt.synchronize().unwrap();
        })
    });
    // Diagnostics of `siblings`: the same scope with fills in place of the
    // products (the scope's own cost), and the products on a runtime that
    // keeps 32 streams warm (no stream retired and made again per scope).
    g.bench_function("siblings-fill", |bch| {
        bch.iter(|| {
            gpu::scope(|s| {
                for y in outs.iter_mut() {
                    s.spawn(move |t| k::fill(t, y, 1.0));
                }
                Ok(())
            })
            .unwrap();
            rt.synchronize().unwrap();
        })
    });
    {
        let warm = Runtime::new(gpu::RuntimeOptions {
            warm_streams: 32,
            ..Default::default()
        })
        .unwrap();
        let u = warm.begin_task().unwrap();
        let wb = u.from_host(&vec![0.5f32; N * N]).unwrap();
        let wins: Vec<_> = (0..COUNT)
            .map(|_| u.from_host(&vec![1.0f32; N * N]).unwrap())
            .collect();
        let mut wouts: Vec<_> = (0..COUNT).map(|_| u.zeros::<f32>(N * N).unwrap()).collect();
        warm.synchronize().unwrap();
        g.bench_function("siblings-warm", |bch| {
            bch.iter(|| {
                gpu::scope_on(&warm, |s| products(s, gemm, &wins, &wb, &mut wouts)).unwrap();
                warm.synchronize().unwrap();
            })
        });
    }
    // The 16 sibling products through a graphed scope (issue 38, item 5):
    // built at its first run, then each run replays the graph; the
    // products merged into one batched call (`graphed`, the default) or
    // not (`graphed-unbatched`).
    // `graphed-serial`: the tasks recorded at their spawn on the calling
    // thread (`Graphed::serial`).
    for (id, batching, serial) in [
        ("graphed", true, false),
        ("graphed-unbatched", false, false),
        ("graphed-serial", true, true),
    ] {
        let mut graphed = gpu::Graphed::on(rt).batching(batching).serial(serial);
        let mut run = |outs: &mut [Buffer<f32>]| {
            graphed
                .scope(|s| products(s, gemm, &ins, &b, outs))
                .unwrap();
            rt.synchronize().unwrap();
        };
        run(&mut outs);
        let got = t.to_vec(&outs[COUNT - 1]).unwrap();
        assert!(
            got.iter().all(|&v| v == N as f32 * 0.5),
            "B17 {id}: the product"
        );
        g.bench_function(id, |bch| bch.iter(|| run(&mut outs)));
        let st = graphed.stats();
        let want = if batching { COUNT } else { 0 };
        assert_eq!(st.batched, want, "B17 {id}: {st:?}");
        // The last run's parts (the body, the compare and launch, the
        // launch alone), for the note.
        eprintln!(
            "B17/{id}: last run's body {:?}, graph {:?}, launch {:?}",
            st.last_body, st.last_graph, st.last_launch
        );
    }
    g.bench_function("one-stream", |bch| {
        bch.iter(|| {
            for (x, y) in ins.iter().zip(outs.iter_mut()) {
                gemm.run(&t, x, &b, y).unwrap();
            }
            t.synchronize().unwrap();
        })
    });
    let batched = gemm.op_b(Op::N).batched(COUNT, N * N, 0, N * N);
    g.bench_function("batched", |bch| {
        bch.iter(|| {
            batched.run(&t, &batch_a, &b, &mut batch_c).unwrap();
            t.synchronize().unwrap();
        })
    });
    g.finish();
    black_box((&outs, &batch_c));
}
