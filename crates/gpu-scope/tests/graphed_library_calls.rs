//! Library calls, users' foreign operations and allocations in a graphed
//! scope (issue 38 items 1 and 2, DESIGN "Graphs without capture by
//! hand"): a foreign operation declared capture-safe (cuBLAS's, cuRAND's,
//! cuFFT's and cuSPARSE's calls, a user's own) is captured at each run on
//! a side stream into a child graph, which the scope's graph runs as one
//! node, set in place at the next run; an allocation in the body takes the
//! memory the same allocation had in the last run, once its buffer was
//! dropped (a library's workspace included). On `common::runtime()`: the
//! host backend in CI (the queued host twin is the child's one
//! operation), the GPU where `GPU_BACKEND=cuda`.

mod common;

use common::{assert_no_races, runtime, zeroed};
use gpu::memory::DeviceSlice;
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

/// What is not capture-safe is refused in a graphed scope, naming the
/// call, before anything of the run is queued: cuRAND's fills (cuRAND's
/// generation captured failed on an H100); the generator's offset does
/// not move.
#[test]
fn random_fills_are_refused() {
    let rt = runtime();
    let n = 1000;
    let mut rng = gpu::rand::Rng::new(7);
    let [mut x, mut y] = zeroed::<2>(&rt, n);
    let mut g = Graphed::on(&rt);
    let refused = |r: gpu::Result<()>, call: &str| {
        let e = r.unwrap_err();
        assert!(matches!(e.root(), Error::Capturing { .. }), "{e:?}");
        assert!(e.to_string().contains(call), "names {call}: {e}");
    };
    refused(
        g.scope(|s| {
            k::fill(s, &mut y, 1.0)?;
            rng.uniform(s, &mut x)
        }),
        "curandGenerateUniform",
    );
    refused(
        g.scope(|s| rng.normal(s, 0.0, 1.0, &mut x)),
        "curandGenerateNormal",
    );
    assert_eq!(rng.offset(), 0, "the offset did not move");
    assert!(all(&x, 0.0) && all(&y, 0.0), "nothing of the runs ran");
    assert_eq!(g.stats().builds, 0, "{:?}", g.stats());
    assert_no_races(&rt);
}

