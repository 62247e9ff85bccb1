//! One test per rule of DESIGN "The seed's rules (R1-R14)" and "Beyond the seed (X1-X8)" (R1-R14, X1-X3), at ledger level.
#![cfg(not(loom))]

mod common;

use common::*;
use gpu_epoch::{
    Access, Binding, BufferStamps, Decision, EventCoverage, Generation, LedgerError, Reason,
    StreamEpoch, StreamId, StreamSet,
};
use std::convert::Infallible;

fn set(xs: &[StreamId]) -> StreamSet {
    let mut s = StreamSet::new();
    for &x in xs {
        s.insert(x);
    }
    s
}

#[test]
fn r01_stamp_when_taking_the_pointer_and_again_once_submitted() {
    let (l, s) = ledger(2);
    let t0 = l.begin_task();
    l.bind(&t0, s[0]);
    let mut b = BufferStamps::new();
    let u = b.get_mut();
    assert!(l.stamp(u, s[0], Access::Write));
    assert_eq!(u.writer().unwrap().epoch, StreamEpoch(1));
    // Between the two stamps a task that does not own s0 closes it (a host
    // sync of a hand-off): the close does not count...
    let t1 = l.begin_task();
    let c = l.begin_stream_sync(&t1, s[0]).unwrap();
    assert!(!c.counted);
    l.finish_stream_sync(c);
    // ...and the second stamp takes the new epoch, so a fact about epoch 1
    // does not cover the operation.
    assert!(l.stamp(u, s[0], Access::Write));
    assert_eq!(u.writer().unwrap().epoch, StreamEpoch(2));
    l.mark_completed(s[0], StreamEpoch(1));
    assert_eq!(
        l.hand_off(u, s[1], Access::Read, true),
        Decision::DeviceWait(set(&[s[0]]))
    );
    // Reads keep one entry per stream.
    l.stamp(u, s[1], Access::Read);
    l.stamp(u, s[1], Access::Read);
    assert_eq!(u.readers().len(), 1);
}

#[test]
fn r02_a_close_counts_only_for_the_owner_of_an_unshared_stream() {
    let (l, s) = ledger(1);
    let (t0, t1) = (l.begin_task(), l.begin_task());
    assert_eq!(l.bind(&t0, s[0]), Binding::TookOver);
    let c = l.close(&t0, s[0]);
    assert_eq!((c.epoch, c.counted), (StreamEpoch(1), true));
    assert_eq!(l.closed_counted(s[0]), StreamEpoch(1));
    // Another task's close moves the epoch on but counts nothing.
    let c = l.close(&t1, s[0]);
    assert_eq!((c.epoch, c.counted), (StreamEpoch(2), false));
    assert_eq!(l.closed_counted(s[0]), StreamEpoch(1));
    // Once shared, not even the owner's closes count.
    assert_eq!(l.bind(&t1, s[0]), Binding::Shared);
    let c = l.close(&t0, s[0]);
    assert_eq!((c.epoch, c.counted), (StreamEpoch(3), false));
    assert_eq!(l.closed_counted(s[0]), StreamEpoch(1));
    assert_eq!(l.epoch(s[0]), StreamEpoch(4));
}

#[test]
fn r03_binding_owns_takes_over_or_shares_for_good() {
    let (l, s) = ledger(2);
    let (t0, t1, t2) = (l.begin_task(), l.begin_task(), l.begin_task());
    assert_eq!(l.bind(&t0, s[0]), Binding::TookOver);
    assert_eq!(l.bind(&t0, s[0]), Binding::Owned);
    assert_eq!(l.owner(s[0]), Some(t0.id()));
    // A second live task: shared, for good (sticky).
    assert_eq!(l.bind(&t1, s[0]), Binding::Shared);
    assert!(l.is_shared(s[0]));
    assert_eq!(l.bind(&t0, s[0]), Binding::Shared);
    l.finish_task(&t0);
    l.finish_task(&t1);
    assert_eq!(l.bind(&t2, s[0]), Binding::Shared);
    // A finished owner's stream is taken over, unshared.
    let t3 = l.begin_task();
    assert_eq!(l.bind(&t3, s[1]), Binding::TookOver);
    l.finish_task(&t3);
    assert_eq!(l.bind(&t2, s[1]), Binding::TookOver);
    assert_eq!(l.owner(s[1]), Some(t2.id()));
    assert!(!l.is_shared(s[1]));
    assert!(l.close(&t2, s[1]).counted);
}

