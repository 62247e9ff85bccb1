//! A fixed-size set of streams, so that a hand-off decision never allocates.

use crate::StreamId;

/// The most streams one ledger tracks.
pub const MAX_STREAMS: usize = 256;

/// A set of [`StreamId`]s: a 256-bit bitset, `Copy`, no allocation.
#[derive(Clone, Copy, PartialEq, Eq, Default)]
pub struct StreamSet([u64; MAX_STREAMS / 64]);

impl StreamSet {
    /// The empty set.
    pub const fn new() -> Self {
        StreamSet([0; MAX_STREAMS / 64])
    }

    /// Adds `s`; returns whether it was new.
    #[inline]
    pub fn insert(&mut self, s: StreamId) -> bool {
        let (w, b) = (s.index() / 64, s.index() % 64);
        let new = self.0[w] & (1 << b) == 0;
        self.0[w] |= 1 << b;
        new
    }

    /// Whether `s` is in the set.
    #[inline]
    pub fn contains(&self, s: StreamId) -> bool {
        self.0[s.index() / 64] & (1 << (s.index() % 64)) != 0
    }

    /// Whether the set is empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|w| *w == 0)
    }

    /// How many streams the set holds.
    pub fn len(&self) -> usize {
        self.0.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// The streams, in index order.
    pub fn iter(&self) -> impl Iterator<Item = StreamId> + '_ {
        self.0.iter().enumerate().flat_map(|(w, bits)| {
            let mut bits = *bits;
            std::iter::from_fn(move || {
                if bits == 0 {
                    return None;
                }
                let b = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                Some(StreamId((w * 64 + b) as u16))
            })
        })
    }
}

impl std::fmt::Debug for StreamSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}
