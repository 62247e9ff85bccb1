//! The ledger's closes, records, waits and syncs (R2, R4-R8).

use super::*;

impl Ledger {
    /// R2: closes `s`'s epoch for `task` (epoch += 1) before it submits a
    /// record or a synchronize. On a capturing stream nothing closes.
    #[inline]
    pub fn close(&self, task: &Task, s: StreamId) -> Closed {
        let o = self.order(s);
        // Acquire: the task that began a capture reads it in program order;
        // one begun by a task that joined the stream is stamped past any
        // epoch whose close counts (R1/R2).
        if o.capturing.load(Acquire) {
            return Closed {
                stream: s,
                epoch: StreamEpoch(o.epoch.load(Acquire) - 1),
                counted: false,
            };
        }
        let e = o.epoch.fetch_add(1, AcqRel);
        // After the increment: a task that made `s` shared did so before it
        // read the epoch for its stamp, so either it read `e + 1` or this
        // RMW acquired its `joined_shared` and we see `shared` here.
        let counted = o.owner_id.load(Acquire) == task.id().0 && !o.shared.load(Acquire);
        if counted {
            // Only the unshared owner counts, and closes grow: one writer.
            o.closed_counted.store(e, Release);
        }
        Closed {
            stream: s,
            epoch: StreamEpoch(e),
            counted,
        }
    }

    /// R4, first half: `task` records `event` on `s`. Bumps the event's record
    /// count (so waits in flight on it give no fact), then closes `s`. Submit
    /// the driver record, then call [`Ledger::finish_record`].
    pub fn begin_record(&self, task: &Task, event: &EventCoverage, s: StreamId) -> RecordTicket {
        let (records, alone) = event.write().begin();
        RecordTicket {
            closed: self.close(task, s),
            records,
            alone,
        }
    }

    /// R4, X1, second half: the driver record was submitted. The event covers
    /// the closed epoch and the stream's ordered table if the close counted
    /// and the driver's event is surely this record: no other record of it
    /// began since (its driver call may land after this one's), and none was
    /// in flight when this one began (its driver call, too, may have landed
    /// after this one's, whenever it finished).
    pub fn finish_record(&self, event: &EventCoverage, ticket: RecordTicket) {
        let closed = ticket.closed;
        let w = event.write();
        w.end();
        if closed.counted && ticket.alone && w.records_now() == ticket.records {
            w.cover(closed.stream, closed.epoch, self.waited_row(closed.stream));
            if self.is_shared(closed.stream) {
                // The row was read after the driver record: a task that
                // shares the stream now may have raised it for a wait it
                // submitted after the record (X8), and a raise seen above
                // makes its `shared` seen here (it stored `shared` before
                // it bound, the raise after its wait, both `Release`).
                w.drop_table();
            }
        }
    }

    /// R4: the driver record after [`Ledger::begin_record`] failed: the
    /// record is no longer in flight, and the event covers nothing (the
    /// driver's event is in doubt). A ticket neither finished nor aborted
    /// keeps the event covering nothing for good, which is safe.
    pub fn abort_record(&self, event: &EventCoverage, ticket: RecordTicket) {
        let _ = ticket;
        event.write().end();
    }

    /// R4, R14: `task` records `event` on `s`: [`Ledger::begin_record`], then
    /// `driver_record` (the driver's record, with no ledger lock held), then
    /// [`Ledger::finish_record`], or [`Ledger::abort_record`] if it failed.
    /// Returns the epoch the record closed.
    ///
    /// # Errors
    ///
    /// `driver_record`'s error.
    pub fn record<E>(
        &self,
        task: &Task,
        event: &EventCoverage,
        s: StreamId,
        driver_record: impl FnOnce() -> Result<(), E>,
    ) -> Result<Closed, E> {
        let ticket = self.begin_record(task, event, s);
        if let Err(e) = driver_record() {
            self.abort_record(event, ticket);
            return Err(e);
        }
        self.finish_record(event, ticket);
        Ok(ticket.closed)
    }

