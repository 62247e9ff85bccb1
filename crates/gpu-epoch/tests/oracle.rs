//! The ledger against a plain happens-before oracle (DESIGN "Tests").
//!
//! Random programs (tasks, streams of several devices, launches, records and
//! re-records, stream waits, event syncs and queries, stream syncs,
//! takeovers, sharing, recycling, retiring and reusing stream slots, captures
//! and graph launches, raw pointers, host staging memory, collectives) run
//! through the ledger, driven the way the runtime drives
//! it, and through an oracle of per-stream vector clocks. Operations are
//! split into the halves the runtime splits them into (an operation's
//! hand-off and first stamp, then its submission and second stamp;
//! `begin_*` then the driver call and `finish_*`), and the halves of
//! different tasks interleave.
//!
//! What the runtime does around those operations is in the programs too
//! (DESIGN "Soundness"):
//!
//! - **Pooled events.** One small pool of events serves hand-offs and users.
//!   A hand-off's device wait takes an event, resets it
//!   (`record_untracked`), records it raw on the old stream, makes the new
//!   stream wait on it and gives it back; a hand-off's host wait likewise
//!   records one raw and synchronizes it (no fact); a capture's "pre" event
//!   is one recorded raw as the capture begins. User events come from the
//!   same pool (reset when handed out) and go back on drop; users may
//!   synchronize, query or wait on one before recording it. In the oracle an
//!   event is whatever its last driver record captured, tracked or raw.
//! - **Split and rejoin (X3).** A split gives each of its views (disjoint
//!   halves of the buffer, or one view of all of it) the buffer's uses, then
//!   forgets the buffer's (`forget_uses`). Views are used like buffers; then
//!   a task rejoins them (each view handed to its stream as a write, the
//!   buffer restamped there) or they are dropped (the buffer's uses become
//!   the views' of their halves: `merge_views`). In the oracle a view's use
//!   and the buffer's conflict, two views' do not.
//! - **Frees and allocations (X4).** Dropping a buffer hands its uses to the
//!   reclaim stream (owned by a task that never ends) as a write, carried out
//!   with pooled events, then frees it there: every earlier use must happen
//!   before the free. A new buffer is then allocated in its place, in stream
//!   order on a task's stream. Each device has its reclaim stream, and a
//!   buffer is freed on its device's.
//! - **Captures and memory (issue 23, defect 1).** An allocation on a
//!   capturing stream is refused (`Error::Capturing`) after the runtime's
//!   bind: nothing stamped, no buffer, the ledger's state unchanged (checked
//!   whole); one in two times the capture's body returns the error and the
//!   capture ends without its graph. A buffer may be freed while a stream
//!   (its own or another) captures: its captured uses are not stamped and
//!   never run unless a graph is launched on the buffer, which a freed
//!   buffer cannot be; the free waits for what was queued (the capturing
//!   stream's through the capture's pre event), and for a graph's uses once
//!   it was launched.
//! - **Abandoned captures.** A capture may end without its graph (the body
//!   erred or panicked, also when its task ends mid-capture): nothing it
//!   captured runs or was stamped.
//! - **Task ends.** A task that submitted to its stream closes its epoch
//!   there as it ends.
//! - **Shared streams (DESIGN "Streams are a resource").** The pool, out of streams, gives a stream a
//!   live task holds (its home, bound or not yet) to a new task too: it
//!   calls `share` before the new task binds or stamps anything; both
//!   tasks' operations then go on it in submission order, interleaved.
//! - **Retired and reused slots (DESIGN "Streams are a resource").** The pool retires an idle stream no
//!   live task holds or bound (`retire`: a host observation that all its
//!   work is done, like a recycle; the slot is vacant); a stream creation
//!   (`add_stream`) reuses a vacant slot for a new driver stream, which in
//!   the oracle is a new stream ordered after nothing, while the ledger's
//!   slot keeps its epochs, completed value and `waited` row. Stamps of the
//!   old stream are judged against the old stream's clock (complete on the
//!   host). Waits the ledger asks for on a vacant slot are skipped, as the
//!   runtime skips them. (Oracle streams `n + devs..` are reused slots' new
//!   streams; `Sim::ost` maps a slot to its stream.)
//! - **Several devices, staging memory and collectives (DESIGN "Beyond one GPU", issue 23,
//!   defects 2 and 3).** Streams of up to three devices share the ledger.
//!   Host staging memory (page-locked, of one device) is copied from on a
//!   stream of any device, then written by the host; collectives are one
//!   part per rank on unshared streams, issued as a group. See
//!   [`devices`].
//!
//! Property: whenever a buffer use is submitted, every earlier conflicting
//! use (write after write, read after write, write after read) happens
//! before it in the oracle: ordered on the new stream's clock, or known
//! complete on the host; whenever the host reads or writes staging memory,
//! every earlier conflicting device use of it is known complete on the
//! host. Since every wait the ledger asks for is carried out
//! in the oracle too, a violation is exactly a wait the ledger skipped.
//!
//! Precision: each wait the ledger asks for is checked against the oracle; a
//! wait for uses the oracle already orders is unnecessary, and is put down to
//! the cause that kept the ledger from knowing (a table at the end, shown with
//! `--nocapture`).
//!
//! `ORACLE_CASES` sets the number of programs (default 10 000); issue 23's
//! million:
//! `ORACLE_CASES=1000000 cargo test -p gpu-epoch --release --test oracle -- --nocapture`.
#![cfg(not(loom))]

use gpu_epoch::{
    Access, Binding, BufferStamps, Closed, Decision, EventCoverage, Ledger, Reason, RecordTicket,
    StreamEpoch, StreamId, Task, WaitTicket,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use std::collections::{BTreeMap, VecDeque};

#[path = "oracle/devices.rs"]
mod devices;
use devices::{Comm, Next, Part, COMM_STREAMS, STAGING};
use std::sync::Mutex;

const BUFS: usize = 4;
/// Event handles users hold at once.
const HANDLES: usize = 2;
/// The event pool: the users' handles, a capture's pre event and one
/// hand-off's event can be out at once, and each staging buffer's fence.
const POOL: usize = HANDLES + 2 + STAGING;
const SLOTS: usize = 4;
const MAX_STEPS: usize = 200;
/// Streams a program may create in retired slots (new oracle streams).
const NEW_STREAMS: usize = 4;

/// Stamped objects: the buffers `0..BUFS`, then two view slots per buffer.
const OBJS: usize = 3 * BUFS;

/// Ranged objects follow the stamped ones: three parts per (unsplit)
/// buffer, used through the buffer's own stamps with a range (X3 extended,
/// `slice`/`slice_mut`): its first half, its second half (the halves the
/// split model uses) and a middle range overlapping both in part.
const PARTS: usize = 3;

/// A buffer's length in elements, for ranges.
const LEN: usize = 4;

/// The object of part `j` of buffer `b`.
fn part(b: usize, j: usize) -> usize {
    OBJS + PARTS * b + j
}

/// Part `j`'s range and halves.
fn part_range(j: usize) -> (std::ops::Range<usize>, u8) {
    match j {
        0 => (0..LEN / 2, 0b01),
        1 => (LEN / 2..LEN, 0b10),
        _ => (1..LEN - 1, 0b11),
    }
}

/// The object of view `i` of buffer `b`.
fn view(b: usize, i: usize) -> usize {
    BUFS + 2 * b + i
}

/// An object's name in traces: `b1`, or `b1.v0` for a view.
struct Obj(usize);

impl std::fmt::Display for Obj {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            o if o < BUFS => write!(f, "b{o}"),
            o if o >= OBJS => write!(
                f,
                "b{}[{:?}]",
                (o - OBJS) / PARTS,
                part_range((o - OBJS) % PARTS).0
            ),
            o => write!(f, "b{}.v{}", (o - BUFS) / 2, (o - BUFS) % 2),
        }
    }
}

/// Objects an operation touches, for traces: `[b0 r, b1.v1 w]`.
struct Objs<'a>(&'a [(usize, bool)]);

impl std::fmt::Debug for Objs<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[")?;
        for (i, &(o, w)) in self.0.iter().enumerate() {
            let sep = if i == 0 { "" } else { ", " };
            write!(f, "{sep}{} {}", Obj(o), if w { "w" } else { "r" })?;
        }
        f.write_str("]")
    }
}

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
    Recycle,
    HostWait,
    Pooled,
    Unknown,
}

