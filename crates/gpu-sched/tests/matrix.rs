//! The test matrix of DESIGN "Tests" (T1-T15), through the runtime's public API,
//! on both backends.
//!
//! Each case asserts the ledger's decision (the counters' change over the
//! hand-offs under test) and the behaviour, with a *gate*: an operation that
//! blocks a stream until the test opens it or its timeout passes.
//!
//! - Avoid-wait cases (T1-T5, T12-T14): the old stream's later work sits
//!   behind a gate the test opens only after the new task's host-sync
//!   pointer (or read-back) returned. Code that wrongly waited could only
//!   return once the gate gave up, which sets its `timed_out` flag: the test
//!   checks the flag, so it fails deterministically, with no timing threshold.
//! - Still-wait cases (T6-T11): a *probe* gate the test never opens sits on
//!   the old stream; the new task's read-back must return only after the
//!   probe gave up (`timed_out()` is then true), and read the right values.
//!   On the host backend the race detector must also find nothing.
//! - T15 (drop while in use): the drop must return while the buffer's work
//!   is still gated, and the free must wait for it (the host backend's
//!   detector reports a use of freed memory otherwise).

mod common;

use common::{assert_no_races, backend_tests, same_backend, OPENED_BY_TEST, PROBE};
use gpu_epoch::Binding;
use gpu_kernels as k;
use gpu_sched::raw::RawTask;
use gpu_sched::{
    CounterSnapshot, DeviceSlice, DeviceSliceMut, Gate, LaunchConfig, Reason, Runtime,
    RuntimeOptions, TaskContext, Untracked,
};
use std::time::{Duration, Instant};

/// Elements per buffer: not a multiple of the block size.
const N: usize = 1001;

/// The counters' change since `before`.
fn since(rt: &Runtime, before: &CounterSnapshot) -> CounterSnapshot {
    rt.counters().since(before)
}

/// No cross-stream wait of either kind.
#[track_caller]
fn assert_no_wait(d: &CounterSnapshot) {
    assert_eq!(
        (d.device_waits, d.host_syncs),
        (0, 0),
        "expected no cross-stream wait: {d:?}"
    );
}

/// A call that should not have waited for the gated work returned before
/// the gate gave up.
#[track_caller]
fn assert_did_not_wait_for(gate: &Gate, what: &str) {
    assert!(
        !gate.timed_out(),
        "{what} waited for the gated work: it returned only after the gate gave up"
    );
}

/// A call that must wait for the gated work returned only after the probe
/// gate gave up.
#[track_caller]
fn assert_waited_for(probe: &Gate, what: &str) {
    assert!(
        probe.timed_out(),
        "{what} returned while the probe gate still blocked the old stream: it did not wait"
    );
}

/// Opens `gate`, waits for `ctx`'s stream and checks that nothing had to
/// wait for the gate's timeout.
#[track_caller]
fn open_and_finish(gate: &Gate, ctx: &TaskContext) {
    gate.open();
    ctx.synchronize().unwrap();
    assert_did_not_wait_for(gate, "the test");
}

#[track_caller]
fn assert_all(v: &[f32], want: f32) {
    assert_eq!(v.len(), N);
    if let Some((i, x)) = v.iter().enumerate().find(|(_, x)| **x != want) {
        panic!("element {i} is {x}, expected {want}");
    }
}

/// `x[i] *= a` through a raw pointer: an operation the runtime does not see.
fn scale_raw(ctx: &TaskContext, p: u64, n: usize, a: f32) {
    // SAFETY: the kernel touches only the buffers passed, within their
    // lengths (its length arguments are theirs), or the launch is refused
    // before anything is submitted.
    unsafe {
        k::SCALE_F32.launch(
            ctx,
            LaunchConfig::for_elements(n, k::BLOCK),
            (Untracked::new(p, n), a, n),
        )
    }
    .unwrap();
}

/// The parent's later work behind a gate the test opens: `later` is filled
/// with 5 once the gate opens.
fn gated_later_work(ctx: &TaskContext, gate: &Gate, later: &mut impl DeviceSliceMut<f32>) {
    k::gate(ctx, gate, OPENED_BY_TEST).unwrap();
    k::fill(ctx, later, 5.0).unwrap();
}

// ----- avoid waiting ----------------------------------------------------------

