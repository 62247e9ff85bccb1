//! The ledger driven the way the runtime drives it (see `gpu-sched`'s
//! `context/` and `event.rs`): each helper makes the runtime's calls in the
//! runtime's order, through the ledger's closure forms where the runtime has
//! a driver call, with a [`driver`] call that succeeds in its place.
#![allow(dead_code)]

use std::convert::Infallible;

use gpu_epoch::{
    Access, BufferStamps, Closed, CounterSnapshot, Decision, EventCoverage, Ledger, StreamId, Task,
    Uses,
};

/// A ledger with `n` streams.
pub(crate) fn ledger(n: usize) -> (Ledger, Vec<StreamId>) {
    let l = Ledger::new(n);
    let s = (0..n).map(|_| l.add_stream().unwrap()).collect();
    (l, s)
}

/// The driver call `_name` of the runtime, standing in: it succeeds with
/// `out` (what it does on a device is no business of the ledger's).
pub(crate) fn driver<T>(_name: &str, out: T) -> impl FnOnce() -> Result<T, Infallible> {
    move || Ok(out)
}

/// R9 carried out: for each stream of a device wait, the last counted close
/// is read before the pooled record, `s2` waits, and the fact is marked.
/// (A host sync gives no fact: the runtime's hand-off does not close.)
pub(crate) fn hand_off(
    l: &Ledger,
    t: &Task,
    uses: &Uses,
    s2: StreamId,
    access: Access,
) -> Decision {
    let d = l.hand_off(uses, s2, access, true);
    if let Decision::DeviceWait(set) = d {
        for s in set.iter() {
            let c = l.closed_counted(s);
            // driver: record a pooled event on `s`, `s2` waits on it
            l.mark_ordered(t, s2, s, c);
        }
    }
    d
}

/// A tracked operation of `t` on `s` touching one buffer (R1, R3, R9).
pub(crate) fn op(l: &Ledger, t: &Task, uses: &mut Uses, s: StreamId, access: Access) -> Decision {
    l.bind(t, s);
    let d = hand_off(l, t, uses, s, access);
    l.stamp(uses, s, access);
    // driver: submit
    l.stamp(uses, s, access);
    d
}

/// A launch writing `b`.
pub(crate) fn write(l: &Ledger, t: &Task, b: &mut BufferStamps, s: StreamId) -> Decision {
    op(l, t, b.get_mut(), s, Access::Write)
}

/// A launch reading `b`.
pub(crate) fn read(l: &Ledger, t: &Task, b: &mut BufferStamps, s: StreamId) -> Decision {
    op(l, t, b.get_mut(), s, Access::Read)
}

/// R4: `t` records `ev` on `s`.
pub(crate) fn record(l: &Ledger, t: &Task, ev: &EventCoverage, s: StreamId) -> Closed {
    l.bind(t, s);
    l.record(t, ev, s, driver("cuEventRecord", ())).unwrap()
}

/// R8: `t`'s stream `s2` waits on `ev`. Returns whether the fact was kept.
pub(crate) fn wait(l: &Ledger, t: &Task, ev: &EventCoverage, s2: StreamId) -> bool {
    l.bind(t, s2);
    l.stream_wait(t, ev, s2, driver("cuStreamWaitEvent", true))
        .unwrap()
}

/// R6 (or R7 with a query that found the event done).
pub(crate) fn event_sync(l: &Ledger, ev: &EventCoverage) -> bool {
    l.event_complete(ev, driver("cuEventSynchronize", true))
        .unwrap()
}

/// R5: `t` synchronizes `s`.
pub(crate) fn stream_sync(l: &Ledger, t: &Task, s: StreamId) -> Closed {
    l.bind(t, s);
    l.stream_sync(t, s, driver("cuStreamSynchronize", ()))
        .expect("not capturing")
        .unwrap()
}

/// R11: a host-sync pointer to `b` on `t`'s stream `s`.
pub(crate) fn host_sync_ptr(l: &Ledger, t: &Task, b: &mut BufferStamps, s: StreamId) -> Decision {
    l.bind(t, s);
    let u = b.get_mut();
    let d = hand_off(l, t, u, s, Access::Write);
    l.stamp_write(u, s);
    stream_sync(l, t, s);
    d
}

/// R10: a raw pointer to `b` on `t`'s stream `s`.
pub(crate) fn escape(l: &Ledger, t: &Task, b: &mut BufferStamps, s: StreamId) -> Decision {
    l.bind(t, s);
    let u = b.get_mut();
    let d = hand_off(l, t, u, s, Access::Write);
    l.escape(u, s);
    d
}

/// The counters' change since `before`.
pub(crate) fn delta(l: &Ledger, before: &CounterSnapshot) -> CounterSnapshot {
    l.counters().since(before)
}
