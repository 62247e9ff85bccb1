//! Collectives and point-to-point transfers between devices (DESIGN "Beyond one GPU"): NCCL on
//! the CUDA backend, threads on the host backend, both as tracked
//! operations.
//!
//! A [`Communicator`] has one *rank* per device it spans. Either it spans
//! every device of a runtime's group, all in this process
//! ([`Communicator::all_devices`], `ncclCommInitAll`), or this process holds
//! one rank of many and the other ranks are other processes
//! ([`Communicator::with_id`], `ncclCommInitRank`; the ranks meet through a
//! [`UniqueId`] that one of them makes and the others receive, as bytes,
//! over MPI or any other channel). The ranks of this process are its *local
//! ranks*, in rank order.
//!
//! # Examples
//!
//! An all-reduce over two devices, here the host backend simulating two:
//!
//! ```
//! use gpu_sched::nccl::{Communicator, ReduceOp};
//! use gpu_sched::{BackendChoice, Buffer, Runtime, RuntimeOptions};
//!
//! # fn main() -> gpu_sched::Result<()> {
//! let rt = Runtime::new(RuntimeOptions {
//!     backend: BackendChoice::Host,
//!     host_devices: 2,
//!     ..RuntimeOptions::default()
//! })?;
//! let comm = Communicator::all_devices(&rt)?;
//! // One buffer per device, in rank order: 1s on device 0, 2s on device 1.
//! let mut a = rt.device(0)?.begin_task()?.from_host(&[1.0f32; 4])?;
//! let mut b = rt.device(1)?.begin_task()?.from_host(&[2.0f32; 4])?;
//! comm.all_reduce(&mut [&mut a, &mut b], ReduceOp::Sum)?;
//! // Ordered like a kernel that wrote both: these reads wait for it.
//! assert_eq!(a.to_vec()?, vec![3.0; 4]);
//! assert_eq!(b.to_vec()?, vec![3.0; 4]);
//! # Ok(()) }
//! ```
//!
//! One device per process, the id passed through MPI as bytes (here a
//! stand-in for the broadcast; with rsmpi it is
//! `world.process_at_rank(0).broadcast_into(&mut bytes[..])`):
//!
//! ```no_run
//! use gpu_sched::nccl::{Communicator, ReduceOp, UniqueId};
//! use gpu_sched::Runtime;
//!
//! # fn broadcast_from_rank_0(_: &mut [u8; 128]) {}
//! # fn main() -> gpu_sched::Result<()> {
//! # let (rank, nranks) = (0, 2);
//! let rt = Runtime::global()?.device(0)?; // this process's device
//! let mut bytes = [0u8; 128];
//! if rank == 0 {
//!     bytes = *Communicator::unique_id()?.as_bytes();
//! }
//! broadcast_from_rank_0(&mut bytes); // MPI_Bcast of the 128 bytes
//! // SAFETY: every rank runs this program: the same calls, counts and
//! // types on each.
//! let comm = unsafe { Communicator::with_id(&rt, UniqueId::from_bytes(bytes), rank, nranks)? };
//! let mut x = rt.begin_task()?.from_host(&[rank as f32; 1024])?;
//! comm.all_reduce(&mut [&mut x], ReduceOp::Sum)?; // one buffer: one local rank
//! # Ok(()) }
//! ```
//!
//! # What is tracked
//!
//! Each local rank's part of a call is a tracked operation on the stream of
//! a task the communicator keeps for that rank's device (one task per local
//! rank, alive as long as the communicator, its stream its own: see
//! below): `&` buffers are read and `&mut`
//! buffers written, so the ledger orders a collective like a kernel on each
//! device. Before it runs, every buffer is handed off to its rank's stream
//! (a device wait for an earlier writer, on any device); later users of the
//! buffers wait for it. A buffer (or a view, or a slice of one) must be
//! memory of its rank's device ([`Error::WrongDevice`] otherwise).
//!
//! A rank's operation ends only after every rank is done with that rank's
//! buffers: NCCL's rule that a buffer may be reused once the stream reached
//! the call, kept by the host backend too (below). So the ledger's facts
//! about a rank's stream cover the other ranks' reads of its buffers.
//!
//! # Groups, and one thread for every device
//!
//! Every call is one NCCL group: the parts of all local ranks are issued
//! between `ncclGroupStart` and `ncclGroupEnd`, so one thread drives every
//! device (NCCL hangs without the group). Point-to-point transfers are
//! gathered in [`Communicator::group`]: every send and receive in it is
//! issued in one group. Within a call, every buffer is handed off (and
//! stamped) before any part is queued: a hand-off that records an event on
//! another rank's stream then comes before that rank's part, never after it
//! (which would make the two ranks wait for each other for good).
//! Stamping a part before it is queued teaches the ledger nothing false:
//! the stamps are in their stream's open epoch, about which the ledger
//! takes no fact (an event recorded there meanwhile covers the closed
//! epochs only) until the stream's owner, the communicator's task, closes
//! it, which it does only after the group is queued.
//!
//! The communicator issues its calls one at a time (a lock), so all local
//! ranks see them in the same order. The lock is held only while a call's
//! parts are handed off, stamped and queued, never while the caller's code
//! runs (a [`Communicator::group`]'s closure runs before it is taken): a
//! call from any thread, a task joined inside the communicator's own group
//! included, waits at most for another call to be queued.
//!
//! Calls of two communicators that share devices are ordered only where
//! they share buffers. Each rank's task has a stream of its own, which no
//! other task shares while the communicator lives, even when the pool has
//! no stream left to give (making the communicator is then
//! [`gpu_epoch::LedgerError::TooManyStreams`]): on a shared stream, two
//! communicators' calls made at once could queue their parts in opposite
//! orders on two devices, each waiting on the device for the other's for
//! good. NCCL asks besides that communicators used concurrently on one
//! device not depend on each other's progress; order them (one thread, or
//! a scope) if they could.
//!
//! Not checked: with [`Communicator::with_id`] the other ranks are out of
//! sight, so that every rank makes the same calls with the same counts, and
//! that each send has its receive, is NCCL's rule and the caller's. With
//! [`Communicator::all_devices`] both are checked before anything is queued
//! ([`Error::LengthMismatch`], [`Error::BadCollective`]).
//!
//! # Backends
//!
//! CUDA: NCCL through cudarc, loaded at run time. Without `libnccl` (or with
//! one too old) every call that needs it is [`Error::NcclUnavailable`],
//! never a panic. NVLink multicast stays off: `NCCL_NVLS_ENABLE=0` is set in
//! the process environment before the first NCCL call, whatever it was, and
//! `cuMulticastCreate` is never called.
//!
//! The host backend runs the same calls with threads, for CI: each rank's
//! part is an operation on its stream's thread that waits at a rendezvous
//! until every rank's part reached it, computes its output from every
//! rank's input, waits again (until every rank has read what it needs, so
//! that an in-place all-reduce overwrites nothing another rank still
//! reads), then writes its output. The race detector sees each part's own
//! buffers, as it sees a kernel's. A part waits at the rendezvous at most
//! [`Communicator::set_timeout`] (a minute unless set) for the other ranks':
//! then the call is abandoned and the backend breaks, as a device fault
//! does (every later call, on any device, is
//! [`Error::StickyDeviceError`]), so that no part waits for good and no
//! buffer is left silently unwritten. A communicator across processes
//! ([`Communicator::with_id`]) is [`Error::Unsupported`] on the host
//! backend.
//!
//! Trace spans of these operations are empty: the parts are queued at the
//! group's end, after the span of each was closed.