/// cuBLAS's reductions in a graphed scope, each with a workspace of its
/// own (a temporary of the scope): each run's values, the graph built
/// once; in a stream capture, where nothing may allocate, refused by name
/// with nothing queued.
#[test]
fn blas_reductions_take_a_workspace_of_their_own() {
    let rt = runtime();
    let n = 1000;
    let [mut x, mut y] = zeroed::<2>(&rt, n);
    let [mut d, mut r] = zeroed::<2>(&rt, 1);
    let mut g = Graphed::on(&rt);
    for round in 1..=3 {
        let v = round as f32;
        g.scope(|s| {
            k::fill(s, &mut x, v)?;
            k::fill(s, &mut y, 2.0)?;
            let (x, y) = (&x, &y);
            let (d, r) = (&mut d, &mut r);
            s.spawn(move |t| gpu::blas::dot(t, x, y, d));
            s.spawn(move |t| gpu::blas::nrm2(t, x, r));
            Ok(())
        })
        .unwrap();
        let want_d = 2.0 * v * n as f32;
        let want_r = v * (n as f32).sqrt();
        let (got_d, got_r) = (d.to_vec().unwrap()[0], r.to_vec().unwrap()[0]);
        assert!(
            (got_d - want_d).abs() <= 1e-4 * want_d,
            "round {round}: dot {got_d}"
        );
        assert!(
            (got_r - want_r).abs() <= 1e-4 * want_r,
            "round {round}: nrm2 {got_r}"
        );
    }
    let st = g.stats();
    assert_eq!((st.builds, st.replays), (1, 2), "{st:?}");
    let e = gpu::capture_on(&rt, |s| gpu::blas::dot(s, &x, &y, &mut d)).unwrap_err();
    assert!(matches!(e.root(), Error::Capturing { .. }), "{e:?}");
    assert!(e.to_string().contains("dot"), "names the call: {e}");
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

/// A temporary allocated and dropped in the body gets the same memory at
/// every run: the replays set only the fill's changed scalar in place, and
/// the memory is freed with the graphed scope.
#[test]
fn a_temporary_of_the_body_reuses_its_memory() {
    let rt = runtime();
    let n = 1 << 14;
    let [mut acc] = zeroed::<1>(&rt, n);
    let before = rt.live().allocations;
    let mut g = Graphed::on(&rt);
    for round in 1..=4 {
        g.scope(|s| {
            let mut tmp = s.zeros::<f32>(n)?;
            k::fill(s, &mut tmp, round as f32)?;
            k::axpy(s, 1.0, &tmp, &mut acc)
        })
        .unwrap();
        assert!(all(&acc, (1..=round).sum::<i32>() as f32), "round {round}");
    }
    let st = g.stats();
    assert_eq!((st.builds, st.replays), (1, 3), "{st:?}");
    // Only the fill's value changed from run to run, not a pointer.
    assert_eq!(st.nodes_updated, 3, "{st:?}");
    rt.synchronize().unwrap();
    assert_eq!(rt.live().allocations, before + 1, "one block, kept");
    drop(g);
    rt.synchronize().unwrap();
    assert_eq!(rt.live().allocations, before, "freed with the scope");
    assert_no_races(&rt);
}

/// A buffer allocated in the body and kept past its run is the caller's:
/// later runs allocate anew and never touch it; once dropped, its memory
/// serves a later run.
#[test]
fn a_buffer_kept_past_its_run_is_the_callers() {
    let rt = runtime();
    let n = 4096;
    let mut g = Graphed::on(&rt);
    let mut kept: Vec<Buffer<f32>> = Vec::new();
    for round in 1..=3 {
        g.scope(|s| {
            let mut b = s.alloc::<f32>(n)?;
            k::fill(s, &mut b, round as f32)?;
            kept.push(b);
            Ok(())
        })
        .unwrap();
    }
    for (i, b) in kept.iter().enumerate() {
        assert!(all(b, i as f32 + 1.0), "buffer of run {}", i + 1);
    }
    let ptrs: Vec<u64> = kept.iter().map(|b| b.device_ptr()).collect();
    assert!(ptrs[0] != ptrs[1] && ptrs[1] != ptrs[2], "{ptrs:x?}");
    kept.remove(0); // its memory goes back to the scope
    g.scope(|s| {
        let mut b = s.alloc::<f32>(n)?;
        k::fill(s, &mut b, 9.0)?;
        kept.push(b);
        Ok(())
    })
    .unwrap();
    assert_eq!(kept[2].device_ptr(), ptrs[0], "the dropped block, reused");
    assert!(all(&kept[2], 9.0));
    assert!(all(&kept[0], 2.0) && all(&kept[1], 3.0), "untouched");
    assert_no_races(&rt);
}

/// Library calls whose workspace is allocated per call (cuFFT's, cuSPARSE's
/// products) run in a graphed scope and give what they give outside one.
#[test]
fn calls_with_a_workspace_match_plain_ones() {
    use gpu::fft::{Complex32, Plan};
    let rt = runtime();
    let t = rt.begin_task().unwrap();
    let x: Vec<Complex32> = (0..64)
        .map(|i| Complex32::new((i % 5) as f32, (i % 3) as f32 - 1.0))
        .collect();
    let dx = t.from_host(&x).unwrap();
    let plan = Plan::new(&[8, 8]);
    let mut want_f = t.zeros::<Complex32>(64).unwrap();
    plan.forward(&t, &dx, &mut want_f).unwrap();
    // A 3 x 4 sparse matrix.
    let (rp, ci, v) = (
        vec![0i32, 2, 3, 5],
        vec![0i32, 3, 1, 0, 2],
        vec![1.0f32, 2.0, 3.0, 4.0, 5.0],
    );
    let a = gpu::sparse::Csr::from_host(&t, 3, 4, &rp, &ci, &v).unwrap();
    let xs = t.from_host(&[1.0f32, 2.0, 3.0, 4.0]).unwrap();
    let mut want_s = t.zeros::<f32>(3).unwrap();
    gpu::sparse::spmv(&t, 1.0, &a, &xs, 0.0, &mut want_s).unwrap();
    let (want_f, want_s) = (t.to_vec(&want_f).unwrap(), t.to_vec(&want_s).unwrap());
    let mut f = t.zeros::<Complex32>(64).unwrap();
    let mut y = t.zeros::<f32>(3).unwrap();
    t.synchronize().unwrap();
    drop(t);
    let mut g = Graphed::on(&rt);
    for _ in 0..3 {
        g.scope(|s| {
            let (f, y) = (&mut f, &mut y);
            let (dx, a, xs) = (&dx, &a, &xs);
            s.spawn(move |t| plan.forward(t, dx, f));
            s.spawn(move |t| gpu::sparse::spmv(t, 1.0, a, xs, 0.0, y));
            Ok(())
        })
        .unwrap();
        assert_eq!(f.to_vec().unwrap(), want_f, "fft");
        assert_eq!(y.to_vec().unwrap(), want_s, "spmv");
    }
    assert_eq!(g.stats().builds, 1, "{:?}", g.stats());
    assert_no_races(&rt);
}

/// cuBLAS calls whose buffers and scalars are those of the last run reuse
/// its captures (`Foreign::reuse_capture`): on CUDA their replays set no
/// node in place; a changed host factor is captured anew and used.
#[test]
fn unchanged_blas_calls_reuse_their_capture() {
    let rt = runtime();
    let n = 256;
    let [mut x, mut y] = zeroed::<2>(&rt, n);
    let [mut d] = zeroed::<1>(&rt, 1);
    let mut g = Graphed::on(&rt);
    let mut run = |g: &mut Graphed, alpha: f32| {
        g.scope(|s| {
            k::fill(s, &mut x, 1.0)?;
            k::fill(s, &mut y, 0.0)?;
            gpu::blas::axpy(s, alpha, &x, &mut y)?; // y = alpha
            gpu_kernels::reduce::dot_into(s, &x, &y, &mut d)?; // d = n alpha
            gpu::blas::scal_dev(s, &d, &mut y) // y = n alpha^2
        })
        .unwrap();
        let want = n as f32 * alpha;
        assert!(all(&d, want) && all(&y, want * alpha), "alpha {alpha}");
        g.stats().nodes_updated
    };
    let first = run(&mut g, 2.0);
    for _ in 0..3 {
        let updated = run(&mut g, 2.0);
        if rt.backend() == BackendKind::Cuda {
            assert_eq!(updated, first, "a replay set nodes: {:?}", g.stats());
        }
    }
    let updated = run(&mut g, 3.0);
    if rt.backend() == BackendKind::Cuda {
        assert!(updated > first, "axpy captured anew: {:?}", g.stats());
    }
    assert_eq!(g.stats().builds, 1, "{:?}", g.stats());
    assert_no_races(&rt);
}

/// A device closure that fails or panics while it is captured (on CUDA)
/// fails its run, whose work never runs, and leaves the graphed scope and
/// its side stream usable: the next run captures again. (The host backend
/// records the twin, never calling the device closure: the runs succeed.)
#[test]
fn a_device_closure_that_fails_while_captured_fails_its_run_only() {
    let rt = runtime();
    let n = 64;
    let [mut a] = zeroed::<1>(&rt, n);
    let cuda = rt.backend() == BackendKind::Cuda;
    let mut g = Graphed::on(&rt);
    // 0: fails, 1: panics, 2: works.
    for how in 0..3 {
        let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            g.scope(|s| {
                k::fill(s, &mut a, how as f32 + 1.0)?;
                let op = s
                    .foreign("flaky", (), (&mut a,))
                    .host(move |(), (y,): (&mut [f32],)| {
                        y.iter_mut().for_each(|v| *v += 10.0);
                        Ok(())
                    })
                    .capture_safe();
                // SAFETY: the device closure queues nothing.
                unsafe {
                    op.run(|_, (), (_,)| match how {
                        0 => Err(Error::Unsupported("failed on purpose")),
                        1 => panic!("panicked on purpose"),
                        _ => Ok(()),
                    })
                }
            })
        }));
        match (cuda, how) {
            (true, 0) => {
                let e = run.expect("no panic").unwrap_err();
                assert!(matches!(e.root(), Error::Unsupported(_)), "{e:?}");
                assert!(all(&a, 0.0), "nothing of the failed run ran");
            }
            (true, 1) => {
                assert!(run.is_err(), "the panic reached the caller");
                assert!(all(&a, 0.0), "nothing of the panicked run ran");
            }
            (true, _) => {
                run.expect("no panic").unwrap();
                assert!(all(&a, 3.0));
            }
            (false, _) => {
                run.expect("no panic").unwrap();
                assert!(all(&a, how as f32 + 11.0), "the twin ran after the fill");
            }
        }
    }
    assert_no_races(&rt);
}

