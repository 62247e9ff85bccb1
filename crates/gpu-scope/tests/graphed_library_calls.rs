//! Library calls and users' foreign operations in a graphed scope (issue
//! 38 item 1, DESIGN "Graphs without capture by hand"): a foreign
//! operation declared capture-safe (cuBLAS's and cuRAND's calls, a user's
//! own) is captured at each run on a side stream into a child graph, which
//! the scope's graph runs as one node, set in place at the next run. On
//! `common::runtime()`: the host backend in CI (the queued host twin is
//! the child's one operation), the GPU where `GPU_BACKEND=cuda`.

mod common;

use common::{assert_no_races, runtime, zeroed};
use gpu::{BackendKind, Buffer, Error, Graphed};
use gpu_kernels as k;

fn all(b: &Buffer<f32>, want: f32) -> bool {
    b.to_vec().unwrap().iter().all(|&v| v == want)
}

/// cuBLAS calls among kernels, in sibling tasks: each run's scalars (read
/// by the library at the call) are this run's, the graph is built once and
/// replayed, its child nodes set in place.
#[test]
fn blas_calls_are_nodes_with_this_runs_scalars() {
    let rt = runtime();
    let n = 4096;
    let [mut x, mut y, mut z] = zeroed::<3>(&rt, n);
    let mut g = Graphed::on(&rt);
    let mut want_y = 0.0f32;
    for round in 1..=5 {
        let alpha = round as f32;
        g.scope(|s| {
            k::fill(s, &mut x, 1.0)?;
            let x = &x;
            let (y, z) = (&mut y, &mut z);
            s.spawn(move |t| gpu::blas::axpy(t, alpha, x, y)); // y += alpha
            s.spawn(move |t| {
                k::fill(t, z, 2.0)?;
                gpu::blas::scal(t, alpha, z) // z = 2 alpha
            });
            Ok(())
        })
        .unwrap();
        want_y += alpha;
        assert!(all(&y, want_y), "round {round}: y");
        assert!(all(&z, 2.0 * alpha), "round {round}: z");
    }
    let st = g.stats();
    assert_eq!((st.builds, st.replays), (1, 4), "{st:?}");
    // fill, axpy, fill, scal.
    assert_eq!(st.nodes, 4, "{st:?}");
    assert!(
        st.nodes_updated >= 8,
        "the two calls set each replay: {st:?}"
    );
    assert_no_races(&rt);
}

/// A gemm in a graphed scope gives what the same gemm gives outside one.
#[test]
fn a_graphed_gemm_matches_a_plain_one() {
    let rt = runtime();
    let (m, n, kk) = (64, 48, 32);
    let a: Vec<f32> = (0..m * kk).map(|i| (i % 7) as f32 - 3.0).collect();
    let b: Vec<f32> = (0..kk * n).map(|i| (i % 5) as f32 * 0.5).collect();
    let t = rt.begin_task().unwrap();
    let (da, db) = (t.from_host(&a).unwrap(), t.from_host(&b).unwrap());
    let mut plain = t.zeros::<f32>(m * n).unwrap();
    let mut graphed = t.zeros::<f32>(m * n).unwrap();
    let gemm = gpu::blas::Gemm::<f32>::new(m, n, kk);
    gemm.run(&t, &da, &db, &mut plain).unwrap();
    let want = t.to_vec(&plain).unwrap();
    drop(t);
    let mut g = Graphed::on(&rt);
    for _ in 0..3 {
        g.scope(|s| {
            k::fill(s, &mut graphed, 0.0)?;
            gemm.run(s, &da, &db, &mut graphed)
        })
        .unwrap();
        assert_eq!(graphed.to_vec().unwrap(), want);
    }
    assert_eq!(g.stats().builds, 1, "{:?}", g.stats());
    assert_no_races(&rt);
}

