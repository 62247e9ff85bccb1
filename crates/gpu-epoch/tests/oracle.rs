//! The ledger against a plain happens-before oracle (DESIGN §6).
//!
//! Random programs (tasks, streams, launches, records and re-records, stream
//! waits, event syncs and queries, stream syncs, takeovers and recycling,
//! captures and graph launches, raw pointers) run through the ledger, driven
//! the way the runtime drives it, and through an oracle of per-stream vector
//! clocks. Operations are split into the halves the runtime splits them into
//! (an operation's hand-off and first stamp, then its submission and second
//! stamp; `begin_*` then the driver call and `finish_*`), and the halves of
//! different tasks interleave.
//!
//! Property: whenever a buffer use is submitted, every earlier conflicting
//! use (write after write, read after write, write after read) happens
//! before it in the oracle: ordered on the new stream's clock, or known
//! complete on the host. Since every wait the ledger asks for is carried out
//! in the oracle too, a violation is exactly a wait the ledger skipped.
//!
//! Precision: each wait the ledger asks for is checked against the oracle; a
//! wait for uses the oracle already orders is unnecessary, and is put down to
//! the cause that kept the ledger from knowing (a table at the end, shown with
//! `--nocapture`).
//!
//! `ORACLE_CASES` sets the number of programs (default 10 000):
//! `ORACLE_CASES=100000 cargo test -p gpu-epoch --release --test oracle -- --nocapture`.
#![cfg(not(loom))]

use gpu_epoch::{
    Access, Binding, BufferStamps, Closed, Decision, EventCoverage, Ledger, Reason, RecordTicket,
    StreamId, Task, WaitTicket,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use std::collections::BTreeMap;
use std::sync::Mutex;

const BUFS: usize = 4;
const EVENTS: usize = 2;
const SLOTS: usize = 4;
const MAX_STEPS: usize = 200;

// ---------------------------------------------------------------------------
// The oracle: vector clocks, as plain as possible.

/// Why the ledger did not know what the oracle knows; `Direct` is an entry
/// that came straight from a stream's own operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Cause {
    Direct,
    HandOff,
    SharedStream,
    NonOwner,
    NonOwnerRecord,
    ReRecord,
    Escape,
    Capture,
    Recycle,
}

impl Cause {
    fn describe(self) -> &'static str {
        match self {
            Cause::Direct => "epoch granularity (fact known, use stamped later)",
            Cause::HandOff => "hand-off wait (learns only the last counted close)",
            Cause::SharedStream => "shared stream (closes/waits give no fact)",
            Cause::NonOwner => "wait/sync by a task not owning the stream",
            Cause::NonOwnerRecord => "event recorded on a stream the task does not own",
            Cause::ReRecord => "event re-recorded (during a wait, or records in flight)",
            Cause::Escape => "escaped buffer (R10: waits for all on a move)",
            Cause::Capture => "capture (hand-off while capturing syncs the host)",
            Cause::Recycle => "recycle (idle stream: ledger knows only its own stamps)",
        }
    }
}

/// A vector clock whose every component keeps the values it went through and
/// why each was learnt (for the precision table). The value is the last one.
#[derive(Clone, Debug)]
struct Clock(Vec<Vec<(u32, Cause)>>);

impl Clock {
    fn new(n: usize) -> Self {
        Clock(vec![Vec::new(); n])
    }

    fn get(&self, x: usize) -> u32 {
        self.0[x].last().map_or(0, |p| p.0)
    }

    /// The cause of the first value of component `x` that reached `k`.
    fn cause_reaching(&self, x: usize, k: u32) -> Option<Cause> {
        self.0[x].iter().find(|p| p.0 >= k).map(|p| p.1)
    }

    /// Pointwise max; the raised entries keep `other`'s causes (`tag: None`,
    /// the ledger learnt the fact) or take `tag` (it did not).
    fn merge(&mut self, other: &Clock, tag: Option<Cause>) {
        for x in 0..self.0.len() {
            for &(v, c) in &other.0[x] {
                if v > self.get(x) {
                    self.0[x].push((v, tag.unwrap_or(c)));
                }
            }
        }
    }

    fn retag(&self, tag: Option<Cause>) -> Clock {
        let mut c = self.clone();
        if let Some(t) = tag {
            for comp in &mut c.0 {
                for p in comp {
                    p.1 = t;
                }
            }
        }
        c
    }

    fn tick(&mut self, x: usize) -> u32 {
        let v = self.get(x) + 1;
        self.0[x].push((v, Cause::Direct));
        v
    }
}

#[derive(Clone, Copy, Debug)]
struct OUse {
    stream: usize,
    seq: u32,
    write: bool,
}

/// Happens-before: a clock per stream (what its next operation is ordered
/// after), a clock per event (its stream's clock at the driver record; none
/// when recorded in a capture), and the host's known-complete clock.
struct Oracle {
    clock: Vec<Clock>,
    host: Clock,
    event: Vec<Option<Clock>>,
    uses: Vec<Vec<OUse>>,
}

impl Oracle {
    fn new(n: usize) -> Self {
        Oracle {
            clock: vec![Clock::new(n); n],
            host: Clock::new(n),
            event: vec![None; EVENTS],
            uses: vec![Vec::new(); BUFS],
        }
    }

    fn ordered(&self, u: &OUse, s: usize) -> bool {
        self.clock[s].get(u.stream) >= u.seq || self.host.get(u.stream) >= u.seq
    }