impl Cause {
    fn describe(self) -> &'static str {
        match self {
            Cause::Direct => "epoch granularity (fact known, use stamped later)",
            Cause::HandOff => "hand-off wait (learns only the last counted close)",
            Cause::SharedStream => "shared stream (its closes give no fact)",
            Cause::NonOwner => "wait/sync by a task not owning the stream",
            Cause::NonOwnerRecord => "event recorded on a stream the task does not own",
            Cause::ReRecord => "event re-recorded (during a wait, or records in flight)",
            Cause::Escape => "escaped buffer (R10: waits for all on a move)",
            Cause::Recycle => "recycle (idle stream: ledger knows only its own stamps)",
            Cause::HostWait => "hand-off host wait (pooled event: no fact)",
            Cause::Pooled => "pooled event (last driver record raw, or reset)",
            Cause::Unknown => "unknown uses (a split of unknown uses, or too many entries)",
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

/// One use of a buffer's memory: `mask` says which halves it touched.
#[derive(Clone, Copy, Debug)]
struct OUse {
    stream: usize,
    seq: u32,
    write: bool,
    mask: u8,
}

/// The halves of a buffer a mask names, for messages.
fn half_name(mask: u8) -> &'static str {
    match mask {
        1 => " (1st half)",
        2 => " (2nd half)",
        _ => "",
    }
}

/// Happens-before: a clock per stream (what its next operation is ordered
/// after), a clock per pooled event (its stream's clock at its last driver
/// record, tracked or raw; none when never recorded or recorded in a
/// capture), and the host's known-complete clock.
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
            event: vec![None; POOL],
            // Buffers, then host staging memory.
            uses: vec![Vec::new(); BUFS + STAGING],
        }
    }

    fn ordered(&self, u: &OUse, s: usize) -> bool {
        self.clock[s].get(u.stream) >= u.seq || self.host.get(u.stream) >= u.seq
    }

    /// An operation on `s` touching `touches` (buffer, halves, written) is
    /// submitted: every earlier conflicting use must happen before it.
    fn submit(&mut self, s: usize, touches: &[(usize, u8, bool)]) -> Result<(), String> {
        for &(b, m, w) in touches {
            for u in &self.uses[b] {
                if u.mask & m != 0 && (u.write || w) && !self.ordered(u, s) {
                    return Err(format!(
                        "UNSAFE: buffer {b}{} {} on stream {s} is not ordered after its {}{} on stream {} (op #{}): \
                         stream clock {:?}, host {:?}",
                        half_name(m),
                        if w { "write" } else { "read" },
                        if u.write { "write" } else { "read" },
                        half_name(u.mask),
                        u.stream,
                        u.seq,
                        (0..self.host.0.len()).map(|x| self.clock[s].get(x)).collect::<Vec<_>>(),
                        (0..self.host.0.len()).map(|x| self.host.get(x)).collect::<Vec<_>>(),
                    ));
                }
            }
        }
        let seq = self.clock[s].tick(s);
        for &(b, mask, write) in touches {
            self.uses[b].push(OUse {
                stream: s,
                seq,
                write,
                mask,
            });
        }
        Ok(())
    }

    fn record(&mut self, e: usize, s: usize, tag: Option<Cause>) {
        self.event[e] = Some(self.clock[s].retag(tag));
    }

    /// `s2` waits on the device for event `e`'s last driver record.
    fn wait_event(&mut self, e: usize, s2: usize, tag: Option<Cause>) {
        if let Some(c) = &self.event[e] {
            self.clock[s2].merge(c, tag);
        }
    }

    /// The host synchronizes event `e`'s last driver record.
    fn host_event(&mut self, e: usize, tag: Option<Cause>) {
        if let Some(c) = &self.event[e] {
            self.host.merge(c, tag);
        }
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
    /// Devices (1..=3), sharing the ledger (DESIGN "Beyond one GPU"): task stream `i` is of
    /// device `i % devs`; each device has its reclaim stream.
    devs: usize,
    /// How many tasks may be live at once (2..=SLOTS).
    tasks: usize,
    /// How many buffers the program uses (1..=BUFS).
    bufs: usize,
    /// Swarm testing: the kinds of operation this program uses (bit `k`
    /// for [`kind`] `k`; launches always), so that rarer sequences of a
    /// few kinds are dense in some programs.
    kinds: u32,
    /// A task picks a stream other than its own when a step's byte is at
    /// least this.
    cross: u8,
    steps: Vec<Step>,
}

/// The kind of an operation byte: 0 launch, 1 record, 2 stream wait, 3
/// event sync, 4 event query, 5 stream sync, 6 task finish, 7 escape, 8 raw
/// launch, 9 capture begin or end, 10 graph launch, 11 host-sync pointer, 12
/// recycle, 13 user event dropped, 14 split, rejoin or views dropped, 15
/// free or allocation, 16 a task begins sharing a held stream, 17 retire,
/// 18 stream creation, 19 a staging call (copy in or out, host access), 20
/// a communicator's creation, drop or collective.
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
        91..=95 => 12,
        100..=103 => 13,
        104..=111 => 14,
        112..=117 => 15,
        118..=120 => 16,
        121..=123 => 17,
        124..=126 => 18,
        127..=133 => 19,
        _ => 20,
    }
}

/// Operation bytes are below this.
const OPS: u8 = 140;

fn program() -> impl Strategy<Value = Program> {
    let step = (
        0..SLOTS as u8,
        0u8..OPS,
        any::<u8>(),
        any::<u8>(),
        any::<u8>(),
    )
        .prop_map(|(slot, op, a, b, c)| Step { slot, op, a, b, c });
    (
        (2usize..=5, prop_oneof![Just(1usize), 1usize..=3]),
        2usize..=SLOTS,
        1usize..=BUFS,
        prop_oneof![Just(u32::MAX), any::<u32>()],
        prop_oneof![Just(248u8), 224u8..=255],
        prop::collection::vec(step, 1..=MAX_STEPS),
    )
        .prop_map(
            |((streams, devs), tasks, bufs, kinds, cross, steps)| Program {
                streams,
                devs,
                tasks,
                bufs,
                kinds,
                cross,
                steps,
            },
        )
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
        /// Host staging memory the operation reads or writes (a copy).
        host: Vec<(usize, bool)>,
        captured: bool,
    },
    /// A collective: its parts' hand-offs and stamps, rank by rank (`phase`),
    /// then every part queued at once.
    Collective { phase: usize, parts: Vec<Part> },
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
            Pending::Wait { .. } | Pending::Collective { .. } => None,
        }
    }

    /// The objects it holds, and whether it writes them.
    fn touches(&self) -> Vec<(usize, bool)> {
        match self {
            Pending::Launch { touches, .. } => touches.clone(),
            Pending::Collective { parts, .. } => {
                parts.iter().flat_map(|p| p.touches.clone()).collect()
            }
            Pending::StreamSync { hold: Some(b), .. } => vec![(*b, true)],
            _ => Vec::new(),
        }
    }

    /// The pooled event it holds, if any.
    fn event(&self) -> Option<usize> {
        match *self {
            Pending::Record { e, .. } | Pending::Wait { e, .. } => Some(e),
            _ => None,
        }
    }
}

struct Slot {
    task: Task,
    home: usize,
    pending: Option<Pending>,
    /// Bound its own stream (the runtime's `submitted`): closes it at the end.
    submitted: bool,
    /// The rest of the runtime call in progress (a staging call's steps).
    next: VecDeque<Next>,
    /// The staging buffer that call holds (`&mut Staging`), and its stream.
    holds: Option<(usize, usize)>,
}

/// A captured or graph operation's object: (object, written, the buffer's
/// generation then).
type GraphTouch = (usize, bool, u32);

struct Capture {
    stream: usize,
    task: u64,
    graph: Vec<GraphTouch>,
    /// The pooled event recorded raw on the stream as the capture began.
    pre: usize,
}

/// What a buffer slot holds.
#[derive(Clone, Copy, Debug, PartialEq)]
enum BufState {
    Live,
    /// Split into this many views (1 or 2); the buffer itself is borrowed.
    Split(usize),
    /// Freed; a new buffer may be allocated in its place.
    Freed,
}

#[derive(Default)]
struct Stats {
    cases: u64,
    ops: u64,
    waits: u64,
    needed: u64,
    unneeded: BTreeMap<Cause, u64>,
    avoided: [u64; Reason::ALL.len()],
    device_waits: u64,
    host_syncs: u64,
    bindings: [u64; 3],
    raw_records: u64,
    handouts: u64,
    splits: u64,
    rejoins: u64,
    dropped_views: u64,
    frees: u64,
    allocs: u64,
    abandoned: u64,
    task_closes: u64,
    shares: u64,
    retires: u64,
    creates: u64,
    /// Waits the ledger asked for on a retired (vacant) slot: skipped.
    vacant_skips: u64,
    /// Waits of frees' hand-offs: needed, unnecessary.
    free_waits: [u64; 2],
    /// Allocations refused in a capture; of them, captures then abandoned.
    refused_allocs: [u64; 2],
    /// Frees while a stream is capturing; of them, of a buffer the capture
    /// used.
    frees_in_capture: [u64; 2],
    pub(crate) dev: devices::DevStats,
}

impl Stats {
    fn add(&mut self, s: &Stats) {
        self.cases += s.cases;
        self.ops += s.ops;
        self.waits += s.waits;
        self.needed += s.needed;
        self.device_waits += s.device_waits;
        self.host_syncs += s.host_syncs;
        for i in 0..5 {
            self.avoided[i] += s.avoided[i];
        }
        for i in 0..3 {
            self.bindings[i] += s.bindings[i];
        }
        for (c, n) in &s.unneeded {
            *self.unneeded.entry(*c).or_default() += n;
        }
        self.raw_records += s.raw_records;
        self.handouts += s.handouts;
        self.splits += s.splits;
        self.rejoins += s.rejoins;
        self.dropped_views += s.dropped_views;
        self.frees += s.frees;
        self.allocs += s.allocs;
        self.abandoned += s.abandoned;
        self.task_closes += s.task_closes;
        self.shares += s.shares;
        self.retires += s.retires;
        self.creates += s.creates;
        self.vacant_skips += s.vacant_skips;
        self.free_waits[0] += s.free_waits[0];
        self.free_waits[1] += s.free_waits[1];
        for i in 0..2 {
            self.refused_allocs[i] += s.refused_allocs[i];
            self.frees_in_capture[i] += s.frees_in_capture[i];
        }
        self.dev.add(&s.dev);
    }
}