#[test]
fn r04_a_record_covers_the_closed_epoch_if_it_counted_else_nothing() {
    let (l, s) = ledger(2);
    let (t0, t1) = (l.begin_task(), l.begin_task());
    let ev = EventCoverage::new();
    l.bind(&t0, s[0]);
    let tk = l.begin_record(&t0, &ev, s[0]);
    // While the driver record is in flight the event covers nothing.
    assert_eq!((ev.records(), ev.source()), (1, None));
    l.finish_record(&ev, tk);
    assert_eq!(ev.source(), Some((s[0], StreamEpoch(1))));
    // Recorded by a task that does not own the stream: covers nothing.
    let c = record(&l, &t1, &ev, s[0]);
    assert!(!c.counted);
    assert_eq!((ev.records(), ev.source()), (2, None));
    // On a capturing stream: closes nothing, covers nothing.
    l.bind(&t1, s[1]);
    l.set_capturing(s[1], true);
    let before = l.epoch(s[1]);
    let c = record(&l, &t1, &ev, s[1]);
    assert!(!c.counted);
    assert_eq!(l.epoch(s[1]), before);
    assert_eq!((ev.records(), ev.source()), (3, None));
}

#[test]
fn r05_stream_sync_completes_a_counted_close_and_refuses_a_capture() {
    let (l, s) = ledger(3);
    let (t0, t1, t2) = (l.begin_task(), l.begin_task(), l.begin_task());
    let mut b = BufferStamps::new();
    write(&l, &t0, &mut b, s[0]);
    let c = stream_sync(&l, &t0, s[0]);
    assert!(c.counted);
    assert_eq!(l.completed(s[0]), StreamEpoch(1));
    assert_eq!(
        read(&l, &t1, &mut b, s[1]),
        Decision::NoWait(Reason::Completed)
    );
    // A sync by a task that does not own the stream gives no fact.
    let mut c2 = BufferStamps::new();
    write(&l, &t2, &mut c2, s[2]);
    let c = l.begin_stream_sync(&t1, s[2]).unwrap();
    assert!(!c.counted);
    l.finish_stream_sync(c);
    assert_eq!(l.completed(s[2]), StreamEpoch(0));
    l.set_capturing(s[0], true);
    assert_eq!(
        l.begin_stream_sync(&t0, s[0]),
        Err(LedgerError::SyncWhileCapturing(s[0]))
    );
}

#[test]
fn r06_event_sync_completes_unless_re_recorded_meanwhile() {
    let (l, s) = ledger(3);
    let (t0, t1, t2) = (l.begin_task(), l.begin_task(), l.begin_task());
    let mut a = BufferStamps::new();
    let ev = EventCoverage::new();
    write(&l, &t0, &mut a, s[0]);
    record(&l, &t0, &ev, s[0]);
    let w = l.begin_wait(&ev);
    assert_eq!(w.source(), Some((s[0], StreamEpoch(1))));
    // While the host waits without the lock, the event is recorded elsewhere:
    // the driver may have waited for that record instead.
    record(&l, &t2, &ev, s[2]);
    assert!(!l.finish_event_complete(&ev, w));
    assert_eq!(l.completed(s[0]), StreamEpoch(0));
    assert_eq!(
        l.hand_off(a.get_mut(), s[1], Access::Read, true),
        Decision::DeviceWait(set(&[s[0]]))
    );
    // Undisturbed, it gives the Completed fact.
    record(&l, &t0, &ev, s[0]);
    assert!(event_sync(&l, &ev));
    assert_eq!(l.completed(s[0]), StreamEpoch(2));
    assert_eq!(
        read(&l, &t1, &mut a, s[1]),
        Decision::NoWait(Reason::Completed)
    );
}

#[test]
fn r07_a_query_that_finds_the_event_done_completes_it() {
    let (l, s) = ledger(3);
    let (t0, t2) = (l.begin_task(), l.begin_task());
    let ev = EventCoverage::new();
    let mut a = BufferStamps::new();
    write(&l, &t0, &mut a, s[0]);
    record(&l, &t0, &ev, s[0]);
    // Not ready: no fact.
    assert!(!l
        .event_complete(&ev, driver("cuEventQuery", false))
        .unwrap());
    assert_eq!(l.completed(s[0]), StreamEpoch(0));
    // Done, but re-recorded between the read and the query: no fact.
    let rerecorded = l.event_complete(&ev, || {
        record(&l, &t2, &ev, s[2]);
        Ok::<_, Infallible>(true)
    });
    assert!(!rerecorded.unwrap());
    assert_eq!(l.completed(s[0]), StreamEpoch(0));
    // Done: Completed.
    record(&l, &t0, &ev, s[0]);
    assert!(l.event_complete(&ev, driver("cuEventQuery", true)).unwrap());
    assert_eq!(l.completed(s[0]), StreamEpoch(2));
    assert_eq!(
        l.hand_off(a.get_mut(), s[1], Access::Write, true),
        Decision::NoWait(Reason::Completed)
    );
}