    /// An operation on `s` touching `touches` is submitted: every earlier
    /// conflicting use must happen before it.
    fn submit(&mut self, s: usize, touches: &[(usize, bool)]) -> Result<(), String> {
        for &(b, w) in touches {
            for u in &self.uses[b] {
                if (u.write || w) && !self.ordered(u, s) {
                    return Err(format!(
                        "UNSAFE: buffer {b} {} on stream {s} is not ordered after its {} on stream {} (op #{}): \
                         stream clock {:?}, host {:?}",
                        if w { "write" } else { "read" },
                        if u.write { "write" } else { "read" },
                        u.stream,
                        u.seq,
                        (0..self.host.0.len()).map(|x| self.clock[s].get(x)).collect::<Vec<_>>(),
                        (0..self.host.0.len()).map(|x| self.host.get(x)).collect::<Vec<_>>(),
                    ));
                }
            }
        }
        let seq = self.clock[s].tick(s);
        for &(b, w) in touches {
            self.uses[b].push(OUse {
                stream: s,
                seq,
                write: w,
            });
        }
        Ok(())
    }

    fn record(&mut self, e: usize, s: usize, tag: Option<Cause>) {
        self.event[e] = Some(self.clock[s].retag(tag));
    }

    fn wait_stream(&mut self, s: usize, s2: usize, tag: Option<Cause>) {
        let c = self.clock[s].clone();
        self.clock[s2].merge(&c, tag);
    }

    fn host_stream(&mut self, s: usize, tag: Option<Cause>) {
        let c = self.clock[s].clone();
        self.host.merge(&c, tag);
    }
}

// ---------------------------------------------------------------------------
// Programs.

#[derive(Clone, Copy, Debug)]
struct Step {
    slot: u8,
    op: u8,
    a: u8,
    b: u8,
    c: u8,
}

#[derive(Clone, Debug)]
struct Program {
    streams: usize,
    /// How many tasks may be live at once (2..=SLOTS).
    tasks: usize,
    /// How many buffers the program uses (1..=BUFS).
    bufs: usize,
    /// Swarm testing: the kinds of operation this program uses (bit `k`
    /// for [`kind`] `k`; launches always), so that rarer sequences of a
    /// few kinds are dense in some programs.
    kinds: u16,
    /// A task picks a stream other than its own when a step's byte is at
    /// least this.
    cross: u8,
    steps: Vec<Step>,
}

/// The kind of an operation byte: 0 launch, 1 record, 2 stream wait, 3
/// event sync, 4 event query, 5 stream sync, 6 task finish, 7 escape, 8 raw
/// launch, 9 capture begin or end, 10 graph launch, 11 host-sync pointer, 12
/// recycle.
fn kind(op: u8) -> u32 {
    match op {
        0..=23 | 96..=99 => 0,
        24..=35 => 1,
        36..=44 => 2,
        45..=49 => 3,
        50..=55 => 4,
        56..=61 => 5,
        62..=66 => 6,
        67..=70 => 7,
        71..=76 => 8,
        77..=82 => 9,
        83..=86 => 10,
        87..=90 => 11,
        _ => 12,
    }
}

fn program() -> impl Strategy<Value = Program> {
    let step = (
        0..SLOTS as u8,
        0u8..100,
        any::<u8>(),
        any::<u8>(),
        any::<u8>(),
    )
        .prop_map(|(slot, op, a, b, c)| Step { slot, op, a, b, c });
    (
        2usize..=5,
        2usize..=SLOTS,
        1usize..=BUFS,
        prop_oneof![Just(u16::MAX), any::<u16>()],
        prop_oneof![Just(248u8), 224u8..=255],
        prop::collection::vec(step, 1..=MAX_STEPS),
    )
        .prop_map(|(streams, tasks, bufs, kinds, cross, steps)| Program {
            streams,
            tasks,
            bufs,
            kinds,
            cross,
            steps,
        })
}

// ---------------------------------------------------------------------------
// The ledger, driven as the runtime drives it.

#[derive(Clone, Copy, Debug, PartialEq)]
enum WaitKind {
    Stream(usize),
    Sync,
    Query(bool),
}

#[derive(Debug)]
enum Pending {
    Launch {
        s: usize,
        touches: Vec<(usize, bool)>,
        captured: bool,
    },
    Record {
        e: usize,
        s: usize,
        ticket: RecordTicket,
        fails: bool,
        /// After the driver call: its number among the event's driver records.
        driven: Option<u64>,
    },
    Wait {
        e: usize,
        kind: WaitKind,
        ticket: WaitTicket,
        records_seen: u64,
        record_in_flight: bool,
        /// After the driver call: the event's clock it saw, if any.
        driven: Option<Option<Clock>>,
    },
    StreamSync {
        s: usize,
        closed: Closed,
        hold: Option<usize>,
        /// After the driver call: the stream's clock it saw complete.
        driven: Option<Clock>,
    },
}

impl Pending {
    fn stream(&self) -> Option<usize> {
        match *self {
            Pending::Launch { s, .. }
            | Pending::Record { s, .. }
            | Pending::StreamSync { s, .. } => Some(s),
            Pending::Wait {
                kind: WaitKind::Stream(s),
                ..
            } => Some(s),
            Pending::Wait { .. } => None,
        }
    }

    fn touches(&self) -> Vec<(usize, bool)> {
        match self {
            Pending::Launch { touches, .. } => touches.clone(),
            Pending::StreamSync { hold: Some(b), .. } => vec![(*b, true)],
            _ => Vec::new(),
        }
    }
}

struct Slot {
    task: Task,
    home: usize,
    pending: Option<Pending>,
}

struct Capture {
    stream: usize,
    task: u64,
    graph: Vec<(usize, bool)>,
}

#[derive(Default)]
struct Stats {
    cases: u64,
    ops: u64,
    waits: u64,
    needed: u64,
    unneeded: BTreeMap<Cause, u64>,
    avoided: [u64; 5],
    device_waits: u64,
    host_syncs: u64,
    bindings: [u64; 3],
}

