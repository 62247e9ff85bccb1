//! The host backend's collectives ([`Collectives`]): each rank's part is an
//! operation on its stream's thread, and the parts of one call meet at a
//! rendezvous (see [`crate::nccl`]'s Backends).
//!
//! Rank `r`'s part arrives at the rendezvous once its stream reached it,
//! so every rank's inputs are written; it waits for the others, reads what
//! it needs of every rank's inputs into temporaries, arrives a second time,
//! and once every rank has read, writes its outputs from the temporaries.
//! So no rank overwrites what another still reads (an in-place all-reduce),
//! and a rank's part ends only after every rank is done with its buffers.
//!
//! The parts of a call are queued on different streams by the one call that
//! makes them all, before it returns, each on a stream no other task shares
//! (the communicator's): each waits only for the others, which all come
//! once their streams finished what was queued before them. If queuing one
//! fails, the rendezvous is abandoned and the parts queued go through
//! without doing anything; so do they when the backend breaks (a kernel's
//! fault), which may skip a part. And a part that waited its timeout for
//! the others (which should never come to pass) abandons the call and
//! breaks the backend, as a kernel's fault does, rather than wait for good:
//! every later use of any device is an error, not a read of a buffer the
//! call left unwritten.

use crate::driver::collective::{pair_sends, Collectives, Comms};
use crate::driver::{CallKind, DataType, Driver, MemAccess, RankCall, ReduceOp};
use crate::error::{Error, Result};
use parking_lot::{Condvar, Mutex};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The host backend's collectives: communicators that are the driver
/// alone (the ranks meet at each call's rendezvous).
#[derive(Debug)]
pub(crate) struct HostCollectives;

impl Collectives for HostCollectives {
    fn init_all(&self, driver: &Arc<dyn Driver>, _ordinals: &[usize]) -> Result<Box<dyn Comms>> {
        Ok(Box::new(HostComms {
            driver: driver.clone(),
        }))
    }

    fn init_rank(
        &self,
        _driver: &Arc<dyn Driver>,
        _id: &[u8; 128],
        _nranks: usize,
        _rank: usize,
    ) -> Result<Box<dyn Comms>> {
        Err(Error::Unsupported(
            "a communicator across processes on the host backend (its collectives run \
             within one process: Communicator::all_devices)",
        ))
    }
}

/// A communicator of the host backend: the driver its devices share,
/// through which every rank's part is queued.
#[derive(Debug)]
struct HostComms {
    driver: Arc<dyn Driver>,
}

impl Comms for HostComms {
    unsafe fn launch(&self, calls: &[RankCall], timeout: Duration) -> Result<()> {
        launch(&self.driver, calls, timeout)
    }

    unsafe fn destroy(&self) {}
}

/// How often a rank waiting at the rendezvous checks whether it was
/// abandoned or the backend broke.
const POLL: Duration = Duration::from_millis(5);

/// One output of a rank's part: computed from any rank's memory, then
/// written to the rank's own.
#[derive(Debug)]
enum Part {
    /// `bytes` from `src` to `dst`.
    Copy { dst: u64, src: u64, bytes: usize },
    /// `count` elements at `dst` become `op` over those at each of `srcs`.
    Reduce {
        dst: u64,
        srcs: Vec<u64>,
        count: usize,
        dtype: DataType,
        op: ReduceOp,
    },
}

/// Where the parts of one call meet: twice, each time until every rank
/// arrived.
struct Rendezvous {
    ranks: usize,
    arrived: Mutex<[usize; 2]>,
    cv: Condvar,
    abandoned: AtomicBool,
    driver: Arc<dyn Driver>,
    /// How long a rank waits for the others at each meeting.
    timeout: Duration,
}

/// How a rank's wait at the rendezvous ended.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Met {
    /// Every rank arrived.
    All,
    /// The call was abandoned or the backend broke meanwhile.
    Abandoned,
    /// The others did not come within the timeout: the call is abandoned
    /// now.
    TimedOut,
}