#[test]
fn r08_a_stream_wait_orders_the_waiting_owners_stream() {
    let (l, s) = ledger(3);
    let (t0, t1, t2, t3) = (
        l.begin_task(),
        l.begin_task(),
        l.begin_task(),
        l.begin_task(),
    );
    let ev = EventCoverage::new();
    let mut a = BufferStamps::new();
    write(&l, &t0, &mut a, s[0]);
    record(&l, &t0, &ev, s[0]);
    assert!(wait(&l, &t1, &ev, s[1]));
    assert_eq!(l.waited(s[1], s[0]), StreamEpoch(1));
    assert_eq!(
        l.hand_off(a.get_mut(), s[1], Access::Read, true),
        Decision::NoWait(Reason::Ordered)
    );
    // A wait on another live task's stream shares it, and still orders
    // what goes on it later (X8).
    l.bind(&t2, s[2]);
    assert!(wait(&l, &t3, &ev, s[2]));
    assert!(l.is_shared(s[2]));
    assert_eq!(l.waited(s[2], s[0]), StreamEpoch(1));
    // A task that never bound an unshared stream learns nothing from a
    // wait on it.
    let (l, s) = ledger(2);
    let (t0, t1, t2) = (l.begin_task(), l.begin_task(), l.begin_task());
    let ev = EventCoverage::new();
    record(&l, &t0, &ev, s[0]);
    l.bind(&t1, s[1]);
    assert!(!l
        .stream_wait(&t2, &ev, s[1], driver("cuStreamWaitEvent", true))
        .unwrap());
    assert_eq!(l.waited(s[1], s[0]), StreamEpoch(0));
    // A wait spanning a re-record: no fact.
    let (l, s) = ledger(3);
    let (t0, t1, t2) = (l.begin_task(), l.begin_task(), l.begin_task());
    let ev = EventCoverage::new();
    record(&l, &t0, &ev, s[0]);
    l.bind(&t1, s[1]);
    let w = l.begin_wait(&ev);
    record(&l, &t2, &ev, s[2]);
    assert!(!l.finish_stream_wait(&t1, &ev, w, s[1]));
    assert_eq!(l.waited(s[1], s[0]), StreamEpoch(0));
}

#[test]
fn r09_hand_off_waits_unless_clean_completed_ordered_or_recycled() {
    let (l, s) = ledger(4);
    let (t0, t1) = (l.begin_task(), l.begin_task());
    let mut a = BufferStamps::new();
    assert_eq!(
        write(&l, &t0, &mut a, s[0]),
        Decision::NoWait(Reason::Clean)
    );
    assert_eq!(
        read(&l, &t0, &mut a, s[0]),
        Decision::NoWait(Reason::SameStream)
    );
    let u = a.get_mut();
    assert_eq!(
        l.hand_off(u, s[1], Access::Read, true),
        Decision::DeviceWait(set(&[s[0]]))
    );
    // No device wait possible (another context): the host syncs s0.
    assert_eq!(
        l.hand_off(u, s[1], Access::Read, false),
        Decision::HostSync(set(&[s[0]]))
    );
    // A capturing new stream waits for nothing (X7): its graph's launch
    // hands the buffer off again, on whatever context.
    l.set_capturing(s[2], true);
    assert_eq!(
        l.hand_off(u, s[2], Access::Read, true),
        Decision::NoWait(Reason::Captured)
    );
    assert_eq!(
        l.hand_off(u, s[2], Access::Read, false),
        Decision::NoWait(Reason::Captured)
    );
    l.set_capturing(s[2], false);
    // Ordered, completed, recycled.
    l.bind(&t1, s[1]);
    assert!(l.mark_ordered(&t1, s[1], s[0], StreamEpoch(1)));
    assert_eq!(
        l.hand_off(u, s[1], Access::Read, true),
        Decision::NoWait(Reason::Ordered)
    );
    l.mark_completed(s[0], StreamEpoch(1));
    assert_eq!(
        l.hand_off(u, s[3], Access::Read, true),
        Decision::NoWait(Reason::Completed)
    );
    let mut b = BufferStamps::new();
    write(&l, &t0, &mut b, s[0]);
    l.finish_task(&t0);
    assert_eq!(l.recycle(s[0]), Generation(1));
    assert_eq!(
        l.hand_off(b.get_mut(), s[3], Access::Write, true),
        Decision::NoWait(Reason::Recycled)
    );
}

#[test]
fn r10_an_escaped_buffer_waits_for_everything_until_it_moves() {
    let (l, s) = ledger(3);
    let (t0, t1) = (l.begin_task(), l.begin_task());
    let mut a = BufferStamps::new();
    escape(&l, &t0, &mut a, s[0]);
    assert!(a.get_mut().is_escaped());
    // The pointer may be used after the stamp's epoch closed.
    stream_sync(&l, &t0, s[0]);
    assert_eq!(l.completed(s[0]), StreamEpoch(1));
    assert_eq!(
        l.hand_off(a.get_mut(), s[1], Access::Read, true),
        Decision::DeviceWait(set(&[s[0]]))
    );
    // A tracked use on the escape's own stream does not end the escape: raw
    // work through the pointer may still follow there.
    read(&l, &t0, &mut a, s[0]);
    write(&l, &t0, &mut a, s[0]);
    assert!(a.get_mut().is_escaped());
    stream_sync(&l, &t0, s[0]);
    assert_eq!(
        l.hand_off(a.get_mut(), s[1], Access::Read, true),
        Decision::DeviceWait(set(&[s[0]]))
    );
    // The move (here a read) ends it; raw writes on s0 before the move are
    // covered only by facts newer than the move.
    assert_eq!(
        read(&l, &t1, &mut a, s[1]),
        Decision::DeviceWait(set(&[s[0]]))
    );
    let u = a.get_mut();
    assert!(!u.is_escaped());
    assert_eq!(u.writer().unwrap().epoch, l.epoch(s[0]));
    assert_eq!(
        l.hand_off(u, s[2], Access::Read, true),
        Decision::DeviceWait(set(&[s[0]]))
    );
}