struct Sim {
    n: usize,
    tasks: usize,
    nbufs: usize,
    kinds: u16,
    cross: u8,
    ledger: Ledger,
    ids: Vec<StreamId>,
    bufs: Vec<BufferStamps>,
    events: Vec<EventCoverage>,
    ev_records: Vec<u64>,
    ev_in_flight: Vec<u32>,
    ev_driver: Vec<u64>,
    slots: Vec<Option<Slot>>,
    // The model of R3: the owner's task id and whether shared.
    owner: Vec<Option<Task>>,
    shared: Vec<bool>,
    bound: Vec<Vec<Task>>,
    capture: Option<Capture>,
    graphs: Vec<Vec<(usize, bool)>>,
    // A raw pointer taken on (stream, by task) that is still valid.
    raw: Vec<Option<(usize, u64)>>,
    oracle: Oracle,
    stats: Stats,
    log: Vec<String>,
}

fn bit(x: u8, i: usize) -> bool {
    (x >> i) & 1 == 1
}

impl Sim {
    fn new(prog: &Program) -> Self {
        let n = prog.streams;
        let ledger = Ledger::new(n);
        let ids = (0..n).map(|_| ledger.add_stream().unwrap()).collect();
        Sim {
            n,
            tasks: prog.tasks,
            nbufs: prog.bufs,
            kinds: prog.kinds,
            cross: prog.cross,
            ledger,
            ids,
            bufs: (0..BUFS).map(|_| BufferStamps::new()).collect(),
            events: (0..EVENTS).map(|_| EventCoverage::new()).collect(),
            ev_records: vec![0; EVENTS],
            ev_in_flight: vec![0; EVENTS],
            ev_driver: vec![0; EVENTS],
            slots: (0..SLOTS).map(|_| None).collect(),
            owner: vec![None; n],
            shared: vec![false; n],
            bound: vec![Vec::new(); n],
            capture: None,
            graphs: Vec::new(),
            raw: vec![None; BUFS],
            oracle: Oracle::new(n),
            stats: Stats::default(),
            log: Vec::new(),
        }
    }

    fn task(&self, slot: usize) -> Task {
        self.slots[slot].as_ref().unwrap().task.clone()
    }

    fn capturing(&self, s: usize) -> bool {
        self.capture.as_ref().is_some_and(|c| c.stream == s)
    }

    fn pending_on(&self, s: usize) -> bool {
        self.slots
            .iter()
            .flatten()
            .any(|sl| sl.pending.as_ref().and_then(Pending::stream) == Some(s))
    }

    /// The borrow rules: no other pending operation writes a buffer this one
    /// touches, or reads one it writes.
    fn borrow_ok(&self, touches: &[(usize, bool)]) -> bool {
        self.slots
            .iter()
            .flatten()
            .filter_map(|sl| sl.pending.as_ref())
            .all(|p| {
                p.touches()
                    .iter()
                    .all(|&(b2, w2)| touches.iter().all(|&(b, w)| b != b2 || (!w && !w2)))
            })
    }

    fn pick(&self, slot: usize, x: u8) -> usize {
        if x < self.cross {
            self.slots[slot].as_ref().unwrap().home
        } else {
            x as usize % self.n
        }
    }

    /// R3, checked against a model of ownership.
    fn bind(&mut self, slot: usize, s: usize) -> Result<(), String> {
        let task = self.task(slot);
        let got = self.ledger.bind(&task, self.ids[s]);
        let want = if self.shared[s] {
            Binding::Shared
        } else {
            match &self.owner[s] {
                Some(o) if o.id() == task.id() => Binding::Owned,
                Some(o) if o.is_live() => {
                    self.shared[s] = true;
                    Binding::Shared
                }
                _ => {
                    self.owner[s] = Some(task.clone());
                    Binding::TookOver
                }
            }
        };
        if got != want {
            return Err(format!(
                "R3: bind of stream {s} gave {got:?}, expected {want:?}"
            ));
        }
        self.stats.bindings[got as usize] += 1;
        if !self.bound[s].iter().any(|t| t.id() == task.id()) {
            self.bound[s].push(task);
        }
        Ok(())
    }

    /// Ends raw pointers of buffers now used on a stream other than theirs.
    fn moved(&mut self, touches: &[(usize, bool)], s: usize) {
        for &(b, _) in touches {
            if self.raw[b].is_some_and(|(rs, _)| rs != s) {
                self.raw[b] = None;
            }
        }
    }

    fn tag_not_learnt(&self, s: usize) -> Cause {
        if self.ledger.is_shared(self.ids[s]) {
            Cause::SharedStream
        } else {
            Cause::NonOwner
        }
    }

    /// Whether a wait on stream `s` for buffer `b` was needed; if not, why
    /// the ledger did not know.
    fn unneeded(&self, b: usize, s: usize, s2: usize, write: bool, escaped: bool) -> Option<Cause> {
        let mut cause = None;
        for u in self.oracle.uses[b]
            .iter()
            .filter(|u| u.stream == s && (u.write || write))
        {
            if !self.oracle.ordered(u, s2) {
                return None;
            }
            let on_host = self.oracle.host.cause_reaching(s, u.seq);
            let on_dev = self.oracle.clock[s2].cause_reaching(s, u.seq);
            cause = match (on_host, on_dev) {
                (Some(c), _) if c != Cause::Direct => Some(c),
                (_, Some(c)) => Some(c),
                (c, None) => c,
            };
        }
        if escaped {
            return Some(Cause::Escape);
        }
        Some(cause.unwrap_or(Cause::Escape))
    }