impl Rendezvous {
    /// Arrives at `phase` and waits for every rank, at most the timeout.
    fn arrive(&self, phase: usize) -> Met {
        let deadline = Instant::now().checked_add(self.timeout);
        let mut n = self.arrived.lock();
        n[phase] += 1;
        if n[phase] == self.ranks {
            self.cv.notify_all();
        }
        loop {
            // Abandoned first: a rank that comes after another gave up
            // reads nothing of the others' (their streams go on).
            if self.abandoned.load(Ordering::Acquire) || self.driver.check_sticky().is_err() {
                return Met::Abandoned;
            }
            if n[phase] >= self.ranks {
                return Met::All;
            }
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                // Under the lock, so that every rank arriving later sees it.
                self.abandoned.store(true, Ordering::Release);
                self.cv.notify_all();
                return Met::TimedOut;
            }
            let left = deadline.map_or(POLL, |d| d - now);
            self.cv.wait_for(&mut n, left.min(POLL));
        }
    }

    fn abandon(&self) {
        self.abandoned.store(true, Ordering::Release);
        let _n = self.arrived.lock();
        self.cv.notify_all();
    }
}

/// One rank's part of a call: its local rank and stream, what it writes,
/// and the accesses to its own buffers (for the race detector).
struct RankPart {
    local: usize,
    stream: crate::driver::RawStream,
    parts: Vec<Part>,
    accesses: Vec<MemAccess>,
}

/// Queues `calls` (every rank local; handed off and stamped, their buffers
/// borrowed until this returns) on their streams of `driver` (the host
/// backend's); each part waits at most `timeout` at each meeting with the
/// others.
///
/// # Errors
///
/// Errors of pairing sends and receives (checked before, so none); driver
/// errors queuing a part (the parts queued before it do nothing).
pub(crate) fn launch(
    driver: &Arc<dyn Driver>,
    calls: &[RankCall],
    timeout: Duration,
) -> Result<()> {
    let ranks = plan(calls)?;
    let rv = Arc::new(Rendezvous {
        ranks: ranks.len(),
        arrived: Mutex::new([0; 2]),
        cv: Condvar::new(),
        abandoned: AtomicBool::new(false),
        driver: driver.clone(),
        timeout,
    });
    for rank in ranks {
        let (rv2, parts, local) = (rv.clone(), rank.parts, rank.local);
        let body: Arc<dyn Fn() + Send + Sync> = Arc::new(move || run(&rv2, local, &parts));
        // SAFETY: the memory `body` touches is the buffers of this call's
        // ranks, each borrowed by the caller until this returns and freed
        // only after a hand-off from its rank's stream (X4), which is after
        // that rank's part ended, which is after every rank is done with it
        // (the second rendezvous). Its own outputs are listed in
        // `accesses` and were handed off to this stream; the other ranks'
        // inputs it reads after the first rendezvous (every rank's stream
        // reached its part: their writers, handed off before, are done)
        // and before the second (no rank writes its outputs before it).
        if let Err(e) = unsafe { driver.host_op(rank.stream, body, &rank.accesses) } {
            rv.abandon();
            return Err(e);
        }
    }
    Ok(())
}

/// Local rank `local`'s part of a collective or of a group of sends and
/// receives.
fn run(rv: &Rendezvous, local: usize, parts: &[Part]) {
    if !met(rv, 0, local) {
        return;
    }
    // SAFETY: after the first rendezvous, before the second: see `launch`.
    let temps: Vec<Vec<u8>> = parts.iter().map(|p| unsafe { read(p) }).collect();
    if !met(rv, 1, local) {
        return;
    }
    for (p, t) in parts.iter().zip(&temps) {
        let dst = match *p {
            Part::Copy { dst, .. } | Part::Reduce { dst, .. } => dst,
        };
        // SAFETY: `dst` is this rank's output, live and ordered on its
        // stream, for `t.len()` bytes (the part's size); no rank reads it
        // any more (all passed the second rendezvous).
        unsafe { std::ptr::copy_nonoverlapping(t.as_ptr(), dst as *mut u8, t.len()) };
    }
}

