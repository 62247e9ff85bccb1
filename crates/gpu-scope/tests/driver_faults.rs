//! A failure injected at every driver call (DESIGN "Soundness": a driver failure gives a
//! typed error, never a panic, a hang, a leak or silently lost work).
//!
//! A representative workload (scopes, spawns and joins, `par_chunks_mut`,
//! events, a gate, a task capture and a scope capture replayed, staging
//! uploads and downloads, `par_map` pipelines over pageable and pinned
//! memory, an own kernel with a host implementation, an all-reduce over
//! two simulated devices) runs once on a fresh host-backend runtime to
//! count its `K` driver calls and record the quiet live counts, then once
//! for each sampled `k` and each error the `k`-th call can return
//! (`FaultInjector::kinds`), on a fresh runtime whose `k`-th call fails.
//! Every run must return (no hang: a timeout names `k`) without a panic
//! (caught, naming `k` and the call); if it returns `Ok`, its values are
//! right (no work lost); afterwards, everything dropped, the live counts
//! are those of the counting run. After a driver error or out of memory
//! the runtime works again: the workload runs once more and succeeds,
//! leaking nothing. After a sticky error every later call fails with it.
//!
//! By default (CI) about 25 values of `k` spread over `0..K` by a fixed
//! seed run; `GPU_FAULTS_ALL=1` runs every `k` (`cargo xtask faults`,
//! release), `GPU_FAULTS_K=3,17` the ones listed. The test prints `K`, the
//! runs and the time.

mod common;

use common::TIMEOUT;
use gpu::diag::LiveCounts;
use gpu::iter::PipelineOptions;
use gpu::kernel::{In, LaunchConfig, Out};
use gpu::memory::{DeviceSlice, DeviceSliceMut, Staging};
use gpu::nccl::{Communicator, ReduceOp};
use gpu::{BackendChoice, Buffer, Error, Runtime, RuntimeOptions, TaskContext, ThreadPool};
use gpu_kernels as k;
use gpu_sched::{FaultInjector, FaultKind};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// How long one run may take before it counts as hung.
const HANG: Duration = Duration::from_secs(60);

/// Elements of the workload's buffers.
const N: usize = 1000;

/// How many `k` the default sample has.
const SAMPLE: usize = 25;

/// `y[i] = a * x[i] + y[i]` for `i < n` (as `tests/own_kernels.rs` of
/// gpu-sched); run here by its host implementation.
const SAXPY_PTX: &str = r"
.version 7.0
.target sm_70
.address_size 64

.visible .entry saxpy(
	.param .u64 saxpy_y,
	.param .u64 saxpy_x,
	.param .f32 saxpy_a,
	.param .u64 saxpy_n
)
{
	ret;
}
";

type Saxpy = (Out<f32>, In<f32>, f32, u64);

fn saxpy_host(y: &mut [f32], x: &[f32], a: f32, n: u64) {
    for (y, &x) in y[..n as usize].iter_mut().zip(&x[..n as usize]) {
        *y += a * x;
    }
}

/// The options of every runtime here: two simulated devices, few warm
/// streams and events (each run starts a runtime).
fn options(faults: Arc<FaultInjector>) -> RuntimeOptions {
    RuntimeOptions {
        backend: BackendChoice::Host,
        host_devices: 2,
        warm_streams: 2,
        warm_events: 4,
        fault_injection: Some(faults),
        ..RuntimeOptions::default()
    }
}

/// Wrong values the workload found (empty: all right).
type Wrong = Vec<String>;

fn expect(wrong: &mut Wrong, what: &str, got: &[f32], want: impl Fn(usize) -> f32) {
    if let Some(i) = (0..got.len()).find(|&i| got[i] != want(i)) {
        wrong.push(format!(
            "{what}: element {i} is {}, not {}",
            got[i],
            want(i)
        ));
    }
}