/// T1: an event the host synchronized covers the parent's work (Completed):
/// the child neither waits on the device nor for the parent's later work.
fn t01_event_synchronized(rt: &Runtime) {
    let parent = rt.begin_task().unwrap();
    let child = rt.begin_task().unwrap();
    let mut a = parent.zeros::<f32>(N).unwrap();
    let mut later = parent.zeros::<f32>(N).unwrap();
    k::fill(&parent, &mut a, 1.0).unwrap();
    let e = rt.event().unwrap();
    parent.record(&e).unwrap();
    let g = rt.gate().unwrap();
    gated_later_work(&parent, &g, &mut later);
    e.synchronize().unwrap();
    assert_did_not_wait_for(&g, "Event::synchronize");

    let before = rt.counters();
    k::add_scalar(&child, &mut a, 1.0).unwrap();
    let d = since(rt, &before);
    child.host_sync_ptr(&mut a).unwrap();
    assert_did_not_wait_for(&g, "the child's host-sync pointer");
    assert_no_wait(&d);
    assert_eq!(d.avoided(Reason::Completed), 1, "{d:?}");
    assert_eq!(d.switches_avoided(), 1, "{d:?}");
    assert_all(&child.to_vec(&a).unwrap(), 2.0);

    open_and_finish(&g, &parent);
    assert_all(&parent.to_vec(&later).unwrap(), 5.0);
    assert_no_races(rt);
}
backend_tests!(t01_event_synchronized);

/// T2: an event a query found done covers the parent's work (Completed).
fn t02_event_query_found_done(rt: &Runtime) {
    let parent = rt.begin_task().unwrap();
    let child = rt.begin_task().unwrap();
    let mut a = parent.zeros::<f32>(N).unwrap();
    let mut later = parent.zeros::<f32>(N).unwrap();
    k::fill(&parent, &mut a, 1.0).unwrap();
    let e = rt.event().unwrap();
    parent.record(&e).unwrap();
    let g = rt.gate().unwrap();
    gated_later_work(&parent, &g, &mut later);
    // The record is before the gate, so it completes; the deadline only
    // turns a hang into a failure.
    let deadline = Instant::now() + OPENED_BY_TEST;
    while !e.query().unwrap() {
        assert!(Instant::now() < deadline, "the event never completed");
        std::thread::yield_now();
    }

    let before = rt.counters();
    k::add_scalar(&child, &mut a, 1.0).unwrap();
    let d = since(rt, &before);
    child.host_sync_ptr(&mut a).unwrap();
    assert_did_not_wait_for(&g, "the child's host-sync pointer");
    assert_no_wait(&d);
    assert_eq!(d.avoided(Reason::Completed), 1, "{d:?}");
    assert_eq!(d.switches_avoided(), 1, "{d:?}");
    assert_all(&child.to_vec(&a).unwrap(), 2.0);

    open_and_finish(&g, &parent);
    assert_all(&parent.to_vec(&later).unwrap(), 5.0);
    assert_no_races(rt);
}
backend_tests!(t02_event_query_found_done);

/// T3: a stream synchronize covers the work before it (Completed).
fn t03_stream_synchronized(rt: &Runtime) {
    let parent = rt.begin_task().unwrap();
    let child = rt.begin_task().unwrap();
    let mut a = parent.zeros::<f32>(N).unwrap();
    let mut later = parent.zeros::<f32>(N).unwrap();
    k::fill(&parent, &mut a, 1.0).unwrap();
    parent.synchronize().unwrap();
    let g = rt.gate().unwrap();
    gated_later_work(&parent, &g, &mut later);

    let before = rt.counters();
    k::add_scalar(&child, &mut a, 1.0).unwrap();
    let d = since(rt, &before);
    child.host_sync_ptr(&mut a).unwrap();
    assert_did_not_wait_for(&g, "the child's host-sync pointer");
    assert_no_wait(&d);
    assert_eq!(d.avoided(Reason::Completed), 1, "{d:?}");
    assert_eq!(d.switches_avoided(), 1, "{d:?}");
    assert_all(&child.to_vec(&a).unwrap(), 2.0);

    open_and_finish(&g, &parent);
    assert_all(&parent.to_vec(&later).unwrap(), 5.0);
    assert_no_races(rt);
}
backend_tests!(t03_stream_synchronized);

/// T4, the seed's example: the child waits for the parent's event on the
/// device (Ordered); its host-sync pointer returns while the parent's
/// later, gated work still runs.
fn t04_event_waited_by_new_stream(rt: &Runtime) {
    let parent = rt.begin_task().unwrap();
    let child = rt.begin_task().unwrap();
    let mut a = parent.zeros::<f32>(N).unwrap();
    let mut later = parent.zeros::<f32>(N).unwrap();
    k::fill(&parent, &mut a, 1.0).unwrap();
    let e = rt.event().unwrap();
    parent.record(&e).unwrap();
    let g = rt.gate().unwrap();
    gated_later_work(&parent, &g, &mut later);

    let before = rt.counters();
    child.wait(&e).unwrap();
    k::add_scalar(&child, &mut a, 1.0).unwrap();
    let d = since(rt, &before);
    child.host_sync_ptr(&mut a).unwrap();
    assert_did_not_wait_for(&g, "the child's host-sync pointer");
    assert_no_wait(&d);
    assert_eq!(d.avoided(Reason::Ordered), 1, "{d:?}");
    assert_eq!(d.switches_avoided(), 1, "{d:?}");
    assert_all(&child.to_vec(&a).unwrap(), 2.0);

    open_and_finish(&g, &parent);
    assert_all(&parent.to_vec(&later).unwrap(), 5.0);
    assert_no_races(rt);
}
backend_tests!(t04_event_waited_by_new_stream);