/// cuRAND's fills draw each run's values at that run's offset: a graphed
/// run fills what a plain fill of the same seed and offset fills, and
/// another run other values.
#[test]
fn random_fills_draw_at_each_runs_offset() {
    let rt = runtime();
    let n = 1000;
    let mut rng = gpu::rand::Rng::new(7);
    let [mut x, mut want] = zeroed::<2>(&rt, n);
    let mut g = Graphed::on(&rt);
    let mut seen = Vec::new();
    for _ in 0..3 {
        let at = rng;
        g.scope(|s| rng.uniform(s, &mut x)).unwrap();
        let t = rt.begin_task().unwrap();
        let mut plain = at;
        plain.uniform(&t, &mut want).unwrap();
        let (got, want) = (t.to_vec(&x).unwrap(), t.to_vec(&want).unwrap());
        assert_eq!(got, want, "the values of a plain fill at the same offset");
        assert!(!seen.contains(&got), "a later run drew other values");
        seen.push(got);
    }
    assert_eq!(rng.offset(), 3 * n as u64);
    assert_no_races(&rt);
}

/// A user's foreign operation declared capture-safe (a copy queued by
/// hand on CUDA, its twin on the host backend) is a node like a library
/// call; one not declared capture-safe, or whose twin is waited for, is
/// refused with its name before anything runs.
#[test]
fn users_foreign_operations_follow_their_declaration() {
    let rt = runtime();
    let n = 512;
    let [mut src, mut dst] = zeroed::<2>(&rt, n);
    let copy = |s: &gpu::TaskContext, src: &Buffer<f32>, dst: &mut Buffer<f32>, safe: bool| {
        let mut op =
            s.foreign("my_copy", (src,), (dst,))
                .host(|(a,): (&[f32],), (b,): (&mut [f32],)| {
                    b.copy_from_slice(a);
                    Ok(())
                });
        if safe {
            op = op.capture_safe();
        }
        // SAFETY: the device closure queues one copy of `n` floats, from
        // the declared read to the declared write, on the stream it is
        // given, and returns once queued (capture-safe: a stream-ordered
        // copy within the device).
        unsafe {
            op.run(|fs, (a,), (b,)| {
                gpu::foreign::cudarc::driver::result::memcpy_dtod_async(
                    b.raw(),
                    a.raw(),
                    n * 4,
                    fs.raw() as usize as gpu::foreign::cudarc::driver::sys::CUstream,
                )
                .map_err(|e| Error::external("cuMemcpyDtoDAsync", e))
            })
        }
    };
    let mut g = Graphed::on(&rt);
    for round in 1..=3 {
        g.scope(|s| {
            k::fill(s, &mut src, round as f32)?;
            copy(s, &src, &mut dst, true)
        })
        .unwrap();
        assert!(all(&dst, round as f32), "round {round}");
    }
    assert_eq!(g.stats().builds, 1, "{:?}", g.stats());
    let r = g.scope(|s| {
        k::fill(s, &mut src, 9.0)?;
        copy(s, &src, &mut dst, false)
    });
    let e = r.unwrap_err();
    assert!(matches!(e.root(), Error::Capturing { .. }), "{e:?}");
    assert!(e.to_string().contains("my_copy"), "names the call: {e}");
    assert!(all(&src, 3.0) && all(&dst, 3.0), "nothing of the run ran");
    if rt.backend() == BackendKind::Host {
        let r = g.scope(|s| {
            let op = s
                .foreign("my_waited", (&src,), (&mut dst,))
                .host_sync(|(a,): (&[f32],), (b,): (&mut [f32],)| {
                    b.copy_from_slice(a);
                    Ok(())
                })
                .capture_safe();
            // SAFETY: the device closure queues nothing.
            unsafe { op.run(|_, _, _| Ok(())) }
        });
        let e = r.unwrap_err();
        assert!(matches!(e.root(), Error::Capturing { .. }), "{e:?}");
        assert!(e.to_string().contains("my_waited"), "{e}");
    }
    assert_no_races(&rt);
}
