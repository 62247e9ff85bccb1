//! Several devices in the oracle's programs (DESIGN "Beyond one GPU"; review 3, issue
//! 23): host staging memory, which copies read or write while they run, and
//! collectives. Streams of every device share the one ledger; task stream
//! `i` is of device `i % devs`, and each device has its reclaim stream.
//!
//! - **Staging.** A staging buffer is page-locked host memory of one
//!   device's runtime (`gpu_sched::Staging`); the oracle keeps its uses as
//!   it keeps a buffer's. A call holds it (`&mut Staging`) from its first
//!   step to its last, and each call waits first for the buffer's fence in
//!   flight, if any (`settle`: an event synchronize, the event back to the
//!   pool). `copy_from_host` from it (of any device's runtime, on a stream
//!   of any device: the shape of issue 23's defect 2) is a tracked
//!   operation that writes a device buffer and reads the staging memory,
//!   then a synchronize of the copying stream (the fixed runtime's host
//!   wait). `Staging::send` and `receive` (the staging buffer's own device
//!   only; another's is `Error::WrongDevice`, nothing done) copy in or out,
//!   then record a fence (a pooled event, tracked) on the copying stream.
//!   Then the host reads or writes the memory (`as_slice`, `as_mut_slice`):
//!   every earlier device use that conflicts must be complete on the host.
//!   A copy on a capturing stream is refused (`Error::Capturing`), nothing
//!   stamped. No capture begins on a stream while a call holds it.
//! - **Collectives.** A communicator has one task per rank (one rank a
//!   device while the program has devices left), each on a stream of its
//!   own that is never shared (the fixed runtime never gives a collective's
//!   task a shared stream, nor the pool that stream to another task). A
//!   collective is one part per rank (reading its send buffer, writing its
//!   receive buffer; or one buffer written in place), issued as one group:
//!   rank by rank, each part's buffers handed off to its stream and stamped
//!   (the two stamps of `tracked`, whose submission only adds the part to
//!   the group), then every part queued at once (`ncclGroupEnd`). Each of
//!   these phases is one step of the calling task, so other tasks' halves
//!   interleave; the call's buffers stay borrowed until the parts are
//!   queued. The ledger knows no devices, so a part's buffers may be of any
//!   device here (the runtime asks its rank's).

use super::*;

/// Host staging buffers; staging buffer `h` is of device `h % devs`.
pub(crate) const STAGING: usize = 2;

/// Streams the pool creates for communicators' tasks when no task stream is
/// free (after the reclaim streams in the ledger; comm stream `j` is of
/// device `j % devs`).
pub(crate) const COMM_STREAMS: usize = 3;

/// One step of a runtime call in progress, taken at the task's next step.
#[derive(Debug)]
pub(crate) enum Next {
    /// `Staging::settle`: the host waits for the buffer's fence, if any.
    Settle(usize),
    /// The settled fence's event goes back to the pool.
    GiveBack(usize),
    /// The copy: object `o` written (`into_device`) or read on `s`, and the
    /// staging memory `h` read or written.
    Copy {
        s: usize,
        o: usize,
        h: usize,
        into_device: bool,
    },
    /// `copy_from_host`'s synchronize of the copying stream.
    Sync(usize),
    /// `Staging::copied`: a fence recorded on `s`, the buffer's in flight.
    Fence { h: usize, s: usize },
    /// The host reads or writes the staging memory.
    Host { h: usize, write: bool },
    /// The call returns: the staging buffer is let go.
    Release,
}

/// A rank of the communicator.
pub(crate) struct Rank {
    task: Task,
    s: usize,
    /// Bound its stream: closes it when the communicator goes.
    submitted: bool,
}

/// A communicator: its ranks, and whether a collective is in progress (one
/// at a time, under its lock).
pub(crate) struct Comm {
    ranks: Vec<Rank>,
    busy: bool,
}

/// One rank's part of a collective and the objects it touches.
#[derive(Clone, Debug)]
pub(crate) struct Part {
    rank: usize,
    pub(crate) touches: Vec<(usize, bool)>,
}