/// T5: a stream whose task finished is taken over by a new task (R3), here
/// while it is still busy (so it is not recycled): the new owner's record
/// counts, and a task that waits for it does not wait for the new owner's
/// later, gated work. Then (R13) a stream recycled since a buffer's stamp
/// covers that stamp.
fn t05_stream_taken_over_from_finished_task(rt: &Runtime) {
    // Three streams: the reclaim stream, the waiter's, and the one taken
    // over. With the ledger full, a new task gets a busy pooled stream.
    let three_streams = RuntimeOptions {
        max_streams: 3,
        warm_streams: 1,
        ..RuntimeOptions::default()
    };
    let rt3 = same_backend(rt, three_streams.clone());
    let waiter = rt3.begin_task().unwrap();
    // Streams are bound at a task's first operation: the waiter's now.
    let _ = waiter.stream_id();
    let first = rt3.begin_task().unwrap();
    let s = first.stream_id();
    let mut a = first.from_host(&[1.0f32; N]).unwrap();
    let busy = rt3.gate().unwrap();
    k::gate(&first, &busy, OPENED_BY_TEST).unwrap();
    let generation = rt3.ledger().generation(s);
    drop(first);

    let owner = rt3.begin_task().unwrap();
    assert_eq!(
        owner.stream_id(),
        s,
        "the finished task's busy stream is taken over"
    );
    assert_eq!(
        rt3.ledger().generation(s),
        generation,
        "a busy stream is not recycled"
    );
    assert_eq!(rt3.ledger().owner(s), Some(owner.task_id()));
    assert!(
        !rt3.ledger().is_shared(s),
        "taking over does not share the stream"
    );
    let mut later = owner.zeros::<f32>(N).unwrap();
    k::add_scalar(&owner, &mut a, 1.0).unwrap();
    let e = rt3.event().unwrap();
    owner.record(&e).unwrap();
    assert!(e.covers().is_some(), "the new owner's record counts");
    let g = rt3.gate().unwrap();
    gated_later_work(&owner, &g, &mut later);
    busy.open();

    let before = rt3.counters();
    waiter.wait(&e).unwrap();
    k::add_scalar(&waiter, &mut a, 1.0).unwrap();
    let d = since(&rt3, &before);
    waiter.host_sync_ptr(&mut a).unwrap();
    assert_did_not_wait_for(&g, "the waiter's host-sync pointer");
    assert_did_not_wait_for(&busy, "the finished task's gate");
    assert_no_wait(&d);
    assert_eq!(d.avoided(Reason::Ordered), 1, "{d:?}");
    assert_eq!(d.switches_avoided(), 1, "{d:?}");
    assert_all(&waiter.to_vec(&a).unwrap(), 3.0);
    open_and_finish(&g, &owner);
    assert_all(&owner.to_vec(&later).unwrap(), 5.0);
    assert_no_races(&rt3);

    // Recycling: a finished task's idle stream is handed out again (here the
    // only one in the pool) with a new generation, which covers every stamp
    // of the old one.
    let rt = &same_backend(rt, three_streams);
    let user = rt.begin_task().unwrap();
    let first = rt.begin_task().unwrap();
    let s = first.stream_id();
    let mut x = first.from_host(&[1.0f32; N]).unwrap();
    first.synchronize().unwrap();
    let generation = rt.ledger().generation(s);
    drop(first);
    let next = rt.begin_task().unwrap();
    assert_eq!(next.stream_id(), s, "the idle stream is handed out again");
    assert_ne!(rt.ledger().generation(s), generation, "recycled");
    let before = rt.counters();
    k::add_scalar(&user, &mut x, 1.0).unwrap();
    let d = since(rt, &before);
    assert_no_wait(&d);
    assert_eq!(d.avoided(Reason::Recycled), 1, "{d:?}");
    assert_all(&user.to_vec(&x).unwrap(), 2.0);
    drop(next);
    assert_no_races(rt);
}
backend_tests!(t05_stream_taken_over_from_finished_task);

// ----- still wait ---------------------------------------------------------------