#[test]
fn r11_host_sync_pointer_syncs_the_tasks_stream_not_the_parents() {
    let (l, s) = ledger(3);
    let (parent, child) = (l.begin_task(), l.begin_task());
    let ev = EventCoverage::new();
    let (mut a, mut b) = (BufferStamps::new(), BufferStamps::new());
    write(&l, &parent, &mut a, s[0]);
    record(&l, &parent, &ev, s[0]); // the spawn
    write(&l, &parent, &mut b, s[0]); // more_work, epoch 2
    assert!(wait(&l, &child, &ev, s[1]));
    assert_eq!(
        host_sync_ptr(&l, &child, &mut a, s[1]),
        Decision::NoWait(Reason::Ordered)
    );
    // The child's sync completes its stream and, through its ordered table
    // (X1), the parent's epoch 1 only: more_work is not waited for.
    assert_eq!(l.completed(s[1]), StreamEpoch(1));
    assert_eq!(l.completed(s[0]), StreamEpoch(1));
    assert_eq!(
        l.hand_off(b.get_mut(), s[2], Access::Read, true),
        Decision::DeviceWait(set(&[s[0]]))
    );
}

#[test]
fn r12_capture_gives_no_facts_and_the_graph_launch_stamps() {
    let (l, s) = ledger(2);
    let (t0, t1) = (l.begin_task(), l.begin_task());
    let mut a = BufferStamps::new();
    let (ev0, ev1) = (EventCoverage::new(), EventCoverage::new());
    write(&l, &t1, &mut a, s[1]);
    record(&l, &t1, &ev1, s[1]);
    l.bind(&t0, s[0]);
    l.set_capturing(s[0], true);
    // A captured op: the hand-off waits for nothing (X7: it runs at the
    // launch below, which waits for s1), no stamp.
    let u = a.get_mut();
    assert_eq!(
        l.hand_off(u, s[0], Access::Write, true),
        Decision::NoWait(Reason::Captured)
    );
    assert!(!l.stamp(u, s[0], Access::Write));
    assert_eq!(u.writer().unwrap().stream, s[1]);
    // Record and wait on the capturing stream: no close, no fact.
    let epoch = l.epoch(s[0]);
    assert!(!record(&l, &t0, &ev0, s[0]).counted);
    assert_eq!((l.epoch(s[0]), ev0.source()), (epoch, None));
    assert!(!wait(&l, &t0, &ev1, s[0]));
    assert_eq!(l.waited(s[0], s[1]), StreamEpoch(0));
    l.set_capturing(s[0], false);
    // The graph launch: one operation that hands off and stamps.
    assert_eq!(
        write(&l, &t0, &mut a, s[0]),
        Decision::DeviceWait(set(&[s[1]]))
    );
    let w = a.get_mut().writer().unwrap();
    assert_eq!((w.stream, w.epoch), (s[0], l.epoch(s[0])));
}

#[test]
fn r13_a_recycled_stream_covers_its_old_stamps_and_its_events_still_count() {
    let (l, s) = ledger(3);
    let (t0, t1, t2) = (l.begin_task(), l.begin_task(), l.begin_task());
    let (mut a, mut b) = (BufferStamps::new(), BufferStamps::new());
    let ev = EventCoverage::new();
    write(&l, &t0, &mut a, s[0]);
    record(&l, &t0, &ev, s[0]);
    write(&l, &t0, &mut b, s[0]);
    l.finish_task(&t0);
    // The pool found s0 idle.
    assert_eq!(l.recycle(s[0]), Generation(1));
    assert_eq!(l.owner(s[0]), None);
    assert_eq!(
        read(&l, &t2, &mut b, s[2]),
        Decision::NoWait(Reason::Recycled)
    );
    assert_eq!(l.bind(&t1, s[0]), Binding::TookOver);
    assert!(l.close(&t1, s[0]).counted);
    // The finished owner's event counts.
    assert!(wait(&l, &t2, &ev, s[2]));
    assert_eq!(l.waited(s[2], s[0]), StreamEpoch(1));
}