    /// R9: the hand-off of buffer `b` to `s2`, carried out.
    fn hand_off(&mut self, slot: usize, b: usize, s2: usize, write: bool) -> Result<(), String> {
        let task = self.task(slot);
        let sid2 = self.ids[s2];
        let access = if write { Access::Write } else { Access::Read };
        let uses = self.bufs[b].get_mut();
        let escaped_on = if uses.is_escaped() {
            uses.writer().map(|w| w.stream.index())
        } else {
            None
        };
        let d = self.ledger.hand_off(uses, sid2, access, true);
        let capturing = self.ledger.is_capturing(sid2);
        if capturing != self.capturing(s2) {
            return Err(format!("capture state of stream {s2} differs"));
        }
        for s in d.waits().iter() {
            let s = s.index();
            if s == s2 {
                return Err(format!("hand-off to {s2} waits for its own stream"));
            }
            self.stats.waits += 1;
            let why = if capturing {
                Some(Cause::Capture)
            } else {
                self.unneeded(b, s, s2, write, escaped_on == Some(s))
            };
            match why {
                None => self.stats.needed += 1,
                Some(c) => *self.stats.unneeded.entry(c).or_default() += 1,
            }
        }
        self.log
            .push(format!("  hand-off b{b} -> s{s2} {access:?}: {d:?}"));
        match d {
            Decision::NoWait(_) => {}
            Decision::DeviceWait(set) => {
                for s in set.iter() {
                    // Read before the driver records the pooled event on `s`.
                    let c = self.ledger.closed_counted(s);
                    // (The driver records it and `s2` waits on it here.)
                    let tag = if self.ledger.mark_ordered(&task, sid2, s, c) {
                        Cause::HandOff
                    } else {
                        self.tag_not_learnt(s2)
                    };
                    self.oracle.wait_stream(s.index(), s2, Some(tag));
                }
            }
            Decision::HostSync(set) => {
                for s in set.iter() {
                    // The runtime synchronizes `s` on the host; the ledger
                    // learns from it only through a counted close.
                    let closed = self
                        .ledger
                        .begin_stream_sync(&task, s)
                        .map_err(|e| format!("host sync of {s:?}: {e}"))?;
                    let tag = if closed.counted {
                        None
                    } else {
                        Some(self.tag_not_learnt(s.index()))
                    };
                    self.oracle.host_stream(s.index(), tag);
                    self.ledger.finish_stream_sync(closed);
                }
            }
        }
        Ok(())
    }

    fn stamp(&mut self, b: usize, s: usize, write: bool) -> Result<(), String> {
        let access = if write { Access::Write } else { Access::Read };
        let stamped = self
            .ledger
            .stamp(self.bufs[b].get_mut(), self.ids[s], access);
        if stamped == self.capturing(s) {
            return Err(format!(
                "stamp on stream {s} returned {stamped} (capturing: {})",
                self.capturing(s)
            ));
        }
        Ok(())
    }

    /// First half of a launch or a graph launch: bind, hand-offs, stamps.
    fn launch(&mut self, slot: usize, s: usize, touches: Vec<(usize, bool)>) -> Result<(), String> {
        if !self.borrow_ok(&touches) {
            return Ok(());
        }
        self.log.push(format!("T{slot} launch on s{s} {touches:?}"));
        self.bind(slot, s)?;
        self.moved(&touches, s);
        for &(b, w) in &touches {
            self.hand_off(slot, b, s, w)?;
            self.stamp(b, s, w)?;
        }
        let captured = self.capturing(s);
        self.slots[slot].as_mut().unwrap().pending = Some(Pending::Launch {
            s,
            touches,
            captured,
        });
        Ok(())
    }

    fn record_tag(&self, s: usize, ticket: &RecordTicket) -> Option<Cause> {
        if ticket.closed().counted {
            None
        } else if self.ledger.is_shared(self.ids[s]) {
            Some(Cause::SharedStream)
        } else {
            Some(Cause::NonOwnerRecord)
        }
    }

    /// The tag of a fact from event `e` that the ledger did not keep.
    fn wait_tag(&self, e: usize, p: &Pending, kept: bool) -> Option<Cause> {
        let Pending::Wait {
            ticket,
            records_seen,
            record_in_flight,
            kind,
            ..
        } = p
        else {
            unreachable!()
        };
        if kept {
            return None;
        }
        if ticket.source().is_none() {
            // The event's clock carries why its record counted nothing,
            // unless a record was in flight (the driver still has the old).
            return record_in_flight.then_some(Cause::ReRecord);
        }
        if self.ev_records[e] != *records_seen {
            return Some(Cause::ReRecord);
        }
        match kind {
            WaitKind::Stream(s2) => Some(self.tag_not_learnt(*s2)),
            _ => Some(Cause::Direct),
        }
    }

