//! Collective and point-to-point calls as the backends take them (§11):
//! raw addresses, counts and streams, one [`RankCall`] per local rank's
//! part. The CUDA backend hands them to NCCL ([`super::cuda::nccl`]); the
//! host backend runs them with threads ([`crate::nccl`]'s host module).
//! Nothing here tracks anything: [`crate::nccl`] hands the buffers off and
//! stamps them before any call is made.

use super::{MemAccess, RawStream};

/// How a reduction combines the ranks' elements.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum ReduceOp {
    /// The sum (integers wrap, as NCCL's do).
    Sum,
    /// The product (integers wrap).
    Prod,
    /// The largest.
    Max,
    /// The smallest.
    Min,
}

/// An element type, as NCCL names it.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(crate) enum DataType {
    F32,
    F64,
    I32,
    U32,
    I64,
    U64,
    U8,
}

impl DataType {
    /// Bytes per element.
    pub(crate) fn size(self) -> usize {
        match self {
            DataType::U8 => 1,
            DataType::F32 | DataType::I32 | DataType::U32 => 4,
            DataType::F64 | DataType::I64 | DataType::U64 => 8,
        }
    }
}

/// What one rank does in a call; addresses are of its own device's memory
/// (the host backend: of the process). Counts are elements.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum CallKind {
    /// `recv = op over every rank's send`, `count` elements (`send ==
    /// recv`: in place).
    AllReduce {
        send: u64,
        recv: u64,
        count: usize,
        op: ReduceOp,
    },
    /// `recv = root's send` (`send` is read on the root only; `send ==
    /// recv`: in place).
    Broadcast {
        send: u64,
        recv: u64,
        count: usize,
        root: usize,
    },
    /// Rank `r`'s `recv` (`count` elements) is `op` over every rank's
    /// `send[r * count..(r + 1) * count]`.
    ReduceScatter {
        send: u64,
        recv: u64,
        count: usize,
        op: ReduceOp,
    },
    /// `recv[q * count..(q + 1) * count]` is rank `q`'s `send` (`count`
    /// elements).
    AllGather { send: u64, recv: u64, count: usize },
    /// `count` elements of `buf` to rank `peer`.
    Send { buf: u64, count: usize, peer: usize },
    /// `count` elements from rank `peer` into `buf`.
    Recv { buf: u64, count: usize, peer: usize },
}

/// One rank's part of a call: the kind, on the stream of the rank's task,
/// with what it touches of its own buffers (for the host backend's race
/// detector).
#[derive(Clone, Debug)]
pub(crate) struct RankCall {
    /// The local rank (its place in the communicator's local ranks).
    pub(crate) local: usize,
    pub(crate) stream: RawStream,
    pub(crate) dtype: DataType,
    pub(crate) kind: CallKind,
    pub(crate) accesses: smallvec::SmallVec<[MemAccess; 2]>,
}