/// The workload, on device 0 of `rt`'s group (and device 1 for the
/// all-reduce). `Ok` with the wrong values it found, or the first error.
fn workload(rt: &Runtime) -> gpu::Result<Wrong> {
    let mut wrong = Wrong::new();
    let t = rt.begin_task()?;
    let ones = vec![1.0f32; N];
    let mut a = t.from_host(&ones)?;
    let mut b = t.zeros::<f32>(N)?;
    let mut c = t.zeros::<f32>(N)?;
    drop(t);

    // A scope: the body writes, children spawn (one nested scope), a join.
    gpu::scope_on(rt, |s| {
        k::scale(s, &mut a, 2.0)?; // a = 2
        let (a, b, c) = (&a, &mut b, &mut c);
        s.spawn(move |t| {
            k::copy(t, a, b)?; // b = 2
            t.scope(|s| {
                let b = &mut *b;
                s.spawn(move |t| k::add_scalar(t, b, 1.0)); // b = 3
                Ok(())
            })
        });
        s.spawn(move |t| {
            let (x, y) = t.join(
                |l| {
                    let mut tmp = l.zeros::<f32>(N)?;
                    k::fill(l, &mut tmp, 4.0)?;
                    k::axpy(l, 1.0, &tmp, c) // c = 4
                },
                |r| {
                    let mut tmp = r.from_host(&[5.0f32; 16])?;
                    k::add_scalar(r, &mut tmp, 1.0)?;
                    r.to_vec(&tmp)
                },
            )?;
            let _: () = x;
            if y != [6.0; 16] {
                return Err(Error::Unsupported("the join's second side computed wrong"));
            }
            Ok(())
        });
        Ok(())
    })?;

    // Chunks, each a task of its own.
    gpu::par_chunks_mut(&mut a, 128).for_each(|t, v| k::add_scalar(t, v, 1.0))?; // a = 3

    // Events and a gate (opened before the wait).
    let e = rt.event()?;
    let g = rt.gate()?;
    g.open();
    {
        let p = rt.begin_task()?;
        k::gate(&p, &g, TIMEOUT)?;
        k::add_scalar(&p, &mut b, 1.0)?; // b = 4
        p.record(&e)?;
        let q = rt.begin_task()?;
        q.wait(&e)?;
        k::axpy(&q, 1.0, &b, &mut c)?; // c = 8
        q.synchronize()?;
    }
    drop((e, g));

    // A task's capture, replayed twice.
    {
        let t = rt.begin_task()?;
        let graph = t.capture(|t| k::add_scalar(t, &mut b, 1.0))?;
        for _ in 0..2 {
            t.launch_graph(&graph).write(&mut b).submit()?; // b = 6
        }
    }

    // A scope's capture, replayed once.
    {
        let graph = gpu::capture_on(rt, |s| {
            let a = &mut a;
            s.spawn(move |t| k::scale(t, a, 2.0)); // a = 6
            Ok(())
        })?;
        let t = rt.begin_task()?;
        t.launch_graph(&graph).write(&mut a).submit()?;
    }

    // Staging: an upload and a download.
    {
        let t = rt.begin_task()?;
        let mut st = Staging::<f32>::new(rt, N)?;
        let up: Vec<f32> = (0..N).map(|i| i as f32).collect();
        let mut d = t.zeros::<f32>(N)?;
        st.upload(&t, &up, &mut d)?;
        k::add_scalar(&t, &mut d, 1.0)?;
        let mut back = vec![0.0f32; N];
        st.download(&t, &d, &mut back)?;
        expect(&mut wrong, "staging", &back, |i| i as f32 + 1.0);
    }

    // Pipelines: pageable and pinned.
    {
        let input: Vec<f32> = (0..N).map(|i| i as f32).collect();
        let mut output = vec![0.0f32; N];
        let opts = PipelineOptions {
            chunk: 300,
            lanes: 2,
        };
        gpu::iter::par_map_on(rt, &input, &mut output, opts, |t, x, y| {
            k::scale_into(t, x, y, 2.0)
        })?;
        expect(&mut wrong, "par_map", &output, |i| 2.0 * i as f32);
        let mut sin = Staging::<f32>::new(rt, N)?;
        sin.as_mut_slice()?.copy_from_slice(&input);
        let mut sout = Staging::<f32>::new(rt, N)?;
        gpu::iter::par_map_pinned(&mut sin, &mut sout, opts, |t, x, y| {
            k::scale_into(t, x, y, 3.0)
        })?;
        expect(&mut wrong, "par_map_pinned", sout.as_slice()?, |i| {
            3.0 * i as f32
        });
    }

    // An own kernel, with its host implementation.
    {
        let kernel = rt
            .load_ptx(SAXPY_PTX)?
            .kernel::<Saxpy>("saxpy")?
            .with_host(saxpy_host);
        let t = rt.begin_task()?;
        saxpy(&t, &kernel, &a, &mut c)?; // c = 8 + 1.5 * 6 = 17
    }

    // An all-reduce over the two devices.
    {
        let comm = Communicator::all_devices(rt)?;
        let mut bufs: Vec<Buffer<f32>> = (0..comm.local_ranks())
            .map(|d| {
                let rt = comm.device(d).expect("a local rank");
                rt.begin_task()?.from_host(&vec![d as f32 + 1.0; N])
            })
            .collect::<gpu::Result<_>>()?;
        comm.all_reduce(&mut bufs.iter_mut().collect::<Vec<_>>(), ReduceOp::Sum)?;
        for (d, x) in bufs.iter().enumerate() {
            expect(
                &mut wrong,
                &format!("all_reduce on {d}"),
                &x.to_vec()?,
                |_| 3.0,
            );
        }
    }

    expect(&mut wrong, "a", &a.to_vec()?, |_| 6.0);
    expect(&mut wrong, "b", &b.to_vec()?, |_| 6.0);
    expect(&mut wrong, "c", &c.to_vec()?, |_| 17.0);
    Ok(wrong)
}

