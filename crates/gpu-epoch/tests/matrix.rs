//! The test matrix of DESIGN "Tests" (T1-T15) at ledger level: each case asserts
//! the hand-off's decision, its reason, and the counters' change. (The
//! runtime's tests add the behaviour, with a gate, on both backends.)
#![cfg(not(loom))]

mod common;

use common::*;
use gpu_epoch::{
    Access, Binding, BufferStamps, CounterSnapshot, Decision, EventCoverage, Ledger, Reason,
    StreamId, StreamSet,
};

fn set(xs: &[StreamId]) -> StreamSet {
    let mut s = StreamSet::new();
    for &x in xs {
        s.insert(x);
    }
    s
}

/// The counters' change: `(avoided for reason, device waits, host syncs)`.
fn changed(l: &Ledger, before: &CounterSnapshot, r: Reason) -> (u64, u64, u64) {
    let d = delta(l, before);
    (d.avoided(r), d.device_waits, d.host_syncs)
}

/// The seed's shape: the parent writes `a`, records an event (the spawn),
/// and keeps going (`more_work` writes `b`, so its stream moves past the
/// event). Returns the ledger, streams, parent, event, `a`, `b`.
fn parent_then_more_work(
    n: usize,
) -> (
    Ledger,
    Vec<StreamId>,
    gpu_epoch::Task,
    EventCoverage,
    BufferStamps,
    BufferStamps,
) {
    let (l, s) = ledger(n);
    let parent = l.begin_task();
    let ev = EventCoverage::new();
    let (mut a, mut b) = (BufferStamps::new(), BufferStamps::new());
    write(&l, &parent, &mut a, s[0]);
    record(&l, &parent, &ev, s[0]);
    write(&l, &parent, &mut b, s[0]);
    (l, s, parent, ev, a, b)
}

#[test]
fn t01_event_synchronized_on_the_host_avoids_the_wait() {
    let (l, s, _p, ev, mut a, _b) = parent_then_more_work(2);
    let child = l.begin_task();
    assert!(event_sync(&l, &ev));
    let before = l.counters();
    assert_eq!(
        read(&l, &child, &mut a, s[1]),
        Decision::NoWait(Reason::Completed)
    );
    assert_eq!(changed(&l, &before, Reason::Completed), (1, 0, 0));
}

#[test]
fn t02_event_query_found_done_avoids_the_wait() {
    let (l, s, _p, ev, mut a, _b) = parent_then_more_work(2);
    let child = l.begin_task();
    assert!(l.event_complete(&ev, driver("cuEventQuery", true)).unwrap());
    let before = l.counters();
    assert_eq!(
        write(&l, &child, &mut a, s[1]),
        Decision::NoWait(Reason::Completed)
    );
    assert_eq!(changed(&l, &before, Reason::Completed), (1, 0, 0));
}

#[test]
fn t03_stream_synchronized_avoids_the_wait() {
    let (l, s) = ledger(2);
    let (parent, child) = (l.begin_task(), l.begin_task());
    let mut a = BufferStamps::new();
    write(&l, &parent, &mut a, s[0]);
    assert!(stream_sync(&l, &parent, s[0]).counted);
    let before = l.counters();
    assert_eq!(
        write(&l, &child, &mut a, s[1]),
        Decision::NoWait(Reason::Completed)
    );
    assert_eq!(changed(&l, &before, Reason::Completed), (1, 0, 0));
}

#[test]
fn t04_event_waited_for_by_the_new_stream_avoids_the_wait() {
    let (l, s, _p, ev, mut a, mut b) = parent_then_more_work(3);
    let child = l.begin_task();
    assert!(wait(&l, &child, &ev, s[1]));
    let before = l.counters();
    // The host-sync pointer: hand-off to the child's stream, then its sync.
    assert_eq!(
        host_sync_ptr(&l, &child, &mut a, s[1]),
        Decision::NoWait(Reason::Ordered)
    );
    assert_eq!(changed(&l, &before, Reason::Ordered), (1, 0, 0));
    // It returned while more_work (b, after the event) still runs: the
    // parent's stream is complete only up to the event.
    let before = l.counters();
    assert_eq!(
        read(&l, &child, &mut b, s[2]),
        Decision::DeviceWait(set(&[s[0]]))
    );
    assert_eq!(changed(&l, &before, Reason::Completed), (0, 1, 0));
}