/// T6: memory used after the event is not covered by it: the waiter still
/// waits for the parent's stream (and so for the later use).
fn t06_memory_used_after_event(rt: &Runtime) {
    let parent = rt.begin_task().unwrap();
    let child = rt.begin_task().unwrap();
    let mut a = parent.from_host(&[1.0f32; N]).unwrap();
    let e = rt.event().unwrap();
    parent.record(&e).unwrap();
    let probe = rt.gate().unwrap();
    k::gate(&parent, &probe, PROBE).unwrap();
    k::scale(&parent, &mut a, 2.0).unwrap(); // after the event

    let before = rt.counters();
    child.wait(&e).unwrap();
    k::add_scalar(&child, &mut a, 1.0).unwrap();
    let d = since(rt, &before);
    assert_eq!(d.device_waits, 1, "{d:?}");
    assert_eq!(d.switches_avoided(), 0, "{d:?}");
    let v = child.to_vec(&a).unwrap();
    assert_waited_for(&probe, "the child's read-back");
    assert_all(&v, 3.0); // (1 * 2) + 1: the parent's scale came first
    assert_no_races(rt);
}
backend_tests!(t06_memory_used_after_event);

/// T7: an event recorded by another task covers nothing of the parent's
/// stream: (i) recorded on that task's own stream, it orders the waiter
/// after that stream only; (ii) recorded on the parent's stream by a task
/// that does not own it, it covers nothing at all.
fn t07_event_recorded_by_another_task(rt: &Runtime) {
    // (i) The other task's own stream.
    let parent = rt.begin_task().unwrap();
    let other = rt.begin_task().unwrap();
    let child = rt.begin_task().unwrap();
    let mut a = parent.from_host(&[1.0f32; N]).unwrap();
    let mut later = parent.zeros::<f32>(N).unwrap();
    let e = rt.event().unwrap();
    other.record(&e).unwrap();
    assert_eq!(e.covers().map(|c| c.0), Some(other.stream_id()));
    let probe = rt.gate().unwrap();
    k::gate(&parent, &probe, PROBE).unwrap();
    k::fill(&parent, &mut later, 5.0).unwrap();

    let before = rt.counters();
    child.wait(&e).unwrap();
    k::add_scalar(&child, &mut a, 1.0).unwrap();
    let d = since(rt, &before);
    assert_eq!(d.device_waits, 1, "{d:?}");
    assert_eq!(d.switches_avoided(), 0, "{d:?}");
    let v = child.to_vec(&a).unwrap();
    assert_waited_for(&probe, "the child's read-back");
    assert_all(&v, 2.0);

    // (ii) The parent's stream, by a task that does not own it. No public
    // call submits to another task's stream, so the other task's binding
    // (what R3 does when it submits there) goes through the ledger, and the
    // record itself through the parent's context: the driver record is on
    // the parent's stream either way.
    let mut b = parent.from_host(&[1.0f32; N]).unwrap();
    assert_eq!(other.share_stream_of(&parent).unwrap(), Binding::Shared);
    let e2 = rt.event().unwrap();
    parent.record(&e2).unwrap();
    assert_eq!(
        e2.covers(),
        None,
        "a record on a stream another live task uses covers nothing"
    );
    let probe2 = rt.gate().unwrap();
    k::gate(&parent, &probe2, PROBE).unwrap();
    k::fill(&parent, &mut later, 6.0).unwrap();

    let before = rt.counters();
    child.wait(&e2).unwrap();
    k::add_scalar(&child, &mut b, 1.0).unwrap();
    let d = since(rt, &before);
    assert_eq!(d.device_waits, 1, "{d:?}");
    assert_eq!(d.switches_avoided(), 0, "{d:?}");
    let v = child.to_vec(&b).unwrap();
    assert_waited_for(&probe2, "the child's read-back");
    assert_all(&v, 2.0);
    assert_all(&parent.to_vec(&later).unwrap(), 6.0);
    assert_no_races(rt);
}
backend_tests!(t07_event_recorded_by_another_task);