/// `y = 1.5 * x + y` by the own kernel.
fn saxpy(
    t: &TaskContext,
    kernel: &gpu::kernel::Kernel<Saxpy>,
    x: &(impl DeviceSlice<f32> + ?Sized),
    y: &mut (impl DeviceSliceMut<f32> + ?Sized),
) -> gpu::Result<()> {
    let n = y.len() as u64;
    assert_eq!(x.len(), y.len());
    // SAFETY: the host implementation touches `y[i]` and `x[i]` for
    // `i < n` only, `n` the length of both; `x` is only read.
    unsafe { kernel.launch(t, LaunchConfig::for_elements(N, 128), (y, x, 1.5f32, n)) }
}

/// One device's resources in use and memory, named.
type Counts = [(&'static str, usize); 5];

/// What must come back: resources in use and memory, on both devices, at a
/// quiet moment (synchronized, pinned cache released).
fn quiet(rts: &[Runtime]) -> Result<Vec<Counts>, Error> {
    rts.iter()
        .map(|rt| {
            rt.synchronize()?;
            rt.release_cached_memory();
            let c: LiveCounts = rt.live();
            Ok([
                ("streams in use", c.streams_in_use),
                ("events in use", c.events_in_use),
                ("allocations", c.allocations),
                ("device bytes", c.device_bytes),
                ("pinned bytes", c.pinned_bytes),
            ])
        })
        .collect()
}

/// A runtime's two devices (device 1's runtime kept alive, so that its
/// counts stay readable).
fn start(faults: Arc<FaultInjector>) -> gpu::Result<[Runtime; 2]> {
    let rt = Runtime::new(options(faults))?;
    let rt1 = rt.device(1)?;
    Ok([rt, rt1])
}

/// Runs the workload on `pool` with a check that it returned right.
fn run_workload(pool: &ThreadPool, rt: &Runtime) -> gpu::Result<Wrong> {
    pool.install(|| workload(rt))
}

/// The counting run: the calls' names and the quiet counts.
fn count(pool: &ThreadPool) -> (Vec<&'static str>, Vec<Counts>) {
    let faults = FaultInjector::new();
    let rts = start(faults.clone()).expect("the runtime starts");
    let wrong = run_workload(pool, &rts[0]).expect("the workload runs without faults");
    assert!(wrong.is_empty(), "{wrong:?}");
    let names = faults.names();
    let warm = quiet(&rts).expect("quiet");
    // The same once more: the counts are stable (a second run leaks
    // nothing either).
    let wrong = run_workload(pool, &rts[0]).expect("a second run");
    assert!(wrong.is_empty(), "{wrong:?}");
    assert_eq!(
        quiet(&rts).expect("quiet"),
        warm,
        "a run without faults leaks"
    );
    assert!(rts[0].races().is_empty(), "{:?}", rts[0].races());
    (names, warm)
}

/// One run with call `k` failing with `kind`: `Err` says what went wrong.
fn one(pool: &Arc<ThreadPool>, k: u64, kind: FaultKind, warm: &[Counts]) -> Result<(), String> {
    if std::env::var_os("GPU_FAULTS_VERBOSE").is_some() {
        eprintln!("driver faults: call {k} failing with {kind:?}");
    }
    let faults = FaultInjector::failing(k, kind);
    let (tx, rx) = mpsc::channel();
    let (pool, warm, f) = (pool.clone(), warm.to_vec(), faults.clone());
    std::thread::spawn(move || {
        let r = catch_unwind(AssertUnwindSafe(|| check(&pool, &f, &warm)));
        let _ = tx.send(r);
    });
    let at = || match faults.fired() {
        Some((n, name, kind)) => format!("call {n} ({name}) failing with {kind:?}"),
        None => format!("call {k} ({kind:?}, never reached)"),
    };
    match rx.recv_timeout(HANG) {
        Ok(Ok(r)) => r.map_err(|e| format!("{}: {e}", at())),
        Ok(Err(p)) => {
            let msg = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            Err(format!("{}: panicked: {msg}", at()))
        }
        Err(_) => Err(format!("{}: hung for {HANG:?}", at())),
    }
}

/// The body of [`one`], on its own thread.
fn check(pool: &ThreadPool, faults: &Arc<FaultInjector>, warm: &[Counts]) -> Result<(), String> {
    let rts = match start(faults.clone()) {
        Ok(rts) => rts,
        // Failed to start: a typed error is all there is to check.
        Err(_) => return Ok(()),
    };
    let r = run_workload(pool, &rts[0]);
    // Only the workload's calls fail (the counting run counted those).
    faults.disarm();
    if let Ok(wrong) = &r {
        if !wrong.is_empty() {
            return Err(format!(
                "returned Ok with wrong values (lost work): {wrong:?}"
            ));
        }
    }
    let races = rts[0].races();
    if !races.is_empty() {
        return Err(format!("races: {races:?}"));
    }
    let fired = faults.fired();
    if fired.is_none() && r.is_err() {
        return Err(format!("failed with no fault injected: {r:?}"));
    }
    if fired.is_some_and(|(_, _, kind)| kind == FaultKind::Sticky) {
        // Broken for good: every later call fails with the sticky error,
        // and dropping everything returns.
        let e = rts[0].synchronize().err();
        if !e.as_ref().is_some_and(Error::is_sticky) {
            return Err(format!("after a sticky error, synchronize gave {e:?}"));
        }
        let e = gpu::scope_on(&rts[0], |s| s.zeros::<f32>(4).map(drop)).err();
        if !e.as_ref().is_some_and(Error::is_sticky) {
            return Err(format!("after a sticky error, a scope gave {e:?}"));
        }
        return Ok(());
    }
    let after = quiet(&rts).map_err(|e| format!("synchronize after the run: {e}"))?;
    if after != warm {
        return Err(format!(
            "leaked (workload gave {r:?}): {warm:?} -> {after:?}"
        ));
    }
    // The runtime works again.
    match run_workload(pool, &rts[0]) {
        Ok(wrong) if wrong.is_empty() => {}
        other => return Err(format!("the run after the fault gave {other:?}")),
    }
    let again = quiet(&rts).map_err(|e| format!("synchronize after the rerun: {e}"))?;
    if again != warm {
        return Err(format!("the rerun leaked: {warm:?} -> {again:?}"));
    }
    Ok(())
}

/// The `k` to run: all, the listed ones, or a sample of [`SAMPLE`] spread
/// over `0..calls` (one in each of `SAMPLE` equal parts, placed by a fixed
/// seed).
fn sample(calls: u64) -> Vec<u64> {
    if std::env::var("GPU_FAULTS_ALL").is_ok_and(|v| v == "1") {
        return (0..calls).collect();
    }
    if let Ok(list) = std::env::var("GPU_FAULTS_K") {
        return list
            .split(',')
            .map(|s| s.trim().parse().expect("GPU_FAULTS_K: numbers"))
            .collect();
    }
    let parts = SAMPLE as u64;
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut ks: Vec<u64> = (0..parts)
        .map(|i| {
            // xorshift64
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let (lo, hi) = (i * calls / parts, (i + 1) * calls / parts);
            lo + x % (hi - lo).max(1)
        })
        .collect();
    ks.dedup();
    ks
}

#[test]
fn a_failure_at_any_driver_call_is_a_typed_error_and_leaks_nothing() {
    let started = Instant::now();
    let pool = Arc::new(
        gpu::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .expect("a pool"),
    );
    let (names, warm) = count(&pool);
    let calls = names.len() as u64;
    if std::env::var_os("GPU_FAULTS_VERBOSE").is_some() {
        for (i, n) in names.iter().enumerate() {
            eprintln!("driver faults: call {i} is {n}");
        }
    }
    let ks = sample(calls);
    let mut failures = Vec::new();
    let mut runs = 0;
    for &k in &ks {
        let name = names.get(k as usize).copied().unwrap_or("none");
        for &kind in FaultInjector::kinds(name) {
            runs += 1;
            if let Err(e) = one(&pool, k, kind, &warm) {
                failures.push(e);
            }
        }
    }
    eprintln!(
        "driver faults: K = {calls} driver calls, {} k run ({runs} runs), {:.1} s",
        ks.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(
        failures.is_empty(),
        "{} of {runs} runs failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// A buffer dropped while its task's work may run: the free waits on the
/// device for the task's stream (an event recorded there, waited for on
/// the reclaim stream). That wait failing on a live context, the drop
/// still does not block (X4): the free is deferred, and done at the next
/// synchronize (it was kept for good, as on a broken context: one
/// allocation leaked for each).
#[test]
fn a_free_whose_device_wait_fails_is_deferred_not_leaked() {
    for call in ["record", "wait_event", "create_event"] {
        let faults = FaultInjector::new();
        let rt = Runtime::new(RuntimeOptions {
            warm_events: 0,
            ..options(faults.clone())
        })
        .unwrap();
        let t = rt.begin_task().unwrap();
        let g = rt.gate().unwrap();
        let mut b = t.zeros::<f32>(N).unwrap();
        // Behind a gate: the free must wait for the stream on the device.
        k::gate(&t, &g, TIMEOUT).unwrap();
        k::add_scalar(&t, &mut b, 1.0).unwrap();
        faults.fail_next(call, FaultKind::Driver);
        drop(b);
        assert!(faults.fired().is_some(), "{call}: no fault");
        assert_eq!(
            rt.live().allocations,
            1,
            "{call}: freed before its work ran"
        );
        assert!(!g.timed_out(), "{call}: the drop waited for the gate");
        g.open();
        drop((t, g));
        rt.synchronize().unwrap();
        assert_eq!(rt.live().allocations, 0, "{call}: the buffer leaked");
        assert_eq!(rt.live().device_bytes, 0, "{call}");
        assert!(rt.races().is_empty(), "{call}: {:?}", rt.races());
    }
}

/// A gate whose fence after a blocked operation cannot be recorded: its
/// flags are freed once the device synchronized (they were kept for good).
#[test]
fn a_gate_whose_fence_fails_frees_its_flags_once_the_device_is_idle() {
    let faults = FaultInjector::new();
    let rt = Runtime::new(options(faults.clone())).unwrap();
    rt.release_cached_memory();
    let pinned = rt.live().pinned_bytes;
    let g = rt.gate().unwrap();
    let t = rt.begin_task().unwrap();
    faults.fail_next("record", FaultKind::Driver);
    let e = k::gate(&t, &g, TIMEOUT).unwrap_err();
    assert!(matches!(e, Error::Driver { .. }), "{e:?}");
    drop(t);
    drop(g); // opens it: the blocked operation passes
    rt.synchronize().unwrap();
    assert_eq!(rt.live().pinned_bytes, pinned, "the gate's flags leaked");
    assert!(rt.races().is_empty(), "{:?}", rt.races());
}

/// A graphed scope whose in-place update fails (review of issue 26's
/// graphed scopes): the run fails with the driver's error and launches
/// nothing, the cache is dropped (a failure after some nodes were set
/// would leave them with the failed run's arguments), and the next run
/// with the first run's buffers again builds anew and gets their values.
#[test]
fn a_graphed_scope_whose_update_fails_is_built_anew() {
    let n = 256;
    // Runs `g` over buffer set `set` (of four: two sets of two), filling
    // each of its two buffers with `v`.
    fn run(g: &mut gpu::Graphed, bufs: &mut [Buffer<f32>], set: usize, v: f32) -> gpu::Result<()> {
        let (a, b) = bufs[2 * set..2 * set + 2].split_at_mut(1);
        g.scope(|s| {
            k::fill(s, &mut a[0], v)?;
            k::fill(s, &mut b[0], v)
        })
    }
    let faults = FaultInjector::new();
    let rt = Runtime::new(options(faults.clone())).unwrap();
    let t = rt.begin_task().unwrap();
    let mut bufs: Vec<Buffer<f32>> = (0..4).map(|_| t.zeros::<f32>(n).unwrap()).collect();
    t.synchronize().unwrap();
    drop(t);
    let mut g = gpu::Graphed::on(&rt);
    run(&mut g, &mut bufs, 0, 1.0).unwrap();
    faults.fail_next("graph_set_kernel", FaultKind::Driver);
    let e = run(&mut g, &mut bufs, 1, 2.0).unwrap_err();
    assert!(matches!(e, Error::Driver { .. }), "{e:?}");
    assert_eq!(
        faults.fired().map(|f| f.1),
        Some("graph_set_kernel"),
        "the fault hit the update"
    );
    for b in &bufs[2..] {
        assert!(
            b.to_vec().unwrap().iter().all(|&x| x == 0.0),
            "the failed run ran"
        );
    }
    // The first run exactly again, on its buffers zeroed: both get its
    // value (a node left with the failed run's arguments would fill the
    // other set's buffer instead).
    let t = rt.begin_task().unwrap();
    for b in &mut bufs[..2] {
        t.memset_zero(b).unwrap();
    }
    t.synchronize().unwrap();
    drop(t);
    run(&mut g, &mut bufs, 0, 1.0).unwrap();
    for (i, b) in bufs[..2].iter().enumerate() {
        assert!(
            b.to_vec().unwrap().iter().all(|&x| x == 1.0),
            "buffer {i} of the first set"
        );
    }
    assert_eq!(g.stats().builds, 2, "built anew after the failed update");
    assert!(rt.races().is_empty(), "{:?}", rt.races());
}