mod group;
#[cfg(test)]
mod test;

use crate::buffer::{DeviceRepr, DeviceSlice, DeviceSliceMut};
use crate::context::{TaskContext, Touch};
use crate::driver::collective::{self, same_len, Comms};
use crate::driver::{BackendKind, CallKind, DataType, RankCall};
use crate::error::{Error, Result};
use crate::runtime::Runtime;
use parking_lot::Mutex;
use std::any::TypeId;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

pub use crate::driver::ReduceOp;
pub use group::GroupCalls;

/// Element types the collectives move and reduce: `f32`, `f64`, `i32`,
/// `u32`, `i64`, `u64` and `u8`. Sealed: NCCL knows no others.
pub trait NcclType: DeviceRepr + sealed::Sealed {}

mod sealed {
    pub trait Sealed {}
}

macro_rules! nccl_types {
    ($($t:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl NcclType for $t {}
    )*};
}
nccl_types!(f32, f64, i32, u32, i64, u64, u8);

/// NCCL's name for `T`.
fn data_type<T: NcclType>() -> DataType {
    let t = TypeId::of::<T>();
    if t == TypeId::of::<f32>() {
        DataType::F32
    } else if t == TypeId::of::<f64>() {
        DataType::F64
    } else if t == TypeId::of::<i32>() {
        DataType::I32
    } else if t == TypeId::of::<u32>() {
        DataType::U32
    } else if t == TypeId::of::<i64>() {
        DataType::I64
    } else if t == TypeId::of::<u64>() {
        DataType::U64
    } else {
        // The last of the sealed list.
        debug_assert!(t == TypeId::of::<u8>());
        DataType::U8
    }
}

