//! B9 (DESIGN "Benchmarks"): the CPU cost of the ledger's hot operations: stamp (write
//! and read), the hand-off decision (a read covered by an Ordered fact; a
//! write with a writer and two readers, all covered), close, mark_ordered,
//! a begin/finish_record pair, and bind's fast path. Each runs alone, then
//! again while a second thread hammers the same operation on other streams of
//! the same ledger (the thread lives for that benchmark only).
//!
//! Goals on the development machine: decision <= 25 ns, stamp <= 15 ns,
//! close <= 20 ns.
//!
//! `cargo bench -p gpu-epoch --bench ledger -- --warm-up-time 1 --measurement-time 2`

use criterion::{black_box, Criterion};
use gpu_epoch::{Access, EventCoverage, Ledger, StreamEpoch, StreamId, Task, Uses};
use std::sync::atomic::{AtomicBool, Ordering};

/// One thread's fixture: a task owning four streams of the ledger.
struct Side {
    task: Task,
    /// The stream the operations run on.
    new: StreamId,
    /// The stream of the earlier writer.
    old: StreamId,
    /// A use written on `old`, covered on `new` by an Ordered fact.
    written: Uses,
    /// The same, plus readers on two more streams, also covered.
    read_twice: Uses,
    /// Stamped by the stamp benchmarks.
    scratch: Uses,
    event: EventCoverage,
    covered: StreamEpoch,
}

fn side(l: &Ledger, s: &[StreamId]) -> Side {
    let task = l.begin_task();
    for &x in s {
        l.bind(&task, x);
    }
    let (new, old, r1, r2) = (s[0], s[1], s[2], s[3]);
    let mut written = Uses::new();
    l.stamp_write(&mut written, old);
    let mut read_twice = written.clone();
    l.stamp_read(&mut read_twice, r1);
    l.stamp_read(&mut read_twice, r2);
    for x in [old, r1, r2] {
        let c = l.close(&task, x);
        assert!(l.mark_ordered(&task, new, x, c.epoch));
    }
    let mut scratch = Uses::new();
    l.stamp_read(&mut scratch, new);
    Side {
        task,
        new,
        old,
        written,
        read_twice,
        scratch,
        event: EventCoverage::new(),
        covered: l.closed_counted(old),
    }
}

type Op = fn(&Ledger, &mut Side);

const OPS: [(&str, Op); 9] = [
    ("stamp_write", |l, s| {
        black_box(l.stamp_write(&mut s.scratch, s.new));
    }),
    ("stamp_read", |l, s| {
        black_box(l.stamp_read(&mut s.scratch, s.new));
    }),
    ("decision_read_ordered", |l, s| {
        black_box(l.hand_off(black_box(&s.written), s.new, Access::Read, true));
    }),
    ("decision_write_2_readers", |l, s| {
        black_box(l.hand_off(black_box(&s.read_twice), s.new, Access::Write, true));
    }),
    ("close", |l, s| {
        black_box(l.close(&s.task, s.new));
    }),
    ("closed_counted", |l, s| {
        black_box(l.closed_counted(s.old));
    }),
    ("mark_ordered", |l, s| {
        black_box(l.mark_ordered(&s.task, s.new, s.old, s.covered));
    }),
    ("record_pair", |l, s| {
        let tk = l.begin_record(&s.task, &s.event, s.new);
        l.finish_record(&s.event, black_box(tk));
    }),
    ("bind_owned", |l, s| {
        black_box(l.bind(&s.task, s.new));
    }),
];

fn b9(c: &mut Criterion) {
    let l = Ledger::new(8);
    let ids: Vec<StreamId> = (0..8).map(|_| l.add_stream().unwrap()).collect();
    let mut mine = side(&l, &ids[..4]);
    let mut other = side(&l, &ids[4..]);
    for contended in [false, true] {
        let mut g = c.benchmark_group(if contended {
            "B9/contended"
        } else {
            "B9/uncontended"
        });
        for (name, op) in OPS {
            let stop = AtomicBool::new(false);
            std::thread::scope(|sc| {
                let hammer = contended.then(|| {
                    let (l, other, stop) = (&l, &mut other, &stop);
                    sc.spawn(move || {
                        let mut n = 0u64;
                        while !stop.load(Ordering::Relaxed) {
                            for _ in 0..64 {
                                op(l, other);
                            }
                            n += 64;
                        }
                        n
                    })
                });
                g.bench_function(name, |b| b.iter(|| op(&l, &mut mine)));
                stop.store(true, Ordering::Relaxed);
                if let Some(h) = hammer {
                    let n = h.join().unwrap();
                    eprintln!("  (the second thread did {n} of them meanwhile)");
                }
            });
        }
        g.finish();
    }
}

fn main() {
    // What `criterion_group!`/`criterion_main!` expand to, without their
    // undocumented public items.
    let mut c = Criterion::default().configure_from_args();
    b9(&mut c);
    c.final_summary();
}