    /// The second half of `slot`'s pending operation.
    fn advance(&mut self, slot: usize) -> Result<(), String> {
        let mut p = self.slots[slot].as_mut().unwrap().pending.take().unwrap();
        let task = self.task(slot);
        match &mut p {
            Pending::Launch {
                s,
                touches,
                captured,
            } => {
                let (s, captured) = (*s, *captured);
                self.log.push(format!(
                    "T{slot} submit on s{s} {touches:?} captured={captured}"
                ));
                if captured {
                    let cap = self
                        .capture
                        .as_mut()
                        .expect("capture ended under a pending op");
                    for &(b, w) in touches.iter() {
                        match cap.graph.iter_mut().find(|g| g.0 == b) {
                            Some(g) => g.1 |= w,
                            None => cap.graph.push((b, w)),
                        }
                    }
                } else {
                    self.oracle.submit(s, touches)?;
                    self.stats.ops += 1;
                }
                for &(b, w) in touches.iter() {
                    self.stamp(b, s, w)?;
                }
                return Ok(());
            }
            Pending::Record {
                e,
                s,
                ticket,
                fails,
                driven: driven @ None,
            } => {
                // The driver record (unless it fails: the event is unchanged).
                let (e, s) = (*e, *s);
                self.log.push(format!(
                    "T{slot} driver record e{e} on s{s}{}",
                    if *fails { " FAILED" } else { "" }
                ));
                self.ev_driver[e] += 1;
                *driven = Some(self.ev_driver[e]);
                if *fails {
                } else if self.capturing(s) {
                    self.oracle.event[e] = None;
                } else {
                    let tag = self.record_tag(s, ticket);
                    self.oracle.record(e, s, tag);
                }
            }
            Pending::Record {
                e,
                ticket,
                fails,
                driven: Some(seq),
                ..
            } => {
                let (e, ticket) = (*e, *ticket);
                self.log.push(format!(
                    "T{slot} finish record e{e} ({:?})",
                    ticket.closed()
                ));
                if *fails {
                    self.ledger.abort_record(&self.events[e], ticket);
                } else {
                    self.ledger.finish_record(&self.events[e], ticket);
                    let c = ticket.closed();
                    if c.counted
                        && self.ev_driver[e] == *seq
                        && self.events[e].source() != Some((c.stream, c.epoch))
                    {
                        // The driver has this record; the ledger dropped it.
                        if let Some(clock) = &self.oracle.event[e] {
                            self.oracle.event[e] = Some(clock.retag(Some(Cause::ReRecord)));
                        }
                    }
                }
                self.ev_in_flight[e] -= 1;
                return Ok(());
            }
            Pending::Wait {
                e,
                kind,
                ticket,
                driven: driven @ None,
                ..
            } => {
                self.log.push(format!(
                    "T{slot} driver {kind:?} e{e} (saw {:?})",
                    ticket.source()
                ));
                // What the driver call sees of the event now.
                *driven = Some(match *kind {
                    WaitKind::Stream(s2) if self.capturing(s2) => None,
                    WaitKind::Query(false) => None,
                    _ => self.oracle.event[*e].clone(),
                });
            }
            Pending::Wait {
                e,
                kind,
                ticket,
                driven: Some(seen),
                ..
            } => {
                let (e, kind, ticket) = (*e, *kind, *ticket);
                let seen = seen.take();
                self.log.push(format!("T{slot} finish {kind:?} e{e}"));
                let kept = match kind {
                    WaitKind::Stream(s2) => {
                        let kept = self.ledger.finish_stream_wait(
                            &task,
                            &self.events[e],
                            ticket,
                            self.ids[s2],
                        );
                        if kept && self.capturing(s2) {
                            return Err("a wait on a capturing stream gave a fact".into());
                        }
                        kept
                    }
                    WaitKind::Sync | WaitKind::Query(true) => {
                        self.ledger.finish_event_complete(&self.events[e], ticket)
                    }
                    WaitKind::Query(false) => false,
                };
                if let Some(c) = seen {
                    let tag = self.wait_tag(e, &p, kept);
                    match kind {
                        WaitKind::Stream(s2) => self.oracle.clock[s2].merge(&c, tag),
                        _ => self.oracle.host.merge(&c, tag),
                    }
                }
                return Ok(());
            }
            Pending::StreamSync {
                s,
                driven: driven @ None,
                ..
            } => {
                self.log.push(format!("T{slot} driver sync s{s}"));
                *driven = Some(self.oracle.clock[*s].clone());
            }
            Pending::StreamSync {
                s,
                closed,
                driven: Some(seen),
                ..
            } => {
                let (s, closed) = (*s, *closed);
                self.log
                    .push(format!("T{slot} finish sync s{s} ({closed:?})"));
                let tag = if closed.counted {
                    None
                } else {
                    Some(self.tag_not_learnt(s))
                };
                self.oracle.host.merge(seen, tag);
                self.ledger.finish_stream_sync(closed);
                return Ok(());
            }
        }
        // Driven, not finished: the task's next step finishes it.
        self.slots[slot].as_mut().unwrap().pending = Some(p);
        Ok(())
    }

    fn end_capture(&mut self) {
        let cap = self.capture.take().unwrap();
        self.log.push(format!(
            "end capture on s{}: graph {:?}",
            cap.stream, cap.graph
        ));
        self.ledger.set_capturing(self.ids[cap.stream], false);
        if !cap.graph.is_empty() {
            if self.graphs.len() == 3 {
                self.graphs.remove(0);
            }
            self.graphs.push(cap.graph);
        }
    }