/// The id through which the ranks of a communicator across processes meet
/// ([`Communicator::with_id`]): 128 bytes, made once by one rank
/// ([`Communicator::unique_id`]) and sent to the others as they are.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct UniqueId([u8; 128]);

impl UniqueId {
    /// The bytes, to send to the other ranks.
    pub fn as_bytes(&self) -> &[u8; 128] {
        &self.0
    }

    /// The id whose bytes another rank sent.
    pub fn from_bytes(bytes: [u8; 128]) -> Self {
        UniqueId(bytes)
    }
}

impl std::fmt::Debug for UniqueId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "UniqueId(")?;
        for b in &self.0[..8] {
            write!(f, "{b:02x}")?;
        }
        write!(f, "..)")
    }
}

/// The ranks of a collective communication that this process holds: one
/// per device, each with a task on its device whose stream runs its parts
/// of every call. See the [module](self) for what is tracked and how.
///
/// Calls take one buffer per local rank, in rank order (a slice with one
/// element for a communicator of [`Communicator::with_id`]); buffers may be
/// [`crate::Buffer`]s or views of one type per call (`&mut dyn
/// DeviceSliceMut<T>` mixes them).
pub struct Communicator {
    /// The local ranks' devices, in rank order.
    devices: Vec<Runtime>,
    /// The rank of local rank 0.
    first: usize,
    /// Ranks in all processes.
    nranks: usize,
    backend: BackendKind,
    /// The backend's communicators, one per local rank
    /// ([`crate::driver::Driver::collectives`]).
    comms: Box<dyn Comms>,
    /// One task per local rank, each with a stream of its own, which run
    /// the calls; the lock issues one call at a time, and is held only
    /// while one is handed off, stamped and queued (no caller's code runs
    /// under it).
    contexts: Mutex<Vec<TaskContext>>,
    /// The host backend: how long a part waits at the rendezvous for the
    /// other ranks' (nanoseconds; [`Communicator::set_timeout`]).
    timeout_ns: AtomicU64,
}

/// How long a host part waits for the other ranks' unless
/// [`Communicator::set_timeout`] says otherwise: far beyond any test's
/// wait, short of for good.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

impl std::fmt::Debug for Communicator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Communicator")
            .field("ranks", &(self.first..self.first + self.devices.len()))
            .field("of", &self.nranks)
            .field("backend", &self.backend)
            .finish_non_exhaustive()
    }
}

impl Communicator {
    /// A communicator over every device of `rt`'s group (DESIGN "Beyond one GPU"), rank `d` on
    /// device `d`, all in this process (CUDA: `ncclCommInitAll`).
    ///
    /// # Errors
    ///
    /// [`Error::NcclUnavailable`] on CUDA without NCCL; [`Error::Nccl`];
    /// driver errors opening the devices.
    pub fn all_devices(rt: &Runtime) -> Result<Communicator> {
        let n = rt.device_count();
        let devices = (0..n).map(|d| rt.device(d)).collect::<Result<Vec<_>>>()?;
        let ordinals: Vec<_> = devices.iter().map(Runtime::ordinal).collect();
        let driver = &devices[0].core().driver;
        let comms = driver.collectives().init_all(driver, &ordinals)?;
        Communicator::with_comms(devices, 0, n, comms)
    }

