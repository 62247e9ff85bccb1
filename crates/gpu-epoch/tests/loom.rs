//! The ledger's races under loom: run with
//! `LOOM_MAX_PREEMPTIONS=4 RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p gpu-epoch --release --test loom`
//! (CI does: every interleaving with at most four preemptions, about 23
//! seconds here for the six models). Without the bound loom explores every
//! interleaving: the first five models passed that way in about five
//! minutes here (288 s, with the event coverage's sequence lock, whose
//! every load and store is a step for loom).
//!
//! The driver is modelled by a mutex per device object: a driver record sets
//! the event's state, a driver wait reads it, a submission appends to the
//! stream's queue, a record snapshots how much of it it covers.
#![cfg(loom)]

use gpu_epoch::{
    Access, Binding, Decision, EventCoverage, Ledger, Reason, StreamEpoch, StreamId, Uses,
};
use loom::sync::{Arc, Mutex};
use loom::thread;

/// Runs `f` under loom: every interleaving (with at most
/// `LOOM_MAX_PREEMPTIONS` preemptions when set). The models are small (two
/// or three threads, two or three streams).
fn model<F: Fn() + Sync + Send + 'static>(f: F) {
    loom::model::Builder::new().check(f);
}

fn ledger(n: usize) -> (Arc<Ledger>, Vec<StreamId>) {
    let l = Ledger::new(n);
    let s = (0..n).map(|_| l.add_stream().unwrap()).collect();
    (Arc::new(l), s)
}

/// The device side of an event: which record it holds, `(stream, epoch the
/// record closed)`.
type DriverEvent = Arc<Mutex<Option<(StreamId, StreamEpoch)>>>;

/// A record by `task` on `s`, with the driver call in the middle.
fn record(l: &Ledger, task: &gpu_epoch::Task, ev: &EventCoverage, dev: &DriverEvent, s: StreamId) {
    l.bind(task, s);
    let tk = l.begin_record(task, ev, s);
    *dev.lock().unwrap() = Some((s, tk.closed().epoch));
    l.finish_record(ev, tk);
}

/// R6, R8, R14: an event re-recorded (on another stream) while a task waits
/// for it. A wait that keeps a fact must have waited for the record whose
/// source it read; afterwards the event covers what the driver holds, or
/// nothing.
#[test]
fn rerecord_while_a_task_waits() {
    for host_sync in [false, true] {
        model(move || {
            let (l, s) = ledger(3);
            let (t0, t1, t2) = (l.begin_task(), l.begin_task(), l.begin_task());
            let ev = Arc::new(EventCoverage::new());
            let dev: DriverEvent = Arc::new(Mutex::new(None));
            record(&l, &t0, &ev, &dev, s[0]);
            l.bind(&t1, s[1]);
            l.bind(&t2, s[2]);

            let waiter = {
                let (l, ev, dev, s1) = (l.clone(), ev.clone(), dev.clone(), s[1]);
                thread::spawn(move || {
                    let w = l.begin_wait(&ev);
                    let seen = *dev.lock().unwrap(); // the driver wait / sync
                    let kept = if host_sync {
                        l.finish_event_complete(&ev, w)
                    } else {
                        l.finish_stream_wait(&t1, &ev, w, s1)
                    };
                    if kept {
                        assert_eq!(
                            w.source(),
                            seen,
                            "a fact for a record the driver did not wait for"
                        );
                    }
                })
            };
            let (l2, ev2, dev2, s2) = (l.clone(), ev.clone(), dev.clone(), s[2]);
            let recorder = thread::spawn(move || record(&l2, &t2, &ev2, &dev2, s2));
            waiter.join().unwrap();
            recorder.join().unwrap();
            if let Some(src) = ev.source() {
                assert_eq!(Some(src), *dev.lock().unwrap());
            }
        });
    }
}