struct Sim {
    /// Task streams are `0..n`; streams `n..n + devs` are the devices'
    /// reclaim streams.
    n: usize,
    devs: usize,
    tasks: usize,
    nbufs: usize,
    kinds: u32,
    cross: u8,
    ledger: Ledger,
    ids: Vec<StreamId>,
    /// Each device's reclaim stream and the task that owns it for good.
    reclaim: Vec<usize>,
    reclaimer: Vec<Task>,
    /// Each buffer's device.
    bdev: Vec<usize>,
    /// Each staging buffer's fence in flight (`Staging::in_flight`): a
    /// pooled event recorded after its last copy.
    fence: [Option<usize>; STAGING],
    /// The communicator, if any: a task and an unshared stream per rank.
    comm: Option<Comm>,
    /// Streams a communicator's task holds: never shared, never given to
    /// another task.
    reserved: Vec<bool>,
    /// Stamps of every object (buffers, then views).
    bufs: Vec<BufferStamps>,
    state: Vec<BufState>,
    /// Bumped when a buffer is freed: graphs of the old one are void.
    gen: Vec<u32>,
    // The event pool: coverage and bookkeeping per pooled event.
    events: Vec<EventCoverage>,
    ev_records: Vec<u64>,
    ev_in_flight: Vec<u32>,
    ev_driver: Vec<u64>,
    /// Events in the pool (a stack: the last given back is taken first).
    free_events: Vec<usize>,
    /// The users' event handles: the pooled event each holds.
    user: [Option<usize>; HANDLES],
    slots: Vec<Option<Slot>>,
    // The model of R3: the owner's task id and whether shared.
    owner: Vec<Option<Task>>,
    shared: Vec<bool>,
    bound: Vec<Vec<Task>>,
    capture: Option<Capture>,
    graphs: Vec<Vec<GraphTouch>>,
    /// A split buffer's uses when it was split (for a drop of its views).
    split_before: Vec<gpu_epoch::Uses>,
    // A raw pointer taken on (stream, by task) that is still valid.
    raw: Vec<Option<(usize, u64)>>,
    /// The oracle's stream behind each slot: the slot's own index until the
    /// slot is retired and reused, then a new one from `n + devs` on.
    ost: Vec<usize>,
    /// The next new oracle stream.
    next_ost: usize,
    /// Retired slots (no driver stream behind them) not reused yet.
    vacant: Vec<bool>,
    oracle: Oracle,
    stats: Stats,
    log: Vec<String>,
}

fn bit(x: u8, i: usize) -> bool {
    (x >> i) & 1 == 1
}