/// Whether every rank met local rank `local`'s part at `phase`. If they did
/// not come within the timeout, breaks the backend: the part unwinds with
/// its message, which the host backend takes as a kernel's fault (its
/// sticky error; `resume_unwind`, so no panic hook prints it).
fn met(rv: &Rendezvous, phase: usize, local: usize) -> bool {
    match rv.arrive(phase) {
        Met::All => true,
        Met::Abandoned => false,
        Met::TimedOut => std::panic::resume_unwind(Box::new(format!(
            "a collective's rank {local} waited {:?} for the other ranks' parts, which \
             never came; the call is abandoned (Communicator::set_timeout)",
            rv.timeout
        ))),
    }
}

/// What `p` writes, as bytes.
///
/// # Safety
///
/// Its sources are live and written, and nobody writes them meanwhile.
unsafe fn read(p: &Part) -> Vec<u8> {
    match *p {
        Part::Copy { src, bytes, .. } => {
            let mut v = vec![0u8; bytes];
            // SAFETY: the caller's contract, for `bytes` at `src`.
            unsafe { std::ptr::copy_nonoverlapping(src as *const u8, v.as_mut_ptr(), bytes) };
            v
        }
        Part::Reduce {
            ref srcs,
            count,
            dtype,
            op,
            ..
        } => {
            // SAFETY: the caller's contract, for `count` elements of
            // `dtype` at each source.
            unsafe {
                match dtype {
                    DataType::F32 => reduce::<f32>(srcs, count, op),
                    DataType::F64 => reduce::<f64>(srcs, count, op),
                    DataType::I32 => reduce::<i32>(srcs, count, op),
                    DataType::U32 => reduce::<u32>(srcs, count, op),
                    DataType::I64 => reduce::<i64>(srcs, count, op),
                    DataType::U64 => reduce::<u64>(srcs, count, op),
                    DataType::U8 => reduce::<u8>(srcs, count, op),
                }
            }
        }
    }
}