#[test]
fn t05_stream_taken_over_from_a_finished_task_avoids_the_wait() {
    let (l, s) = ledger(3);
    let (t0, t1, t2) = (l.begin_task(), l.begin_task(), l.begin_task());
    let mut a = BufferStamps::new();
    write(&l, &t0, &mut a, s[0]);
    l.finish_task(&t0);
    // A task takes the finished task's stream over: its closes count.
    assert_eq!(l.bind(&t1, s[0]), Binding::TookOver);
    let ev = EventCoverage::new();
    assert!(record(&l, &t1, &ev, s[0]).counted);
    assert!(wait(&l, &t2, &ev, s[2]));
    let before = l.counters();
    assert_eq!(
        read(&l, &t2, &mut a, s[2]),
        Decision::NoWait(Reason::Ordered)
    );
    assert_eq!(changed(&l, &before, Reason::Ordered), (1, 0, 0));
    // Recycled (idle, R13): every stamp on it is covered.
    let mut b = BufferStamps::new();
    write(&l, &t1, &mut b, s[0]);
    l.finish_task(&t1);
    l.recycle(s[0]);
    let before = l.counters();
    assert_eq!(
        write(&l, &t2, &mut b, s[1]),
        Decision::NoWait(Reason::Recycled)
    );
    assert_eq!(changed(&l, &before, Reason::Recycled), (1, 0, 0));
}

#[test]
fn t06_memory_used_after_the_event_still_waits() {
    let (l, s, parent, ev, mut a, _b) = parent_then_more_work(2);
    write(&l, &parent, &mut a, s[0]); // after the event
    let child = l.begin_task();
    assert!(wait(&l, &child, &ev, s[1]));
    let before = l.counters();
    assert_eq!(
        read(&l, &child, &mut a, s[1]),
        Decision::DeviceWait(set(&[s[0]]))
    );
    assert_eq!(changed(&l, &before, Reason::Ordered), (0, 1, 0));
}

#[test]
fn t07_event_recorded_by_a_task_not_owning_the_stream_still_waits() {
    let (l, s) = ledger(2);
    let (owner, other, child) = (l.begin_task(), l.begin_task(), l.begin_task());
    let mut a = BufferStamps::new();
    let ev = EventCoverage::new();
    write(&l, &owner, &mut a, s[0]);
    assert!(!record(&l, &other, &ev, s[0]).counted);
    assert_eq!(ev.source(), None);
    assert!(!wait(&l, &child, &ev, s[1]));
    let before = l.counters();
    assert_eq!(
        read(&l, &child, &mut a, s[1]),
        Decision::DeviceWait(set(&[s[0]]))
    );
    assert_eq!(changed(&l, &before, Reason::Ordered), (0, 1, 0));
}

#[test]
fn t08_event_on_a_stream_several_live_tasks_use_still_waits() {
    let (l, s) = ledger(2);
    let (t0, t1, child) = (l.begin_task(), l.begin_task(), l.begin_task());
    let (mut a, mut c) = (BufferStamps::new(), BufferStamps::new());
    let ev = EventCoverage::new();
    write(&l, &t0, &mut a, s[0]);
    write(&l, &t1, &mut c, s[0]); // a second live task on s0: shared
    assert!(l.is_shared(s[0]));
    // Even its owner's record covers nothing now.
    assert!(!record(&l, &t0, &ev, s[0]).counted);
    assert!(!wait(&l, &child, &ev, s[1]));
    let before = l.counters();
    assert_eq!(
        write(&l, &child, &mut a, s[1]),
        Decision::DeviceWait(set(&[s[0]]))
    );
    assert_eq!(changed(&l, &before, Reason::Ordered), (0, 1, 0));
}