    fn step(&mut self, mut st: Step) -> Result<(), String> {
        let slot = st.slot as usize % self.tasks;
        if self.kinds & (1 << kind(st.op)) == 0 {
            st.op %= 24; // a launch instead
        }
        if kind(st.op) == 12 {
            return self.recycle(st.a as usize % self.n);
        }
        let Some(sl) = &self.slots[slot] else {
            // The pool hands out a stream with no live owner, if any (then
            // the task takes it over); else one a live task owns (shared).
            // (With none free, one step in four starts a task anyway.)
            let free = (0..self.n)
                .map(|i| (st.a as usize + i) % self.n)
                .find(|&s| !self.owner[s].as_ref().is_some_and(Task::is_live) && !self.shared[s]);
            if free.is_none() && st.b % 4 != 0 {
                return Ok(());
            }
            let home = free.unwrap_or(st.a as usize % self.n);
            let task = self.ledger.begin_task();
            self.log
                .push(format!("T{slot} begins ({:?}), home s{home}", task.id()));
            self.slots[slot] = Some(Slot {
                task,
                home,
                pending: None,
            });
            return Ok(());
        };
        if sl.pending.is_some() {
            return self.advance(slot);
        }
        let task = sl.task.clone();
        let home = sl.home;
        let e = st.b as usize % EVENTS;
        match st.op {
            0..=23 | 96..=99 => {
                let s = self.pick(slot, st.a);
                // 1 to 3 of the program's buffers, each read or written.
                let all = (1u8 << self.nbufs) - 1;
                let mut mask = st.b % all + 1;
                if mask == 15 {
                    mask = 7;
                }
                let touches = (0..self.nbufs)
                    .filter(|&i| bit(mask, i))
                    .map(|i| (i, bit(st.c, i)))
                    .collect();
                self.launch(slot, s, touches)?;
            }
            24..=35 => {
                let s = self.pick(slot, st.a);
                self.log.push(format!("T{slot} begin record e{e} on s{s}"));
                self.bind(slot, s)?;
                let ticket = self
                    .ledger
                    .begin_record(&task, &self.events[e], self.ids[s]);
                self.ev_records[e] += 1;
                self.ev_in_flight[e] += 1;
                self.slots[slot].as_mut().unwrap().pending = Some(Pending::Record {
                    e,
                    s,
                    ticket,
                    fails: st.c % 16 == 0,
                    driven: None,
                });
            }
            36..=55 => {
                let kind = match st.op {
                    36..=44 => {
                        let s2 = self.pick(slot, st.a);
                        self.bind(slot, s2)?;
                        WaitKind::Stream(s2)
                    }
                    45..=49 => WaitKind::Sync,
                    _ => WaitKind::Query(bit(st.c, 0)),
                };
                self.log.push(format!("T{slot} begin {kind:?} e{e}"));
                let ticket = self.ledger.begin_wait(&self.events[e]);
                self.slots[slot].as_mut().unwrap().pending = Some(Pending::Wait {
                    e,
                    kind,
                    ticket,
                    records_seen: self.ev_records[e],
                    record_in_flight: self.ev_in_flight[e] > 0,
                    driven: None,
                });
            }
            56..=61 => {
                let s = self.pick(slot, st.a);
                self.bind(slot, s)?;
                match self.ledger.begin_stream_sync(&task, self.ids[s]) {
                    Ok(closed) => {
                        self.log
                            .push(format!("T{slot} begin sync s{s}: {closed:?}"));
                        if self.capturing(s) {
                            return Err(format!("stream sync of capturing s{s} was allowed"));
                        }
                        self.slots[slot].as_mut().unwrap().pending = Some(Pending::StreamSync {
                            s,
                            closed,
                            hold: None,
                            driven: None,
                        });
                    }
                    Err(_) if self.capturing(s) => {}
                    Err(err) => return Err(format!("stream sync refused: {err}")),
                }
            }
            62..=66 => {
                if self
                    .capture
                    .as_ref()
                    .is_some_and(|c| c.task == task.id().get())
                {
                    if self.pending_on(self.capture.as_ref().unwrap().stream) {
                        return Ok(());
                    }
                    self.end_capture();
                }
                self.log.push(format!("T{slot} finishes"));
                self.ledger.finish_task(&task);
                for r in &mut self.raw {
                    if r.is_some_and(|(_, t)| t == task.id().get()) {
                        *r = None;
                    }
                }
                self.slots[slot] = None;
            }
            67..=70 => {
                // R10: a raw pointer on the task's stream.
                let b = st.b as usize % self.nbufs;
                if self.capturing(home) || !self.borrow_ok(&[(b, true)]) {
                    return Ok(());
                }
                self.log.push(format!("T{slot} escapes b{b} on s{home}"));
                self.bind(slot, home)?;
                self.moved(&[(b, true)], home);
                self.hand_off(slot, b, home, true)?;
                self.ledger.escape(self.bufs[b].get_mut(), self.ids[home]);
                self.raw[b] = Some((home, task.id().get()));
            }
            71..=76 => {
                // Raw work through a pointer this task took, on its stream.
                let mine: Vec<usize> = (0..BUFS)
                    .filter(|&b| self.raw[b].is_some_and(|(_, t)| t == task.id().get()))
                    .collect();
                if mine.is_empty() {
                    return Ok(());
                }
                let b = mine[st.b as usize % mine.len()];
                let s = self.raw[b].unwrap().0;
                if self.capturing(s) || !self.borrow_ok(&[(b, true)]) {
                    return Ok(());
                }
                self.log
                    .push(format!("T{slot} raw launch on s{s} through b{b}'s pointer"));
                self.oracle.submit(s, &[(b, true)])?;
                self.stats.ops += 1;
            }
            77..=79 => {
                if self.capture.is_some() || self.pending_on(home) {
                    return Ok(());
                }
                self.log.push(format!("T{slot} begins capture on s{home}"));
                self.bind(slot, home)?;
                self.ledger.set_capturing(self.ids[home], true);
                self.capture = Some(Capture {
                    stream: home,
                    task: task.id().get(),
                    graph: Vec::new(),
                });
            }
            80..=82 => {
                let Some(cap) = &self.capture else {
                    return Ok(());
                };
                if cap.task != task.id().get() || self.pending_on(cap.stream) {
                    return Ok(());
                }
                self.end_capture();
            }
            83..=86 => {
                if self.graphs.is_empty() {
                    return Ok(());
                }
                let g = self.graphs[st.b as usize % self.graphs.len()].clone();
                let s = self.pick(slot, st.a);
                if self.capturing(s) {
                    return Ok(());
                }
                self.log.push(format!("T{slot} graph launch:"));
                self.launch(slot, s, g)?;
            }
            87..=90 => {
                // R11: a host-sync pointer.
                let b = st.b as usize % self.nbufs;
                if self.capturing(home) || !self.borrow_ok(&[(b, true)]) {
                    return Ok(());
                }
                self.log
                    .push(format!("T{slot} host-sync pointer b{b} on s{home}"));
                self.bind(slot, home)?;
                self.moved(&[(b, true)], home);
                self.hand_off(slot, b, home, true)?;
                self.stamp(b, home, true)?;
                // The pointer's use, ordered like an operation on `home`.
                self.oracle.submit(home, &[(b, true)])?;
                self.stamp(b, home, true)?;
                let closed = self
                    .ledger
                    .begin_stream_sync(&task, self.ids[home])
                    .map_err(|e| e.to_string())?;
                self.slots[slot].as_mut().unwrap().pending = Some(Pending::StreamSync {
                    s: home,
                    closed,
                    hold: Some(b),
                    driven: None,
                });
            }
            _ => unreachable!(),
        }
        Ok(())
    }