/// T8: an event on a stream several live tasks use covers nothing, and the
/// stream stays shared after the other task finished (sticky).
fn t08_event_on_shared_stream(rt: &Runtime) {
    let parent = rt.begin_task().unwrap();
    let child = rt.begin_task().unwrap();
    let s = parent.stream_id();
    let mut a = parent.from_host(&[1.0f32; N]).unwrap();
    let mut later = parent.zeros::<f32>(N).unwrap();
    {
        // Another live task submits to the parent's stream (R3; through the
        // ledger: no public call submits to another task's stream).
        let other = rt.begin_task().unwrap();
        assert_eq!(other.share_stream_of(&parent).unwrap(), Binding::Shared);
    }
    assert!(
        rt.ledger().is_shared(s),
        "shared for good, even after the other task finished"
    );
    let e = rt.event().unwrap();
    parent.record(&e).unwrap();
    assert_eq!(e.covers(), None);
    let probe = rt.gate().unwrap();
    k::gate(&parent, &probe, PROBE).unwrap();
    k::fill(&parent, &mut later, 5.0).unwrap();

    let before = rt.counters();
    child.wait(&e).unwrap();
    k::add_scalar(&child, &mut a, 1.0).unwrap();
    let d = since(rt, &before);
    assert_eq!(d.device_waits, 1, "{d:?}");
    assert_eq!(d.switches_avoided(), 0, "{d:?}");
    let v = child.to_vec(&a).unwrap();
    assert_waited_for(&probe, "the child's read-back");
    assert_all(&v, 2.0);

    // A synchronize of the shared stream gives no Completed fact either.
    parent.synchronize().unwrap();
    let mut b = parent.from_host(&[1.0f32; N]).unwrap();
    parent.synchronize().unwrap();
    let before = rt.counters();
    k::add_scalar(&child, &mut b, 1.0).unwrap();
    let d = since(rt, &before);
    assert_eq!(d.device_waits, 1, "{d:?}");
    assert_eq!(d.switches_avoided(), 0, "{d:?}");
    assert_all(&child.to_vec(&b).unwrap(), 2.0);
    assert_all(&parent.to_vec(&later).unwrap(), 5.0);
    assert_no_races(rt);
}
backend_tests!(t08_event_on_shared_stream);

/// T9: an event re-recorded elsewhere covers only its last record: (i) a
/// waiter after the re-record is not ordered after the first; (ii) a host
/// synchronize in flight while another task re-records gives no fact about
/// the record it started on.
fn t09_event_re_recorded_elsewhere(rt: &Runtime) {
    let parent = rt.begin_task().unwrap();
    let other = rt.begin_task().unwrap();
    let child = rt.begin_task().unwrap();
    let mut a = parent.from_host(&[1.0f32; N]).unwrap();
    let mut later = parent.zeros::<f32>(N).unwrap();
    let e = rt.event().unwrap();
    parent.record(&e).unwrap();
    let probe = rt.gate().unwrap();
    k::gate(&parent, &probe, PROBE).unwrap();
    k::fill(&parent, &mut later, 5.0).unwrap();
    other.record(&e).unwrap();
    assert_eq!(e.covers().map(|c| c.0), Some(other.stream_id()));

    let before = rt.counters();
    child.wait(&e).unwrap();
    k::add_scalar(&child, &mut a, 1.0).unwrap();
    let d = since(rt, &before);
    assert_eq!(d.device_waits, 1, "{d:?}");
    assert_eq!(d.switches_avoided(), 0, "{d:?}");
    let v = child.to_vec(&a).unwrap();
    assert_waited_for(&probe, "the child's read-back");
    assert_all(&v, 2.0);

    // (ii) The parent's record sits behind a gate, so a host synchronize of
    // the event blocks; meanwhile another task re-records it.
    let mut x = parent.from_host(&[1.0f32; N]).unwrap();
    let g = rt.gate().unwrap();
    k::gate(&parent, &g, OPENED_BY_TEST).unwrap();
    let e2 = rt.event().unwrap();
    parent.record(&e2).unwrap();
    let epoch_of_x = x.uses().writer().unwrap().epoch;
    let (started, on_start) = std::sync::mpsc::channel();
    std::thread::scope(|scope| {
        let e2 = &e2;
        let waiting = scope.spawn(move || {
            started.send(()).unwrap();
            e2.synchronize()
        });
        on_start.recv().unwrap();
        // Not a threshold: only makes it likely that the synchronize is in
        // flight (its fact taken) before the re-record. Either order must
        // give no fact about the parent's stream.
        std::thread::sleep(Duration::from_millis(20));
        other.record(e2).unwrap();
        g.open();
        waiting.join().unwrap().unwrap();
    });
    assert_did_not_wait_for(&g, "the event synchronize");
    assert!(
        rt.ledger().completed(parent.stream_id()) < epoch_of_x,
        "a synchronize that spanned a re-record gave a fact about the old record"
    );
    let before = rt.counters();
    k::add_scalar(&child, &mut x, 1.0).unwrap();
    let d = since(rt, &before);
    assert_eq!(d.device_waits, 1, "{d:?}");
    assert_eq!(d.switches_avoided(), 0, "{d:?}");
    assert_all(&child.to_vec(&x).unwrap(), 2.0);
    assert_all(&parent.to_vec(&later).unwrap(), 5.0);
    assert_no_races(rt);
}
backend_tests!(t09_event_re_recorded_elsewhere);

