//! The host backend's bounds: destroyed streams' threads are joined and
//! their slots reused (exactly: never a slot whose earlier stream's work
//! the host has not seen done), and the race detector prunes what every
//! stream already orders, still finding the races that remain.

use super::HostDriver;
use crate::driver::{Driver, MemAccess, RawStream, SyncMode};
use gpu_epoch::Access;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Waits (up to 10 s, a hang guard) until `n` stream threads of `d` run
/// (the destroyed streams' threads ended).
fn until_running(d: &HostDriver, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while d.running_threads() > n {
        assert!(
            Instant::now() < deadline,
            "{} destroyed streams' threads never ended",
            d.running_threads()
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Submits on `s` an operation that touches nothing but is checked by the
/// race detector as `access` to `bytes` at `ptr`.
fn touch(d: &HostDriver, s: RawStream, ptr: u64, bytes: usize, access: Access) {
    let acc = [MemAccess { ptr, bytes, access }];
    // SAFETY: the body touches no memory; the accesses are only checked.
    unsafe { d.host_op(s, Arc::new(|| {}), &acc) }.unwrap();
}

/// Defect 6: bursts of 40 streams, each written on, synchronized (the host
/// sees its work done, as the stream pool does before it retires a stream)
/// and destroyed. Before the fix every destroyed stream's thread was kept
/// unjoined (its stack mapped: about 80 MiB a burst) and every stream took
/// a new slot: 800 of each after 20 bursts. Now both stay at one burst's.
#[test]
fn bursts_of_streams_leave_no_threads_or_slots_behind() {
    const BURST: usize = 40;
    let d = HostDriver::new(1 << 20, usize::MAX);
    let buf = d.alloc(BURST * 4, RawStream(0)).unwrap();
    for burst in 0..20 {
        let streams: Vec<_> = (0..BURST).map(|_| d.create_stream().unwrap()).collect();
        for (i, &s) in streams.iter().enumerate() {
            touch(&d, s, buf + 4 * i as u64, 4, Access::Write);
        }
        for &s in &streams {
            d.stream_sync(s, SyncMode::Blocking).unwrap();
            d.destroy_stream(s).unwrap();
        }
        until_running(&d, 0);
        assert!(
            d.held_threads() <= BURST && d.slots() <= BURST,
            "after burst {burst}: {} threads unjoined, {} slots",
            d.held_threads(),
            d.slots()
        );
    }
    // The next stream joins every ended thread.
    let s = d.create_stream().unwrap();
    assert_eq!((d.held_threads(), d.slots()), (1, BURST));
    d.destroy_stream(s).unwrap();
    assert!(d.races().is_empty(), "{:?}", d.races());
}

/// A slot is reused only when the host saw its earlier stream's work done:
/// a stream written on and destroyed unsynchronized leaves its slot to
/// itself, and a new stream's unordered read of what it wrote is a race;
/// one synchronized first gives its slot to the next stream. A handle of
/// the slot's earlier stream stays refused, and the slot's clock goes on
/// past the earlier stream's: a stream that waited for the earlier one's
/// last record is not taken as ordered after the new one's first write.
#[test]
fn slots_are_reused_only_when_the_detector_stays_exact() {
    let d = HostDriver::new(1 << 20, usize::MAX);
    let buf = d.alloc(64, RawStream(0)).unwrap();

    let unseen = d.create_stream().unwrap();
    touch(&d, unseen, buf, 4, Access::Write);
    d.destroy_stream(unseen).unwrap();
    until_running(&d, 0);
    let reader = d.create_stream().unwrap();
    assert_eq!(d.slots(), 2, "the unseen stream's slot is not reused");
    touch(&d, reader, buf, 4, Access::Read);
    d.stream_sync(reader, SyncMode::Blocking).unwrap();
    let races = d.races();
    assert_eq!(races.len(), 1, "{races:?}");
    assert!(races[0].contains("not ordered after a write"), "{races:?}");
    d.clear_races();

    let seen = d.create_stream().unwrap();
    assert_eq!(d.slots(), 3);
    touch(&d, seen, buf + 16, 4, Access::Write);
    d.stream_sync(seen, SyncMode::Blocking).unwrap();
    // A record after what the host saw: `reader` waits for it, then (once
    // the test opens its gate) reads what the slot's next stream writes,
    // unordered with that write.
    let e = d.create_event(false).unwrap();
    d.record(e, seen).unwrap();
    d.wait_event(reader, e).unwrap();
    let gate: &'static [AtomicU32; 2] = Box::leak(Box::new([AtomicU32::new(0), AtomicU32::new(0)]));
    // SAFETY: both flags are 4-aligned, live for good (leaked) and only
    // accessed atomically.
    unsafe {
        d.host_gate(
            reader,
            gate[0].as_ptr(),
            gate[1].as_ptr(),
            Duration::from_secs(10).as_nanos() as u64,
        )
    }
    .unwrap();
    touch(&d, reader, buf + 40, 4, Access::Read);
    d.destroy_stream(seen).unwrap();
    until_running(&d, 1);

    let next = d.create_stream().unwrap();
    assert_eq!(d.slots(), 3, "the synchronized stream's slot is reused");
    assert_ne!(next, seen, "a reused slot's handle is a new one");
    assert!(
        d.stream_query(seen).is_err(),
        "the earlier handle is refused"
    );
    assert!(d.destroy_stream(seen).is_err());
    touch(&d, next, buf + 40, 4, Access::Write);
    // Ordered after the earlier stream's write (the host saw it done).
    touch(&d, next, buf + 16, 4, Access::Read);
    d.stream_sync(next, SyncMode::Blocking).unwrap();
    gate[0].store(1, Ordering::Release);
    d.stream_sync(reader, SyncMode::Blocking).unwrap();
    assert_eq!(gate[1].load(Ordering::Acquire), 0, "the gate timed out");
    let races = d.races();
    assert_eq!(races.len(), 1, "{races:?}");
    assert!(
        races[0].contains(&format!("{:#x}", buf + 40)) && races[0].contains("after a write"),
        "{races:?}"
    );
}

/// Defect 6 (the detector): 20,000 reads of distinct 4-byte elements on one
/// stream, synchronized every 1,000, with a second stream idle. Before the
/// fix the history kept all 20,000 (every later check went through them);
/// now what the host and every stream order is pruned. A read not yet
/// synchronized stays, and a write on the other stream unordered with it is
/// still a race; a write on an element whose read was pruned (the host saw
/// it done, so the write is ordered after it) is not.
#[test]
fn ordered_history_is_pruned_and_races_are_still_found() {
    const N: usize = 20_000;
    let d = HostDriver::new(1 << 20, usize::MAX);
    let buf = d.alloc(N * 4, RawStream(0)).unwrap();
    let (a, b) = (d.create_stream().unwrap(), d.create_stream().unwrap());
    for round in 0..N / 1000 {
        for i in round * 1000..(round + 1) * 1000 {
            touch(&d, a, buf + 4 * i as u64, 4, Access::Read);
        }
        d.stream_sync(a, SyncMode::Blocking).unwrap();
    }
    assert!(
        d.history_len() <= 4096,
        "{} entries kept of {N} ordered reads",
        d.history_len()
    );
    assert!(d.races().is_empty(), "{:?}", d.races());

    // A read not synchronized, then unordered writes on the other stream:
    // one to that element (a race), one to an element read long ago.
    touch(&d, a, buf + 4 * 7, 4, Access::Read);
    touch(&d, b, buf + 4 * 7, 4, Access::Write);
    touch(&d, b, buf + 4 * 8, 4, Access::Write);
    d.stream_sync(b, SyncMode::Blocking).unwrap();
    d.stream_sync(a, SyncMode::Blocking).unwrap();
    let races = d.races();
    assert_eq!(races.len(), 1, "{races:?}");
    assert!(races[0].contains(&format!("{:#x}", buf + 28)), "{races:?}");
}

/// Found by the stress run on a small stream pool (seed 31): two threads
/// use one stream (shared, DESIGN "Streams are a resource"), one recording an event on it while the
/// other queues a wait for that event there. `record` made the event's new
/// record visible before queueing it, so a wait read in between was queued
/// ahead of the record it waited for, and the stream waited for itself for
/// good (or two streams each waited for a record queued behind the other's
/// wait). As `cuEventRecord`, the record must be queued before any wait
/// can see it. Each round's synchronize runs under a watchdog: a hang fails.
#[test]
fn a_wait_is_never_queued_ahead_of_the_record_it_waits_for() {
    const ROUNDS: usize = 200;
    const CALLS: usize = 200;
    let d = Arc::new(HostDriver::new(1 << 20, usize::MAX));
    let (tx, rx) = std::sync::mpsc::channel();
    let run = {
        let d = d.clone();
        move || {
            let s = d.create_stream().unwrap();
            let e = d.create_event(false).unwrap();
            for round in 0..ROUNDS {
                let barrier = std::sync::Barrier::new(2);
                std::thread::scope(|t| {
                    t.spawn(|| {
                        barrier.wait();
                        for _ in 0..CALLS {
                            d.record(e, s).unwrap();
                        }
                    });
                    barrier.wait();
                    for _ in 0..CALLS {
                        d.wait_event(s, e).unwrap();
                    }
                });
                d.stream_sync(s, SyncMode::Blocking).unwrap();
                tx.send(round).unwrap();
            }
        }
    };
    std::thread::spawn(run);
    for round in 0..ROUNDS {
        match rx.recv_timeout(Duration::from_secs(20)) {
            Ok(r) => assert_eq!(r, round),
            Err(_) => panic!(
                "round {round}: the stream waits for good for a record queued behind its wait"
            ),
        }
    }
}