    /// R13: the pool finds `s` idle (a host observation) and recycles it,
    /// if every task that bound it finished.
    fn recycle(&mut self, s: usize) -> Result<(), String> {
        if self.capturing(s) || self.pending_on(s) || self.bound[s].iter().any(Task::is_live) {
            return Ok(());
        }
        self.log.push(format!("pool recycles s{s}"));
        self.oracle.host_stream(s, Some(Cause::Recycle));
        self.ledger.recycle(self.ids[s]);
        self.bound[s].clear();
        self.owner[s] = None;
        self.shared[s] = false;
        Ok(())
    }

    fn run(&mut self, prog: &Program) -> Result<(), String> {
        for &st in &prog.steps {
            self.step(st)?;
        }
        // Finish what is in flight, so its submissions are checked too.
        for slot in 0..SLOTS {
            if self.slots[slot]
                .as_ref()
                .is_some_and(|s| s.pending.is_some())
            {
                self.advance(slot)?;
            }
        }
        let c = self.ledger.counters();
        for r in Reason::ALL {
            self.stats.avoided[r as usize] += c.avoided(r);
        }
        self.stats.device_waits += c.device_waits;
        self.stats.host_syncs += c.host_syncs;
        self.stats.cases += 1;
        Ok(())
    }
}

// ---------------------------------------------------------------------------

fn report(st: &Stats) {
    let unneeded: u64 = st.unneeded.values().sum();
    eprintln!();
    eprintln!(
        "oracle: {} programs, {} operations submitted, 0 unsafe skips",
        st.cases, st.ops
    );
    eprintln!(
        "  bindings: owned {}, took over {}, shared {}",
        st.bindings[0], st.bindings[1], st.bindings[2]
    );
    eprintln!(
        "  no wait: clean {}, same stream {}, completed {}, ordered {}, recycled {}",
        st.avoided[0], st.avoided[1], st.avoided[2], st.avoided[3], st.avoided[4]
    );
    eprintln!(
        "  waits (per old stream): {} ({} device, {} host), needed {}, unnecessary {} ({:.1}%)",
        st.waits,
        st.device_waits,
        st.host_syncs,
        st.needed,
        unneeded,
        100.0 * unneeded as f64 / st.waits.max(1) as f64
    );
    eprintln!(
        "  {:<58} {:>8} {:>7}",
        "unnecessary waits by cause", "count", "share"
    );
    for (c, n) in &st.unneeded {
        eprintln!(
            "  {:<58} {:>8} {:>6.1}%",
            c.describe(),
            n,
            100.0 * *n as f64 / unneeded.max(1) as f64
        );
    }
}

/// The Binding enum as an index (Owned, TookOver, Shared).
const _: () = {
    assert!(Binding::Owned as usize == 0);
    assert!(Binding::TookOver as usize == 1);
    assert!(Binding::Shared as usize == 2);
};