#[test]
fn r14_no_lock_is_held_across_a_driver_call() {
    use std::sync::mpsc;
    use std::time::Duration;
    let (l, s) = ledger(3);
    let (t0, t1, t2) = (l.begin_task(), l.begin_task(), l.begin_task());
    let ev = EventCoverage::new();
    record(&l, &t0, &ev, s[0]);
    l.bind(&t1, s[1]);
    let kept = l.stream_wait(&t1, &ev, s[1], || {
        // During the driver wait, another thread records and queries the
        // event: it must not block on a lock the waiter holds.
        std::thread::scope(|sc| {
            let (tx, rx) = mpsc::channel();
            let (l, ev, t2, s2) = (&l, &ev, &t2, s[2]);
            sc.spawn(move || {
                record(l, t2, ev, s2);
                event_sync(l, ev);
                tx.send(()).unwrap();
            });
            rx.recv_timeout(Duration::from_secs(10))
                .expect("a record blocked while another task waited on the event");
        });
        Ok::<_, Infallible>(true)
    });
    // The re-record is detected by the record count.
    assert!(!kept.unwrap());
    assert_eq!(l.waited(s[1], s[0]), StreamEpoch(0));
    // Two records in flight at once: whichever driver call lands last, the
    // event covers nothing until a record runs alone.
    // (Two owners, so that both records count.)
    l.finish_task(&t0);
    l.finish_task(&t2);
    let (t3, t4) = (l.begin_task(), l.begin_task());
    let (s0, s2) = (s[0], s[2]);
    assert_eq!(l.bind(&t3, s0), Binding::TookOver);
    assert_eq!(l.bind(&t4, s2), Binding::TookOver);
    let k3 = l.begin_record(&t3, &ev, s0);
    let k4 = l.begin_record(&t4, &ev, s2);
    // k4's driver call, then k3's: the driver's event is k3's record.
    l.finish_record(&ev, k4);
    l.finish_record(&ev, k3);
    assert_eq!(ev.source(), None);
    record(&l, &t3, &ev, s0);
    assert_eq!(ev.source().map(|x| x.0), Some(s0));
}

#[test]
fn x1_an_event_carries_its_streams_ordered_table() {
    let (l, s) = ledger(4);
    let t: Vec<_> = (0..4).map(|_| l.begin_task()).collect();
    let e: Vec<_> = (0..3).map(|_| EventCoverage::new()).collect();
    let mut a = BufferStamps::new();
    write(&l, &t[0], &mut a, s[0]);
    record(&l, &t[0], &e[0], s[0]);
    assert!(wait(&l, &t[1], &e[0], s[1]));
    record(&l, &t[1], &e[1], s[1]);
    assert!(wait(&l, &t[2], &e[1], s[2]));
    assert_eq!(l.waited(s[2], s[0]), StreamEpoch(1));
    assert_eq!(
        l.hand_off(a.get_mut(), s[2], Access::Read, true),
        Decision::NoWait(Reason::Ordered)
    );
    // Completing an event completes its table too.
    record(&l, &t[2], &e[2], s[2]);
    assert!(event_sync(&l, &e[2]));
    assert_eq!(l.completed(s[0]), StreamEpoch(1));
    assert_eq!(l.completed(s[1]), StreamEpoch(1));
    assert_eq!(
        read(&l, &t[3], &mut a, s[3]),
        Decision::NoWait(Reason::Completed)
    );
}

#[test]
fn x6_a_recycled_stream_completes_what_it_was_ordered_after() {
    // s1 waited for s0's epoch 1, then went idle: recycling it (R13) says
    // s0's epoch 1 is done too, as a synchronize of s1 would (R5, X1).
    let (l, s) = ledger(3);
    let t: Vec<_> = (0..3).map(|_| l.begin_task()).collect();
    let ev = EventCoverage::new();
    let mut a = BufferStamps::new();
    write(&l, &t[0], &mut a, s[0]);
    record(&l, &t[0], &ev, s[0]);
    assert!(wait(&l, &t[1], &ev, s[1]));
    assert_eq!(l.completed(s[0]), StreamEpoch(0));
    l.finish_task(&t[1]);
    l.recycle(s[1]);
    assert_eq!(l.completed(s[0]), StreamEpoch(1));
    assert_eq!(
        read(&l, &t[2], &mut a, s[2]),
        Decision::NoWait(Reason::Completed)
    );
}

