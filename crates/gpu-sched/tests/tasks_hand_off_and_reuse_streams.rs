//! Two tasks hand a buffer off without races, a signature that disagrees
//! with its PTX is a typed error, `has_submitted` sees every kind of
//! submission, and an idle stream is reused first (with or without end
//! flags): the runtime's basics, on the host backend, with a module of its
//! own.

use gpu_sched::raw::RawTask;
use gpu_sched::{Builtin, BuiltinEntry, BuiltinModule, LaunchConfig, Out, Runtime};

// Host-only kernels; the PTX is checked on every backend.
const PTX: &str = ".version 7.0\n.target sm_70\n.address_size 64\n.visible .entry add_one(.param .u64 x, .param .u64 n)\n{\n\tret;\n}\n";

static TEST: BuiltinModule = BuiltinModule::new(
    "test",
    PTX,
    &[BuiltinEntry::of::<(Out<f32>, u64)>("add_one")],
);

/// `add_one(float* x, u64 n)`: `x[i] += 1`.
static ADD_ONE: Builtin<(Out<f32>, u64)> =
    Builtin::<(Out<f32>, u64)>::new(&TEST, "add_one", |x, n| {
        x[..n as usize].iter_mut().for_each(|v| *v += 1.0)
    });

/// A module whose list gives `add_one` one parameter, where its PTX entry
/// has two.
static WRONG: BuiltinModule =
    BuiltinModule::new("wrong", PTX, &[BuiltinEntry::of::<(Out<f32>,)>("add_one")]);

/// `add_one` declared with too few parameters.
static ADD_ONE_SHORT: Builtin<(Out<f32>,)> =
    Builtin::<(Out<f32>,)>::new(&WRONG, "add_one", |_x| {});

#[test]
fn two_tasks_hand_off_without_races() {
    let rt = Runtime::host().unwrap();
    let a_ctx = rt.begin_task().unwrap();
    let mut a = a_ctx.from_host(&[1.0f32; 1000]).unwrap();
    // SAFETY: the test kernel writes x[..n], n the buffer's length, or the
    // launch is refused before anything is submitted.
    unsafe {
        ADD_ONE.launch(
            &a_ctx,
            LaunchConfig::for_elements(1000, 256),
            (&mut a, 1000u64),
        )
    }
    .unwrap();
    let b_ctx = rt.begin_task().unwrap();
    let before = rt.counters();
    // SAFETY: the test kernel writes x[..n], n the buffer's length, or the
    // launch is refused before anything is submitted.
    unsafe {
        ADD_ONE.launch(
            &b_ctx,
            LaunchConfig::for_elements(1000, 256),
            (&mut a, 1000u64),
        )
    }
    .unwrap();
    assert_eq!(rt.counters().since(&before).device_waits, 1);
    let v = b_ctx.to_vec(&a).unwrap();
    assert!(v.iter().all(|x| *x == 3.0), "{:?}", &v[..4]);
    assert!(rt.races().is_empty(), "{:?}", rt.races());
    drop(a);
    drop(a_ctx);
    drop(b_ctx);
}

/// A launch's argument count is the signature's (the compiler checks it);
/// a signature that disagrees with the PTX entry is refused when the
/// module loads, at the first launch, before anything is submitted.
#[test]
fn wrong_argument_count_is_a_typed_error() {
    let rt = Runtime::host().unwrap();
    let t = rt.begin_task().unwrap();
    let mut a = t.zeros::<f32>(10).unwrap();
    // SAFETY: the host implementation touches nothing, and the launch is
    // refused before anything is submitted.
    let e = unsafe { ADD_ONE_SHORT.launch(&t, LaunchConfig::linear(1, 1), (&mut a,)) }.unwrap_err();
    assert!(matches!(e, gpu_sched::Error::BadKernelArgs { .. }), "{e}");
    assert_eq!(t.to_vec(&a).unwrap(), [0.0; 10]);
}