#[test]
fn ledger_never_skips_a_wait_the_oracle_needs() {
    let cases = std::env::var("ORACLE_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let config = Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: 4096,
        ..Config::default()
    };
    let stats = Mutex::new(Stats::default());
    let mut runner = TestRunner::new(config);
    let result = runner.run(&program(), |prog| {
        let mut sim = Sim::new(&prog);
        match sim.run(&prog) {
            Ok(()) => {
                let mut st = stats.lock().unwrap();
                let s = sim.stats;
                st.cases += s.cases;
                st.ops += s.ops;
                st.waits += s.waits;
                st.needed += s.needed;
                st.device_waits += s.device_waits;
                st.host_syncs += s.host_syncs;
                for i in 0..5 {
                    st.avoided[i] += s.avoided[i];
                }
                for i in 0..3 {
                    st.bindings[i] += s.bindings[i];
                }
                for (c, n) in s.unneeded {
                    *st.unneeded.entry(c).or_default() += n;
                }
                Ok(())
            }
            Err(e) => Err(TestCaseError::fail(format!(
                "{e}\n--- trace ({} streams) ---\n{}",
                prog.streams,
                sim.log.join("\n")
            ))),
        }
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    report(&stats.lock().unwrap());
}

// ---------------------------------------------------------------------------
// Replays: hand-written programs for races that random programs reach only
// once in tens of thousands. Each fails if the ledger loses the check it
// names (each was seen to fail against a ledger without it).
//
// A step is `(task, op, a, b, c)`: a task's first step begins it on the first
// free stream from `a`; a task with an operation in flight takes its next
// half (`N`); else `op` picks: 0 launch (buffers `b + 1` as a bit mask, bit
// `i` of `c` writes buffer `i`), 24 record (event `b`), 36 stream wait, 45
// event sync (event `b`), 56 stream sync, 67 escape (buffer `b`), 71 raw
// launch. `a` below 200 is the task's own stream, else stream `a % n`.

/// A step as `(task, op, a, b, c)`.
type Raw = (u8, u8, u8, u8, u8);

const N: Raw = (0, 0, 0, 0, 0);

fn replay(streams: usize, v: &[Raw]) {
    let prog = Program {
        streams,
        tasks: SLOTS,
        bufs: BUFS,
        kinds: u16::MAX,
        cross: 200,
        steps: v
            .iter()
            .map(|&(slot, op, a, b, c)| Step { slot, op, a, b, c })
            .collect(),
    };
    let mut sim = Sim::new(&prog);
    if let Err(e) = sim.run(&prog) {
        panic!("{e}\n--- trace ---\n{}", sim.log.join("\n"));
    }
}

/// `(task, N)` for `k` steps of `task`: the halves of its operation in flight.
fn halves(task: u8, k: usize) -> impl Iterator<Item = Raw> {
    std::iter::repeat((task, N.1, N.2, N.3, N.4)).take(k)
}

fn program_of(parts: Vec<Vec<Raw>>) -> Vec<Raw> {
    parts.concat()
}

#[test]
fn replay_rerecord_during_a_stream_wait() {
    // R8: a re-record lands between the wait's read of the event and its
    // driver call: the wait must not give the old source's fact.
    replay(
        3,
        &program_of(vec![
            vec![(0, 99, 0, 0, 0), (1, 99, 1, 0, 0), (2, 99, 2, 0, 0)],
            vec![(0, 0, 0, 0, 1)], // T0 writes b0 on s0
            halves(0, 1).collect(),
            vec![(0, 24, 0, 0, 1)], // T0 records e0 on s0
            halves(0, 2).collect(),
            vec![(1, 36, 0, 0, 0)], // s1 waits e0: reads it
            vec![(2, 24, 0, 0, 1)], // T2 re-records e0 on s2
            halves(2, 2).collect(),
            halves(1, 2).collect(), // the driver wait (on T2's record), finish
            vec![(1, 0, 0, 0, 0)],  // T1 reads b0 on s1
            halves(1, 1).collect(),
        ]),
    );
}

#[test]
fn replay_rerecord_during_an_event_sync() {
    // R6: the same for a host synchronize.
    replay(
        3,
        &program_of(vec![
            vec![(0, 99, 0, 0, 0), (1, 99, 1, 0, 0), (2, 99, 2, 0, 0)],
            vec![(0, 0, 0, 0, 1)],
            halves(0, 1).collect(),
            vec![(0, 24, 0, 0, 1)],
            halves(0, 2).collect(),
            vec![(1, 45, 0, 0, 0)], // T1 syncs e0: reads it
            vec![(2, 24, 0, 0, 1)],
            halves(2, 2).collect(),
            halves(1, 2).collect(),
            vec![(1, 0, 0, 0, 0)],
            halves(1, 1).collect(),
        ]),
    );
}

#[test]
fn replay_two_records_in_flight() {
    // R4: T0 and T1 record e0 at once; T1's driver call lands first, T0's
    // last, and T0 finishes first: T1's finish must not claim the event.
    replay(
        3,
        &program_of(vec![
            vec![(0, 99, 0, 0, 0), (1, 99, 1, 0, 0), (2, 99, 2, 0, 0)],
            vec![(1, 0, 0, 1, 2)], // T1 writes b1 on s1
            halves(1, 1).collect(),
            vec![(0, 24, 0, 0, 1)], // T0 begins recording e0 on s0
            vec![(1, 24, 0, 0, 1)], // T1 begins recording e0 on s1
            halves(1, 1).collect(), // T1's driver record
            halves(0, 2).collect(), // T0's driver record, T0 finishes
            halves(1, 1).collect(), // T1 finishes
            vec![(2, 45, 0, 0, 0)], // T2 syncs e0
            halves(2, 2).collect(),
            vec![(2, 0, 0, 1, 0)], // T2 reads b1 on s2
            halves(2, 1).collect(),
        ]),
    );
}

#[test]
fn replay_escape_then_a_same_stream_use() {
    // R10: a tracked use on the escape's own stream must not end the escape:
    // raw work through the pointer follows.
    replay(
        2,
        &program_of(vec![
            vec![(0, 99, 0, 0, 0)],
            vec![(0, 67, 0, 0, 0)], // T0 escapes b0 on s0
            vec![(0, 0, 0, 0, 0)],  // T0 reads b0 on s0
            halves(0, 1).collect(),
            vec![(0, 0, 0, 0, 1)], // T0 writes b0 on s0
            halves(0, 1).collect(),
            vec![(0, 56, 0, 0, 0)], // T0 syncs s0
            halves(0, 2).collect(),
            vec![(0, 71, 0, 0, 0)], // raw work through the pointer
            vec![(1, 99, 1, 0, 0)],
            vec![(1, 0, 0, 0, 0)], // T1 reads b0 on s1
            halves(1, 1).collect(),
        ]),
    );
}

#[test]
fn replay_escape_moved_by_a_read() {
    // R10: after a read moves an escaped buffer, its writer is not the
    // escape's old stamp (raw writes followed it).
    replay(
        3,
        &program_of(vec![
            vec![(0, 99, 0, 0, 0)],
            vec![(0, 67, 0, 0, 0)], // T0 escapes b0 on s0
            vec![(0, 56, 0, 0, 0)], // T0 syncs s0
            halves(0, 2).collect(),
            vec![(0, 71, 0, 0, 0)], // raw work through the pointer
            vec![(1, 99, 1, 0, 0)],
            vec![(1, 0, 0, 0, 0)], // T1 reads b0 on s1: the move
            halves(1, 1).collect(),
            vec![(2, 99, 2, 0, 0)],
            vec![(2, 0, 0, 0, 0)], // T2 reads b0 on s2
            halves(2, 1).collect(),
        ]),
    );
}

#[test]
fn replay_a_non_owner_fact_between_a_record_and_its_finish() {
    // X1: T0's record copies s0's ordered table after its driver call; a
    // fact from T1's device wait on s0 (submitted after that record) must not
    // get into it.
    replay(
        3,
        &program_of(vec![
            vec![(0, 99, 0, 0, 0), (1, 99, 1, 0, 0), (2, 99, 2, 0, 0)],
            vec![(1, 0, 0, 1, 2)], // T1 writes b1 on s1
            halves(1, 1).collect(),
            vec![(1, 24, 0, 1, 1)], // T1 records e1 on s1 (a counted close)
            halves(1, 2).collect(),
            vec![(0, 24, 0, 0, 1)],  // T0 records e0 on s0
            halves(0, 1).collect(),  //   driver record
            vec![(1, 0, 201, 1, 0)], // T1 reads b1 on s0: a device wait on s1
            halves(1, 1).collect(),
            halves(0, 1).collect(), // T0 finishes the record
            vec![(2, 36, 0, 0, 0)], // s2 waits e0
            halves(2, 2).collect(),
            vec![(2, 0, 0, 1, 0)], // T2 reads b1 on s2
            halves(2, 1).collect(),
        ]),
    );
}
