//! Host-backend smoke test of the runtime with a test module.

use gpu_sched::{KernelArg, KernelDef, KernelRef, LaunchConfig, Module, Param, Runtime};

/// add_one(x: *mut f32, n: u64)
unsafe fn add_one(args: &[KernelArg], _cfg: LaunchConfig) {
    let (KernelArg::Ptr(p), KernelArg::U64(n)) = (args[0], args[1]) else {
        unreachable!()
    };
    // SAFETY: the runtime checked the argument list; p is a live allocation.
    let x = unsafe { std::slice::from_raw_parts_mut(p as *mut f32, n as usize) };
    x.iter_mut().for_each(|v| *v += 1.0);
}

static TEST: Module = Module {
    name: "test",
    // Host-only kernels; the PTX is checked on every backend.
    ptx: ".version 7.0\n.target sm_70\n.address_size 64\n.visible .entry add_one(.param .u64 x, .param .u64 n)\n{\n\tret;\n}\n",
    kernels: &[KernelDef {
        name: "add_one",
        params: &[Param::PtrWrite, Param::U64],
        host: add_one,
    }],
};
const ADD_ONE: KernelRef = KernelRef::new(&TEST, 0);

#[test]
fn two_tasks_hand_off_without_races() {
    let rt = Runtime::host().unwrap();
    let a_ctx = rt.begin_task().unwrap();
    let mut a = a_ctx.from_host(&[1.0f32; 1000]).unwrap();
    // SAFETY: the test kernel writes x[..n], n the buffer's length, or the
    // launch is refused before anything is submitted.
    unsafe {
        a_ctx
            .launch(ADD_ONE, LaunchConfig::for_elements(1000, 256))
            .write(&mut a)
            .arg(1000u64)
            .submit()
    }
    .unwrap();
    let b_ctx = rt.begin_task().unwrap();
    let before = rt.counters();
    // SAFETY: the test kernel writes x[..n], n the buffer's length, or the
    // launch is refused before anything is submitted.
    unsafe {
        b_ctx
            .launch(ADD_ONE, LaunchConfig::for_elements(1000, 256))
            .write(&mut a)
            .arg(1000u64)
            .submit()
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

#[test]
fn wrong_argument_count_is_a_typed_error() {
    let rt = Runtime::host().unwrap();
    let t = rt.begin_task().unwrap();
    let mut a = t.zeros::<f32>(10).unwrap();
    // SAFETY: the test kernel writes x[..n], n the buffer's length, or the
    // launch is refused before anything is submitted.
    let e = unsafe {
        t.launch(ADD_ONE, LaunchConfig::linear(1, 1))
            .write(&mut a)
            .submit()
    }
    .unwrap_err();
    assert!(matches!(e, gpu_sched::Error::BadKernelArgs { .. }), "{e}");
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
/// the device has set. A stream still busy is passed over.
#[test]
fn an_idle_stream_is_reused_first() {
    let rt = Runtime::host().unwrap();
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
    // SAFETY: the host backend blocks on the gate itself and does not
    // launch the kernel passed.
    unsafe { t.block_on(&g, ADD_ONE, std::time::Duration::from_secs(20)) }.unwrap();
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
    // SAFETY: the host backend blocks on the gate itself and does not
    // launch the kernel passed.
    unsafe { t.block_on(&g, ADD_ONE, std::time::Duration::from_secs(20)) }.unwrap();
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