#[test]
fn t09_event_re_recorded_elsewhere_still_waits() {
    // Re-recorded before the wait: the wait covers the new record only.
    let (l, s, _p, ev, mut a, _b) = parent_then_more_work(3);
    let (child, other) = (l.begin_task(), l.begin_task());
    record(&l, &other, &ev, s[2]);
    assert!(wait(&l, &child, &ev, s[1]));
    let before = l.counters();
    assert_eq!(
        read(&l, &child, &mut a, s[1]),
        Decision::DeviceWait(set(&[s[0]]))
    );
    assert_eq!(changed(&l, &before, Reason::Ordered), (0, 1, 0));
    // Re-recorded while the child waits (between its read of the event and
    // its driver call): no fact at all.
    let (l, s, _p, ev, mut a, _b) = parent_then_more_work(3);
    let (child, other) = (l.begin_task(), l.begin_task());
    l.bind(&child, s[1]);
    let w = l.begin_wait(&ev);
    record(&l, &other, &ev, s[2]);
    assert!(!l.finish_stream_wait(&child, &ev, w, s[1]));
    let before = l.counters();
    assert_eq!(
        read(&l, &child, &mut a, s[1]),
        Decision::DeviceWait(set(&[s[0]]))
    );
    assert_eq!(changed(&l, &before, Reason::Ordered), (0, 1, 0));
}

#[test]
fn t10_launch_through_a_pointer_taken_before_the_event_still_waits() {
    let (l, s) = ledger(3);
    let (parent, child) = (l.begin_task(), l.begin_task());
    let mut a = BufferStamps::new();
    let ev = EventCoverage::new();
    escape(&l, &parent, &mut a, s[0]); // p = pointer(a)
    record(&l, &parent, &ev, s[0]);
    // ... @cuda f(p) on s0, after the event: untracked.
    assert!(wait(&l, &child, &ev, s[1]));
    let before = l.counters();
    assert_eq!(
        read(&l, &child, &mut a, s[1]),
        Decision::DeviceWait(set(&[s[0]]))
    );
    assert_eq!(changed(&l, &before, Reason::Ordered), (0, 1, 0));
    // Likewise after a synchronize.
    let mut b = BufferStamps::new();
    escape(&l, &parent, &mut b, s[0]);
    stream_sync(&l, &parent, s[0]);
    let before = l.counters();
    assert_eq!(
        write(&l, &child, &mut b, s[2]),
        Decision::DeviceWait(set(&[s[0]]))
    );
    assert_eq!(changed(&l, &before, Reason::Completed), (0, 1, 0));
}

#[test]
fn t11_capture_gives_no_facts_and_the_graph_launch_stamps() {
    let (l, s) = ledger(3);
    let (t0, t1, t2) = (l.begin_task(), l.begin_task(), l.begin_task());
    let mut a = BufferStamps::new();
    let ev = EventCoverage::new();
    write(&l, &t1, &mut a, s[1]);
    l.bind(&t0, s[0]);
    l.set_capturing(s[0], true);
    // Captured: the hand-off waits for nothing (X7: the launch below hands
    // the buffer off again), nothing is stamped.
    let before = l.counters();
    let u = a.get_mut();
    assert_eq!(
        l.hand_off(u, s[0], Access::Write, true),
        Decision::NoWait(Reason::Captured)
    );
    assert_eq!(changed(&l, &before, Reason::Captured), (1, 0, 0));
    assert!(!l.stamp(u, s[0], Access::Write));
    // A record in the capture covers nothing; a wait on it gives nothing.
    assert!(!record(&l, &t0, &ev, s[0]).counted);
    l.set_capturing(s[0], false);
    assert!(!wait(&l, &t2, &ev, s[2]));
    // The graph launch on s0 is one operation: it hands off and stamps.
    let before = l.counters();
    assert_eq!(
        write(&l, &t0, &mut a, s[0]),
        Decision::DeviceWait(set(&[s[1]]))
    );
    assert_eq!(changed(&l, &before, Reason::Ordered), (0, 1, 0));
    assert_eq!(a.get_mut().writer().unwrap().stream, s[0]);
    let before = l.counters();
    assert_eq!(
        read(&l, &t2, &mut a, s[2]),
        Decision::DeviceWait(set(&[s[0]]))
    );
    assert_eq!(changed(&l, &before, Reason::Ordered), (0, 1, 0));
}