#[test]
fn has_submitted_tracks_every_kind_of_submission() {
    let rt = Runtime::host().unwrap();
    let fresh = |f: &dyn Fn(&gpu_sched::TaskContext)| {
        let t = rt.begin_task().unwrap();
        assert!(!t.has_submitted());
        f(&t);
        assert!(t.has_submitted());
    };
    fresh(&|t| drop(t.fence().unwrap()));
    fresh(&|t| t.synchronize().unwrap());
    fresh(&|t| drop(t.zeros::<f32>(4).unwrap()));
    fresh(&|t| {
        let _ = t.cu_stream();
    });
    let ev = rt.event().unwrap();
    fresh(&|t| t.wait(&ev).unwrap());
    fresh(&|t| t.record(&ev).unwrap());
}

/// The pool hands out the most recently released stream it knows idle
/// without a driver call: one its task left idle (it submitted nothing, or
/// synchronized after its last submission), or one whose end-of-work flag
/// the device has set (with the flags on: they are off by default). A
/// stream still busy is passed over.
#[test]
fn an_idle_stream_is_reused_first() {
    let rt = Runtime::new(gpu_sched::RuntimeOptions {
        backend: gpu_sched::BackendChoice::Host,
        end_flags: true,
        ..Default::default()
    })
    .unwrap();
    let t = rt.begin_task().unwrap();
    let first = t.stream_id();
    drop(t);
    let t = rt.begin_task().unwrap();
    assert_eq!(t.stream_id(), first, "untouched: taken again first");
    drop(t.fence().unwrap());
    t.synchronize().unwrap();
    drop(t);
    let t = rt.begin_task().unwrap();
    assert_eq!(t.stream_id(), first, "synchronized: taken again first");
    let g = rt.gate().unwrap();
    gpu_kernels::gate(&t, &g, std::time::Duration::from_secs(20)).unwrap();
    drop(t);
    let other = rt.begin_task().unwrap();
    assert_ne!(other.stream_id(), first, "busy: passed over");
    g.open();
    rt.synchronize().unwrap();
    let t = rt.begin_task().unwrap();
    assert_eq!(t.stream_id(), first, "its flag is set: taken again first");
    assert!(!g.timed_out());
    assert!(rt.races().is_empty(), "{:?}", rt.races());
    drop(other);
}

/// Without end-of-work flags the pool asks the driver: a busy stream is
/// passed over, and once idle it is recycled again.
#[test]
fn without_flags_the_pool_queries_streams() {
    let rt = Runtime::new(gpu_sched::RuntimeOptions {
        backend: gpu_sched::BackendChoice::Host,
        warm_streams: 1,
        end_flags: false,
        ..Default::default()
    })
    .unwrap();
    let t = rt.begin_task().unwrap();
    let first = t.stream_id();
    let g = rt.gate().unwrap();
    gpu_kernels::gate(&t, &g, std::time::Duration::from_secs(20)).unwrap();
    let generation = rt.ledger().generation(first);
    drop(t);
    let other = rt.begin_task().unwrap();
    assert_ne!(other.stream_id(), first, "busy: passed over");
    assert_eq!(rt.ledger().generation(first), generation, "not recycled");
    g.open();
    rt.synchronize().unwrap();
    let t = rt.begin_task().unwrap();
    assert_eq!(t.stream_id(), first, "idle now: the query finds it");
    assert_ne!(rt.ledger().generation(first), generation, "recycled");
    assert!(!g.timed_out());
    drop(other);
}

/// Fills `b` with `v` on `t`'s stream behind a gate, which it returns
/// closed: the fill is queued, not done.
fn gated_fill(
    rt: &Runtime,
    t: &gpu_sched::TaskContext,
    b: &mut gpu_sched::Buffer<f32>,
    v: f32,
) -> gpu_sched::Gate {
    let g = rt.gate().unwrap();
    gpu_kernels::gate(t, &g, std::time::Duration::from_secs(20)).unwrap();
    gpu_kernels::fill(t, b, v).unwrap();
    g
}

