//! The ledger's stamping (R1, R10): a use of a buffer on a stream, in its
//! current epoch, kept in the buffer's [`Uses`].

use super::*;

impl Ledger {
    #[inline]
    fn current_use(&self, s: StreamId) -> Use {
        let o = self.order(s);
        Use {
            stream: s,
            // Coherence with this task's bind (its RMW, or the mutex) is all a
            // stamp needs (README, "How the R1/R2 race is closed").
            epoch: StreamEpoch(o.epoch.load(Acquire)),
            generation: Generation(o.generation.load(Relaxed)),
        }
    }

    /// R1: stamps a write of the whole on `s`. Call when the operation
    /// takes the pointer and again once it is submitted. Returns `false`
    /// (and stamps nothing) while `s` is capturing: the graph launch stamps
    /// instead (R12).
    #[inline]
    pub fn stamp_write(&self, uses: &mut Uses, s: StreamId) -> bool {
        self.stamp_write_range(uses, WHOLE, s)
    }

    /// R1, X3: stamps a write of `range` on `s` (see [`Uses`] for the
    /// rules): the entries inside `range` go, an entry `(range, this
    /// write)` comes. Stamp only after a hand-off of `range` for a write.
    #[inline]
    pub fn stamp_write_range(&self, uses: &mut Uses, range: Range<usize>, s: StreamId) -> bool {
        if self.is_capturing(s) {
            return false;
        }
        if range.is_empty() {
            // No element: nothing to order.
            return true;
        }
        let u = self.current_use(s);
        if range == WHOLE {
            // A write's hand-off of the whole waited for every stream (see
            // `forget_uses`).
            uses.unknown = false;
        }
        // R10: only a move to another stream ends an escape; raw work
        // through the pointer may still follow on the escape's stream.
        let still_escaped = |e: &Entry| e.escaped && e.writer.is_some_and(|w| w.stream == s);
        if let [e] = uses.entries.as_mut_slice() {
            if contains(&range, &e.range) {
                // The hot path: one entry, rewritten in place.
                e.escaped = still_escaped(e);
                e.range = range;
                e.writer = Some(u);
                e.readers.clear();
                return true;
            }
        }
        let mut escaped = false;
        uses.entries.retain(|e| {
            let inside = contains(&range, &e.range);
            escaped |= inside && still_escaped(e);
            !inside
        });
        uses.entries.push(Entry {
            range,
            writer: Some(u),
            readers: Vec::new(),
            escaped,
        });
        if uses.entries.len() > MAX_ENTRIES {
            Self::coalesce(uses);
        }
        true
    }

    /// R1, X2: stamps a read of the whole on `s` (one reader per stream).
    #[inline]
    pub fn stamp_read(&self, uses: &mut Uses, s: StreamId) -> bool {
        self.stamp_read_range(uses, WHOLE, s)
    }

    /// R1, X2, X3: stamps a read of `range` on `s` (see [`Uses`] for the
    /// rules): in the entry equal to `range`, else a new one, else (the list
    /// full) in the smallest entry holding `range`, else the entries are
    /// coalesced. Stamp only after a hand-off of `range` for a read.
    #[inline]
    pub fn stamp_read_range(&self, uses: &mut Uses, range: Range<usize>, s: StreamId) -> bool {
        if self.is_capturing(s) {
            return false;
        }
        if range.is_empty() {
            return true;
        }
        let u = self.current_use(s);
        for e in uses.entries.iter_mut() {
            if e.escaped && overlaps(&e.range, &range) {
                self.end_escape_by_read(e, s);
            }
        }
        let at = match uses.entries.iter().position(|e| e.range == range) {
            Some(i) => i,
            None if uses.entries.len() < MAX_ENTRIES => {
                uses.entries.push(Entry {
                    range,
                    writer: None,
                    readers: Vec::new(),
                    escaped: false,
                });
                uses.entries.len() - 1
            }
            None => {
                let holding = uses
                    .entries
                    .iter()
                    .enumerate()
                    .filter(|(_, e)| contains(&e.range, &range))
                    .min_by_key(|(_, e)| e.range.end - e.range.start)
                    .map(|(i, _)| i);
                match holding {
                    Some(i) => i,
                    None => {
                        Self::coalesce(uses);
                        return true;
                    }
                }
            }
        };
        let readers = &mut uses.entries[at].readers;
        match readers.iter_mut().find(|r| r.stream == s) {
            Some(r) => *r = u,
            None => readers.push(u),
        }
        true
    }