    /// A new id for a communicator across processes
    /// ([`Communicator::with_id`]): one rank makes it and sends its bytes
    /// ([`UniqueId::as_bytes`]) to the others. NCCL makes it, whatever the
    /// backend.
    ///
    /// # Errors
    ///
    /// [`Error::NcclUnavailable`] without NCCL; [`Error::Nccl`].
    pub fn unique_id() -> Result<UniqueId> {
        collective::unique_id().map(UniqueId)
    }

    /// This process's rank `rank` of `nranks` ranks that meet through `id`,
    /// on `rt`'s device (CUDA: `ncclCommInitRank`, which returns once every
    /// rank joined). Its calls take one buffer: this rank's.
    ///
    /// # Safety
    ///
    /// The other ranks are in other processes, where this one cannot check
    /// them (DESIGN "Soundness"): every rank of `id` makes the same calls on its
    /// communicator, in the same order, with the same element type, count
    /// (per rank, for `reduce_scatter` and `all_gather`), operation and root,
    /// and each `send` is matched by a `recv` of the same count and type on
    /// its peer. NCCL does not check this either: a mismatch is undefined
    /// behaviour there (a transfer may write past a buffer, or hang). Within
    /// one process ([`Communicator::all_devices`]) the runtime checks it and
    /// the calls are safe.
    ///
    /// # Errors
    ///
    /// [`Error::BadCollective`] unless `rank < nranks`;
    /// [`Error::Unsupported`] on the host backend, whose collectives run in
    /// one process ([`Communicator::all_devices`]);
    /// [`Error::NcclUnavailable`]; [`Error::Nccl`].
    pub unsafe fn with_id(
        rt: &Runtime,
        id: UniqueId,
        rank: usize,
        nranks: usize,
    ) -> Result<Communicator> {
        if rank >= nranks {
            return Err(Error::BadCollective {
                call: "with_id",
                problem: format!("rank {rank} of {nranks} ranks"),
            });
        }
        let driver = &rt.core().driver;
        let comms = driver
            .collectives()
            .init_rank(driver, &id.0, nranks, rank)?;
        Communicator::with_comms(vec![rt.clone()], rank, nranks, comms)
    }

    fn with_comms(
        devices: Vec<Runtime>,
        first: usize,
        nranks: usize,
        comms: Box<dyn Comms>,
    ) -> Result<Communicator> {
        // Each with a stream of its own from now on (see the module).
        let contexts: Result<Vec<_>> = devices
            .iter()
            .map(|d| {
                let t = d.begin_task()?;
                t.bind_own_stream()?;
                Ok(t)
            })
            .collect();
        let c = Communicator {
            backend: devices[0].backend(),
            devices,
            first,
            nranks,
            comms,
            contexts: Mutex::new(Vec::new()),
            timeout_ns: AtomicU64::new(DEFAULT_TIMEOUT.as_nanos() as u64),
        };
        // Made after `c`, so that its drop destroys the communicators on an
        // error here.
        *c.contexts.lock() = contexts?;
        Ok(c)
    }