#[derive(Default)]
pub(crate) struct DevStats {
    copies_in: u64,
    copies_out: u64,
    /// Copies from another device's staging memory.
    cross_device: u64,
    syncs: u64,
    fences: u64,
    settles: u64,
    /// Host reads, writes.
    host: [u64; 2],
    refused_copies: u64,
    wrong_device: u64,
    comms: u64,
    comm_drops: u64,
    collectives: u64,
    parts: u64,
    /// Parts whose stream's epoch moved between their stamps.
    restamps: u64,
}

impl DevStats {
    pub(crate) fn add(&mut self, o: &DevStats) {
        self.copies_in += o.copies_in;
        self.copies_out += o.copies_out;
        self.cross_device += o.cross_device;
        self.syncs += o.syncs;
        self.fences += o.fences;
        self.settles += o.settles;
        self.host[0] += o.host[0];
        self.host[1] += o.host[1];
        self.refused_copies += o.refused_copies;
        self.wrong_device += o.wrong_device;
        self.comms += o.comms;
        self.comm_drops += o.comm_drops;
        self.collectives += o.collectives;
        self.parts += o.parts;
        self.restamps += o.restamps;
    }

    pub(crate) fn report(&self) {
        eprintln!(
            "  staging: copies in {} (from another device's staging {}), out {}; \
             copy_from_host syncs {}, fences {} (settled {}); host reads {}, writes {}; \
             refused in a capture {}, of another device {}",
            self.copies_in,
            self.cross_device,
            self.copies_out,
            self.syncs,
            self.fences,
            self.settles,
            self.host[0],
            self.host[1],
            self.refused_copies,
            self.wrong_device
        );
        eprintln!(
            "  collectives: communicators {} (dropped {}), collectives {} ({} parts), \
             stamps moved before the group {}",
            self.comms, self.comm_drops, self.collectives, self.parts, self.restamps
        );
    }
}

impl Sim {
    /// A stream's device.
    pub(crate) fn sdev(&self, s: usize) -> usize {
        if s < self.n {
            s % self.devs
        } else if s < self.n + self.devs {
            s - self.n
        } else {
            (s - self.n - self.devs) % self.devs
        }
    }

    /// A staging buffer's device.
    fn hdev(&self, h: usize) -> usize {
        h % self.devs
    }

    /// Whether a runtime call in progress (a staging call between its copy
    /// and its host wait) or a communicator holds stream `s`.
    pub(crate) fn held_by_call(&self, s: usize) -> bool {
        self.reserved[s]
            || self
                .slots
                .iter()
                .flatten()
                .any(|sl| sl.holds.is_some_and(|(_, hs)| hs == s))
    }

    /// The objects the program may use now: buffers, views, ranges.
    fn usable_objs(&self) -> Vec<usize> {
        (0..OBJS + PARTS * BUFS)
            .filter(|&o| self.usable(o) && self.mem(o).0 < self.nbufs)
            .collect()
    }

    /// Everything the ledger holds about streams, buffers and events, for
    /// checking that a refused call left it as it was.
    pub(crate) fn ledger_state(&self) -> String {
        use std::fmt::Write;
        let l = &self.ledger;
        let mut out = String::new();
        for (i, &id) in self.ids.iter().enumerate() {
            let waited: Vec<_> = self.ids.iter().map(|&of| l.waited(id, of)).collect();
            let _ = writeln!(
                out,
                "s{i}: epoch {:?} completed {:?} counted {:?} generation {:?} owner {:?} \
                 shared {} capturing {} vacant {} waited {waited:?}",
                l.epoch(id),
                l.completed(id),
                l.closed_counted(id),
                l.generation(id),
                l.owner(id),
                l.is_shared(id),
                l.is_capturing(id),
                l.is_vacant(id),
            );
        }
        for (o, b) in self.bufs.iter().enumerate() {
            let _ = writeln!(out, "{}: {:?}", Obj(o), b.snapshot());
        }
        for (e, ev) in self.events.iter().enumerate() {
            let _ = writeln!(out, "e{e}: {:?} {}", ev.source(), ev.records());
        }
        out
    }

    // ----- staging -------------------------------------------------------

