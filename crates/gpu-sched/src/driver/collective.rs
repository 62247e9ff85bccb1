//! The collectives seam (DESIGN "Beyond one GPU"): what a backend does for a communicator, as
//! [`super::Driver::collectives`] hands it out, and the calls it takes (raw
//! addresses, counts and streams, one [`RankCall`] per local rank's part).
//! The CUDA backend hands them to NCCL ([`super::cuda::nccl`]); the host
//! backend runs them with threads ([`super::host::nccl`]). Nothing here
//! tracks anything: [`crate::nccl`] hands the buffers off and stamps them
//! before any call is made.

use super::{Driver, MemAccess, RawStream};
use crate::error::{Error, Result};
use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

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

/// A backend's collectives, handed out by [`Driver::collectives`]: they
/// make the communicators of one [`crate::nccl::Communicator`] ([`Comms`]).
pub(crate) trait Collectives: Sync + Debug {
    /// Communicators over the devices of `ordinals`, rank `d` on
    /// `ordinals[d]`, all in this process (CUDA: `ncclCommInitAll`).
    /// `driver` is the first device's, as the runtime holds it: the host
    /// backend queues every rank's part through it (its devices share one
    /// driver).
    ///
    /// # Errors
    ///
    /// [`Error::NcclUnavailable`] on CUDA without NCCL; [`Error::Nccl`].
    fn init_all(&self, driver: &Arc<dyn Driver>, ordinals: &[usize]) -> Result<Box<dyn Comms>>;

    /// The communicator of rank `rank` of `nranks` ranks that meet through
    /// `id`, on `driver`'s device (CUDA: `ncclCommInitRank`, which returns
    /// once every rank joined).
    ///
    /// # Errors
    ///
    /// [`Error::Unsupported`] on the host backend, whose collectives run
    /// within one process; [`Error::NcclUnavailable`]; [`Error::Nccl`].
    fn init_rank(
        &self,
        driver: &Arc<dyn Driver>,
        id: &[u8; 128],
        nranks: usize,
        rank: usize,
    ) -> Result<Box<dyn Comms>>;
}

/// The communicators of one [`crate::nccl::Communicator`], one per local
/// rank, as a backend made them ([`Collectives`]).
pub(crate) trait Comms: Send + Sync + Debug {
    /// Queues `calls` on their streams, in one group (CUDA: between
    /// `ncclGroupStart` and `ncclGroupEnd`), each on its rank's
    /// communicator `call.local`; returns once they are queued. The host
    /// backend: each part waits at most `timeout` at each meeting with the
    /// others (CUDA: not used).
    ///
    /// # Safety
    ///
    /// Each call's stream is a live stream of its rank's device; each
    /// call's addresses are live memory of that device for its count of
    /// elements of its type, ordered on its stream (handed off to it), and
    /// stay alive until the stream reached the call. The calls match across
    /// ranks as NCCL requires (every rank calls the same collectives in the
    /// same order; each send has its receive).
    ///
    /// # Errors
    ///
    /// Driver errors queuing a part (the host backend: the parts queued
    /// before it do nothing); [`Error::NcclUnavailable`]; [`Error::Nccl`].
    unsafe fn launch(&self, calls: &[RankCall], timeout: Duration) -> Result<()>;

    /// Releases the communicators (CUDA: `ncclCommFinalize` and
    /// `ncclCommDestroy`). Errors are ignored: the caller is a drop.
    ///
    /// # Safety
    ///
    /// Called once; every call queued on them finished, and none is made
    /// after this.
    unsafe fn destroy(&self);
}

/// A new id for [`Collectives::init_rank`], as bytes. NCCL makes it,
/// whatever the backend.
///
/// # Errors
///
/// [`Error::NcclUnavailable`] without NCCL; [`Error::Nccl`].
pub(crate) fn unique_id() -> Result<[u8; 128]> {
    super::cuda::nccl::unique_id()
}

/// [`Error::LengthMismatch`] for `what` unless `got == expected`.
pub(crate) fn same_len(what: &'static str, expected: usize, got: usize) -> Result<()> {
    if got == expected {
        return Ok(());
    }
    Err(Error::LengthMismatch {
        what,
        expected,
        got,
    })
}

/// Pairs each send with its receive, as indices into `calls` (each a
/// local rank, its element type and its part), with every rank local
/// (local rank = rank): the `k`-th send from rank `a` to rank `b` with the
/// `k`-th receive of `b` from `a`, of the same type and length.
///
/// # Errors
///
/// [`Error::BadCollective`] for a send or receive without its partner, or
/// of another type; [`Error::LengthMismatch`].
pub(crate) fn pair_sends(calls: &[(usize, DataType, CallKind)]) -> Result<Vec<(usize, usize)>> {
    use std::collections::{BTreeMap, VecDeque};
    // (receiving rank, sending rank) -> the receives, in order.
    let mut recvs: BTreeMap<(usize, usize), VecDeque<usize>> = BTreeMap::new();
    for (j, &(local, _, kind)) in calls.iter().enumerate() {
        if let CallKind::Recv { peer, .. } = kind {
            recvs.entry((local, peer)).or_default().push_back(j);
        }
    }
    let mut pairs = Vec::new();
    for (i, &(from, dtype, kind)) in calls.iter().enumerate() {
        let CallKind::Send { count, peer, .. } = kind else {
            continue;
        };
        let Some(j) = recvs.get_mut(&(peer, from)).and_then(VecDeque::pop_front) else {
            return Err(Error::BadCollective {
                call: "group",
                problem: format!(
                    "rank {from} sends to rank {peer}, which has no receive from it left \
                     (a send needs a receive in the same group)"
                ),
            });
        };
        let (_, r_dtype, r_kind) = calls[j];
        if r_dtype != dtype {
            return Err(Error::BadCollective {
                call: "group",
                problem: format!(
                    "rank {from} sends {dtype:?} to rank {peer}, which receives {r_dtype:?}"
                ),
            });
        }
        if let CallKind::Recv { count: got, .. } = r_kind {
            same_len("a receive of the group (its send's length)", count, got)?;
        }
        pairs.push((i, j));
    }
    if let Some((&(at, from), _)) = recvs.iter().find(|(_, left)| !left.is_empty()) {
        return Err(Error::BadCollective {
            call: "group",
            problem: format!(
                "rank {at} receives from rank {from}, which sends it nothing more \
                 (a receive needs a send in the same group)"
            ),
        });
    }
    Ok(pairs)
}
