//! A graphed scope's recording (DESIGN "Graphs without capture by hand"):
//! its operations as nodes, each with the key that names it from one run
//! to the next and the operations it follows, kept in shards while the
//! scope's tasks record them.

use crate::driver::NodeOp;
use crate::error::{Error, Result};
use parking_lot::Mutex;
use std::sync::atomic::Ordering;

/// A graphed scope's operations as recorded: operation `i` (the `i`-th
/// submitted) with its task's key and its index in its task (which name it
/// from one run to the next), and the operations it follows (indices of
/// earlier ones). Kept where the shards left them (an operation is a few
/// hundred bytes, B13 records 30,046): `pos` finds each.
pub(crate) struct Recording {
    items: Vec<Recorded>,
    /// `items[pos[i]]` is operation `i`.
    pos: Vec<u32>,
}

impl Recording {
    /// How many operations.
    pub(crate) fn len(&self) -> usize {
        self.pos.len()
    }

    /// Operation `i`'s key.
    pub(crate) fn key(&self, i: u32) -> (u64, u32) {
        self.at(i).key
    }

    /// Operation `i`.
    pub(crate) fn op(&self, i: u32) -> &NodeOp {
        &self.at(i).op
    }

    /// The operations `i` follows.
    pub(crate) fn deps(&self, i: u32) -> &[u32] {
        &self.at(i).deps
    }

    /// Operation `i`, taken out (an empty fill is left in its place).
    pub(crate) fn take_op(&mut self, i: u32) -> NodeOp {
        let p = self.pos[i as usize] as usize;
        let none = NodeOp::Memset {
            dst: 0,
            value: 0,
            count: 0,
        };
        std::mem::replace(&mut self.items[p].op, none)
    }

    fn at(&self, i: u32) -> &Recorded {
        &self.items[self.pos[i as usize] as usize]
    }

    /// Its storage, emptied, for the next run's recording to fill without
    /// growing it again ([`Shards::with_spare`]).
    pub(crate) fn into_spare(self) -> Vec<Recorded> {
        let mut items = self.items;
        items.clear();
        items
    }
}

/// One recorded operation of a graphed scope, with its index in the
/// recording.
pub(crate) struct Recorded {
    pub(super) i: u32,
    pub(super) key: (u64, u32),
    pub(super) op: NodeOp,
    pub(super) deps: smallvec::SmallVec<[u32; 4]>,
}

/// Where a graphed scope's recorded operations are kept: shards, each
/// thread pushing to one of its own (mostly), so that the capture's lock is
/// held only to order the operation (R14: short).
pub(super) struct Shards(Box<[Mutex<Vec<Recorded>>]>);

impl Shards {
    const COUNT: usize = 32;

    /// Shards, the calling thread's holding `spare` (empty): a serial
    /// graphed scope's thread records everything there, so the storage of
    /// the last run's recording ([`Recording::into_spare`]) is reused as
    /// it is, neither grown nor copied.
    pub(super) fn with_spare(spare: Vec<Recorded>) -> Self {
        debug_assert!(spare.is_empty());
        let shards = Shards((0..Self::COUNT).map(|_| Mutex::new(Vec::new())).collect());
        *shards.mine().lock() = spare;
        shards
    }

    /// The calling thread's shard.
    fn mine(&self) -> &Mutex<Vec<Recorded>> {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        thread_local! {
            static SHARD: usize = NEXT.fetch_add(1, Ordering::Relaxed);
        }
        &self.0[SHARD.with(|s| *s) % Self::COUNT]
    }

    /// Keeps `r`, in the calling thread's shard.
    pub(super) fn push(&self, r: Recorded) {
        self.mine().lock().push(r);
    }

    /// The `n` operations numbered so far, taken.
    ///
    /// # Errors
    ///
    /// [`Error::CaptureEnded`] if one is missing: numbered but not pushed
    /// (by a task kept past the scope, in flight when it ended).
    pub(super) fn take(&self, n: usize) -> Result<Recording> {
        let full: Vec<&Mutex<Vec<Recorded>>> =
            self.0.iter().filter(|s| !s.lock().is_empty()).collect();
        let items = if let [one] = full[..] {
            // One thread recorded (a serial scope): its shard as it is.
            std::mem::take(&mut *one.lock())
        } else {
            let mut items = Vec::with_capacity(n);
            for shard in full {
                items.append(&mut shard.lock());
            }
            items
        };
        // An operation numbered but not pushed leaves a hole.
        let mut pos = vec![u32::MAX; n];
        for (p, r) in items.iter().enumerate() {
            match pos.get_mut(r.i as usize) {
                Some(slot) => *slot = p as u32,
                None => return Err(Error::CaptureEnded),
            }
        }
        if pos.contains(&u32::MAX) {
            return Err(Error::CaptureEnded);
        }
        Ok(Recording { items, pos })
    }
}