    /// Host backend: how long a rank's part of a call waits at the
    /// rendezvous for the other ranks' parts (a minute unless set) before
    /// the call is abandoned and the backend breaks (see the
    /// [module](self)): for calls queued from now on. A part waits while
    /// the other ranks' streams finish the work queued before theirs, so
    /// this bounds that work too. CUDA: not used (NCCL waits as it does).
    pub fn set_timeout(&self, timeout: Duration) {
        let ns = u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX);
        self.timeout_ns.store(ns, Ordering::Relaxed);
    }

    /// How many ranks this process holds.
    pub fn local_ranks(&self) -> usize {
        self.devices.len()
    }

    /// How many ranks there are, in every process.
    pub fn rank_count(&self) -> usize {
        self.nranks
    }

    /// The rank of local rank `local`, if there is one.
    pub fn rank(&self, local: usize) -> Option<usize> {
        (local < self.devices.len()).then_some(self.first + local)
    }

    /// The device of local rank `local`, if there is one.
    pub fn device(&self, local: usize) -> Option<&Runtime> {
        self.devices.get(local)
    }

    /// Whether every rank is in this process: then the calls are checked
    /// across ranks.
    fn all_local(&self) -> bool {
        self.devices.len() == self.nranks
    }

    /// [`Error::BadCollective`] unless there is one buffer per local rank.
    fn check_count(&self, call: &'static str, what: &'static str, n: usize) -> Result<()> {
        if n == self.devices.len() {
            return Ok(());
        }
        Err(Error::BadCollective {
            call,
            problem: format!(
                "{n} {what} for {} local ranks; pass one per local rank, in rank order",
                self.devices.len()
            ),
        })
    }

    /// [`Error::WrongDevice`] unless `b` is memory of local rank `local`'s
    /// device.
    fn check_device<T: DeviceRepr>(
        &self,
        local: usize,
        b: &(impl DeviceSlice<T> + ?Sized),
        what: &'static str,
    ) -> Result<()> {
        self.devices[local].check_same(b.runtime_id(), what)
    }

    /// [`Error::BadCollective`] unless `rank` is a rank.
    fn check_rank(&self, call: &'static str, what: &str, rank: usize) -> Result<()> {
        if rank < self.nranks {
            return Ok(());
        }
        Err(Error::BadCollective {
            call,
            problem: format!("{what} {rank} is not a rank: there are {}", self.nranks),
        })
    }

    /// Issues the parts `build` hands off and stamps, as one group, with
    /// the tasks held: `build` and what it calls run none of the caller's
    /// code (the buffer traits are sealed), so no call can wait for this
    /// one while it holds them.
    fn run(
        &self,
        build: impl FnOnce(&[TaskContext], &mut Vec<RankCall>) -> Result<()>,
    ) -> Result<()> {
        let contexts = self.contexts.lock();
        let mut calls = Vec::with_capacity(contexts.len());
        build(&contexts, &mut calls)?;
        self.launch(&calls)
    }

    /// Queues `calls` (handed off and stamped, their buffers borrowed until
    /// this returns) on their streams, in one group.
    fn launch(&self, calls: &[RankCall]) -> Result<()> {
        if calls.is_empty() {
            return Ok(());
        }
        // A broken device queues nothing, so no other rank waits for it for
        // good.
        for d in &self.devices {
            d.driver().check_sticky()?;
        }
        let timeout = Duration::from_nanos(self.timeout_ns.load(Ordering::Relaxed));
        // SAFETY: each call's stream is its rank's task's, of its
        // communicator's device; its buffers are of that device (checked
        // before), handed off to the stream by `tracked` and still
        // borrowed, and their drops free them only after a hand-off from
        // the stream (X4). Every local rank makes the same calls (one
        // loop over them), checked to match when all ranks are local.
        unsafe { self.comms.launch(calls, timeout) }
    }

    /// Every rank's `bufs` become `op` over all ranks' (in place).
    ///
    /// # Errors
    ///
    /// [`Error::BadCollective`] unless there is one buffer per local rank;
    /// [`Error::WrongDevice`] for a buffer of another device;
    /// [`Error::LengthMismatch`] unless the lengths agree; driver and NCCL
    /// errors.
    pub fn all_reduce<T: NcclType, B: DeviceSliceMut<T> + ?Sized>(
        &self,
        bufs: &mut [&mut B],
        op: ReduceOp,
    ) -> Result<()> {
        self.in_place(
            "all_reduce",
            "a buffer of the all-reduce",
            bufs,
            |p, count| CallKind::AllReduce {
                send: p,
                recv: p,
                count,
                op,
            },
            |_| false,
        )
    }

    /// Every rank's `recv` becomes `op` over all ranks' `send` (out of
    /// place: `send` is only read).
    ///
    /// # Errors
    ///
    /// As [`Communicator::all_reduce`].
    pub fn all_reduce_into<T, S, R>(
        &self,
        send: &[&S],
        recv: &mut [&mut R],
        op: ReduceOp,
    ) -> Result<()>
    where
        T: NcclType,
        S: DeviceSlice<T> + ?Sized,
        R: DeviceSliceMut<T> + ?Sized,
    {
        self.out_of_place(
            "all_reduce_into",
            [
                "a send buffer of the all-reduce",
                "a receive buffer of the all-reduce",
            ],
            (send, recv),
            [1, 1],
            |send, recv, count| CallKind::AllReduce {
                send,
                recv,
                count,
                op,
            },
        )
    }

    /// Every rank's `bufs` become rank `root`'s (in place; the root's is
    /// only read).
    ///
    /// # Errors
    ///
    /// [`Error::BadCollective`] unless `root` is a rank and there is one
    /// buffer per local rank; as [`Communicator::all_reduce`].
    pub fn broadcast<T: NcclType, B: DeviceSliceMut<T> + ?Sized>(
        &self,
        bufs: &mut [&mut B],
        root: usize,
    ) -> Result<()> {
        self.check_rank("broadcast", "the root", root)?;
        self.in_place(
            "broadcast",
            "a buffer of the broadcast",
            bufs,
            |p, count| CallKind::Broadcast {
                send: p,
                recv: p,
                count,
                root,
            },
            |local| self.first + local == root,
        )
    }

    /// Rank `r`'s `recv` becomes `op` over every rank's part `r` of `send`
    /// (its elements `r * n..(r + 1) * n`, `n` the length of `recv`).
    ///
    /// # Errors
    ///
    /// [`Error::LengthMismatch`] unless each `send` holds `rank_count()`
    /// times its `recv`'s elements and (all ranks local) the `recv`s agree;
    /// as [`Communicator::all_reduce`].
    pub fn reduce_scatter<T, S, R>(
        &self,
        send: &[&S],
        recv: &mut [&mut R],
        op: ReduceOp,
    ) -> Result<()>
    where
        T: NcclType,
        S: DeviceSlice<T> + ?Sized,
        R: DeviceSliceMut<T> + ?Sized,
    {
        self.out_of_place(
            "reduce_scatter",
            [
                "a send buffer of the reduce-scatter (ranks × the receive length)",
                "a receive buffer of the reduce-scatter",
            ],
            (send, recv),
            [self.nranks, 1],
            |send, recv, count| CallKind::ReduceScatter {
                send,
                recv,
                count,
                op,
            },
        )
    }

    /// Every rank's `recv` becomes all ranks' `send`, in rank order (rank
    /// `q`'s at elements `q * n..(q + 1) * n`, `n` the length of `send`).
    ///
    /// # Errors
    ///
    /// [`Error::LengthMismatch`] unless each `recv` holds `rank_count()`
    /// times its `send`'s elements and (all ranks local) the `send`s agree;
    /// as [`Communicator::all_reduce`].
    pub fn all_gather<T, S, R>(&self, send: &[&S], recv: &mut [&mut R]) -> Result<()>
    where
        T: NcclType,
        S: DeviceSlice<T> + ?Sized,
        R: DeviceSliceMut<T> + ?Sized,
    {
        self.out_of_place(
            "all_gather",
            [
                "a send buffer of the all-gather",
                "a receive buffer of the all-gather (ranks × the send length)",
            ],
            (send, recv),
            [1, self.nranks],
            |send, recv, count| CallKind::AllGather { send, recv, count },
        )
    }

    /// The body of an in-place collective: one buffer per local rank, all
    /// of one length on their ranks' devices; each rank's part is a
    /// tracked operation that writes its buffer, or only reads it where
    /// `read_only(local)` (a broadcast's root).
    fn in_place<T, B>(
        &self,
        call: &'static str,
        what: &'static str,
        bufs: &mut [&mut B],
        kind: impl Fn(u64, usize) -> CallKind,
        read_only: impl Fn(usize) -> bool,
    ) -> Result<()>
    where
        T: NcclType,
        B: DeviceSliceMut<T> + ?Sized,
    {
        self.check_count(call, "buffers", bufs.len())?;
        let count = bufs[0].len();
        for (local, b) in bufs.iter().enumerate() {
            self.check_device(local, &**b, what)?;
            same_len(what, count, b.len())?;
        }
        let dtype = data_type::<T>();
        self.run(|contexts, calls| {
            for (local, b) in bufs.iter_mut().enumerate() {
                let part = kind(b.device_ptr(), count);
                let t = if read_only(local) {
                    Touch::read(&**b)
                } else {
                    Touch::write(&mut **b)
                };
                issue(&contexts[local], local, dtype, part, &mut [t], calls)?;
            }
            Ok(())
        })
    }

    /// The out-of-place collectives' shared body: one `send` buffer (read)
    /// and one `recv` buffer (written) per local rank, of `times[0]` and
    /// `times[1]` times the call's count of elements (`what` names them in
    /// errors); `kind` makes a rank's part from its buffers' addresses and
    /// the count.
    fn out_of_place<T, S, R>(
        &self,
        call: &'static str,
        what: [&'static str; 2],
        (send, recv): (&[&S], &mut [&mut R]),
        times: [usize; 2],
        kind: impl Fn(u64, u64, usize) -> CallKind,
    ) -> Result<()>
    where
        T: NcclType,
        S: DeviceSlice<T> + ?Sized,
        R: DeviceSliceMut<T> + ?Sized,
    {
        self.check_count(call, "send buffers", send.len())?;
        self.check_count(call, "receive buffers", recv.len())?;
        let count = send[0].len() / times[0];
        for (local, (s, r)) in send.iter().zip(recv.iter()).enumerate() {
            self.check_device(local, *s, what[0])?;
            self.check_device(local, &**r, what[1])?;
            same_len(what[0], count * times[0], s.len())?;
            same_len(what[1], count * times[1], r.len())?;
        }
        let dtype = data_type::<T>();
        self.run(|contexts, calls| {
            for (local, (s, r)) in send.iter().zip(recv.iter_mut()).enumerate() {
                let part = kind(s.device_ptr(), r.device_ptr(), count);
                let t = &mut [Touch::read(*s), Touch::write(&mut **r)];
                issue(&contexts[local], local, dtype, part, t, calls)?;
            }
            Ok(())
        })
    }
}

