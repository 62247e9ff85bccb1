//! The ledger's hand-off (R9, X2): what a buffer's move to a stream must
//! wait for, and the facts a wait teaches.

use super::*;

impl Ledger {
    /// Whether use `u` is ordered before new work on `s2`, and why.
    #[inline]
    fn covered(&self, u: &Use, s2: StreamId) -> Option<Reason> {
        if u.stream == s2 {
            return Some(Reason::SameStream);
        }
        if !self.facts.load(Relaxed) {
            return None;
        }
        let o = self.order(u.stream);
        if o.generation.load(Acquire) != u.generation.0 {
            return Some(Reason::Recycled);
        }
        if o.completed.load(Acquire) >= u.epoch.0 {
            return Some(Reason::Completed);
        }
        if self.order(s2).waited[u.stream.index()].load(Acquire) >= u.epoch.0 {
            return Some(Reason::Ordered);
        }
        None
    }

    /// R9: what must happen before a buffer with `uses` is used on `s2` for
    /// `access`, as a whole. A read waits for the last writer; a write for
    /// the last writer and every reader since (X2); each unless covered. An
    /// escaped buffer (R10) moving to another stream waits for everything
    /// its stream queued, whatever the facts.
    ///
    /// `device_wait_possible` is false where the runtime cannot make `s2`
    /// wait on the device (another context); a capturing `s2` waits for
    /// nothing (X7: its graph's launch hands the buffer off again). Counts
    /// every outcome (see [`Ledger::counters`]).
    #[inline]
    pub fn hand_off(
        &self,
        uses: &Uses,
        s2: StreamId,
        access: Access,
        device_wait_possible: bool,
    ) -> Decision {
        self.hand_off_range(uses, WHOLE, s2, access, device_wait_possible)
    }

    /// R9, X3: [`Ledger::hand_off`] for `range` only: the waits of every
    /// entry overlapping `range`, merged (the union of their streams, one
    /// decision); disjoint ranges never wait for each other.
    #[inline]
    pub fn hand_off_range(
        &self,
        uses: &Uses,
        range: Range<usize>,
        s2: StreamId,
        access: Access,
        device_wait_possible: bool,
    ) -> Decision {
        let counters = &self.order(s2).counters;
        if uses.unknown {
            return self.hand_off_unknown(s2, device_wait_possible);
        }
        let mut waits = StreamSet::new();
        let mut reason = Reason::Clean;
        let mut dirty = false;
        for e in uses.entries.iter().filter(|e| overlaps(&e.range, &range)) {
            dirty |= e.writer.is_some() || !e.readers.is_empty();
            self.entry_waits(e, s2, access, &mut waits, &mut reason);
        }
        if waits.is_empty() {
            if !dirty {
                counters.avoided(Reason::Clean);
            }
            return Decision::NoWait(reason);
        }
        self.wait_decision(s2, waits, device_wait_possible)
    }

    /// The streams one entry's uses make a use on `s2` for `access` wait
    /// for, added to `waits`; uses covered are counted, `reason` is the
    /// last one's.
    #[inline]
    fn entry_waits(
        &self,
        e: &Entry,
        s2: StreamId,
        access: Access,
        waits: &mut StreamSet,
        reason: &mut Reason,
    ) {
        let counters = &self.order(s2).counters;
        if access == Access::Read && !e.escaped && e.readers.iter().any(|r| r.stream == s2) {
            // `s2` already read since the last write: it was ordered after
            // the writer then, and stream order keeps it so.
            counters.avoided(Reason::SameStream);
            *reason = Reason::SameStream;
            return;
        }
        // Outcomes with the same reason are counted with one increment.
        let mut same_reason = 0;
        let mut check = |u: &Use, escaped: bool| {
            if escaped && u.stream != s2 {
                waits.insert(u.stream);
                return;
            }
            match self.covered(u, s2) {
                Some(r) => {
                    if same_reason != 0 && r != *reason {
                        counters.avoided_n(*reason, same_reason);
                        same_reason = 0;
                    }
                    *reason = r;
                    same_reason += 1;
                }
                None => {
                    waits.insert(u.stream);
                }
            }
        };
        if let Some(w) = &e.writer {
            check(w, e.escaped);
        }
        if access == Access::Write {
            for r in &e.readers {
                check(r, false);
            }
        }
        if same_reason != 0 {
            counters.avoided_n(*reason, same_reason);
        }
    }

    /// R9 for unknown uses ([`Ledger::forget_uses`]): waits for every stream
    /// but `s2`.
    #[cold]
    fn hand_off_unknown(&self, s2: StreamId, device_wait_possible: bool) -> Decision {
        let mut waits = StreamSet::new();
        for i in 0..self.stream_count() {
            let s = StreamId(i as u16);
            // A retired stream's work is done (it was idle).
            if s != s2 && !self.is_vacant(s) {
                waits.insert(s);
            }
        }
        if waits.is_empty() {
            return Decision::NoWait(Reason::SameStream);
        }
        self.wait_decision(s2, waits, device_wait_possible)
    }