    /// Kind 19: `slot`'s task makes a staging call (it has none in
    /// progress).
    pub(crate) fn staging_op(&mut self, slot: usize, st: Step) -> Result<(), String> {
        let h = st.b as usize % STAGING;
        if self
            .slots
            .iter()
            .flatten()
            .any(|sl| sl.holds.is_some_and(|(x, _)| x == h))
        {
            // Another task's call holds `&mut` of it.
            return Ok(());
        }
        let s = self.pick(slot, st.a);
        let objs = self.usable_objs();
        let o = (!objs.is_empty()).then(|| objs[(st.c as usize >> 3) % objs.len()]);
        let same = self.sdev(s) == self.hdev(h);
        let copy = |o, into_device| Next::Copy {
            s,
            o,
            h,
            into_device,
        };
        let (mut call, held) = match (st.c % 5, o) {
            (0, Some(o)) => (vec![Next::Settle(h), copy(o, true), Next::Sync(s)], s),
            (1 | 2, Some(_)) if !same => {
                // `Staging::same_runtime`: refused before anything is done.
                self.stats.dev.wrong_device += 1;
                return Ok(());
            }
            (1, Some(o)) => (
                vec![Next::Settle(h), copy(o, true), Next::Fence { h, s }],
                s,
            ),
            (2, Some(o)) => (
                vec![Next::Settle(h), copy(o, false), Next::Fence { h, s }],
                s,
            ),
            (3, _) => (
                vec![Next::Settle(h), Next::Host { h, write: true }],
                usize::MAX,
            ),
            (4, _) => (
                vec![Next::Settle(h), Next::Host { h, write: false }],
                usize::MAX,
            ),
            _ => return Ok(()),
        };
        call.push(Next::Release);
        self.log.push(format!(
            "T{slot} staging call on h{h} (device {}), stream s{s} (device {}): {call:?}",
            self.hdev(h),
            self.sdev(s)
        ));
        let sl = self.slots[slot].as_mut().unwrap();
        sl.holds = Some((h, held));
        sl.next = call.into();
        self.next_step(slot)
    }

    /// The next step of `slot`'s call in progress (it has no operation in
    /// flight).
    pub(crate) fn next_step(&mut self, slot: usize) -> Result<(), String> {
        let task = self.task(slot);
        let sl = self.slots[slot].as_mut().unwrap();
        let next = sl.next.pop_front().expect("a call in progress");
        match next {
            Next::Settle(h) => {
                let Some(e) = self.fence[h].take() else {
                    return Ok(());
                };
                self.log
                    .push(format!("T{slot} settles h{h}: synchronizes its fence e{e}"));
                let ticket = self.ledger.begin_wait(&self.events[e]);
                let sl = self.slots[slot].as_mut().unwrap();
                sl.pending = Some(Pending::Wait {
                    e,
                    kind: WaitKind::Sync,
                    ticket,
                    records_seen: self.ev_records[e],
                    record_in_flight: self.ev_in_flight[e] > 0,
                    driven: None,
                });
                sl.next.push_front(Next::GiveBack(e));
                self.stats.dev.settles += 1;
            }
            Next::GiveBack(e) => self.give_event(e),
            Next::Copy {
                s,
                o,
                h,
                into_device,
            } => {
                let capturing = self.ledger.is_capturing(self.ids[s]);
                if capturing != self.capturing(s) {
                    return Err(format!("capture state of s{s} differs at a copy"));
                }
                let touches = vec![(o, into_device)];
                if capturing || !self.usable(o) || !self.borrow_ok(&touches) {
                    // Refused (`Error::Capturing`, before anything is
                    // stamped), or not made: the call returns.
                    let before = capturing.then(|| self.ledger_state());
                    if let Some(before) = before {
                        self.log
                            .push(format!("T{slot} copy on capturing s{s} refused"));
                        if self.ledger_state() != before {
                            return Err("a refused copy changed the ledger".into());
                        }
                        self.stats.dev.refused_copies += 1;
                    }
                    let sl = self.slots[slot].as_mut().unwrap();
                    sl.next.retain(|n| matches!(n, Next::Release));
                    return Ok(());
                }
                if into_device {
                    self.stats.dev.copies_in += 1;
                    if self.sdev(s) != self.hdev(h) {
                        self.stats.dev.cross_device += 1;
                    }
                } else {
                    self.stats.dev.copies_out += 1;
                }
                self.launch_host(slot, s, touches, vec![(h, !into_device)])?;
            }
            Next::Sync(s) => {
                self.bind(slot, s)?;
                let closed = self
                    .ledger
                    .begin_stream_sync(&task, self.ids[s])
                    .map_err(|e| format!("copy_from_host's synchronize of s{s} refused: {e}"))?;
                self.log.push(format!(
                    "T{slot} begin sync s{s} after the copy: {closed:?}"
                ));
                self.slots[slot].as_mut().unwrap().pending = Some(Pending::StreamSync {
                    s,
                    closed,
                    hold: None,
                    driven: None,
                });
                self.stats.dev.syncs += 1;
            }
            Next::Fence { h, s } => {
                if self.capturing(s) {
                    return Err(format!("a staging fence on capturing s{s}"));
                }
                let e = self.take_event();
                self.bind(slot, s)?;
                self.log
                    .push(format!("T{slot} begin record of h{h}'s fence e{e} on s{s}"));
                let ticket = self
                    .ledger
                    .begin_record(&task, &self.events[e], self.ids[s]);
                self.ev_records[e] += 1;
                self.ev_in_flight[e] += 1;
                self.slots[slot].as_mut().unwrap().pending = Some(Pending::Record {
                    e,
                    s,
                    ticket,
                    fails: false,
                    driven: None,
                });
                self.fence[h] = Some(e);
                self.stats.dev.fences += 1;
            }
            Next::Host { h, write } => self.host_access(h, write)?,
            Next::Release => sl.holds = None,
        }
        Ok(())
    }