    /// DESIGN "Soundness": `event` was (or is about to be) recorded by a driver call the
    /// ledger does not see (a hand-off's pooled event, a raw handle): it
    /// covers nothing from now on, and waits in flight on it give no fact.
    pub fn record_untracked(&self, event: &EventCoverage) {
        let w = event.write();
        let _ = w.begin();
        w.end();
    }

    /// R6, R7, R8, first half: read what `event` covers before a driver wait,
    /// synchronize or query. Takes no lock: a few loads.
    #[inline]
    pub fn begin_wait(&self, event: &EventCoverage) -> WaitTicket {
        event
            .try_read(|e| WaitTicket {
                source: e.source_now(),
                records: e.records_now(),
            })
            // A record was being written: the wait gives no fact.
            .unwrap_or(WaitTicket {
                source: None,
                records: 0,
            })
    }

    /// The event's ordered table, if it was not re-recorded since `ticket`.
    #[inline]
    fn table_since(event: &EventCoverage, ticket: &WaitTicket) -> Option<Table> {
        event
            .try_read(|e| (e.records_now() == ticket.records).then(|| e.table_now()))
            .flatten()
    }

    /// R6, R7, X1: the host saw `event` complete (synchronize returned, or a
    /// query said done). If it was not re-recorded since `ticket`, its source
    /// and ordered table become Completed facts. Returns whether they did.
    pub fn finish_event_complete(&self, event: &EventCoverage, ticket: WaitTicket) -> bool {
        let Some((s, e)) = ticket.source else {
            return false;
        };
        let Some(table) = Self::table_since(event, &ticket) else {
            return false;
        };
        self.complete_with_table(s, e, &table);
        true
    }

    /// R6, R7, R14: the host waits for `event`: [`Ledger::begin_wait`], then
    /// `driver_wait` (a driver synchronize or query, with no ledger lock
    /// held), which says whether the event is complete (a query: whether it
    /// was done; `false` also keeps the ledger from learning), then
    /// [`Ledger::finish_event_complete`] if it is. Returns whether the
    /// Completed facts were kept.
    ///
    /// # Errors
    ///
    /// `driver_wait`'s error.
    pub fn event_complete<E>(
        &self,
        event: &EventCoverage,
        driver_wait: impl FnOnce() -> Result<bool, E>,
    ) -> Result<bool, E> {
        let ticket = self.begin_wait(event);
        Ok(driver_wait()? && self.finish_event_complete(event, ticket))
    }

    /// R8, X1: `task`'s stream `s2` waited on `event` on the device. If `task`
    /// owns `s2` (unshared, not capturing) and the event was not re-recorded
    /// since `ticket`, `s2` is ordered after the source and after the source
    /// stream's ordered table. Returns whether the fact was kept.
    #[inline]
    pub fn finish_stream_wait(
        &self,
        task: &Task,
        event: &EventCoverage,
        ticket: WaitTicket,
        s2: StreamId,
    ) -> bool {
        let Some((s, e)) = ticket.source else {
            return false;
        };
        if !self.may_learn(task, s2) {
            return false;
        }
        let Some(table) = Self::table_since(event, &ticket) else {
            return false;
        };
        let o = self.order(s2);
        if s != s2 {
            o.raise(s, e.0);
        }
        for &w in &table {
            let (t, w) = unpack(w);
            if t != s2 {
                o.raise(t, w);
            }
        }
        true
    }

    /// R8, R14: `task`'s stream `s2` waits on the device for `event`:
    /// [`Ledger::begin_wait`], then `driver_wait` (the driver's stream wait,
    /// with no ledger lock held), which says whether the ledger may learn
    /// from it (`false`: a wait captured into a graph, or on an event
    /// recorded where the ledger did not see), then
    /// [`Ledger::finish_stream_wait`] if so. Returns whether the Ordered
    /// facts were kept.
    ///
    /// # Errors
    ///
    /// `driver_wait`'s error.
    pub fn stream_wait<E>(
        &self,
        task: &Task,
        event: &EventCoverage,
        s2: StreamId,
        driver_wait: impl FnOnce() -> Result<bool, E>,
    ) -> Result<bool, E> {
        let ticket = self.begin_wait(event);
        Ok(driver_wait()? && self.finish_stream_wait(task, event, ticket, s2))
    }