impl Drop for Communicator {
    fn drop(&mut self) {
        let contexts = self.contexts.get_mut();
        // NCCL's calls finish before their communicators go (errors have
        // no one to go to: the streams' next users see a sticky one).
        for c in contexts.iter().filter(|c| c.has_submitted()) {
            let _ = c.synchronize();
        }
        // SAFETY: the communicators go once, here, and every call on them
        // finished (synchronized above).
        unsafe { self.comms.destroy() };
        // The tasks end, giving their streams back (R13).
        contexts.clear();
    }
}

/// The name of a part, for traces.
fn call_name(kind: &CallKind) -> &'static str {
    match kind {
        CallKind::AllReduce { .. } => "nccl all-reduce",
        CallKind::Broadcast { .. } => "nccl broadcast",
        CallKind::ReduceScatter { .. } => "nccl reduce-scatter",
        CallKind::AllGather { .. } => "nccl all-gather",
        CallKind::Send { .. } => "nccl send",
        CallKind::Recv { .. } => "nccl recv",
    }
}

/// Local rank `local`'s part `kind` as a tracked operation of its task
/// `ctx`: its buffers (`touches`) handed off to the task's stream and
/// stamped, the part added to `calls`, to be queued with the others.
fn issue(
    ctx: &TaskContext,
    local: usize,
    dtype: DataType,
    kind: CallKind,
    touches: &mut [Touch<'_>],
    calls: &mut Vec<RankCall>,
) -> Result<()> {
    // Queued with the group later: no close after it (X6).
    ctx.submitting_later(|| {
        ctx.tracked(call_name(&kind), touches, |mem, stream| {
            calls.push(RankCall {
                local,
                stream,
                dtype,
                kind,
                accesses: mem.iter().copied().collect(),
            });
            Ok(())
        })
    })
}