/// A task whose first operation writes a buffer last written on a stream
/// no task holds, whose work is not known done and which holds stamps of
/// that buffer alone, takes that stream over as it is (DESIGN "Streams are
/// a resource"): no query, no recycle, no event and no device wait, and
/// the order holds by the stream's own order (the values, and the race
/// detector). A stream a live task holds, a use known done, a first
/// operation that only reads, and a stream that holds stamps of another
/// buffer too are not followed.
#[test]
fn a_task_follows_its_data_to_a_stream_not_known_idle() {
    let faults = gpu_sched::FaultInjector::new();
    let rt = Runtime::new(gpu_sched::RuntimeOptions {
        backend: gpu_sched::BackendChoice::Host,
        end_flags: false,
        fault_injection: Some(faults.clone()),
        ..Default::default()
    })
    .unwrap();
    let calls_since = |from: usize, name: &str| {
        faults.names()[from..]
            .iter()
            .filter(|n| **n == name)
            .count()
    };
    let setup = rt.begin_task().unwrap();
    let mut a = setup.zeros::<f32>(4096).unwrap();
    let mut b = setup.zeros::<f32>(4096).unwrap();
    let mut c = setup.zeros::<f32>(4096).unwrap();
    let mut d = setup.zeros::<f32>(1).unwrap();
    setup.synchronize().unwrap();
    drop(setup);
    let t = rt.begin_task().unwrap();
    let first = t.stream_id();
    let g = gated_fill(&rt, &t, &mut a, 1.0);
    let generation = rt.ledger().generation(first);
    drop(t);

    let from = faults.names().len();
    let u = rt.begin_task().unwrap();
    gpu_kernels::scale(&u, &mut a, 3.0).unwrap();
    assert_eq!(u.stream_id(), first, "followed its data");
    assert_eq!(rt.ledger().generation(first), generation, "taken as it is");
    for call in ["stream_query", "record", "wait_event"] {
        assert_eq!(
            calls_since(from, call),
            0,
            "{call}: {:?}",
            &faults.names()[from..]
        );
    }
    // `b` too, on the same stream: it holds stamps of two buffers now.
    gpu_kernels::fill(&u, &mut b, 5.0).unwrap();

    // Held by `u`: another task touching `a` takes another stream, and
    // waits for `first` on the device.
    let v = rt.begin_task().unwrap();
    gpu_kernels::add_scalar(&v, &mut a, 1.0).unwrap();
    assert_ne!(v.stream_id(), first, "a held stream is not followed");
    drop(u);
    let x = rt.begin_task().unwrap();
    gpu_kernels::scale(&x, &mut b, 2.0).unwrap();
    assert_ne!(
        x.stream_id(),
        first,
        "a stream with another buffer's stamps is not followed"
    );
    let second = v.stream_id();
    g.open();
    v.synchronize().unwrap();
    drop(v);
    x.synchronize().unwrap();
    drop(x);
    assert!(!g.timed_out());

    // Done and seen done (the synchronize): the usual way, recycled.
    let w = rt.begin_task().unwrap();
    gpu_kernels::scale(&w, &mut a, 0.5).unwrap();
    assert_ne!(w.stream_id(), first, "seen done: not followed");
    let host = w.to_vec(&a).unwrap();
    assert!(host.iter().all(|&x| x == 2.0), "{:?}", &host[..4]);
    assert!(w.to_vec(&b).unwrap().iter().all(|&x| x == 10.0));
    let _ = second;
    drop(w);

    // A first operation that only reads `c` (and writes `d`, done), last
    // written on a stream that holds it alone: not followed.
    let y = rt.begin_task().unwrap();
    let ys = y.stream_id();
    let g2 = gated_fill(&rt, &y, &mut c, 4.0);
    drop(y);
    let r = rt.begin_task().unwrap();
    gpu_kernels::reduce::sum_into(&r, &c, &mut d).unwrap();
    assert_ne!(r.stream_id(), ys, "a read does not follow");
    g2.open();
    assert_eq!(r.to_vec(&d).unwrap()[0], 4.0 * 4096.0);
    assert!(!g2.timed_out());
    assert!(rt.races().is_empty(), "{:?}", rt.races());
}