/// T10: a launch through a pointer taken before a synchronize (or an event)
/// is not covered by it: the escaped buffer's next task waits for everything
/// the old stream queued (R10).
fn t10_launch_through_pointer_taken_before(rt: &Runtime) {
    let parent = rt.begin_task().unwrap();
    let child = rt.begin_task().unwrap();

    // Before a synchronize.
    let mut a = parent.from_host(&[1.0f32; N]).unwrap();
    let p = parent.raw_ptr(&mut a).unwrap();
    assert!(a.uses().is_escaped());
    parent.synchronize().unwrap();
    let probe = rt.gate().unwrap();
    k::gate(&parent, &probe, PROBE).unwrap();
    scale_raw(&parent, p, N, 2.0);

    let before = rt.counters();
    k::add_scalar(&child, &mut a, 1.0).unwrap();
    let d = since(rt, &before);
    assert_eq!(d.device_waits, 1, "{d:?}");
    assert_eq!(d.switches_avoided(), 0, "{d:?}");
    assert!(
        !a.uses().is_escaped(),
        "the move to another stream ends the escape"
    );
    let v = child.to_vec(&a).unwrap();
    assert_waited_for(&probe, "the child's read-back");
    assert_all(&v, 3.0); // (1 * 2) + 1

    // Before an event the child waits for.
    let mut b = parent.from_host(&[1.0f32; N]).unwrap();
    let p = parent.raw_ptr(&mut b).unwrap();
    let e = rt.event().unwrap();
    parent.record(&e).unwrap();
    let probe2 = rt.gate().unwrap();
    k::gate(&parent, &probe2, PROBE).unwrap();
    scale_raw(&parent, p, N, 2.0);

    let before = rt.counters();
    child.wait(&e).unwrap();
    k::add_scalar(&child, &mut b, 1.0).unwrap();
    let d = since(rt, &before);
    assert_eq!(d.device_waits, 1, "{d:?}");
    assert_eq!(d.switches_avoided(), 0, "{d:?}");
    let v = child.to_vec(&b).unwrap();
    assert_waited_for(&probe2, "the child's read-back");
    assert_all(&v, 3.0);
    assert_no_races(rt);
}
backend_tests!(t10_launch_through_pointer_taken_before);

/// T11: capture gives no facts (a record on the capturing stream is refused,
/// DESIGN "Soundness": a stream waiting on it would join the capture; captured operations
/// do not stamp), and the graph launch stamps every buffer of the graph on
/// the launch stream.
fn t11_capture_gives_no_facts(rt: &Runtime) {
    let parent = rt.begin_task().unwrap();
    let child = rt.begin_task().unwrap();
    let s = parent.stream_id();
    let mut a = parent.from_host(&[1.0f32; N]).unwrap();
    let stamp = a.uses().writer();
    let epoch = rt.ledger().epoch(s);
    let in_capture = rt.event().unwrap();
    let before = rt.counters();
    let graph = parent
        .capture(|c| {
            let e = c.record(&in_capture).unwrap_err();
            assert!(matches!(e, gpu_sched::Error::Capturing { .. }), "{e:?}");
            k::scale(c, &mut a, 2.0)
        })
        .unwrap();
    assert_no_wait(&since(rt, &before));
    assert_eq!(in_capture.covers(), None, "a refused record covers nothing");
    assert_eq!(
        rt.ledger().epoch(s),
        epoch,
        "a refused record closes nothing"
    );
    assert_eq!(a.uses().writer(), stamp, "captured operations do not stamp");
    assert!(graph
        .touches()
        .any(|(p, _, access)| p == a.device_ptr() && access == gpu_sched::Access::Write));

    // A counted record before the launch covers `a`'s stamp so far; the
    // launch restamps `a` after it.
    let e = rt.event().unwrap();
    parent.record(&e).unwrap();
    let probe = rt.gate().unwrap();
    k::gate(&parent, &probe, PROBE).unwrap();
    parent.launch_graph(&graph).write(&mut a).submit().unwrap();
    assert_ne!(a.uses().writer(), stamp, "the graph launch stamps");

    let before = rt.counters();
    child.wait(&e).unwrap();
    k::add_scalar(&child, &mut a, 1.0).unwrap();
    let d = since(rt, &before);
    assert_eq!(d.device_waits, 1, "{d:?}");
    assert_eq!(d.switches_avoided(), 0, "{d:?}");
    let v = child.to_vec(&a).unwrap();
    assert_waited_for(&probe, "the child's read-back");
    assert_all(&v, 3.0); // the graph's (1 * 2), then + 1
    assert_no_races(rt);
}
backend_tests!(t11_capture_gives_no_facts);