impl Sim {
    fn new(prog: &Program) -> Self {
        let (n, devs) = (prog.streams, prog.devs);
        // Task streams, reclaim streams, streams made for communicators.
        let all = n + devs + COMM_STREAMS;
        let ledger = Ledger::new(all);
        let ids: Vec<StreamId> = (0..all).map(|_| ledger.add_stream().unwrap()).collect();
        let mut owner = vec![None; all];
        let mut bound = vec![Vec::new(); all];
        let mut reclaimer = Vec::new();
        for r in n..n + devs {
            let t = ledger.begin_task();
            assert_eq!(ledger.bind(&t, ids[r]), Binding::TookOver);
            owner[r] = Some(t.clone());
            bound[r].push(t.clone());
            reclaimer.push(t);
        }
        Sim {
            n,
            devs,
            tasks: prog.tasks,
            nbufs: prog.bufs,
            kinds: prog.kinds,
            cross: prog.cross,
            ledger,
            ids,
            reclaim: (n..n + devs).collect(),
            reclaimer,
            bdev: (0..BUFS).map(|b| b % devs).collect(),
            fence: [None; STAGING],
            comm: None,
            reserved: vec![false; all],
            bufs: (0..OBJS).map(|_| BufferStamps::new()).collect(),
            state: vec![BufState::Live; BUFS],
            gen: vec![0; BUFS],
            events: (0..POOL).map(|_| EventCoverage::new()).collect(),
            ev_records: vec![0; POOL],
            ev_in_flight: vec![0; POOL],
            ev_driver: vec![0; POOL],
            free_events: (0..POOL).rev().collect(),
            user: [None; HANDLES],
            slots: (0..SLOTS).map(|_| None).collect(),
            owner,
            shared: vec![false; all],
            bound,
            capture: None,
            graphs: Vec::new(),
            split_before: vec![gpu_epoch::Uses::new(); BUFS],
            raw: vec![None; BUFS],
            // New streams in reused slots come before the communicators'.
            oracle: Oracle::new(all + NEW_STREAMS),
            ost: (0..n + devs)
                .chain((0..COMM_STREAMS).map(|j| n + devs + NEW_STREAMS + j))
                .collect(),
            next_ost: n + devs,
            vacant: vec![false; all],
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

    /// The buffer an object's memory belongs to, and which halves of it.
    fn mem(&self, o: usize) -> (usize, u8) {
        if o < BUFS {
            return (o, 0b11);
        }
        if o >= OBJS {
            let (b, j) = ((o - OBJS) / PARTS, (o - OBJS) % PARTS);
            return (b, part_range(j).1);
        }
        let (b, i) = ((o - BUFS) / 2, (o - BUFS) % 2);
        match self.state[b] {
            BufState::Split(1) => (b, 0b11),
            _ => (b, 1 << i),
        }
    }

    fn name(o: usize) -> Obj {
        Obj(o)
    }

    /// Whether object `o` exists and may be used now.
    fn usable(&self, o: usize) -> bool {
        if o < BUFS {
            return self.state[o] == BufState::Live;
        }
        if o >= OBJS {
            return self.state[(o - OBJS) / PARTS] == BufState::Live;
        }
        let (b, i) = ((o - BUFS) / 2, (o - BUFS) % 2);
        matches!(self.state[b], BufState::Split(k) if i < k)
    }

    fn mem_touches(&self, touches: &[(usize, bool)]) -> Vec<(usize, u8, bool)> {
        touches
            .iter()
            .map(|&(o, w)| {
                let (b, m) = self.mem(o);
                (b, m, w)
            })
            .collect()
    }

    /// The stamps an object's uses go to, and the range in them: a part's
    /// are its buffer's.
    fn stamps_of(o: usize) -> (usize, std::ops::Range<usize>) {
        if o >= OBJS {
            let (b, j) = ((o - OBJS) / PARTS, (o - OBJS) % PARTS);
            return (b, part_range(j).0);
        }
        (o, gpu_epoch::WHOLE)
    }

    /// The borrow rules: no other pending operation writes an object this
    /// one touches, or reads one it writes (a part borrows its buffer's
    /// stamps: `slice_mut` borrows the buffer exclusively, `slice` shares
    /// it).
    fn borrow_ok(&self, touches: &[(usize, bool)]) -> bool {
        self.slots
            .iter()
            .flatten()
            .filter_map(|sl| sl.pending.as_ref())
            .all(|p| {
                p.touches().iter().all(|&(b2, w2)| {
                    touches
                        .iter()
                        .all(|&(b, w)| Self::stamps_of(b).0 != Self::stamps_of(b2).0 || (!w && !w2))
                })
            })
    }

    fn pick(&self, slot: usize, x: u8) -> usize {
        if x < self.cross {
            self.slots[slot].as_ref().unwrap().home
        } else {
            // A retired slot has no stream: the next one that has (and not
            // a communicator's).
            (0..self.n)
                .map(|i| (x as usize + i) % self.n)
                .find(|&s| !self.vacant[s] && !self.reserved[s])
                .expect("a task's home is neither retired nor reserved")
        }
    }

    /// R3, checked against a model of ownership.
    fn bind(&mut self, slot: usize, s: usize) -> Result<Binding, String> {
        let task = self.task(slot);
        let got = self.bind_as(&task, s)?;
        let sl = self.slots[slot].as_mut().unwrap();
        if sl.home == s {
            sl.submitted = true;
        }
        Ok(got)
    }

    /// R3 for `task` (a slot's, or a communicator's), checked against the
    /// model.
    fn bind_as(&mut self, task: &Task, s: usize) -> Result<Binding, String> {
        let task = task.clone();
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
        Ok(got)
    }

    /// Ends raw pointers of buffers now used on a stream other than theirs.
    fn moved(&mut self, touches: &[(usize, bool)], s: usize) {
        for &(o, _) in touches {
            // A part's use moves its buffer, as far as raw work goes.
            let o = Self::stamps_of(o).0;
            if o < BUFS && self.raw[o].is_some_and(|(rs, _)| rs != s) {
                self.raw[o] = None;
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

    // ----- the event pool ----------------------------------------------

    fn take_event(&mut self) -> usize {
        self.free_events.pop().expect("the event pool ran dry")
    }

    fn give_event(&mut self, e: usize) {
        self.free_events.push(e);
    }

    /// `record_untracked`: the ledger's coverage of `e` is reset (a raw
    /// driver record follows, or the event is handed to a user).
    fn untracked(&mut self, e: usize) {
        self.ledger.record_untracked(&self.events[e]);
        self.ev_records[e] += 1;
    }

    /// A driver record of `e` on `s` the ledger does not see.
    fn raw_record(&mut self, e: usize, s: usize) {
        self.ev_driver[e] += 1;
        self.oracle.record(e, self.ost[s], Some(Cause::Pooled));
        self.stats.raw_records += 1;
    }

    /// The event a hand-off waits on for `s`: the capture's pre event while
    /// `s` is captured, else one from the pool recorded raw on `s` now (to be
    /// given back after the wait).
    fn hand_off_event(&mut self, s: usize) -> (usize, bool) {
        if let Some(cap) = self.capture.as_ref().filter(|c| c.stream == s) {
            return (cap.pre, false);
        }
        let e = self.take_event();
        self.untracked(e);
        self.raw_record(e, s);
        (e, true)
    }

    /// A user handle's event: from the pool (reset) if it holds none.
    fn user_event(&mut self, h: usize) -> usize {
        if let Some(e) = self.user[h] {
            return e;
        }
        let e = self.take_event();
        self.log
            .push(format!("  user event {h} handed out: pooled e{e}"));
        self.untracked(e);
        // The driver's event is still its last record, which the ledger
        // forgot.
        if let Some(c) = &self.oracle.event[e] {
            self.oracle.event[e] = Some(c.retag(Some(Cause::Pooled)));
        }
        self.user[h] = Some(e);
        self.stats.handouts += 1;
        e
    }

    fn event_busy(&self, e: usize) -> bool {
        self.slots
            .iter()
            .flatten()
            .any(|sl| sl.pending.as_ref().and_then(Pending::event) == Some(e))
    }

    // ----- hand-offs ---------------------------------------------------

    /// Whether a wait on stream `s` for object `o` was needed; if not, why
    /// the ledger did not know.
    fn unneeded(
        &self,
        o: usize,
        s: usize,
        s2: usize,
        write: bool,
        escaped: bool,
        unknown: bool,
    ) -> Option<Cause> {
        let (b, m) = self.mem(o);
        // The driver streams behind the slots now.
        let (s, s2) = (self.ost[s], self.ost[s2]);
        let mut cause = None;
        for u in self.oracle.uses[b]
            .iter()
            .filter(|u| u.stream == s && u.mask & m != 0 && (u.write || write))
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
        if unknown {
            return Some(Cause::Unknown);
        }
        if escaped {
            return Some(Cause::Escape);
        }
        Some(cause.unwrap_or(Cause::Escape))
    }

    /// R9: the hand-off of object `o` to `s2` by `task`, carried out as the
    /// runtime does (`wait_streams`, `host_wait`): with pooled events.
    fn hand_off(&mut self, task: &Task, o: usize, s2: usize, write: bool) -> Result<(), String> {
        let sid2 = self.ids[s2];
        let access = if write { Access::Write } else { Access::Read };
        let (so, range) = Self::stamps_of(o);
        let uses = self.bufs[so].get_mut();
        let escaped_on = if uses.is_escaped() {
            uses.writer().map(|w| w.stream.index())
        } else {
            None
        };
        let unknown = uses.is_unknown();
        let d = self.ledger.hand_off_range(uses, range, sid2, access, true);
        let capturing = self.ledger.is_capturing(sid2);
        if capturing != self.capturing(s2) {
            return Err(format!("capture state of stream {s2} differs"));
        }
        if capturing && !d.waits().is_empty() {
            // X7: the graph's launch hands the buffer off again.
            return Err(format!("a hand-off to s{s2}, capturing, waits: {d:?}"));
        }
        for s in d.waits().iter() {
            let s = s.index();
            if s == s2 {
                return Err(format!("hand-off to {s2} waits for its own stream"));
            }
            if self.ledger.is_vacant(self.ids[s]) != self.vacant[s] {
                return Err(format!("vacancy of slot {s} differs"));
            }
            if self.vacant[s] {
                // The runtime skips it: the retired stream's work is done.
                self.stats.vacant_skips += 1;
                continue;
            }
            self.stats.waits += 1;
            let why = self.unneeded(o, s, s2, write, escaped_on == Some(s), unknown);
            match why {
                None => self.stats.needed += 1,
                Some(c) => *self.stats.unneeded.entry(c).or_default() += 1,
            }
            if self.reclaim.contains(&s2) {
                self.stats.free_waits[usize::from(why.is_some())] += 1;
            }
        }
        self.log.push(format!(
            "  hand-off {} -> s{s2} {access:?}: {d:?}",
            Self::name(o)
        ));
        match d {
            Decision::NoWait(_) => {}
            Decision::DeviceWait(set) => {
                // Not on a retired slot (the runtime skips those).
                let live: Vec<StreamId> = set.iter().filter(|s| !self.vacant[s.index()]).collect();
                for s in live {
                    // Read before the driver records the pooled event on `s`.
                    let facts = self.ledger.hand_off_facts(s);
                    let (e, pooled) = self.hand_off_event(s.index());
                    // `s2` waits on it on the device.
                    let tag = if self.ledger.learn_hand_off(task, sid2, &facts) {
                        // What the wait ordered beyond the source's last
                        // counted close: its open epoch, or, on a shared
                        // source, everything since it was shared (its
                        // closes give no fact, R2).
                        if self.ledger.is_shared(s) {
                            Cause::SharedStream
                        } else {
                            Cause::HandOff
                        }
                    } else {
                        self.tag_not_learnt(s2)
                    };
                    self.oracle.wait_event(e, self.ost[s2], Some(tag));
                    if pooled {
                        self.give_event(e);
                    }
                }
            }
            Decision::HostSync(set) => {
                // Not on a retired slot (the runtime skips those).
                let live: Vec<StreamId> = set.iter().filter(|s| !self.vacant[s.index()]).collect();
                for s in live {
                    // The runtime synchronizes a pooled event recorded raw on
                    // `s` (or a capture's pre event, teaching nothing);
                    // seen complete, it teaches what the facts read before
                    // the record say (`learn_host_wait`).
                    let facts = self.ledger.hand_off_facts(s);
                    let (e, pooled) = self.hand_off_event(s.index());
                    self.oracle.host_event(e, Some(Cause::HostWait));
                    if pooled {
                        self.ledger.learn_host_wait(&facts);
                        self.give_event(e);
                    }
                }
            }
        }
        Ok(())
    }

    fn stamp(&mut self, o: usize, s: usize, write: bool) -> Result<(), String> {
        let access = if write { Access::Write } else { Access::Read };
        let (so, range) = Self::stamps_of(o);
        let stamped = self
            .ledger
            .stamp_range(self.bufs[so].get_mut(), range, self.ids[s], access);
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
        self.launch_host(slot, s, touches, Vec::new())
    }

    /// [`Sim::launch`] of an operation that also reads or writes host
    /// staging memory (`host`: staging buffer, written).
    fn launch_host(
        &mut self,
        slot: usize,
        s: usize,
        touches: Vec<(usize, bool)>,
        host: Vec<(usize, bool)>,
    ) -> Result<(), String> {
        if !self.borrow_ok(&touches) {
            return Ok(());
        }
        self.log.push(format!(
            "T{slot} launch on s{s} {:?}{}",
            Objs(&touches),
            if host.is_empty() {
                String::new()
            } else {
                format!(" staging {host:?}")
            }
        ));
        self.bind(slot, s)?;
        self.moved(&touches, s);
        let task = self.task(slot);
        for &(o, w) in &touches {
            self.hand_off(&task, o, s, w)?;
            self.stamp(o, s, w)?;
        }
        let captured = self.capturing(s);
        self.slots[slot].as_mut().unwrap().pending = Some(Pending::Launch {
            s,
            touches,
            host,
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
            Pending::Collective { .. } => return self.collective_step(slot, p),
            Pending::Launch {
                s,
                touches,
                host,
                captured,
            } => {
                let (s, captured) = (*s, *captured);
                self.log.push(format!(
                    "T{slot} submit on s{s} {:?} captured={captured}",
                    Objs(touches)
                ));
                if captured && !host.is_empty() {
                    return Err("a copy of host memory was captured".into());
                }
                if captured {
                    let gens: Vec<u32> = touches
                        .iter()
                        .map(|&(o, _)| self.gen[self.mem(o).0])
                        .collect();
                    let cap = self
                        .capture
                        .as_mut()
                        .expect("capture ended under a pending op");
                    for (&(o, w), g) in touches.iter().zip(gens) {
                        match cap.graph.iter_mut().find(|t| t.0 == o && t.2 == g) {
                            Some(t) => t.1 |= w,
                            None => cap.graph.push((o, w, g)),
                        }
                    }
                } else {
                    let mut mem = self.mem_touches(touches);
                    mem.extend(host.iter().map(|&(h, w)| (BUFS + h, 0b11, w)));
                    self.oracle.submit(self.ost[s], &mem)?;
                    self.stats.ops += 1;
                }
                for &(o, w) in touches.iter() {
                    self.stamp(o, s, w)?;
                }
                if !captured && self.slots[slot].as_ref().unwrap().home == s {
                    // The runtime closes its stream's epoch after each
                    // operation (R2; DESIGN "Beyond the seed (X1-X8)").
                    let c = self.ledger.close(&task, self.ids[s]);
                    self.log.push(format!("  closes s{s}: {c:?}"));
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
                    self.oracle.record(e, self.ost[s], tag);
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
                        WaitKind::Stream(s2) => self.oracle.clock[self.ost[s2]].merge(&c, tag),
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
                *driven = Some(self.oracle.clock[self.ost[*s]].clone());
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

    /// Ends the capture: its graph is kept, or discarded (the body erred or
    /// panicked: nothing it captured runs). The pre event goes back.
    fn end_capture(&mut self, keep: bool) {
        let cap = self.capture.take().unwrap();
        self.log.push(format!(
            "end capture on s{}{}: graph {:?}",
            cap.stream,
            if keep { "" } else { " ABANDONED" },
            cap.graph
        ));
        self.ledger.set_capturing(self.ids[cap.stream], false);
        self.give_event(cap.pre);
        if !keep {
            self.stats.abandoned += 1;
        } else if !cap.graph.is_empty() {
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
        match kind(st.op) {
            12 => return self.recycle(st.a as usize % self.n),
            17 => return self.retire(st.a as usize % self.n),
            18 => return self.create(),
            _ => {}
        }
        if kind(st.op) == 16 && self.slots[slot].is_none() {
            return self.share_start(slot, st.a as usize);
        }
        if kind(st.op) == 20
            && self.slots[slot]
                .as_ref()
                .is_none_or(|sl| sl.pending.is_none() && sl.next.is_empty())
        {
            // A communicator's call, made from any thread (this slot's, which
            // drives a collective's phases).
            return self.collective_op(slot, st);
        }
        let Some(sl) = &self.slots[slot] else {
            // The pool hands out a stream with no live owner, if any (then
            // the task takes it over); else one a live task owns (shared).
            // (With none free, one step in four starts a task anyway.)
            let takeable = |s: usize| {
                !self.owner[s].as_ref().is_some_and(Task::is_live)
                    && !self.shared[s]
                    && !self.vacant[s]
                    && !self.reserved[s]
            };
            // One begin in four follows a buffer's data (the pool's
            // `acquire_following`): the stream of its last writer, taken
            // over as it is if no live task holds it.
            let follow = (st.c % 4 == 3)
                .then(|| self.bufs[st.b as usize % BUFS].snapshot().writer())
                .flatten()
                .and_then(|w| self.ids[..self.n].iter().position(|&id| id == w.stream))
                .filter(|&s| takeable(s));
            let free = follow.or_else(|| {
                (0..self.n)
                    .map(|i| (st.a as usize + i) % self.n)
                    .find(|&s| takeable(s))
            });
            if free.is_none() && st.b % 4 != 0 {
                return Ok(());
            }
            // Never a communicator's stream: the runtime gives a
            // collective's task an unshared stream.
            let Some(home) = free.or_else(|| {
                (0..self.n)
                    .map(|i| (st.a as usize + i) % self.n)
                    .find(|&s| !self.vacant[s] && !self.reserved[s])
            }) else {
                return Ok(());
            };
            let task = self.ledger.begin_task();
            let how = if follow.is_some() {
                " (following b's writer)"
            } else {
                ""
            };
            self.log.push(format!(
                "T{slot} begins ({:?}), home s{home}{how}",
                task.id()
            ));
            self.slots[slot] = Some(Slot {
                task,
                home,
                pending: None,
                submitted: false,
                next: VecDeque::new(),
                holds: None,
            });
            return Ok(());
        };
        if sl.pending.is_some() {
            return self.advance(slot);
        }
        if !sl.next.is_empty() {
            return self.next_step(slot);
        }
        if kind(st.op) == 19 {
            return self.staging_op(slot, st);
        }
        if kind(st.op) == 16 {
            st.op %= 24; // a task that began already: a launch
        }
        let task = sl.task.clone();
        let home = sl.home;
        let h = st.b as usize % HANDLES;
        match st.op {
            0..=23 | 96..=99 => {
                let s = self.pick(slot, st.a);
                // 1 to 3 of the program's buffers, each read or written (a
                // split buffer through one of its views; none once freed).
                let all = (1u8 << self.nbufs) - 1;
                let mut mask = st.b % all + 1;
                if mask == 15 {
                    mask = 7;
                }
                let touches: Vec<(usize, bool)> = (0..self.nbufs)
                    .filter(|&i| bit(mask, i))
                    .filter_map(|i| match self.state[i] {
                        // The buffer, or one of its parts by range.
                        BufState::Live => match (st.c as usize >> (4 + i)) & 3 {
                            0 => Some((i, bit(st.c, i))),
                            j => Some((part(i, j - 1), bit(st.c, i))),
                        },
                        BufState::Split(k) => {
                            Some((view(i, usize::from(bit(st.c, 4 + i)) % k), bit(st.c, i)))
                        }
                        BufState::Freed => None,
                    })
                    .collect();
                if touches.is_empty() {
                    return Ok(());
                }
                self.launch(slot, s, touches)?;
            }
            24..=35 => {
                let s = self.pick(slot, st.a);
                let e = self.user_event(h);
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
                let e = self.user_event(h);
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
                    // The task ends mid-capture (it panicked): the capture
                    // ends on unwind and its graph is discarded.
                    self.end_capture(false);
                }
                self.log.push(format!("T{slot} finishes"));
                if self.slots[slot].as_ref().unwrap().submitted {
                    // The task's last epoch on its stream closes (R2).
                    let c = self.ledger.close(&task, self.ids[home]);
                    self.log.push(format!("  closes s{home}: {c:?}"));
                    self.stats.task_closes += 1;
                }
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
                if self.state[b] != BufState::Live
                    || self.capturing(home)
                    || !self.borrow_ok(&[(b, true)])
                {
                    return Ok(());
                }
                self.log.push(format!("T{slot} escapes b{b} on s{home}"));
                self.bind(slot, home)?;
                self.moved(&[(b, true)], home);
                self.hand_off(&task, b, home, true)?;
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
                self.oracle.submit(self.ost[s], &[(b, 0b11, true)])?;
                self.stats.ops += 1;
            }
            77..=79 => {
                // Not while a staging call holds the stream (between its
                // copy and its host wait: the runtime's capture refuses a
                // stream with two holders).
                if self.capture.is_some() || self.pending_on(home) || self.held_by_call(home) {
                    return Ok(());
                }
                self.log.push(format!("T{slot} begins capture on s{home}"));
                self.bind(slot, home)?;
                // What the stream queued before the capture: a pooled event
                // recorded raw, which hand-offs from it wait on meanwhile.
                let pre = self.take_event();
                self.untracked(pre);
                self.raw_record(pre, home);
                self.ledger.set_capturing(self.ids[home], true);
                self.capture = Some(Capture {
                    stream: home,
                    task: task.id().get(),
                    graph: Vec::new(),
                    pre,
                });
            }
            80..=82 => {
                let Some(cap) = &self.capture else {
                    return Ok(());
                };
                if cap.task != task.id().get() || self.pending_on(cap.stream) {
                    return Ok(());
                }
                // One in four captures is abandoned (the body erred).
                self.end_capture(st.c % 4 != 0);
            }
            83..=86 => {
                if self.graphs.is_empty() {
                    return Ok(());
                }
                let g = self.graphs[st.b as usize % self.graphs.len()].clone();
                // Every object it touches must still be the one captured.
                if !g
                    .iter()
                    .all(|&(o, _, gen)| self.usable(o) && self.gen[self.mem(o).0] == gen)
                {
                    return Ok(());
                }
                let s = self.pick(slot, st.a);
                if self.capturing(s) {
                    return Ok(());
                }
                self.log.push(format!("T{slot} graph launch:"));
                self.launch(slot, s, g.iter().map(|&(o, w, _)| (o, w)).collect())?;
            }
            87..=90 => {
                // R11: a host-sync pointer.
                let b = st.b as usize % self.nbufs;
                if self.state[b] != BufState::Live
                    || self.capturing(home)
                    || !self.borrow_ok(&[(b, true)])
                {
                    return Ok(());
                }
                self.log
                    .push(format!("T{slot} host-sync pointer b{b} on s{home}"));
                self.bind(slot, home)?;
                self.moved(&[(b, true)], home);
                self.hand_off(&task, b, home, true)?;
                self.stamp(b, home, true)?;
                // The pointer's use, ordered like an operation on `home`.
                self.oracle.submit(self.ost[home], &[(b, 0b11, true)])?;
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
            100..=103 => {
                // A user event is dropped: back to the pool (no borrow left).
                let Some(e) = self.user[h] else {
                    return Ok(());
                };
                if self.event_busy(e) {
                    return Ok(());
                }
                self.log
                    .push(format!("user event {h} dropped: e{e} back to the pool"));
                self.user[h] = None;
                self.give_event(e);
            }
            104..=107 => {
                // X3: split into views (one in four: a single view).
                let b = st.b as usize % self.nbufs;
                if self.state[b] != BufState::Live || !self.borrow_ok(&[(b, true)]) {
                    return Ok(());
                }
                let k = if st.c % 4 == 0 { 1 } else { 2 };
                self.log.push(format!("T{slot} splits b{b} into {k}"));
                let uses = self.bufs[b].get_mut().clone();
                for i in 0..k {
                    self.bufs[view(b, i)] = BufferStamps::from_uses(uses.clone());
                }
                self.split_before[b] = uses;
                self.ledger.forget_uses(self.bufs[b].get_mut());
                self.state[b] = BufState::Split(k);
                // The buffer is borrowed by its views: its raw pointer's
                // contract ends.
                self.raw[b] = None;
                self.stats.splits += 1;
            }
            108..=111 => {
                // One of the split buffers.
                let split: Vec<usize> = (0..self.nbufs)
                    .filter(|&b| matches!(self.state[b], BufState::Split(_)))
                    .collect();
                let Some(&b) = split.get(st.b as usize % split.len().max(1)) else {
                    return Ok(());
                };
                let BufState::Split(k) = self.state[b] else {
                    unreachable!()
                };
                let views: Vec<(usize, bool)> = (0..k).map(|i| (view(b, i), true)).collect();
                if !self.borrow_ok(&views) {
                    return Ok(());
                }
                if bit(st.c, 0) {
                    // Dropped without a rejoin: the buffer's uses are the
                    // views' of their halves (`Ledger::merge_views`, as
                    // the runtime's `Split` does at its drop).
                    self.log.push(format!("b{b}'s views dropped"));
                    self.stats.dropped_views += 1;
                    let ranges = if k == 1 {
                        vec![gpu_epoch::WHOLE]
                    } else {
                        vec![0..LEN / 2, LEN / 2..usize::MAX]
                    };
                    let views: Vec<gpu_epoch::Uses> = (0..k)
                        .map(|i| self.bufs[view(b, i)].get_mut().clone())
                        .collect();
                    let pairs: Vec<(std::ops::Range<usize>, &gpu_epoch::Uses)> =
                        ranges.into_iter().zip(views.iter()).collect();
                    let before = std::mem::take(&mut self.split_before[b]);
                    self.ledger
                        .merge_views(self.bufs[b].get_mut(), &before, &pairs);
                } else {
                    let s = self.pick(slot, st.a);
                    self.log.push(format!("T{slot} rejoins b{b} on s{s}"));
                    self.bind(slot, s)?;
                    for &(v, _) in &views {
                        self.hand_off(&task, v, s, true)?;
                    }
                    if !self.capturing(s) {
                        // The restamp is a write on `s` (no device work):
                        // every view's use must be ordered before it.
                        self.oracle.submit(self.ost[s], &[(b, 0b11, true)])?;
                    }
                    self.stamp(b, s, true)?;
                    self.stats.rejoins += 1;
                }
                self.state[b] = BufState::Live;
            }
            112..=114 => {
                // X4: the buffer is dropped: its uses are handed to the
                // reclaim stream, which frees it.
                let b = st.b as usize % self.nbufs;
                if self.state[b] != BufState::Live || !self.borrow_ok(&[(b, true)]) {
                    return Ok(());
                }
                // On the reclaim stream of the buffer's device.
                let (r, d) = (self.reclaim[self.bdev[b]], self.bdev[b]);
                self.log.push(format!("b{b} dropped: freed on s{r}"));
                if let Some(cap) = &self.capture {
                    // Captured uses are not stamped: the free waits only
                    // for what ran or was queued (the pre event covers
                    // the capturing stream's), and the graph cannot be
                    // launched on the freed buffer.
                    let used = cap.graph.iter().any(|t| self.mem(t.0).0 == b);
                    self.stats.frees_in_capture[0] += 1;
                    self.stats.frees_in_capture[1] += u64::from(used);
                }
                let reclaimer = self.reclaimer[d].clone();
                self.hand_off(&reclaimer, b, r, true)?;
                self.oracle.submit(self.ost[r], &[(b, 0b11, true)])?;
                self.stats.ops += 1;
                self.stats.frees += 1;
                self.state[b] = BufState::Freed;
                self.gen[b] += 1;
                self.raw[b] = None;
            }
            115..=117 => {
                // A new buffer in a freed one's place, allocated in stream
                // order (the driver orders the memory's reuse).
                let freed: Vec<usize> = (0..self.nbufs)
                    .filter(|&b| self.state[b] == BufState::Freed)
                    .collect();
                let Some(&b) = freed.get(st.b as usize % freed.len().max(1)) else {
                    return Ok(());
                };
                let s = self.pick(slot, st.a);
                // The runtime binds, then refuses an allocation on a
                // capturing stream (`Error::Capturing`): nothing stamped, no
                // buffer; the ledger is as it was.
                let before = self.ledger_state();
                let was = self.bind(slot, s)? == Binding::Owned;
                let refused = self.ledger.is_capturing(self.ids[s]);
                if refused != self.capturing(s) {
                    return Err(format!("capture state of s{s} differs at an allocation"));
                }
                if refused {
                    self.log.push(format!(
                        "T{slot} allocation of b{b} on capturing s{s} refused"
                    ));
                    if was && self.ledger_state() != before {
                        return Err(format!(
                            "a refused allocation changed the ledger:\n{before}\n{}",
                            self.ledger_state()
                        ));
                    }
                    self.stats.refused_allocs[0] += 1;
                    // The capture's body returns the error (one in two):
                    // the capture ends without its graph.
                    if self
                        .capture
                        .as_ref()
                        .is_some_and(|c| c.task == task.id().get() && c.stream == s)
                        && bit(st.c, 0)
                        && !self.pending_on(s)
                    {
                        self.end_capture(false);
                        self.stats.refused_allocs[1] += 1;
                    }
                    return Ok(());
                }
                self.log.push(format!("T{slot} allocates b{b} on s{s}"));
                self.bdev[b] = self.sdev(s);
                self.bufs[b] = BufferStamps::new();
                self.oracle.uses[b].clear();
                self.stamp(b, s, true)?;
                self.oracle.submit(self.ost[s], &[(b, 0b11, true)])?;
                self.stats.ops += 1;
                self.stats.allocs += 1;
                self.state[b] = BufState::Live;
            }
            _ => unreachable!(),
        }
        Ok(())
    }

    /// R13: the pool finds `s` idle (a host observation) and recycles it,
    /// if every task that bound it finished.
    fn recycle(&mut self, s: usize) -> Result<(), String> {
        if self.vacant[s]
            || self.held_by_call(s)
            || self.capturing(s)
            || self.pending_on(s)
            || self.bound[s].iter().any(Task::is_live)
        {
            return Ok(());
        }
        self.log.push(format!("pool recycles s{s}"));
        self.oracle.host_stream(self.ost[s], Some(Cause::Recycle));
        self.ledger.recycle(self.ids[s]);
        self.bound[s].clear();
        self.owner[s] = None;
        self.shared[s] = false;
        Ok(())
    }

    /// DESIGN "Streams are a resource": the pool is out of streams: it gives `slot`'s new task a stream
    /// a live task holds (the first from `a`), shared for good from now on
    /// (`share`, before the new task binds or stamps anything). Both tasks'
    /// operations then go on it in submission order.
    fn share_start(&mut self, slot: usize, a: usize) -> Result<(), String> {
        let Some(home) = (0..self.n)
            .map(|i| (a + i) % self.n)
            .find(|&s| self.slots.iter().flatten().any(|sl| sl.home == s))
        else {
            return Ok(());
        };
        self.ledger.share(self.ids[home]);
        self.shared[home] = true;
        if !self.ledger.is_shared(self.ids[home]) {
            return Err(format!("share of s{home} did not make it shared"));
        }
        let task = self.ledger.begin_task();
        self.log.push(format!(
            "T{slot} begins ({:?}), shares s{home} (pool out of streams)",
            task.id()
        ));
        self.slots[slot] = Some(Slot {
            task,
            home,
            pending: None,
            submitted: false,
            next: VecDeque::new(),
            holds: None,
        });
        self.stats.shares += 1;
        Ok(())
    }

    /// DESIGN "Streams are a resource": the pool finds `s` idle (a host observation), held by no live
    /// task and bound by none, and retires it: its driver stream goes away
    /// and the slot is vacant until `add_stream` reuses it. One task stream
    /// at least is kept.
    fn retire(&mut self, s: usize) -> Result<(), String> {
        if self.vacant[s]
            || self.held_by_call(s)
            || self.capturing(s)
            || self.pending_on(s)
            || self.bound[s].iter().any(Task::is_live)
            || self.slots.iter().flatten().any(|sl| sl.home == s)
            || self.raw.iter().any(|r| r.is_some_and(|(rs, _)| rs == s))
            || (0..self.n).filter(|&x| !self.vacant[x]).count() < 2
        {
            return Ok(());
        }
        self.log
            .push(format!("pool retires s{s} (oracle stream {})", self.ost[s]));
        self.oracle.host_stream(self.ost[s], Some(Cause::Recycle));
        self.ledger.retire(self.ids[s]);
        if !self.ledger.is_vacant(self.ids[s]) {
            return Err(format!("retired s{s} is not vacant"));
        }
        self.bound[s].clear();
        self.owner[s] = None;
        self.shared[s] = false;
        self.vacant[s] = true;
        self.stats.retires += 1;
        Ok(())
    }

    /// DESIGN "Streams are a resource": the pool creates a stream: `add_stream` reuses a vacant slot
    /// (the ledger is full otherwise), and a new driver stream is behind it:
    /// a new oracle stream, ordered after nothing. The slot keeps its
    /// epochs, completed value and `waited` row.
    fn create(&mut self) -> Result<(), String> {
        if !self.vacant.contains(&true) {
            return match self.ledger.add_stream() {
                Ok(id) => Err(format!("add_stream found room in a full ledger: {id:?}")),
                Err(_) => Ok(()),
            };
        }
        if self.next_ost == self.n + self.devs + NEW_STREAMS {
            return Ok(()); // no oracle stream left: the slot stays vacant
        }
        let id = self.ledger.add_stream().map_err(|e| e.to_string())?;
        let Some(s) = (0..self.n).find(|&s| self.ids[s] == id && self.vacant[s]) else {
            return Err(format!("add_stream gave {id:?}, not a vacant slot"));
        };
        if self.ledger.is_vacant(id) {
            return Err(format!("reused slot {s} is still vacant"));
        }
        self.ost[s] = self.next_ost;
        self.next_ost += 1;
        self.vacant[s] = false;
        self.log.push(format!(
            "pool creates a stream: slot s{s} reused (oracle stream {})",
            self.ost[s]
        ));
        self.stats.creates += 1;
        Ok(())
    }

    fn run(&mut self, prog: &Program) -> Result<(), String> {
        for &st in &prog.steps {
            self.step(st)?;
        }
        // Finish what is in flight, so its submissions are checked too (and
        // the rest of each runtime call in progress, its host accesses).
        for slot in 0..SLOTS {
            if self.slots[slot]
                .as_ref()
                .is_some_and(|s| s.pending.is_some())
            {
                self.advance(slot)?;
            }
        }
        for slot in 0..SLOTS {
            while let Some(sl) = &self.slots[slot] {
                let in_call =
                    sl.holds.is_some() || matches!(sl.pending, Some(Pending::Collective { .. }));
                let (pending, next) = (sl.pending.is_some(), !sl.next.is_empty());
                match (pending, next) {
                    (true, _) if in_call => self.advance(slot)?,
                    (false, true) => self.next_step(slot)?,
                    _ => break,
                }
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

/// With `ORACLE_ROWS=<file>`: the precision as JSON rows a line
/// (`ledger/random-needed`, `-unnecessary`, `-classified`; unit `waits`),
/// for `cargo xtask bench`'s `ratio/ledger-unnecessary-random`.
fn write_rows(st: &Stats) {
    let Some(path) = std::env::var_os("ORACLE_ROWS") else {
        return;
    };
    let unneeded: u64 = st.unneeded.values().sum();
    let rows: String = [
        ("needed", st.needed),
        ("unnecessary", unneeded),
        ("classified", st.needed + unneeded),
    ]
    .iter()
    .map(|(what, n)| {
        format!("{{\"name\": \"ledger/random-{what}\", \"value\": {n}, \"unit\": \"waits\"}}\n")
    })
    .collect();
    std::fs::write(&path, rows).expect("writing ORACLE_ROWS");
}

fn report(st: &Stats) {
    write_rows(st);
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
        "  pooled events: {} raw records, {} handed to users; splits {} ({} rejoined, \
         {} dropped); frees {}, allocations {}; captures abandoned {}; task-end closes {}",
        st.raw_records,
        st.handouts,
        st.splits,
        st.rejoins,
        st.dropped_views,
        st.frees,
        st.allocs,
        st.abandoned,
        st.task_closes
    );
    eprintln!(
        "  stream pool: shared with a second task {}, retired {}, created in a retired slot {}; \
         waits on a vacant slot skipped {}",
        st.shares, st.retires, st.creates, st.vacant_skips
    );
    eprintln!(
        "  captures: allocations refused {} (the capture then abandoned {}); frees while \
         capturing {} (of a buffer the capture used {})",
        st.refused_allocs[0], st.refused_allocs[1], st.frees_in_capture[0], st.frees_in_capture[1]
    );
    st.dev.report();
    eprintln!(
        "  frees' waits (included below): needed {}, unnecessary {}",
        st.free_waits[0], st.free_waits[1]
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
    // Programs run before the first failure (shrinking runs more).
    let first_failure = Mutex::new(None);
    let mut runner = TestRunner::new(config);
    let result = runner.run(&program(), |prog| {
        let mut sim = Sim::new(&prog);
        match sim.run(&prog) {
            Ok(()) => {
                stats.lock().unwrap().add(&sim.stats);
                Ok(())
            }
            Err(e) => {
                let mut first = first_failure.lock().unwrap();
                if first.is_none() {
                    *first = Some(stats.lock().unwrap().cases + 1);
                }
                Err(TestCaseError::fail(format!(
                    "{e}\n--- trace ({} streams) ---\n{}",
                    prog.streams,
                    sim.log.join("\n")
                )))
            }
        }
    });
    if let Err(e) = result {
        panic!(
            "{e}\n(first failure: program #{})",
            first_failure.lock().unwrap().unwrap_or(0)
        );
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
// `i` of `c` writes buffer `i`, bit `4 + i` picks the view of a split one),
// 24 record (event handle `b`), 36 stream wait, 45 event sync, 50 event
// query (done if bit 0 of `c`), 56 stream sync, 62 task end, 67 escape
// (buffer `b`), 71 raw launch, 77 capture begin, 80 capture end (abandoned
// if `c % 4 == 0`), 91 recycle (stream `a`), 100 event handle `b` dropped,
// 104 split of buffer `b` (one view if `c % 4 == 0`, else two), 108 rejoin
// (bit 0 of `c` clear) or views dropped (split buffer `b`), 112 free
// (buffer `b`), 115 allocation (freed buffer `b`; refused on a capturing
// stream, the capture then abandoned if bit 0 of `c`), 121 retire (stream
// `a`), 124 stream creation (a vacant slot reused), 127 a staging call, 134
// a communicator's call (`devices`' replays say how). A task's first step
// with op 118 begins it sharing the first stream from `a` a live task holds
// (`share`). `a` below 200 is the task's own stream, else stream `a % n`
// (the next one neither vacant nor a communicator's).
// Event handles get events from the pool (a stack, 0 first) on first use.

/// A step as `(task, op, a, b, c)`.
type Raw = (u8, u8, u8, u8, u8);

const N: Raw = (0, 0, 0, 0, 0);

fn replay(streams: usize, v: &[Raw]) -> Sim {
    replay_on(streams, 1, v)
}

/// [`replay`] with `devs` devices.
fn replay_on(streams: usize, devs: usize, v: &[Raw]) -> Sim {
    let prog = Program {
        streams,
        devs,
        tasks: SLOTS,
        bufs: BUFS,
        kinds: u32::MAX,
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
    sim
}

/// `(task, N)` for `k` steps of `task`: the halves of its operation in flight.
fn halves(task: u8, k: usize) -> impl Iterator<Item = Raw> {
    std::iter::repeat_n((task, N.1, N.2, N.3, N.4), k)
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

#[test]
fn replay_pooled_event_from_a_hand_off_given_to_a_user() {
    // DESIGN "Soundness": a user event goes back to the pool covering s0's epoch; a
    // hand-off records it raw on s2; handed out again, synchronized,
    // queried and waited on before any record of its new holder, it must
    // teach nothing about s0.
    let mut sim = replay(
        3,
        &program_of(vec![
            vec![(0, 99, 0, 0, 0), (1, 99, 1, 0, 0), (2, 99, 2, 0, 0)],
            vec![(0, 0, 0, 0, 1)], // T0 writes b0 on s0
            halves(0, 1).collect(),
            vec![(0, 24, 0, 0, 1)], // T0 records event 0 (pooled e0) on s0
            halves(0, 2).collect(),
            vec![(0, 100, 0, 0, 0)], // event 0 dropped: e0 back to the pool
            vec![(2, 0, 0, 1, 2)],   // T2 writes b1 on s2
            halves(2, 1).collect(),
            vec![(1, 0, 0, 1, 0)], // T1 reads b1 on s1: e0 recorded raw on s2
            halves(1, 1).collect(),
            vec![(1, 45, 0, 0, 0)], // T1 syncs event 0: e0 again, unrecorded
            halves(1, 2).collect(),
            vec![(1, 50, 0, 0, 1)], // T1 queries it: done
            halves(1, 2).collect(),
            vec![(1, 36, 0, 0, 0)], // s1 waits on it
            halves(1, 2).collect(),
            vec![(1, 0, 0, 0, 0)], // T1 reads b0 on s1: must wait for s0
            halves(1, 1).collect(),
        ]),
    );
    assert_eq!(sim.user[0], Some(0), "the pool handed e0 out again");
    // No Completed fact about s0, and the read waited for it.
    assert_eq!(sim.ledger.completed(sim.ids[0]), StreamEpoch(0));
    assert!(sim
        .log
        .iter()
        .any(|l| l.contains("hand-off b0 -> s1 Read: DeviceWait")));
    assert!(!sim.bufs[0].get_mut().is_unknown());
}

#[test]
fn replay_split_dropped_then_a_parent_write_elsewhere() {
    // X3: views used on s1 and s2 are dropped without a rejoin: the buffer's
    // next uses wait for every stream, a read keeping it so.
    let mut sim = replay(
        4,
        &program_of(vec![
            vec![
                (0, 99, 0, 0, 0),
                (1, 99, 1, 0, 0),
                (2, 99, 2, 0, 0),
                (3, 99, 3, 0, 0),
            ],
            vec![(0, 0, 0, 0, 1)], // T0 writes b0 on s0
            halves(0, 1).collect(),
            vec![(0, 104, 0, 0, 1)],  // T0 splits b0 into two views
            vec![(1, 0, 0, 0, 1)],    // T1 writes view 0 on s1
            vec![(2, 0, 0, 0, 0x10)], // T2 reads view 1 on s2
            halves(1, 1).collect(),
            halves(2, 1).collect(),
            vec![(0, 108, 0, 0, 1)], // the views are dropped
            vec![(3, 0, 0, 0, 0)],   // T3 reads b0 on s3: waits for all
            halves(3, 1).collect(),
            vec![(0, 0, 0, 0, 1)], // T0 writes b0 on s0: still unknown
            halves(0, 1).collect(),
            vec![(3, 0, 0, 0, 1)], // T3 writes b0 on s3: known again
            halves(3, 1).collect(),
        ]),
    );
    assert!(!sim.bufs[0].get_mut().is_unknown());
    assert_eq!(sim.stats.dropped_views, 1);
}

#[test]
fn replay_rejoin() {
    // X3: views written on s1 and s2 are rejoined on s0: s0 waits for both,
    // and the buffer's next user waits for s0 alone.
    let mut sim = replay(
        3,
        &program_of(vec![
            vec![(0, 99, 0, 0, 0), (1, 99, 1, 0, 0), (2, 99, 2, 0, 0)],
            vec![(0, 0, 0, 0, 1)], // T0 writes b0 on s0
            halves(0, 1).collect(),
            vec![(0, 104, 0, 0, 1)],  // T0 splits b0 into two views
            vec![(1, 0, 0, 0, 1)],    // T1 writes view 0 on s1
            vec![(2, 0, 0, 0, 0x11)], // T2 writes view 1 on s2
            halves(1, 1).collect(),
            halves(2, 1).collect(),
            vec![(0, 108, 0, 0, 0)], // T0 rejoins b0 on s0
            vec![(0, 0, 0, 0, 0)],   // T0 reads b0 on s0: no wait
            halves(0, 1).collect(),
            vec![(1, 0, 0, 0, 0)], // T1 reads b0 on s1: waits for s0 only
            halves(1, 1).collect(),
        ]),
    );
    assert!(!sim.bufs[0].get_mut().is_unknown());
    assert_eq!(sim.stats.rejoins, 1);
    assert!(sim.stats.unneeded.is_empty(), "{:?}", sim.stats.unneeded);
    assert!(sim
        .log
        .iter()
        .any(|l| l.contains("hand-off b0 -> s1 Read: DeviceWait({S0})")));
}

#[test]
fn replay_free_after_reads_on_two_streams() {
    // X4: the reclaim stream waits for the writer and both readers before
    // the free; a new buffer then takes the slot.
    let sim = replay(
        3,
        &program_of(vec![
            vec![(0, 99, 0, 0, 0), (1, 99, 1, 0, 0), (2, 99, 2, 0, 0)],
            vec![(0, 0, 0, 0, 1)], // T0 writes b0 on s0
            halves(0, 1).collect(),
            vec![(1, 0, 0, 0, 0)], // T1 reads b0 on s1
            vec![(2, 0, 0, 0, 0)], // T2 reads b0 on s2
            halves(1, 1).collect(),
            halves(2, 1).collect(),
            vec![(0, 112, 0, 0, 0)], // b0 dropped: freed on the reclaim stream
            vec![(0, 115, 0, 0, 0)], // T0 allocates a new b0 on s0
            vec![(1, 0, 0, 0, 1)],   // T1 writes it on s1
            halves(1, 1).collect(),
        ]),
    );
    assert_eq!((sim.stats.frees, sim.stats.allocs), (1, 1));
    assert!(sim
        .log
        .iter()
        .any(|l| l.contains("hand-off b0 -> s3 Write: DeviceWait({S0, S1, S2})")));
}

#[test]
fn replay_abandoned_capture() {
    // R12, DESIGN "Soundness": a task panics mid-capture: the capture ends (nothing it
    // captured was stamped or runs), its pre event goes back to the pool
    // (handed to a user next: no fact), its stream is recycled and taken
    // over, and the new owner's work is stamped again.
    let mut sim = replay(
        3,
        &program_of(vec![
            vec![(0, 99, 0, 0, 0), (1, 99, 1, 0, 0), (2, 99, 2, 0, 0)],
            vec![(0, 0, 0, 1, 2)], // T0 writes b1 on s0
            halves(0, 1).collect(),
            vec![(0, 77, 0, 0, 0)], // T0 begins capturing s0 (pre event e0)
            vec![(0, 0, 0, 0, 1)],  // T0 writes b0 on s0: captured
            vec![(2, 0, 0, 1, 0)],  // T2 reads b1 on s2: waits on the pre event
            halves(2, 1).collect(),
            halves(0, 1).collect(),
            vec![(0, 62, 0, 0, 0)], // T0 panics: capture abandoned, T0 ends
            vec![(1, 91, 0, 0, 0)], // the pool recycles s0
            vec![(1, 45, 0, 1, 0)], // T1 syncs event 1: the old pre event
            halves(1, 2).collect(),
            vec![(0, 99, 0, 0, 0)], // T3 begins on s0 (takes it over)
            vec![(0, 0, 0, 0, 1)],  // it writes b0 on s0: stamped
            halves(0, 1).collect(),
            vec![(2, 0, 0, 0, 0)], // T2 reads b0 on s2: must wait for s0
            halves(2, 1).collect(),
        ]),
    );
    assert_eq!(sim.stats.abandoned, 1);
    assert!(sim.graphs.is_empty());
    assert_eq!(sim.user[1], Some(0), "the pre event was handed to the user");
    let b0 = sim.bufs[0].get_mut().writer().unwrap();
    assert_eq!(b0.stream, sim.ids[0]);
    assert!(sim
        .log
        .iter()
        .any(|l| l.contains("hand-off b0 -> s2 Read: DeviceWait({S0})")));
}

#[test]
fn replay_shared_stream_then_a_needed_wait() {
    // DESIGN "Streams are a resource": the pool gives s0, held by T0 (which submitted nothing yet), to
    // T1 too: `share` before T1 binds. T1's write is stamped, T0 records an
    // event on s0, then T1's write is submitted (after the record in stream
    // order): the record's close must not count, so a wait on the event
    // orders nothing about the write, and T2's read still waits for s0.
    let sim = replay(
        3,
        &program_of(vec![
            vec![(0, 99, 0, 0, 0)],  // T0 begins on s0
            vec![(1, 118, 0, 0, 0)], // T1 begins sharing s0 (`share`)
            vec![(2, 99, 2, 0, 0)],  // T2 begins on s2
            vec![(1, 0, 0, 1, 2)],   // T1 writes b1 on s0: bound, stamped
            vec![(0, 24, 0, 0, 1)],  // T0 records event 0 on s0
            halves(0, 2).collect(),
            halves(1, 1).collect(), // T1's write is submitted
            vec![(2, 36, 0, 0, 0)], // s2 waits on event 0
            halves(2, 2).collect(),
            vec![(2, 0, 0, 1, 0)], // T2 reads b1 on s2: must wait for s0
            halves(2, 1).collect(),
        ]),
    );
    assert_eq!(sim.stats.shares, 1);
    assert_eq!(sim.stats.bindings[Binding::Shared as usize], 2);
    assert!(sim.ledger.is_shared(sim.ids[0]));
    assert_eq!(sim.stats.needed, 1);
    assert!(sim
        .log
        .iter()
        .any(|l| l.contains("hand-off b1 -> s2 Read: DeviceWait({S0})")));
}

#[test]
fn replay_retire_reuse_then_a_hand_off_from_an_old_stamp() {
    // DESIGN "Streams are a resource": s0 is synchronized (a Completed fact), its task ends and the pool
    // retires it; an escaped buffer's wait on the vacant slot is skipped;
    // the slot is reused for a new stream. Stamps from the old stream need
    // no wait, on the new stream of the same slot or elsewhere; the new
    // stream's work, at later epochs of the slot, still does.
    let mut sim = replay(
        3,
        &program_of(vec![
            vec![(0, 99, 0, 0, 0)], // T0 begins on s0
            vec![(0, 0, 0, 0, 1)],  // T0 writes b0 on s0
            halves(0, 1).collect(),
            vec![(0, 67, 0, 2, 0)], // T0 escapes b2 on s0
            vec![(0, 71, 0, 0, 0)], // raw work through the pointer
            vec![(0, 56, 0, 0, 0)], // T0 syncs s0
            halves(0, 2).collect(),
            vec![(0, 62, 0, 0, 0)],  // T0 ends
            vec![(1, 121, 0, 0, 0)], // the pool retires s0
            vec![(1, 99, 1, 0, 0)],  // T1 begins on s1
            vec![(1, 0, 0, 3, 0)],   // T1 reads b2 on s1: s0 vacant, skipped
            halves(1, 1).collect(),
            vec![(2, 124, 0, 0, 0)], // the pool creates a stream: slot s0
            vec![(2, 99, 0, 0, 0)],  // T2 begins on the new s0
            vec![(2, 0, 0, 0, 0)],   // T2 reads b0 (old s0's write) on s0
            halves(2, 1).collect(),
            vec![(2, 0, 0, 1, 2)], // T2 writes b1 on the new s0
            halves(2, 1).collect(),
            vec![(1, 0, 0, 0, 0)], // T1 reads b0 on s1: no wait
            halves(1, 1).collect(),
            vec![(1, 0, 0, 1, 0)], // T1 reads b1 on s1: waits for s0
            halves(1, 1).collect(),
        ]),
    );
    assert_eq!((sim.stats.retires, sim.stats.creates), (1, 1));
    assert_eq!(sim.stats.vacant_skips, 1);
    assert_eq!(sim.ost[0], 4, "slot s0 has a new oracle stream");
    assert!(!sim.ledger.is_vacant(sim.ids[0]));
    assert!(sim.ledger.completed(sim.ids[0]) > StreamEpoch(0));
    let b1 = sim.bufs[1].get_mut().writer().unwrap();
    assert!(b1.epoch > sim.ledger.completed(sim.ids[0]));
    assert!(sim
        .log
        .iter()
        .any(|l| l.contains("hand-off b2 -> s1 Read: DeviceWait({S0})")));
    assert!(sim
        .log
        .iter()
        .any(|l| l.contains("hand-off b0 -> s1 Read: NoWait(")));
    assert!(sim
        .log
        .iter()
        .any(|l| l.contains("hand-off b1 -> s1 Read: DeviceWait({S0})")));
}

#[test]
fn replay_allocation_refused_in_a_capture() {
    // Issue 23, defect 1: an allocation in a capture is refused (nothing
    // stamped, no buffer), the ledger as it was; the body carries on here,
    // and the graph it ends with holds only what it launched. Then another
    // attempt whose error ends the capture without its graph.
    let mut sim = replay(
        3,
        &program_of(vec![
            vec![(0, 99, 0, 0, 0)],
            vec![(0, 112, 0, 0, 0)], // b0 dropped: freed
            vec![(0, 77, 0, 0, 0)],  // T0 begins capturing s0
            vec![(0, 115, 0, 0, 0)], // T0 allocates b0: refused, carries on
            vec![(0, 0, 0, 1, 2)],   // T0 writes b1: captured
            halves(0, 1).collect(),
            vec![(0, 80, 0, 0, 1)],  // the capture ends: a graph
            vec![(0, 77, 0, 0, 0)],  // a second capture
            vec![(0, 115, 0, 0, 1)], // refused, and the body returns the error
        ]),
    );
    assert_eq!(sim.stats.refused_allocs, [2, 1]);
    assert_eq!(sim.stats.abandoned, 1);
    assert_eq!(sim.state[0], BufState::Freed);
    assert_eq!(sim.stats.allocs, 0);
    assert_eq!(sim.graphs.len(), 1);
    assert!(sim.graphs[0].iter().all(|t| t.0 == 1), "{:?}", sim.graphs);
    assert!(sim.bufs[0].get_mut().writer().is_none());
}

#[test]
fn replay_free_while_its_stream_is_capturing() {
    // X4 in a capture: b0, written before the capture and read in it, is
    // freed while its stream captures: the reclaim stream waits for what ran
    // before the capture (the pre event), not for the captured read, which
    // never runs: the graph cannot be launched on the freed buffer.
    let sim = replay(
        3,
        &program_of(vec![
            vec![(0, 99, 0, 0, 0)],
            vec![(0, 0, 0, 0, 1)], // T0 writes b0 on s0
            halves(0, 1).collect(),
            vec![(0, 77, 0, 0, 0)], // T0 begins capturing s0
            vec![(0, 0, 0, 0, 0)],  // T0 reads b0: captured
            halves(0, 1).collect(),
            vec![(1, 99, 1, 0, 0)],
            vec![(1, 112, 0, 0, 0)], // b0 dropped: freed on s3
            vec![(0, 80, 0, 0, 1)],  // the capture ends: a graph of b0
            vec![(1, 83, 0, 0, 0)],  // T1 launches it: b0 is gone, refused
        ]),
    );
    assert_eq!(sim.stats.frees_in_capture, [1, 1]);
    assert_eq!(sim.stats.frees, 1);
    assert_eq!((sim.gen[0], sim.graphs.len()), (1, 1));
    assert!(!sim.log.iter().any(|l| l.contains("graph launch")));
    assert!(sim
        .log
        .iter()
        .any(|l| l.contains("hand-off b0 -> s3 Write: DeviceWait({S0})")));
}

#[test]
fn replay_a_task_follows_its_data() {
    // DESIGN "Streams are a resource" (issue 39): a task begins on the
    // stream of its first buffer's last writer, which no live task holds
    // and whose work is not known done: taken over as it is (R3, not
    // recycled). Its write of that buffer needs no wait (stream order); a
    // reader on another stream still waits for the stream, which now
    // carries the new write too.
    let sim = replay(
        3,
        &program_of(vec![
            vec![(0, 99, 0, 0, 0), (1, 99, 1, 0, 0)], // T0 on s0, T1 on s1
            vec![(0, 0, 0, 0, 1)],                    // T0 writes b0 on s0
            halves(0, 1).collect(),
            vec![(0, 62, 0, 0, 0)], // T0 ends
            vec![(0, 99, 2, 0, 3)], // T0' begins following b0's writer (else s2)
            vec![(0, 0, 0, 0, 1)],  // it writes b0 on s0
            halves(0, 1).collect(),
            vec![(1, 0, 1, 0, 0)], // T1 reads b0 on s1
            halves(1, 1).collect(),
        ]),
    );
    let log = sim.log.join("\n");
    assert!(log.contains("home s0 (following b's writer)"), "{log}");
    assert!(
        !log.contains("hand-off b0 -> s0 Write: DeviceWait"),
        "{log}"
    );
    assert!(
        log.contains("hand-off b0 -> s1 Read: DeviceWait({S0})"),
        "{log}"
    );
    assert_eq!(
        sim.ledger.generation(sim.ids[0]),
        gpu_epoch::Generation::default(),
        "not recycled"
    );
}