#[test]
fn x6_a_hand_off_s_host_wait_completes_the_last_counted_close() {
    // The host synchronizes a pooled event recorded on s0 after reading
    // the facts: s0's last counted close, and what s0 was ordered after,
    // are done.
    let (l, s) = ledger(3);
    let t: Vec<_> = (0..3).map(|_| l.begin_task()).collect();
    let ev = EventCoverage::new();
    let mut a = BufferStamps::new();
    write(&l, &t[1], &mut a, s[1]);
    record(&l, &t[1], &ev, s[1]);
    assert!(wait(&l, &t[0], &ev, s[0]));
    let mut b = BufferStamps::new();
    write(&l, &t[0], &mut b, s[0]);
    assert!(l.close(&t[0], s[0]).counted);
    let facts = l.hand_off_facts(s[0]);
    // (the pooled record and the host's synchronize of it)
    l.learn_host_wait(&facts);
    assert_eq!(l.completed(s[0]), StreamEpoch(1));
    assert_eq!(l.completed(s[1]), StreamEpoch(1));
    for x in [&mut a, &mut b] {
        assert_eq!(
            read(&l, &t[2], x, s[2]),
            Decision::NoWait(Reason::Completed)
        );
    }
}

#[test]
fn x8_a_sharers_wait_orders_the_stream_but_not_the_owners_record_or_sync() {
    // t1 shares t0's s1 and waits there for s0's write: later work on s1,
    // whoever submits it, is ordered after that write.
    let (l, s) = ledger(3);
    let t: Vec<_> = (0..3).map(|_| l.begin_task()).collect();
    let (ev, e1) = (EventCoverage::new(), EventCoverage::new());
    let mut a = BufferStamps::new();
    write(&l, &t[2], &mut a, s[0]);
    record(&l, &t[2], &ev, s[0]);
    l.bind(&t[0], s[1]);
    // t0 (the owner) begins a record on s1 and its driver call lands
    // before t1's wait; t1's fact comes before t0's finish.
    let ticket = l.begin_record(&t[0], &e1, s[1]);
    assert!(wait(&l, &t[1], &ev, s[1]));
    assert_eq!(
        l.hand_off(a.get_mut(), s[1], Access::Read, true),
        Decision::NoWait(Reason::Ordered)
    );
    l.finish_record(&e1, ticket);
    // The record covers t0's close but not t1's wait, which came after it.
    let c = l.begin_wait(&e1);
    assert_eq!(c.source(), Some((s[1], StreamEpoch(1))));
    assert!(l.finish_event_complete(&e1, c));
    assert_eq!(l.completed(s[1]), StreamEpoch(1));
    assert_eq!(l.completed(s[0]), StreamEpoch(0));
    // Likewise a synchronize the owner began before the sharer's wait.
    let (l, s) = ledger(3);
    let t: Vec<_> = (0..3).map(|_| l.begin_task()).collect();
    let ev = EventCoverage::new();
    let mut a = BufferStamps::new();
    write(&l, &t[2], &mut a, s[0]);
    record(&l, &t[2], &ev, s[0]);
    l.bind(&t[0], s[1]);
    let closed = l.begin_stream_sync(&t[0], s[1]).unwrap();
    assert!(closed.counted);
    assert!(wait(&l, &t[1], &ev, s[1]));
    l.finish_stream_sync(closed);
    assert_eq!(l.completed(s[1]), closed.epoch);
    assert_eq!(l.completed(s[0]), StreamEpoch(0));
}

#[test]
fn x2_readers_do_not_wait_for_each_other_a_writer_waits_for_all() {
    let (l, s) = ledger(4);
    let t: Vec<_> = (0..4).map(|_| l.begin_task()).collect();
    let mut a = BufferStamps::new();
    write(&l, &t[0], &mut a, s[0]);
    stream_sync(&l, &t[0], s[0]);
    assert_eq!(
        read(&l, &t[1], &mut a, s[1]),
        Decision::NoWait(Reason::Completed)
    );
    assert_eq!(
        read(&l, &t[2], &mut a, s[2]),
        Decision::NoWait(Reason::Completed)
    );
    assert_eq!(
        read(&l, &t[1], &mut a, s[1]),
        Decision::NoWait(Reason::SameStream)
    );
    assert_eq!(a.get_mut().readers().len(), 2);
    let before = l.counters();
    assert_eq!(
        write(&l, &t[3], &mut a, s[3]),
        Decision::DeviceWait(set(&[s[1], s[2]]))
    );
    let d = delta(&l, &before);
    assert_eq!((d.device_waits, d.avoided(Reason::Completed)), (2, 1));
    assert!(a.get_mut().readers().is_empty());
}

#[test]
fn x3_disjoint_views_do_not_wait_for_each_other() {
    let (l, s) = ledger(3);
    let t: Vec<_> = (0..3).map(|_| l.begin_task()).collect();
    let mut parent = BufferStamps::new();
    write(&l, &t[0], &mut parent, s[0]);
    stream_sync(&l, &t[0], s[0]);
    let mut v1 = BufferStamps::from_uses(parent.snapshot());
    let mut v2 = BufferStamps::from_uses(parent.snapshot());
    assert_eq!(
        write(&l, &t[1], &mut v1, s[1]),
        Decision::NoWait(Reason::Completed)
    );
    assert_eq!(
        write(&l, &t[2], &mut v2, s[2]),
        Decision::NoWait(Reason::Completed)
    );
    // The join on s0: each view's work is waited for, then the parent is
    // restamped there.
    assert_eq!(
        hand_off(&l, &t[0], v1.get_mut(), s[0], Access::Write),
        Decision::DeviceWait(set(&[s[1]]))
    );
    assert_eq!(
        hand_off(&l, &t[0], v2.get_mut(), s[0], Access::Write),
        Decision::DeviceWait(set(&[s[2]]))
    );
    l.stamp_write(parent.get_mut(), s[0]);
    assert_eq!(parent.get_mut().writer().unwrap().stream, s[0]);
}