    /// The entries of `s`'s `waited` row that are not 0, as
    /// `(stream, epoch)` pairs (X1).
    #[inline]
    pub(super) fn waited_row(&self, s: StreamId) -> impl Iterator<Item = (StreamId, u64)> + '_ {
        let o = self.order(s);
        o.waited_mask.iter().enumerate().flat_map(move |(k, m)| {
            let mut bits = m.load(Acquire);
            std::iter::from_fn(move || {
                while bits != 0 {
                    let i = k * 64 + bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    let w = o.waited[i].load(Acquire);
                    if w != 0 {
                        return Some((StreamId(i as u16), w));
                    }
                }
                None
            })
        })
    }

    /// R5, first half: `task` synchronizes `s`: closes its epoch.
    ///
    /// # Errors
    ///
    /// [`LedgerError::SyncWhileCapturing`] if `s` is capturing.
    pub fn begin_stream_sync(&self, task: &Task, s: StreamId) -> Result<Closed, LedgerError> {
        if self.is_capturing(s) {
            return Err(LedgerError::SyncWhileCapturing(s));
        }
        Ok(self.close(task, s))
    }

    /// R5, X1, second half: the synchronize returned. If the close counted,
    /// the closed epoch and everything `s` was ordered after are completed.
    pub fn finish_stream_sync(&self, closed: Closed) {
        if !closed.counted {
            return;
        }
        self.mark_completed(closed.stream, closed.epoch);
        // The row is read after the synchronize: as in `finish_record`, a
        // task sharing the stream now may have raised it for a wait it
        // submitted after the synchronize (X8).
        let row: smallvec::SmallVec<[(StreamId, u64); 8]> =
            self.waited_row(closed.stream).collect();
        if !self.is_shared(closed.stream) {
            for (t, w) in row {
                self.mark_completed(t, StreamEpoch(w));
            }
        }
    }

    /// X1: `s` is known past every device wait it was ordered by: each
    /// entry of its `waited` row is completed.
    pub(super) fn complete_row(&self, s: StreamId) {
        for (t, w) in self.waited_row(s) {
            self.mark_completed(t, StreamEpoch(w));
        }
    }

    /// R6, R7, X1: `s`'s epochs up to `e` and a packed ordered table read
    /// with them (an event's, or a hand-off's facts) are completed.
    pub(super) fn complete_with_table(&self, s: StreamId, e: StreamEpoch, table: &[u64]) {
        self.mark_completed(s, e);
        for &w in table {
            let (t, w) = unpack(w);
            self.mark_completed(t, StreamEpoch(w));
        }
    }

    /// R5, R14: `task` synchronizes `s`: [`Ledger::begin_stream_sync`], then
    /// `driver_sync` (the driver's synchronize, with no ledger lock held),
    /// then [`Ledger::finish_stream_sync`] if it succeeded. Returns the
    /// epoch the synchronize closed.
    ///
    /// # Errors
    ///
    /// The outer [`LedgerError::SyncWhileCapturing`] if `s` is capturing
    /// (`driver_sync` is not called); the inner `driver_sync`'s error.
    pub fn stream_sync<E>(
        &self,
        task: &Task,
        s: StreamId,
        driver_sync: impl FnOnce() -> Result<(), E>,
    ) -> Result<Result<Closed, E>, LedgerError> {
        let closed = self.begin_stream_sync(task, s)?;
        Ok(driver_sync().map(|()| {
            self.finish_stream_sync(closed);
            closed
        }))
    }
}