    /// X3: too many entries: the uses become unknown (every hand-off waits
    /// for every stream, whatever the facts, until a write of the whole),
    /// which orders everything the entries held.
    #[cold]
    fn coalesce(uses: &mut Uses) {
        uses.entries.clear();
        uses.unknown = true;
    }

    /// Stamps `access` of the whole on `s`.
    #[inline]
    pub fn stamp(&self, uses: &mut Uses, s: StreamId, access: Access) -> bool {
        self.stamp_range(uses, WHOLE, s, access)
    }

    /// Stamps `access` of `range` on `s`.
    #[inline]
    pub fn stamp_range(
        &self,
        uses: &mut Uses,
        range: Range<usize>,
        s: StreamId,
        access: Access,
    ) -> bool {
        match access {
            Access::Read => self.stamp_read_range(uses, range, s),
            Access::Write => self.stamp_write_range(uses, range, s),
        }
    }

    /// R10: a read on another stream moves an escaped buffer (its hand-off
    /// waited for everything the escape's stream had queued). Raw writes
    /// through the pointer may have been submitted after the escape's stamp,
    /// unstamped: the writer is restamped with its stream's epoch now, which
    /// no fact covers before a close that follows them.
    #[cold]
    fn end_escape_by_read(&self, e: &mut Entry, s: StreamId) {
        if let Some(w) = &mut e.writer {
            if w.stream != s {
                *w = self.current_use(w.stream);
                e.escaped = false;
            }
        }
    }

    /// R10: a raw pointer leaves the runtime on `s`: stamped once, as a
    /// write of the whole, and marked escaped.
    pub fn escape(&self, uses: &mut Uses, s: StreamId) {
        uses.entries.clear();
        uses.entries.push(Entry {
            range: WHOLE,
            writer: Some(self.current_use(s)),
            readers: Vec::new(),
            escaped: true,
        });
        uses.unknown = false;
    }

    /// X3, DESIGN "Soundness": the uses of a buffer are no longer known: its views may have
    /// been used on any stream and not given back. Until the next write (or
    /// escape) of the whole stamps it, every hand-off of `uses` (of any
    /// range) waits for everything every other stream queued, whatever the
    /// facts; reads and writes of ranges keep it so.
    pub fn forget_uses(&self, uses: &mut Uses) {
        uses.unknown = true;
    }

    /// X3: a split ends without a rejoin (its views dropped): `parent`'s
    /// uses become what each view's uses say of the view's own range, and
    /// what `before` (the parent's uses when it was split) says outside
    /// the views. `views` are the views' ranges in the parent's stamps,
    /// disjoint and covering the split part (the first from 0 and the last
    /// to `usize::MAX` where the parent is split whole), with their uses.
    /// Unknown uses on either side, or more entries than [`MAX_ENTRIES`],
    /// leave `parent` unknown ([`Ledger::forget_uses`]).
    ///
    /// Why this orders every later use as a rejoin's restamp would: each
    /// view's uses keep, for its range, every use made through it (an
    /// entry holding it, or a later write holding it, ordered after it:
    /// see [`Uses`]), and every use of the parent before the split (each
    /// view started with `before`); an entry restricted to the view's
    /// range still holds what was used of that range. Outside the views,
    /// `before`'s entries that reach there are kept whole (at worst a wait
    /// that was not needed).
    pub fn merge_views(&self, parent: &mut Uses, before: &Uses, views: &[(Range<usize>, &Uses)]) {
        if before.unknown || views.iter().any(|(_, v)| v.unknown) {
            parent.unknown = true;
            return;
        }
        let region = views
            .iter()
            .map(|(r, _)| r.clone())
            .reduce(|a, b| a.start.min(b.start)..a.end.max(b.end))
            .unwrap_or(0..0);
        let mut entries: smallvec::SmallVec<[Entry; 1]> = before
            .entries
            .iter()
            .filter(|e| !contains(&region, &e.range))
            .cloned()
            .collect();
        for (r, v) in views {
            for e in &v.entries {
                let range = e.range.start.max(r.start)..e.range.end.min(r.end);
                if range.start < range.end {
                    entries.push(Entry { range, ..e.clone() });
                }
            }
        }
        if entries.len() > MAX_ENTRIES {
            parent.unknown = true;
            return;
        }
        parent.entries = entries;
        parent.unknown = false;
    }
}