// ----- X3 extended: ranges of one stamps ------------------------------------

#[test]
fn x3_disjoint_ranges_do_not_wait() {
    let (l, s) = ledger(3);
    let t = l.begin_task();
    for &x in &s {
        l.bind(&t, x);
    }
    let mut b = BufferStamps::new();
    let u = b.get_mut();
    // Two writers of disjoint halves, on two streams: neither waits.
    assert!(matches!(
        l.hand_off_range(u, 0..10, s[0], Access::Write, true),
        Decision::NoWait(_)
    ));
    l.stamp_write_range(u, 0..10, s[0]);
    assert!(matches!(
        l.hand_off_range(u, 10..20, s[1], Access::Write, true),
        Decision::NoWait(_)
    ));
    l.stamp_write_range(u, 10..20, s[1]);
    // A read of one half waits for its writer only; a write of the other
    // half does not wait for that read.
    assert_eq!(
        l.hand_off_range(u, 0..10, s[2], Access::Read, true),
        Decision::DeviceWait(set(&[s[0]]))
    );
    l.stamp_read_range(u, 0..10, s[2]);
    assert_eq!(
        l.hand_off_range(u, 10..20, s[0], Access::Write, true),
        Decision::DeviceWait(set(&[s[1]]))
    );
    // Empty ranges touch nothing.
    assert!(matches!(
        l.hand_off_range(u, 10..10, s[2], Access::Write, true),
        Decision::NoWait(_)
    ));
}

#[test]
fn x3_overlapping_ranges_are_ordered() {
    let (l, s) = ledger(4);
    let t = l.begin_task();
    for &x in &s {
        l.bind(&t, x);
    }
    let mut b = BufferStamps::new();
    let u = b.get_mut();
    l.stamp_write_range(u, 0..10, s[0]);
    l.stamp_write_range(u, 10..20, s[1]);
    l.stamp_read_range(u, 5..8, s[2]);
    // A write over both halves waits for both writers and the reader: one
    // decision, the union of the entries' streams.
    assert_eq!(
        l.hand_off_range(u, 5..15, s[3], Access::Write, true),
        Decision::DeviceWait(set(&[s[0], s[1], s[2]]))
    );
    l.stamp_write_range(u, 5..15, s[3]);
    // The read of 5..8 was inside the write: dropped; the halves, only
    // overlapped in part, stay (conservative).
    assert_eq!(u.ranges().count(), 3);
    assert_eq!(
        l.hand_off_range(u, 0..5, s[2], Access::Read, true),
        Decision::DeviceWait(set(&[s[0]]))
    );
    // The whole waits for everything; a write of the whole drops it all.
    assert_eq!(
        l.hand_off(u, s[2], Access::Read, true),
        Decision::DeviceWait(set(&[s[0], s[1], s[3]]))
    );
    l.stamp_write(u, s[2]);
    assert_eq!(u.ranges().count(), 1);
    assert_eq!(u.writer().unwrap().stream, s[2]);
    // Merging decisions: the stronger kind, the union of streams.
    let (a, c) = (
        Decision::DeviceWait(set(&[s[0]])),
        Decision::HostSync(set(&[s[1]])),
    );
    assert_eq!(a.merge(c), Decision::HostSync(set(&[s[0], s[1]])));
    assert_eq!(
        Decision::NoWait(Reason::Clean).merge(a),
        Decision::DeviceWait(set(&[s[0]]))
    );
}

#[test]
fn x3_ranges_coalesce_into_unknown_uses() {
    let (l, s) = ledger(2);
    let t = l.begin_task();
    l.bind(&t, s[0]);
    l.bind(&t, s[1]);
    let mut b = BufferStamps::new();
    let u = b.get_mut();
    for i in 0..gpu_epoch::MAX_ENTRIES {
        l.stamp_write_range(u, i..i + 1, s[0]);
    }
    assert_eq!(u.ranges().count(), gpu_epoch::MAX_ENTRIES);
    assert!(!u.is_unknown());
    // A read of a range no entry holds, the list full: coalesced.
    l.stamp_read_range(u, 100..101, s[1]);
    assert!(u.is_unknown());
    // Every hand-off, of any range, waits for every other stream...
    assert_eq!(
        l.hand_off_range(u, 200..201, s[1], Access::Read, true),
        Decision::DeviceWait(set(&[s[0]]))
    );
    // ...until a write of the whole, whose hand-off waited for them all.
    l.stamp_write_range(u, 0..1, s[1]);
    assert!(u.is_unknown());
    l.stamp_write(u, s[1]);
    assert!(!u.is_unknown());
    // A write past the bound coalesces as well.
    for i in 0..=gpu_epoch::MAX_ENTRIES {
        l.stamp_write_range(u, i..i + 1, s[0]);
    }
    assert!(u.is_unknown());
}