/// Arithmetic of the element types, as NCCL's (integers wrap).
trait Elem: Copy + Default + PartialOrd {
    fn add(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
}

macro_rules! elem {
    (float $($t:ty),*) => {$(
        impl Elem for $t {
            fn add(self, o: Self) -> Self { self + o }
            fn mul(self, o: Self) -> Self { self * o }
        }
    )*};
    (int $($t:ty),*) => {$(
        impl Elem for $t {
            fn add(self, o: Self) -> Self { self.wrapping_add(o) }
            fn mul(self, o: Self) -> Self { self.wrapping_mul(o) }
        }
    )*};
}
elem!(float f32, f64);
elem!(int i32, u32, i64, u64, u8);

fn combine<T: Elem>(op: ReduceOp, a: T, b: T) -> T {
    match op {
        ReduceOp::Sum => a.add(b),
        ReduceOp::Prod => a.mul(b),
        ReduceOp::Max => {
            if b > a {
                b
            } else {
                a
            }
        }
        ReduceOp::Min => {
            if b < a {
                b
            } else {
                a
            }
        }
    }
}

/// `count` elements at `src` (of any alignment).
///
/// # Safety
///
/// `src` is readable for `count` elements of `T`, a plain number type.
unsafe fn load<T: Elem>(src: u64, count: usize) -> Vec<T> {
    let mut v = vec![T::default(); count];
    // SAFETY: the caller's contract; `v` holds `count` elements.
    unsafe {
        std::ptr::copy_nonoverlapping(
            src as *const u8,
            v.as_mut_ptr().cast::<u8>(),
            count * std::mem::size_of::<T>(),
        )
    };
    v
}

/// `op` over `count` elements at each of `srcs`, as bytes.
///
/// # Safety
///
/// As [`load`], for each source.
unsafe fn reduce<T: Elem>(srcs: &[u64], count: usize, op: ReduceOp) -> Vec<u8> {
    let Some((&first, rest)) = srcs.split_first() else {
        return Vec::new();
    };
    // SAFETY: the caller's contract.
    let mut acc = unsafe { load::<T>(first, count) };
    for &s in rest {
        // SAFETY: the caller's contract.
        let x = unsafe { load::<T>(s, count) };
        for (a, b) in acc.iter_mut().zip(x) {
            *a = combine(op, *a, b);
        }
    }
    let bytes = count * std::mem::size_of::<T>();
    let mut out = vec![0u8; bytes];
    // SAFETY: `acc` holds `bytes` of plain numbers; `out` has room for
    // them.
    unsafe { std::ptr::copy_nonoverlapping(acc.as_ptr().cast::<u8>(), out.as_mut_ptr(), bytes) };
    out
}

/// Each participating rank's part of `calls`, in rank order. A collective
/// has one call per rank, in rank order; a group has sends and receives.
fn plan(calls: &[RankCall]) -> Result<Vec<RankPart>> {
    let mut by_rank: BTreeMap<usize, RankPart> = BTreeMap::new();
    for c in calls {
        let r = by_rank.entry(c.local).or_insert_with(|| RankPart {
            local: c.local,
            stream: c.stream,
            parts: Vec::new(),
            accesses: Vec::new(),
        });
        r.accesses.extend_from_slice(&c.accesses);
    }
    // The send buffer of rank `q`'s call (collectives).
    let send_of = |q: usize| match calls[q].kind {
        CallKind::AllReduce { send, .. }
        | CallKind::Broadcast { send, .. }
        | CallKind::ReduceScatter { send, .. }
        | CallKind::AllGather { send, .. } => send,
        CallKind::Send { buf, .. } | CallKind::Recv { buf, .. } => buf,
    };
    let n = calls.len();
    for (r, c) in calls.iter().enumerate() {
        let size = c.dtype.size();
        let part = |parts: &mut BTreeMap<usize, RankPart>, p: Part| {
            parts.get_mut(&c.local).expect("every rank").parts.push(p)
        };
        match c.kind {
            CallKind::AllReduce {
                recv, count, op, ..
            } => part(
                &mut by_rank,
                Part::Reduce {
                    dst: recv,
                    srcs: (0..n).map(send_of).collect(),
                    count,
                    dtype: c.dtype,
                    op,
                },
            ),
            CallKind::Broadcast {
                recv, count, root, ..
            } => {
                let src = send_of(root);
                if src != recv {
                    part(
                        &mut by_rank,
                        Part::Copy {
                            dst: recv,
                            src,
                            bytes: count * size,
                        },
                    )
                }
            }
            CallKind::ReduceScatter {
                recv, count, op, ..
            } => part(
                &mut by_rank,
                Part::Reduce {
                    dst: recv,
                    srcs: (0..n)
                        .map(|q| send_of(q) + (r * count * size) as u64)
                        .collect(),
                    count,
                    dtype: c.dtype,
                    op,
                },
            ),
            CallKind::AllGather { recv, count, .. } => {
                for q in 0..n {
                    part(
                        &mut by_rank,
                        Part::Copy {
                            dst: recv + (q * count * size) as u64,
                            src: send_of(q),
                            bytes: count * size,
                        },
                    )
                }
            }
            CallKind::Send { .. } | CallKind::Recv { .. } => {}
        }
    }
    let kinds: Vec<_> = calls.iter().map(|c| (c.local, c.dtype, c.kind)).collect();
    for (i, j) in pair_sends(&kinds)? {
        if let (
            CallKind::Send {
                buf: src, count, ..
            },
            CallKind::Recv { buf: dst, .. },
        ) = (calls[i].kind, calls[j].kind)
        {
            let bytes = count * calls[i].dtype.size();
            by_rank
                .get_mut(&calls[j].local)
                .expect("every rank")
                .parts
                .push(Part::Copy { dst, src, bytes });
        }
    }
    Ok(by_rank.into_values().collect())
}