    /// The host reads or writes staging memory `h`: every earlier device
    /// use of it that conflicts must be complete on the host.
    pub(crate) fn host_access(&mut self, h: usize, write: bool) -> Result<(), String> {
        let rw = |w: bool| if w { "write" } else { "read" };
        self.log.push(format!("host {} of h{h}", rw(write)));
        for u in &self.oracle.uses[BUFS + h] {
            if (u.write || write) && self.oracle.host.get(u.stream) < u.seq {
                return Err(format!(
                    "UNSAFE: the host's {} of staging h{h} is not after its device {} on \
                     stream {} (op #{}): host {:?}",
                    rw(write),
                    rw(u.write),
                    u.stream,
                    u.seq,
                    (0..self.oracle.host.0.len())
                        .map(|x| self.oracle.host.get(x))
                        .collect::<Vec<_>>(),
                ));
            }
        }
        self.stats.dev.host[usize::from(write)] += 1;
        Ok(())
    }

    // ----- collectives ---------------------------------------------------

    /// Kind 20: a communicator is made, dropped, or called (by `slot`'s
    /// task's thread, idle).
    pub(crate) fn collective_op(&mut self, slot: usize, st: Step) -> Result<(), String> {
        match &self.comm {
            None => self.comm_create(st),
            Some(c) if c.busy => Ok(()),
            Some(_) if st.c % 8 == 0 => {
                self.comm_drop();
                Ok(())
            }
            Some(_) if self.slots[slot].is_some() => self.collective_begin(slot, st),
            Some(_) => Ok(()),
        }
    }

    /// A stream the pool may give a communicator's task: no live task holds
    /// or bound it, unshared, not retired, not capturing.
    fn stream_free(&self, s: usize) -> bool {
        !self.vacant[s]
            && !self.shared[s]
            && !self.ledger.is_shared(self.ids[s])
            && !self.held_by_call(s)
            && !self.capturing(s)
            && !self.bound[s].iter().any(Task::is_live)
            && !self.slots.iter().flatten().any(|sl| sl.home == s)
            && !self.raw.iter().any(|r| r.is_some_and(|(rs, _)| rs == s))
    }