/// A hand-off's device wait teaches what the source stream was ordered
/// after (X1 for the hand-off's pooled event): s1 waited for s0's epoch 1,
/// then s2 waits for s1; s2 is ordered after s0's epoch 1 too, so a buffer
/// s0 wrote there needs no wait on s2.
#[test]
fn a_hand_off_teaches_what_its_source_was_ordered_after() {
    let (l, s) = ledger(3);
    let (t0, t1, t2) = (l.begin_task(), l.begin_task(), l.begin_task());
    l.bind(&t0, s[0]);
    l.bind(&t1, s[1]);
    l.bind(&t2, s[2]);
    let mut a = BufferStamps::new();
    assert!(l.stamp(a.get_mut(), s[0], Access::Write));
    assert!(l.close(&t0, s[0]).counted);
    // s1 takes `a`: a device wait for s0, learnt up to its counted close.
    let d = l.hand_off(a.get_mut(), s[1], Access::Read, true);
    assert_eq!(d, Decision::DeviceWait(set(&[s[0]])));
    let facts = l.hand_off_facts(s[0]);
    assert!(l.learn_hand_off(&t1, s[1], &facts));
    assert_eq!(l.waited(s[1], s[0]), StreamEpoch(1));
    // s1 writes `b`; s2 takes it: a device wait for s1...
    let mut b = BufferStamps::new();
    assert!(l.stamp(b.get_mut(), s[1], Access::Write));
    assert!(l.close(&t1, s[1]).counted);
    let d = l.hand_off(b.get_mut(), s[2], Access::Read, true);
    assert_eq!(d, Decision::DeviceWait(set(&[s[1]])));
    // ...which a task that does not own s2 learns nothing from...
    let facts = l.hand_off_facts(s[1]);
    assert!(!l.learn_hand_off(&t1, s[2], &facts));
    assert_eq!(l.waited(s[2], s[0]), StreamEpoch(0));
    // ...and s2's owner learns s1's row with it.
    assert!(l.learn_hand_off(&t2, s[2], &facts));
    assert_eq!(l.waited(s[2], s[1]), StreamEpoch(1));
    assert_eq!(l.waited(s[2], s[0]), StreamEpoch(1));
    assert_eq!(
        l.hand_off(a.get_mut(), s[2], Access::Read, true),
        Decision::NoWait(Reason::Ordered)
    );
}

#[test]
fn x3_a_dropped_split_gives_its_parent_its_views_uses() {
    let (l, s) = ledger(3);
    let (t0, t1, t2) = (l.begin_task(), l.begin_task(), l.begin_task());
    let mut a = BufferStamps::new();
    write(&l, &t0, &mut a, s[0]);
    // Split in two at 10: each view starts with the parent's uses.
    let before = a.get_mut().clone();
    let mut v0 = BufferStamps::from_uses(before.clone());
    let v1 = BufferStamps::from_uses(before.clone());
    l.forget_uses(a.get_mut());
    // View 0 written on s1 (after s0's write); view 1 untouched.
    assert_eq!(
        write(&l, &t1, &mut v0, s[1]),
        Decision::DeviceWait(set(&[s[0]]))
    );
    let mut views = [v0, v1];
    let [u0, u1] = &mut views;
    l.merge_views(
        a.get_mut(),
        &before,
        &[(0..10, &*u0.get_mut()), (10..usize::MAX, &*u1.get_mut())],
    );
    let u = a.get_mut();
    assert!(!u.is_unknown());
    // The first part was last written on s1 alone; the rest on s0.
    l.bind(&t2, s[2]);
    assert_eq!(
        l.hand_off_range(u, 0..5, s[2], Access::Read, true),
        Decision::DeviceWait(set(&[s[1]]))
    );
    assert_eq!(
        l.hand_off_range(u, 20..30, s[2], Access::Read, true),
        Decision::DeviceWait(set(&[s[0]]))
    );
    assert_eq!(
        l.hand_off(u, s[2], Access::Write, true),
        Decision::DeviceWait(set(&[s[0], s[1]]))
    );
    // A view of unknown uses (split again and leaked): the parent's stay
    // unknown.
    let [u0, u1] = &mut views;
    l.forget_uses(u1.get_mut());
    let mut b = BufferStamps::new();
    l.forget_uses(b.get_mut());
    l.merge_views(
        b.get_mut(),
        &before,
        &[(0..10, &*u0.get_mut()), (10..usize::MAX, &*u1.get_mut())],
    );
    assert!(b.get_mut().is_unknown());
}