    /// The wait for `waits` on `s2`: on the device where possible, else on
    /// the host (another context); none while `s2` captures (X7); counted.
    #[inline]
    fn wait_decision(
        &self,
        s2: StreamId,
        waits: StreamSet,
        device_wait_possible: bool,
    ) -> Decision {
        let counters = &self.order(s2).counters;
        if self.is_capturing(s2) {
            // X7: what `s2` queues now runs when its graph is launched, and
            // the launch hands off every buffer the graph touches (R12),
            // while captured operations stamp nothing: the uses waited for
            // here are still the buffer's stamps then, and the launch
            // waits for them (or learns them done). A wait now would order
            // nothing the launch does not.
            counters.avoided_n(Reason::Captured, waits.len() as u64);
            return Decision::NoWait(Reason::Captured);
        }
        if device_wait_possible {
            counters.device_waits(waits.len() as u64);
            Decision::DeviceWait(waits)
        } else {
            counters.host_syncs(waits.len() as u64);
            Decision::HostSync(waits)
        }
    }

    /// The highest epoch of `s` whose close counted: everything stamped with
    /// it or earlier was submitted before the close. Read it *before* a
    /// hand-off's driver record on `s`; after the device wait, give it to
    /// [`Ledger::mark_ordered`].
    #[inline]
    pub fn closed_counted(&self, s: StreamId) -> StreamEpoch {
        StreamEpoch(self.order(s).closed_counted.load(Acquire))
    }

    /// The Ordered fact from a device wait on `s2` for everything `s` had
    /// queued: `waited[s2][s] >= epoch`, if `task` owns `s2`, which is not
    /// shared or capturing. Returns whether the fact was kept.
    #[inline]
    pub fn mark_ordered(&self, task: &Task, s2: StreamId, s: StreamId, epoch: StreamEpoch) -> bool {
        if !self.may_learn(task, s2) || s == s2 {
            return false;
        }
        self.order(s2).raise(s, epoch.0);
        true
    }

    /// What a hand-off's device wait for `s` will teach, read *before* the
    /// hand-off's driver record on `s` (a pooled event recorded raw, or a
    /// capture's event recorded as it began): `s`'s last counted close, as
    /// [`Ledger::closed_counted`], and `s`'s ordered table (X1 for pooled
    /// events): every `waited[s][t]` was raised after its device wait was
    /// submitted on `s`, so before the record, and a stream ordered after
    /// the record is ordered after those waits' sources too. Give it to
    /// [`Ledger::learn_hand_off`] once the device wait was submitted.
    pub fn hand_off_facts(&self, s: StreamId) -> HandOffFacts {
        HandOffFacts {
            stream: s,
            closed: self.closed_counted(s),
            row: self.waited_row(s).map(|(t, v)| pack(t, v)).collect(),
        }
    }

    /// The Ordered facts of a hand-off: `task`'s stream `s2` waited on the
    /// device for everything its source stream had queued when
    /// `facts` were read ([`Ledger::hand_off_facts`]): `waited[s2][s]`
    /// rises to `s`'s last counted close, and `waited[s2][t]` to
    /// `waited[s][t]` for every `t`, if `task` owns `s2`, which is not
    /// shared or capturing. Returns whether the facts were kept.
    #[inline]
    pub fn learn_hand_off(&self, task: &Task, s2: StreamId, facts: &HandOffFacts) -> bool {
        let s = facts.stream;
        if !self.may_learn(task, s2) || s == s2 {
            return false;
        }
        let o = self.order(s2);
        o.raise(s, facts.closed.0);
        for &w in &facts.row {
            let (t, v) = unpack(w);
            if t != s2 {
                o.raise(t, v);
            }
        }
        true
    }

    /// The Completed facts of a hand-off's host wait: the host saw a pooled
    /// event recorded on `facts`' stream, after `facts` were read
    /// ([`Ledger::hand_off_facts`]), complete. Everything up to that
    /// stream's last counted close was submitted before the record, and
    /// everything it was ordered after before that (R5, X1, as
    /// [`Ledger::finish_stream_sync`]): all of it finished. Completed facts
    /// hold for every task, so any task may teach them.
    pub fn learn_host_wait(&self, facts: &HandOffFacts) {
        self.complete_with_table(facts.stream, facts.closed, &facts.row);
    }

    /// The Completed fact: every epoch of `s` up to `epoch` finished.
    #[inline]
    pub fn mark_completed(&self, s: StreamId, epoch: StreamEpoch) {
        self.order(s).completed.fetch_max(epoch.0, AcqRel);
    }

    /// Whether `task`'s device wait on `s`, submitted, may raise `s`'s
    /// `waited` row (R8): `s` is not capturing, and `task` owns it or `s`
    /// is shared (X8). A wait orders whatever any task submits to `s`
    /// after it, whoever queued it, so a sharer's fact holds for every
    /// task. What it must not do is get into a table read after a driver
    /// call of the owner's that it does not precede (`finish_record`,
    /// `finish_stream_sync`): those read the row first and `shared` next,
    /// and drop the row if shared. A sharer stored `shared` before its
    /// wait and raises after it, both `Release`, so a raise they read
    /// makes `shared` read true. An unshared stream's non-owner (a task
    /// whose binding the ledger did not see) learns nothing: no such
    /// check would see it. Sharers raise with a load and a store, as the
    /// owner: two of them racing may lower an entry, which forgoes a fact
    /// and claims none (each value stored is true).
    #[inline]
    pub(super) fn may_learn(&self, task: &Task, s: StreamId) -> bool {
        let o = self.order(s);
        // Acquire: `task`'s own id and capture it reads in program order;
        // `shared` pairs with the sharer's store in `bind_slow` or `share`.
        (o.owner_id.load(Acquire) == task.id().0 || o.shared.load(Acquire))
            && !o.capturing.load(Acquire)
    }
}