/// An allocation whose size changes from run to run gets a new block (the
/// old one freed, ordered after its uses): the memory the scope keeps
/// stays one block per allocation, and the values follow each run's size.
#[test]
fn an_allocation_of_another_size_gets_a_new_block() {
    let rt = runtime();
    let [mut out] = zeroed::<1>(&rt, 1024);
    let before = rt.live().allocations;
    let mut g = Graphed::on(&rt);
    for (round, n) in [256usize, 512, 512, 128, 1024].into_iter().enumerate() {
        g.scope(|s| {
            let mut tmp = s.zeros::<f32>(n)?;
            k::fill(s, &mut tmp, round as f32)?;
            let mut head = out.slice_mut(..n)?;
            s.copy(&tmp, &mut head)
        })
        .unwrap();
        let v = out.to_vec().unwrap();
        assert!(v[..n].iter().all(|&x| x == round as f32), "round {round}");
        rt.synchronize().unwrap();
        assert_eq!(
            rt.live().allocations,
            before + 1,
            "round {round}: one block kept"
        );
    }
    let st = g.stats();
    // The size changed at runs 1, 3 and 4: another shape each time.
    assert_eq!((st.builds, st.replays), (4, 1), "{st:?}");
    drop(g);
    rt.synchronize().unwrap();
    assert_eq!(rt.live().allocations, before);
    assert_no_races(&rt);
}