    /// A communicator of 2 or 3 ranks (`b`), on free streams (task streams
    /// from `a`, then streams made for communicators): one a device first.
    fn comm_create(&mut self, st: Step) -> Result<(), String> {
        let k = 2 + st.b as usize % 2;
        // Free task streams first, then streams made for communicators.
        let made = self.n + self.devs..self.n + self.devs + COMM_STREAMS;
        let free: Vec<usize> = (0..self.n)
            .map(|i| (st.a as usize + i) % self.n)
            .chain(made)
            .filter(|&s| self.stream_free(s))
            .collect();
        let mut streams: Vec<usize> = (0..self.devs)
            .filter_map(|d| free.iter().copied().find(|&s| self.sdev(s) == d))
            .collect();
        for &s in &free {
            if !streams.contains(&s) {
                streams.push(s);
            }
        }
        streams.truncate(k);
        if streams.len() < 2 {
            return Ok(());
        }
        let ranks = streams
            .iter()
            .map(|&s| {
                self.reserved[s] = true;
                Rank {
                    task: self.ledger.begin_task(),
                    s,
                    submitted: false,
                }
            })
            .collect();
        self.log
            .push(format!("communicator made: ranks on streams {streams:?}"));
        self.comm = Some(Comm { ranks, busy: false });
        self.stats.dev.comms += 1;
        Ok(())
    }

    /// The communicator goes: its tasks close their streams and end.
    fn comm_drop(&mut self) {
        let comm = self.comm.take().expect("a communicator");
        self.log.push("communicator dropped".into());
        for r in comm.ranks {
            if r.submitted {
                let c = self.ledger.close(&r.task, self.ids[r.s]);
                self.log.push(format!("  closes s{}: {c:?}", r.s));
                self.stats.task_closes += 1;
            }
            self.ledger.finish_task(&r.task);
            self.reserved[r.s] = false;
        }
        self.stats.dev.comm_drops += 1;
    }

    /// A collective of `k` ranks: of the buffers with a usable object (in
    /// order), rank `r` writes one of buffer `b + r`'s (its receive buffer:
    /// object `(a >> 2r) & 3` of the buffer's, which are the buffer, its
    /// views, its ranges) and, if bit `4 + r` of `c` is set, reads buffer
    /// `b + k + r`'s first (its send buffer); else in place. Skipped unless
    /// the call's borrows hold. Its first phase is taken now.
    fn collective_begin(&mut self, slot: usize, st: Step) -> Result<(), String> {
        let objs = self.usable_objs();
        let mut bufs: Vec<usize> = objs.iter().map(|&o| self.mem(o).0).collect();
        bufs.sort_unstable();
        bufs.dedup();
        if bufs.is_empty() {
            return Ok(());
        }
        let of = |b: usize| -> Vec<usize> {
            objs.iter()
                .copied()
                .filter(|&o| self.mem(o).0 == b)
                .collect()
        };
        // Every buffer of the call is borrowed at once: a `&mut` one alone
        // (a send buffer that would break that is left out: in place).
        let fits = |all: &[(usize, bool)], o: usize, w: bool| {
            all.iter()
                .all(|&(o2, w2)| Self::stamps_of(o).0 != Self::stamps_of(o2).0 || !(w || w2))
        };
        let k = self.comm.as_ref().unwrap().ranks.len();
        let (mut parts, mut all) = (Vec::new(), Vec::new());
        for rank in 0..k {
            let recv = of(bufs[(st.b as usize + rank) % bufs.len()]);
            let j = (st.a as usize >> (2 * rank)) & 3;
            let recv = recv[j % recv.len()];
            if !fits(&all, recv, true) {
                return Ok(());
            }
            all.push((recv, true));
            let mut touches = vec![(recv, true)];
            if bit(st.c, 4 + rank) {
                let send = of(bufs[(st.b as usize + k + rank) % bufs.len()])[0];
                if fits(&all, send, false) {
                    all.push((send, false));
                    touches.insert(0, (send, false));
                }
            }
            parts.push(Part { rank, touches });
        }
        if !self.borrow_ok(&all) {
            return Ok(());
        }
        self.log
            .push(format!("T{slot} calls a collective: {parts:?}"));
        self.comm.as_mut().unwrap().busy = true;
        self.slots[slot].as_mut().unwrap().pending = Some(Pending::Collective { phase: 0, parts });
        self.advance(slot)
    }