/// R4: two tasks record one event at once (on their own streams). The event
/// ends up covering the record the driver holds, or nothing.
#[test]
fn two_records_of_one_event() {
    model(|| {
        let (l, s) = ledger(2);
        let ev = Arc::new(EventCoverage::new());
        let dev: DriverEvent = Arc::new(Mutex::new(None));
        let hs: Vec<_> = (0..2)
            .map(|i| {
                let (l, ev, dev, si) = (l.clone(), ev.clone(), dev.clone(), s[i]);
                thread::spawn(move || {
                    let t = l.begin_task();
                    record(&l, &t, &ev, &dev, si);
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        if let Some(src) = ev.source() {
            assert_eq!(
                Some(src),
                *dev.lock().unwrap(),
                "the event claims a record the driver does not hold"
            );
        }
        assert_eq!(ev.records(), 2);
    });
}

/// R3: two tasks bind one stream at once, while its first owner finishes:
/// never two owners; a take-over is unshared and the taker's close counts.
#[test]
fn two_tasks_bind_one_stream() {
    model(|| {
        let (l, s) = ledger(2);
        let t0 = l.begin_task();
        assert_eq!(l.bind(&t0, s[0]), Binding::TookOver);
        let finisher = {
            let l = l.clone();
            thread::spawn(move || l.finish_task(&t0))
        };
        let hs: Vec<_> = (0..2)
            .map(|_| {
                let (l, s0) = (l.clone(), s[0]);
                thread::spawn(move || {
                    let t = l.begin_task();
                    let b = l.bind(&t, s0);
                    (t, b)
                })
            })
            .collect();
        finisher.join().unwrap();
        let got: Vec<_> = hs.into_iter().map(|h| h.join().unwrap()).collect();
        let took: Vec<_> = got
            .iter()
            .filter(|(_, b)| *b == Binding::TookOver)
            .collect();
        assert!(took.len() <= 1, "two owners: {got:?}");
        match took.first() {
            Some((t, _)) => {
                assert_eq!(l.owner(s[0]), Some(t.id()));
                // The other bound after (shared) or not at all as owner.
                let other = got.iter().find(|(u, _)| u.id() != t.id()).unwrap();
                assert_eq!(other.1, Binding::Shared);
                assert!(l.is_shared(s[0]));
            }
            None => {
                // Both found the first owner live.
                assert!(l.is_shared(s[0]));
                for (t, _) in &got {
                    assert!(!l.close(t, s[0]).counted);
                }
            }
        }
    });
}

/// What a submitting task saw: the epochs of its two stamps, and where its
/// operation landed in the stream's queue.
type Submitted = (StreamEpoch, StreamEpoch, usize);

/// An operation on `s` writing one buffer: first stamp, submit, second stamp.
fn submit(l: &Ledger, task: &gpu_epoch::Task, queue: &Mutex<Vec<u64>>, s: StreamId) -> Submitted {
    let mut u = Uses::new();
    l.bind(task, s);
    assert!(l.stamp(&mut u, s, Access::Write));
    let first = u.writer().unwrap().epoch;
    let at = {
        let mut q = queue.lock().unwrap();
        q.push(task.id().get());
        q.len() - 1
    };
    assert!(l.stamp(&mut u, s, Access::Write));
    (first, u.writer().unwrap().epoch, at)
}

/// No counted close covers an operation stamped but not yet submitted: every
/// stamp at or below a counted close's epoch belongs to an operation queued
/// before that close's record.
fn check_cover(closed: gpu_epoch::Closed, covered: usize, op: Submitted) {
    if !closed.counted {
        return;
    }
    let (first, second, at) = op;
    for e in [first, second] {
        if e <= closed.epoch {
            assert!(
                at < covered,
                "a counted close of {:?} covers a stamp {e:?} of an operation queued after its record",
                closed.epoch
            );
        }
    }
}

/// R1, R2: a task that does not own a stream submits to it while its owner
/// records an event on it (closing the epoch between the submitter's two
/// stamps).
#[test]
fn close_by_another_task_between_two_stamps() {
    model(|| {
        let (l, s) = ledger(2);
        let owner = l.begin_task();
        l.bind(&owner, s[0]);
        let queue = Arc::new(Mutex::new(Vec::new()));
        let submitter = {
            let (l, q, s0) = (l.clone(), queue.clone(), s[0]);
            thread::spawn(move || {
                let t = l.begin_task();
                submit(&l, &t, &q, s0)
            })
        };
        let ev = EventCoverage::new();
        let tk = l.begin_record(&owner, &ev, s[0]);
        let covered = queue.lock().unwrap().len(); // the driver record
        l.finish_record(&ev, tk);
        let op = submitter.join().unwrap();
        check_cover(tk.closed(), covered, op);
        if tk.closed().counted {
            assert_eq!(ev.source(), Some((s[0], tk.closed().epoch)));
        }
    });
}

/// R13: a task takes over the stream of a task that is finishing; the
/// finishing task's last operation is covered by the taker's counted
/// close only if it was queued before it. After both, the idle stream is
/// recycled and every stamp on it is covered.
#[test]
fn take_over_a_finishing_tasks_stream() {
    model(|| {
        let (l, s) = ledger(2);
        let t0 = l.begin_task();
        l.bind(&t0, s[0]);
        let queue = Arc::new(Mutex::new(Vec::new()));
        let old = {
            let (l, q, s0) = (l.clone(), queue.clone(), s[0]);
            thread::spawn(move || {
                let op = submit(&l, &t0, &q, s0);
                l.finish_task(&t0);
                op
            })
        };
        let t1 = l.begin_task();
        let b = l.bind(&t1, s[0]);
        let ev = EventCoverage::new();
        let tk = l.begin_record(&t1, &ev, s[0]);
        let covered = queue.lock().unwrap().len();
        l.finish_record(&ev, tk);
        assert_eq!(tk.closed().counted, b == Binding::TookOver);
        let op = old.join().unwrap();
        check_cover(tk.closed(), covered, op);
        // A use on s0 by the new owner; both finish, the idle stream is
        // recycled: every stamp on it is covered.
        let mut u = Uses::new();
        l.stamp_write(&mut u, s[0]);
        l.finish_task(&t1);
        assert_eq!(l.recycle(s[0]).0, 1);
        assert_eq!(
            l.hand_off(&u, s[1], Access::Read, true),
            Decision::NoWait(Reason::Recycled)
        );
        let t2 = l.begin_task();
        assert_eq!(l.bind(&t2, s[0]), Binding::TookOver);
    });
}

/// X8: a task shares a stream and waits there on the device while the
/// stream's owner records an event on it (or synchronizes it). The
/// sharer's Ordered fact gets into what the owner's record or synchronize
/// teaches only if its wait was queued before the owner's driver call.
#[test]
fn a_sharer_learns_while_the_owner_records_or_syncs() {
    for sync in [false, true] {
        model(move || {
            let (l, s) = ledger(2);
            // s0's write, covered by `ev` (a counted close of epoch 1).
            let ta = l.begin_task();
            let ev = Arc::new(EventCoverage::new());
            let dev: DriverEvent = Arc::new(Mutex::new(None));
            record(&l, &ta, &ev, &dev, s[0]);
            let owner = l.begin_task();
            l.bind(&owner, s[1]);
            // s1's queue: where the sharer's wait landed.
            let queue = Arc::new(Mutex::new(0usize));
            let sharer = {
                let (l, ev, q, s1) = (l.clone(), ev.clone(), queue.clone(), s[1]);
                thread::spawn(move || {
                    let t = l.begin_task();
                    l.bind(&t, s1);
                    let w = l.begin_wait(&ev);
                    let at = {
                        let mut q = q.lock().unwrap();
                        *q += 1;
                        *q - 1
                    };
                    l.finish_stream_wait(&t, &ev, w, s1);
                    at
                })
            };
            let (covered, closed) = if sync {
                let closed = l.begin_stream_sync(&owner, s[1]).unwrap();
                let covered = *queue.lock().unwrap(); // the driver sync
                l.finish_stream_sync(closed);
                (covered, closed)
            } else {
                let e1 = EventCoverage::new();
                let tk = l.begin_record(&owner, &e1, s[1]);
                let covered = *queue.lock().unwrap(); // the driver record
                l.finish_record(&e1, tk);
                // The host sees the record done.
                l.event_complete(&e1, || Ok::<_, ()>(true)).unwrap();
                (covered, tk.closed())
            };
            let at = sharer.join().unwrap();
            if l.completed(s[0]) >= StreamEpoch(1) {
                assert!(closed.counted);
                assert!(
                    at < covered,
                    "the owner's {} taught a wait queued after it",
                    if sync { "synchronize" } else { "record" }
                );
            }
        });
    }
}