/// T11, the wait half: a wait on a capturing stream only orders the
/// graph's operations, so it gives no Ordered fact; after the capture the
/// buffer the event covered still waits.
fn t11b_wait_while_capturing_gives_no_fact(rt: &Runtime) {
    let parent = rt.begin_task().unwrap();
    let other = rt.begin_task().unwrap();
    let mut x = other.from_host(&[1.0f32; N]).unwrap();
    let e = rt.event().unwrap();
    other.record(&e).unwrap();
    let mut y = parent.zeros::<f32>(N).unwrap();
    let graph = parent
        .capture(|c| {
            c.wait(&e)?;
            k::fill(c, &mut y, 3.0)
        })
        .unwrap();
    assert_eq!(
        rt.ledger().waited(parent.stream_id(), other.stream_id()).0,
        0,
        "a wait while capturing gives no fact"
    );
    parent.launch_graph(&graph).write(&mut y).submit().unwrap();
    let before = rt.counters();
    k::add_scalar(&parent, &mut x, 1.0).unwrap();
    let d = since(rt, &before);
    assert_eq!(d.device_waits, 1, "{d:?}");
    assert_eq!(d.switches_avoided(), 0, "{d:?}");
    assert_all(&parent.to_vec(&x).unwrap(), 2.0);
    assert_all(&parent.to_vec(&y).unwrap(), 3.0);
    assert_no_races(rt);
}
backend_tests!(t11b_wait_while_capturing_gives_no_fact);

// ----- ours ---------------------------------------------------------------------

/// T12 (X1): order is transitive. A task three waits away from the root
/// uses the root's memory with no wait, and does not wait for the root's
/// later work; its synchronize makes the root's covered epoch Completed.
fn t12_transitive(rt: &Runtime) {
    let root = rt.begin_task().unwrap();
    let child = rt.begin_task().unwrap();
    let grandchild = rt.begin_task().unwrap();
    let great = rt.begin_task().unwrap();
    let mut a = root.from_host(&[1.0f32; N]).unwrap();
    let mut r = root.from_host(&[7.0f32; N]).unwrap();
    let mut later = root.zeros::<f32>(N).unwrap();
    let f = root.fence().unwrap();
    let g = rt.gate().unwrap();
    gated_later_work(&root, &g, &mut later);

    let mut own = child.zeros::<f32>(N).unwrap();
    child.wait_fence(f).unwrap();
    k::fill(&child, &mut own, 2.0).unwrap();
    let f = child.fence().unwrap();
    grandchild.wait_fence(f).unwrap();
    let f = grandchild.fence().unwrap();

    let before = rt.counters();
    great.wait_fence(f).unwrap();
    k::add_scalar(&great, &mut a, 1.0).unwrap();
    let d = since(rt, &before);
    great.host_sync_ptr(&mut a).unwrap();
    assert_did_not_wait_for(&g, "the great-grandchild's host-sync pointer");
    assert_no_wait(&d);
    assert_eq!(d.avoided(Reason::Ordered), 1, "{d:?}");
    assert_eq!(d.switches_avoided(), 1, "{d:?}");
    assert_all(&great.to_vec(&a).unwrap(), 2.0);

    // The great-grandchild's synchronize completed what it was ordered
    // after, the root's epoch included: a task with no wait uses `r`.
    let stranger = rt.begin_task().unwrap();
    let before = rt.counters();
    k::add_scalar(&stranger, &mut r, 1.0).unwrap();
    let d = since(rt, &before);
    assert_no_wait(&d);
    assert_eq!(d.avoided(Reason::Completed), 1, "{d:?}");
    assert_all(&stranger.to_vec(&r).unwrap(), 8.0);
    assert_did_not_wait_for(&g, "the stranger's read-back");

    open_and_finish(&g, &root);
    assert_all(&root.to_vec(&later).unwrap(), 5.0);
    assert_all(&child.to_vec(&own).unwrap(), 2.0);
    assert_no_races(rt);
}
backend_tests!(t12_transitive);

/// T13 (X2): readers on different streams do not wait for each other; a
/// writer waits for the last writer and every reader since, each unless
/// covered.
fn t13_concurrent_readers(rt: &Runtime) {
    let writer = rt.begin_task().unwrap();
    let r1 = rt.begin_task().unwrap();
    let r2 = rt.begin_task().unwrap();
    let mut a = writer.from_host(&[3.0f32; N]).unwrap();
    let e = rt.event().unwrap();
    writer.record(&e).unwrap();

    let mut sum1 = r1.zeros::<f32>(1).unwrap();
    let mut later = r1.zeros::<f32>(N).unwrap();
    r1.wait(&e).unwrap();
    k::sum_atomic_into(&r1, &a, &mut sum1).unwrap();
    let g = rt.gate().unwrap();
    gated_later_work(&r1, &g, &mut later);

    let mut sum2 = r2.zeros::<f32>(1).unwrap();
    let before = rt.counters();
    r2.wait(&e).unwrap();
    k::sum_atomic_into(&r2, &a, &mut sum2).unwrap();
    let d = since(rt, &before);
    let s2 = r2.to_vec(&sum2).unwrap();
    assert_did_not_wait_for(&g, "the second reader's read-back");
    assert_no_wait(&d);
    assert_eq!(d.avoided(Reason::Ordered), 1, "{d:?}");
    assert_eq!(s2, [3.0 * N as f32]);

    // The writer waits on the device for the first reader (not covered),
    // not for the second (its stream was synchronized: Completed).
    let before = rt.counters();
    k::add_scalar(&writer, &mut a, 1.0).unwrap();
    let d = since(rt, &before);
    assert_eq!(d.device_waits, 1, "{d:?}");
    assert_eq!(d.avoided(Reason::Completed), 1, "{d:?}");
    assert_eq!(d.avoided(Reason::SameStream), 1, "{d:?}");
    open_and_finish(&g, &r1);
    assert_all(&writer.to_vec(&a).unwrap(), 4.0);
    assert_eq!(r1.to_vec(&sum1).unwrap(), [3.0 * N as f32]);
    assert_all(&r1.to_vec(&later).unwrap(), 5.0);
    assert_no_races(rt);
}
backend_tests!(t13_concurrent_readers);