#[test]
fn t12_transitive_three_spawns_deep_avoids_the_wait() {
    let (l, s) = ledger(4);
    let t: Vec<_> = (0..4).map(|_| l.begin_task()).collect();
    let e: Vec<_> = (0..3).map(|_| EventCoverage::new()).collect();
    let mut a = BufferStamps::new();
    write(&l, &t[0], &mut a, s[0]);
    for i in 0..3 {
        record(&l, &t[i], &e[i], s[i]); // spawn
        assert!(wait(&l, &t[i + 1], &e[i], s[i + 1]));
    }
    let before = l.counters();
    assert_eq!(
        write(&l, &t[3], &mut a, s[3]),
        Decision::NoWait(Reason::Ordered)
    );
    assert_eq!(changed(&l, &before, Reason::Ordered), (1, 0, 0));
}

#[test]
fn t13_concurrent_readers_do_not_wait_for_each_other() {
    let (l, s) = ledger(4);
    let t: Vec<_> = (0..4).map(|_| l.begin_task()).collect();
    let mut a = BufferStamps::new();
    write(&l, &t[0], &mut a, s[0]);
    stream_sync(&l, &t[0], s[0]);
    let before = l.counters();
    for i in 1..4 {
        assert_eq!(
            read(&l, &t[i], &mut a, s[i]),
            Decision::NoWait(Reason::Completed)
        );
    }
    assert_eq!(changed(&l, &before, Reason::Completed), (3, 0, 0));
    // A writer waits for every reader.
    let before = l.counters();
    assert_eq!(
        write(&l, &t[0], &mut a, s[0]),
        Decision::DeviceWait(set(&[s[1], s[2], s[3]]))
    );
    assert_eq!(changed(&l, &before, Reason::Completed), (0, 3, 0));
}

#[test]
fn t14_disjoint_chunks_do_not_wait_for_each_other() {
    let (l, s) = ledger(3);
    let t: Vec<_> = (0..3).map(|_| l.begin_task()).collect();
    let mut parent = BufferStamps::new();
    write(&l, &t[0], &mut parent, s[0]);
    stream_sync(&l, &t[0], s[0]);
    let mut chunks: Vec<_> = (0..2)
        .map(|_| BufferStamps::from_uses(parent.snapshot()))
        .collect();
    let before = l.counters();
    for (i, c) in chunks.iter_mut().enumerate() {
        assert_eq!(
            write(&l, &t[i + 1], c, s[i + 1]),
            Decision::NoWait(Reason::Completed)
        );
    }
    assert_eq!(changed(&l, &before, Reason::Completed), (2, 0, 0));
    // The join: the parent's stream waits for each chunk's stream, once.
    let before = l.counters();
    for (i, c) in chunks.iter_mut().enumerate() {
        assert_eq!(
            hand_off(&l, &t[0], c.get_mut(), s[0], Access::Write),
            Decision::DeviceWait(set(&[s[i + 1]]))
        );
    }
    l.stamp_write(parent.get_mut(), s[0]);
    assert_eq!(changed(&l, &before, Reason::Completed), (0, 2, 0));
}

#[test]
fn t15_drop_while_in_use_orders_the_free_without_blocking() {
    let (l, s) = ledger(3);
    let t: Vec<_> = (0..3).map(|_| l.begin_task()).collect();
    let reclaimer = l.begin_task();
    let mut a = BufferStamps::new();
    write(&l, &t[0], &mut a, s[0]);
    read(&l, &t[1], &mut a, s[1]);
    // Drop: a stream-ordered free on the reclaim stream after ordering the
    // last writer and every reader; a device wait, never a host sync.
    l.bind(&reclaimer, s[2]);
    let before = l.counters();
    assert_eq!(
        hand_off(&l, &reclaimer, a.get_mut(), s[2], Access::Write),
        Decision::DeviceWait(set(&[s[0], s[1]]))
    );
    assert_eq!(changed(&l, &before, Reason::Completed), (0, 2, 0));
}