    /// One phase of `slot`'s collective `p`: a rank's hand-offs and stamps,
    /// or (after the last rank's) every part queued.
    pub(crate) fn collective_step(&mut self, slot: usize, mut p: Pending) -> Result<(), String> {
        let Pending::Collective { phase, parts } = &mut p else {
            unreachable!()
        };
        if *phase == parts.len() {
            // `ncclGroupEnd`: every part is queued on its rank's stream.
            for part in parts.iter() {
                let s = self.comm.as_ref().unwrap().ranks[part.rank].s;
                self.log.push(format!(
                    "  collective part {} queued on s{s} {:?}",
                    part.rank,
                    Objs(&part.touches)
                ));
                let mem = self.mem_touches(&part.touches);
                self.oracle.submit(self.ost[s], &mem)?;
                self.stats.ops += 1;
                self.stats.dev.parts += 1;
            }
            self.comm.as_mut().unwrap().busy = false;
            self.stats.dev.collectives += 1;
            return Ok(());
        }
        let part = parts[*phase].clone();
        let rank = &self.comm.as_ref().unwrap().ranks[part.rank];
        let (task, s) = (rank.task.clone(), rank.s);
        self.log.push(format!(
            "T{slot} collective rank {} on s{s}: {:?}",
            part.rank,
            Objs(&part.touches)
        ));
        if self.bind_as(&task, s)? == Binding::Shared || self.ledger.is_shared(self.ids[s]) {
            return Err(format!("a collective's stream s{s} is shared"));
        }
        self.comm.as_mut().unwrap().ranks[part.rank].submitted = true;
        let epoch = self.ledger.epoch(self.ids[s]);
        self.moved(&part.touches, s);
        for &(o, w) in &part.touches {
            self.hand_off(&task, o, s, w)?;
            self.stamp(o, s, w)?;
        }
        // `tracked`'s second stamp, after its submission (which only adds
        // the part to the group), if the stream's epoch moved.
        if self.ledger.epoch(self.ids[s]) != epoch {
            for &(o, w) in &part.touches {
                self.stamp(o, s, w)?;
            }
            self.stats.dev.restamps += 1;
        }
        *phase += 1;
        self.slots[slot].as_mut().unwrap().pending = Some(p);
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// Replays (see the legend in `oracle.rs`): 127 a staging call on staging
// buffer `b % 2` by the task (`c % 5`: 0 `copy_from_host` into object
// `c >> 3` of the usable ones, 1 `Staging::send` into it, 2 `receive` from
// it, 3 a host write, 4 a host read); 134 a communicator's call (made if
// there is none: `2 + b % 2` ranks on free streams from `a`; dropped if
// `c % 8 == 0`; else a collective, see `collective_begin`).

/// `copy_from_host` from device 1's staging memory on a device-0 stream,
/// then a host write of that memory (issue 23's defect 2): the runtime's
/// synchronize of the copying stream comes between, and orders the write
/// after the copy's read.
#[test]
fn replay_copy_from_another_devices_staging_then_a_host_write() {
    let mut sim = replay_on(
        2,
        2,
        &program_of(vec![
            vec![(0, 99, 0, 0, 0)],  // T0 begins on s0 (device 0)
            vec![(0, 127, 0, 1, 0)], // copy_from_host(b0, h1 of device 1)
            halves(0, 6).collect(),  // the copy, the synchronize of s0
            vec![(0, 127, 0, 1, 3)], // the host writes h1
            halves(0, 2).collect(),
        ]),
    );
    let d = &sim.stats.dev;
    assert_eq!((d.cross_device, d.syncs, d.host[1]), (1, 1, 1));
    assert!(sim
        .log
        .iter()
        .any(|l| l.contains("begin sync s0 after the copy")));
    assert!(sim.slots[0].as_ref().unwrap().holds.is_none());
    assert!(sim.ledger.completed(sim.ids[0]) > StreamEpoch(0));
    assert!(!sim.bufs[0].get_mut().is_unknown());
}

/// The oracle's host check bites: the same copy with no host wait after
/// it (the old runtime, which asked only device 0 whether the memory was
/// page-locked), then the host's write, is unsafe.
#[test]
fn host_write_before_the_copy_is_known_done_is_flagged() {
    let steps: Vec<Step> = program_of(vec![
        vec![(0, 99, 0, 0, 0), (0, 127, 0, 1, 0)],
        halves(0, 2).collect(), // the copy is submitted; no synchronize yet
    ])
    .into_iter()
    .map(|(slot, op, a, b, c)| Step { slot, op, a, b, c })
    .collect();
    let prog = Program {
        streams: 2,
        devs: 2,
        tasks: SLOTS,
        bufs: BUFS,
        kinds: u32::MAX,
        cross: 200,
        steps: steps.clone(),
    };
    let mut sim = Sim::new(&prog);
    for st in steps {
        sim.step(st).unwrap();
    }
    assert!(sim.log.iter().any(|l| l.contains("staging [(1, false)]")));
    let err = sim.host_access(1, true).unwrap_err();
    assert!(
        err.starts_with("UNSAFE: the host's write of staging h1"),
        "{err}"
    );
}

/// `Staging::send` then a host write: the fence recorded after the copy is
/// synchronized first (a Completed fact), and its event goes back to the
/// pool.
#[test]
fn replay_staging_send_then_a_host_write_waits_for_its_fence() {
    let sim = replay(
        2,
        &program_of(vec![
            vec![(0, 99, 0, 0, 0)],
            vec![(0, 127, 0, 0, 1)], // h0.send(b0) on s0
            halves(0, 6).collect(),  // the copy, the fence's record
            vec![(0, 127, 0, 0, 3)], // the host writes h0: settles first
            halves(0, 5).collect(),
        ]),
    );
    let d = &sim.stats.dev;
    assert_eq!((d.fences, d.settles, d.host[1]), (1, 1, 1));
    assert!(sim.fence[0].is_none());
    assert_eq!(sim.free_events.len(), POOL, "the fence's event is back");
    assert!(sim.ledger.completed(sim.ids[0]) > StreamEpoch(0));
}

/// A collective across two devices, its phases interleaved with another
/// task's launch: rank 0 waits for T0's write of its buffer, the later
/// reader waits for rank 0's stream; the ranks' streams stay unshared.
#[test]
fn replay_collective_across_devices_interleaved() {
    let sim = replay_on(
        3,
        2,
        &program_of(vec![
            vec![(0, 134, 0, 0, 0)], // a communicator: ranks on s0, s1
            vec![(0, 99, 0, 0, 0)],  // T0 begins on s2 (s0, s1 are the ranks')
            vec![(0, 0, 0, 0, 1)],   // T0 writes b0 on s2
            halves(0, 1).collect(),
            vec![(1, 99, 0, 0, 0)],     // T1 begins, sharing s2
            vec![(0, 134, 0, 0, 0x11)], // T0's thread: the collective, rank 0's phase
            vec![(1, 0, 0, 7, 8)],      // T1 writes b3 on s2, meanwhile
            halves(0, 1).collect(),     // rank 1's phase
            halves(1, 1).collect(),
            halves(0, 1).collect(), // every part queued
            vec![(1, 0, 0, 0, 0)],  // T1 reads b0 on s2: waits for s0
            halves(1, 1).collect(),
        ]),
    );
    let d = &sim.stats.dev;
    assert_eq!((d.comms, d.collectives, d.parts), (1, 1, 2));
    assert!(sim.reserved[0] && sim.reserved[1]);
    assert!(!sim.ledger.is_shared(sim.ids[0]) && !sim.ledger.is_shared(sim.ids[1]));
    for l in [
        "communicator made: ranks on streams [0, 1]",
        "hand-off b0 -> s0 Write: DeviceWait({S2})",
        "hand-off b0 -> s2 Read: DeviceWait({S0})",
        "T1 submit on s2 [b3 w]",
    ] {
        assert!(sim.log.iter().any(|x| x.contains(l)), "{l}");
    }
}