/// T14 (X3): siblings on disjoint chunks never wait for each other; the join
/// restamps the buffer on the joining stream after its ordered waits.
fn t14_disjoint_chunks(rt: &Runtime) {
    let parent = rt.begin_task().unwrap();
    let left = rt.begin_task().unwrap();
    let right = rt.begin_task().unwrap();
    let mut buf = parent.zeros::<f32>(N).unwrap();
    let mut later = left.zeros::<f32>(N).unwrap();
    let e = rt.event().unwrap();
    parent.record(&e).unwrap();
    let half = N / 2 + 1;
    let g = rt.gate().unwrap();
    {
        let mut split = buf.split_chunks(half).unwrap();
        let mut views = split.views();
        assert_eq!(views.len(), 2);
        assert_eq!(views[1].offset(), half);

        let before = rt.counters();
        left.wait(&e).unwrap();
        k::fill(&left, &mut views[0], 1.0).unwrap();
        let left_done = left.fence().unwrap();
        gated_later_work(&left, &g, &mut later);

        right.wait(&e).unwrap();
        k::fill(&right, &mut views[1], 2.0).unwrap();
        right.host_sync_ptr(&mut views[1]).unwrap();
        assert_did_not_wait_for(&g, "the right sibling's host-sync pointer");
        let right_done = right.fence().unwrap();
        let d = since(rt, &before);
        assert_no_wait(&d);
        assert_eq!(d.avoided(Reason::Ordered), 2, "{d:?}");

        let before = rt.counters();
        parent.wait_fence(left_done).unwrap();
        parent.wait_fence(right_done).unwrap();
        drop(views);
        parent.rejoin(split).unwrap();
        let d = since(rt, &before);
        assert_no_wait(&d);
        assert_eq!(d.switches_avoided(), 2, "{d:?}");
    }
    assert_eq!(
        buf.uses().writer().map(|w| w.stream),
        Some(parent.stream_id())
    );
    let v = parent.to_vec(&buf).unwrap();
    assert_did_not_wait_for(&g, "the parent's read-back after the join");
    assert!(
        v[..half].iter().all(|x| *x == 1.0),
        "left chunk: {:?}",
        &v[..4]
    );
    assert!(
        v[half..].iter().all(|x| *x == 2.0),
        "right chunk: {:?}",
        &v[half..half + 4]
    );
    open_and_finish(&g, &left);
    assert_all(&left.to_vec(&later).unwrap(), 5.0);
    assert_no_races(rt);
}
backend_tests!(t14_disjoint_chunks);

/// T15 (X4): dropping a buffer that queued work still uses returns at once
/// and frees the memory only after that work (a writer on one stream and a
/// reader on another, both behind a gate).
fn t15_drop_while_in_use(rt: &Runtime) {
    let writer = rt.begin_task().unwrap();
    let reader = rt.begin_task().unwrap();
    let mut x = writer.from_host(&[1.0f32; N]).unwrap();
    let mut y = reader.zeros::<f32>(N).unwrap();
    let g = rt.gate().unwrap();
    k::gate(&writer, &g, OPENED_BY_TEST).unwrap();
    k::add_scalar(&writer, &mut x, 1.0).unwrap(); // behind the gate
    k::copy(&reader, &x, &mut y).unwrap(); // waits for the add

    let allocations = rt.live().allocations;
    let before = rt.counters();
    drop(x);
    assert_did_not_wait_for(&g, "dropping the buffer");
    let d = since(rt, &before);
    assert_eq!(
        d.device_waits, 2,
        "the free waits for the writer and the reader: {d:?}"
    );
    assert_eq!(rt.live().allocations, allocations - 1);

    // Were the memory freed before the gate opened, the add and the copy
    // would touch freed memory: the host backend's detector reports it.
    open_and_finish(&g, &writer);
    assert_all(&reader.to_vec(&y).unwrap(), 2.0);
    assert_no_races(rt);
}
backend_tests!(t15_drop_while_in_use);
