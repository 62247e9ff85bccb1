//! NCCL, the CUDA backend's collectives (DESIGN "Beyond one GPU", [`Collectives`]), through
//! cudarc's raw bindings (`cudarc::nccl::sys`), loaded at run time. Every
//! raw NCCL call of the crate is here; [`crate::nccl`] is the tracked,
//! public side.
//!
//! # The library
//!
//! cudarc panics when `libnccl` cannot be loaded, or when a function is
//! missing from it. [`library`] therefore checks first, with cudarc's own
//! search (`sys::is_culib_present`, the names its loader tries, in the same
//! order), that the library loads, then that it exports every function
//! called here ([`REQUIRED_SYMBOLS`]); each failure is
//! [`Error::NcclUnavailable`]. Every function here calls it first.
//!
//! # NVLink multicast
//!
//! Stays off: [`library`] sets `NCCL_NVLS_ENABLE=0` in the process
//! environment before the first NCCL call (NCCL reads it when it
//! initialises), whatever it was; nothing here calls `cuMulticastCreate`.
//!
//! # Contexts
//!
//! NCCL is a CUDA runtime library: it makes each communicator's device
//! current on the calling thread (`cudaSetDevice`, the device's primary
//! context, which is the one the backend uses). Each call here therefore
//! forgets the thread's bound driver afterwards, so that the backend's next
//! call on this thread binds its own context again.

use super::device::BOUND_DRIVER;
use crate::driver::collective::{Collectives, Comms};
use crate::driver::{CallKind, DataType, Driver, RankCall, ReduceOp};
use crate::error::{Error, Result};
use cudarc::nccl::sys::{self, ncclDataType_t, ncclRedOp_t, ncclResult_t};
use std::ffi::{c_int, c_void, CStr};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// The CUDA backend's collectives: NCCL's communicators.
#[derive(Debug)]
pub(crate) struct Nccl;

impl Collectives for Nccl {
    fn init_all(&self, _driver: &Arc<dyn Driver>, ordinals: &[usize]) -> Result<Box<dyn Comms>> {
        Ok(Box::new(NcclComms(init_all(ordinals)?)))
    }

    fn init_rank(
        &self,
        driver: &Arc<dyn Driver>,
        id: &[u8; 128],
        nranks: usize,
        rank: usize,
    ) -> Result<Box<dyn Comms>> {
        driver.bind_context()?;
        Ok(Box::new(NcclComms(vec![init_rank(id, nranks, rank)?])))
    }
}

/// NCCL's communicators of one communicator, one per local rank, as
/// integers in rank order.
#[derive(Debug)]
struct NcclComms(Vec<u64>);

impl Comms for NcclComms {
    unsafe fn launch(&self, calls: &[RankCall], _timeout: Duration) -> Result<()> {
        // SAFETY: the communicators came from `init_all` or `init_rank`
        // and are live (destroyed only by `destroy`, after every call);
        // the rest is the caller's contract, which is `launch`'s.
        unsafe { launch(&self.0, calls) }
    }

    unsafe fn destroy(&self) {
        // SAFETY: the communicators came from `init_all` or `init_rank`,
        // go once (the caller's contract), and every call on them
        // finished.
        unsafe { destroy(&self.0) }
    }
}

/// Every NCCL function called here, by the name cudarc loads.
pub(crate) const REQUIRED_SYMBOLS: &[&str] = &[
    "ncclGetVersion",
    "ncclGetErrorString",
    "ncclGetUniqueId",
    "ncclCommInitAll",
    "ncclCommInitRank",
    "ncclCommFinalize",
    "ncclCommDestroy",
    "ncclGroupStart",
    "ncclGroupEnd",
    "ncclAllReduce",
    "ncclBroadcast",
    "ncclReduceScatter",
    "ncclAllGather",
    "ncclSend",
    "ncclRecv",
];

/// The variable that turns NVLink multicast (NVLS) on in NCCL.
pub(crate) const NVLS_ENABLE: &str = "NCCL_NVLS_ENABLE";

/// NCCL's version code (`2.28.3` is 22803), once the library is checked;
/// [`Error::NcclUnavailable`] when it is absent or lacks a function called
/// here. Probed once; never panics.
pub(crate) fn library() -> Result<i32> {
    static PROBE: OnceLock<Result<i32, String>> = OnceLock::new();
    PROBE
        .get_or_init(probe)
        .clone()
        .map_err(Error::NcclUnavailable)
}

fn probe() -> Result<i32, String> {
    // Before NCCL reads its environment (at its first call): multicast
    // off, whatever the environment said.
    std::env::set_var(NVLS_ENABLE, "0");
    // SAFETY: loading libnccl runs its initialisers, as cudarc's own
    // loader would; the handle is closed again at once.
    if !unsafe { sys::is_culib_present() } {
        return Err(format!(
            "libnccl could not be loaded (searched for {})",
            cudarc::get_lib_name_candidates("nccl").join(", ")
        ));
    }
    // SAFETY: `is_culib_present` loaded one of the names `culib` tries, in
    // the same order, so `culib` finds a library and does not panic.
    let lib = unsafe { sys::culib() };
    for name in REQUIRED_SYMBOLS {
        // SAFETY: only the symbol's presence is checked; the pointer type
        // is irrelevant and the symbol is never called through it.
        if unsafe { lib.get::<*const c_void>(name.as_bytes()) }.is_err() {
            return Err(format!("libnccl lacks `{name}`; NCCL is too old"));
        }
    }
    let mut version: c_int = 0;
    // SAFETY: the library and the symbol are present; `version` is a valid
    // out-pointer.
    let r = unsafe { sys::ncclGetVersion(&mut version) };
    if r != ncclResult_t::ncclSuccess {
        return Err(format!("ncclGetVersion failed ({})", r as u32));
    }
    Ok(version)
}

/// `Ok` for success, else the error for `r` while `during`.
fn check(r: ncclResult_t, during: &'static str) -> Result<()> {
    if r == ncclResult_t::ncclSuccess {
        return Ok(());
    }
    // SAFETY: `r` came from a call, so the library is loaded and checked
    // (`ncclGetErrorString` among the required functions); it returns a
    // static NUL-terminated string, or null.
    let text = unsafe { sys::ncclGetErrorString(r) };
    let name = if text.is_null() {
        format!("{r:?}")
    } else {
        // SAFETY: non-null: a static NUL-terminated string of NCCL's.
        unsafe { CStr::from_ptr(text) }
            .to_string_lossy()
            .into_owned()
    };
    Err(Error::Nccl {
        code: r as i32,
        name,
        during,
    })
}

/// After a call that may have made another device current (see the
/// module's docs).
fn forget_bound_context() {
    BOUND_DRIVER.set(0);
}

fn rank_int(r: usize, what: &'static str) -> Result<c_int> {
    c_int::try_from(r).map_err(|_| Error::BadCollective {
        call: what,
        problem: format!("rank {r} does not fit NCCL's int"),
    })
}

/// A new unique id for [`init_rank`], as bytes.
///
/// # Errors
///
/// [`Error::NcclUnavailable`]; [`Error::Nccl`].
pub(crate) fn unique_id() -> Result<[u8; 128]> {
    library()?;
    let mut id = sys::ncclUniqueId { internal: [0; 128] };
    // SAFETY: the library is checked; `id` is a valid out-pointer.
    check(unsafe { sys::ncclGetUniqueId(&mut id) }, "ncclGetUniqueId")?;
    Ok(id.internal.map(|c| c as u8))
}

/// One communicator per device of `ordinals`, all of this process
/// (`ncclCommInitAll`), as integers in that order.
///
/// # Errors
///
/// [`Error::NcclUnavailable`]; [`Error::Nccl`].
pub(crate) fn init_all(ordinals: &[usize]) -> Result<Vec<u64>> {
    library()?;
    let devs = ordinals
        .iter()
        .map(|&d| rank_int(d, "creating communicators"))
        .collect::<Result<Vec<c_int>>>()?;
    let n = rank_int(devs.len(), "creating communicators")?;
    let mut comms: Vec<sys::ncclComm_t> = vec![std::ptr::null_mut(); devs.len()];
    // SAFETY: the library is checked; `comms` holds `n` out-slots and
    // `devs` `n` device ordinals, both alive for the call.
    let r = unsafe { sys::ncclCommInitAll(comms.as_mut_ptr(), n, devs.as_ptr()) };
    forget_bound_context();
    check(r, "creating communicators (ncclCommInitAll)")?;
    Ok(comms.into_iter().map(|c| c as usize as u64).collect())
}

/// The communicator of rank `rank` of `nranks` ranks that meet through
/// `id` (`ncclCommInitRank`), on the device current on this thread: bind
/// it first ([`crate::driver::Driver::bind_context`]). Blocks until every
/// rank joined.
///
/// # Errors
///
/// [`Error::NcclUnavailable`]; [`Error::Nccl`].
pub(crate) fn init_rank(id: &[u8; 128], nranks: usize, rank: usize) -> Result<u64> {
    library()?;
    let (n, r) = (
        rank_int(nranks, "creating a communicator")?,
        rank_int(rank, "creating a communicator")?,
    );
    let id = sys::ncclUniqueId {
        internal: id.map(|b| b as std::ffi::c_char),
    };
    let mut comm: sys::ncclComm_t = std::ptr::null_mut();
    // SAFETY: the library is checked; `comm` is a valid out-pointer.
    let res = unsafe { sys::ncclCommInitRank(&mut comm, n, id, r) };
    forget_bound_context();
    check(res, "creating a communicator (ncclCommInitRank)")?;
    Ok(comm as usize as u64)
}

/// Finalizes (in one group, as NCCL asks of communicators one thread
/// drives) and destroys `comms`. Errors are ignored: the caller is a drop.
///
/// # Safety
///
/// `comms` came from [`init_all`] or [`init_rank`], are destroyed once, and
/// no call on them is made after this.
pub(crate) unsafe fn destroy(comms: &[u64]) {
    if library().is_err() {
        return;
    }
    // SAFETY: the library is checked; each communicator is live (the
    // caller's contract) and finalized once.
    unsafe {
        let _ = sys::ncclGroupStart();
        for &c in comms {
            let _ = sys::ncclCommFinalize(c as usize as sys::ncclComm_t);
        }
        let _ = sys::ncclGroupEnd();
        for &c in comms {
            let _ = sys::ncclCommDestroy(c as usize as sys::ncclComm_t);
        }
    }
    forget_bound_context();
}

fn data_type(t: DataType) -> ncclDataType_t {
    match t {
        DataType::F32 => ncclDataType_t::ncclFloat32,
        DataType::F64 => ncclDataType_t::ncclFloat64,
        DataType::I32 => ncclDataType_t::ncclInt32,
        DataType::U32 => ncclDataType_t::ncclUint32,
        DataType::I64 => ncclDataType_t::ncclInt64,
        DataType::U64 => ncclDataType_t::ncclUint64,
        DataType::U8 => ncclDataType_t::ncclUint8,
    }
}

fn red_op(op: ReduceOp) -> ncclRedOp_t {
    match op {
        ReduceOp::Sum => ncclRedOp_t::ncclSum,
        ReduceOp::Prod => ncclRedOp_t::ncclProd,
        ReduceOp::Max => ncclRedOp_t::ncclMax,
        ReduceOp::Min => ncclRedOp_t::ncclMin,
    }
}

/// Issues `calls` in one NCCL group (`ncclGroupStart`, each call on its
/// rank's communicator `comms[call.local]` and stream, `ncclGroupEnd`):
/// NCCL launches them at the group's end, so one thread may drive every
/// device. Returns once they are queued on their streams.
///
/// # Safety
///
/// `comms` are live communicators of [`init_all`] or [`init_rank`]; each
/// call's stream is a live stream of its communicator's device; each
/// call's addresses are live memory of that device for its count of
/// elements of its type, ordered on its stream (handed off to it), and
/// stay alive until the stream reached the call. The calls match across
/// ranks as NCCL requires (every rank calls the same collectives in the
/// same order; each send has its receive).
pub(crate) unsafe fn launch(comms: &[u64], calls: &[RankCall]) -> Result<()> {
    library()?;
    // SAFETY: the library is checked.
    check(unsafe { sys::ncclGroupStart() }, "ncclGroupStart")?;
    let mut first: Result<()> = Ok(());
    for c in calls {
        let comm = comms[c.local] as usize as sys::ncclComm_t;
        let stream = c.stream.0 as usize as sys::cudaStream_t;
        let t = data_type(c.dtype);
        let r = match c.kind {
            CallKind::AllReduce {
                send,
                recv,
                count,
                op,
            } => (
                // SAFETY: the caller's contract: the addresses are live and
                // ordered for their counts on `stream`, a stream of
                // `comm`'s device, until it reached the call (queued at the
                // group's end). So in every arm below.
                unsafe {
                    sys::ncclAllReduce(
                        send as *const c_void,
                        recv as *mut c_void,
                        count,
                        t,
                        red_op(op),
                        comm,
                        stream,
                    )
                },
                "ncclAllReduce",
            ),
            CallKind::Broadcast {
                send,
                recv,
                count,
                root,
            } => (
                // SAFETY: as above.
                unsafe {
                    sys::ncclBroadcast(
                        send as *const c_void,
                        recv as *mut c_void,
                        count,
                        t,
                        rank_int(root, "broadcast")?,
                        comm,
                        stream,
                    )
                },
                "ncclBroadcast",
            ),
            CallKind::ReduceScatter {
                send,
                recv,
                count,
                op,
            } => (
                // SAFETY: as above.
                unsafe {
                    sys::ncclReduceScatter(
                        send as *const c_void,
                        recv as *mut c_void,
                        count,
                        t,
                        red_op(op),
                        comm,
                        stream,
                    )
                },
                "ncclReduceScatter",
            ),
            CallKind::AllGather { send, recv, count } => (
                // SAFETY: as above.
                unsafe {
                    sys::ncclAllGather(
                        send as *const c_void,
                        recv as *mut c_void,
                        count,
                        t,
                        comm,
                        stream,
                    )
                },
                "ncclAllGather",
            ),
            CallKind::Send { buf, count, peer } => (
                // SAFETY: as above.
                unsafe {
                    sys::ncclSend(
                        buf as *const c_void,
                        count,
                        t,
                        rank_int(peer, "send")?,
                        comm,
                        stream,
                    )
                },
                "ncclSend",
            ),
            CallKind::Recv { buf, count, peer } => (
                // SAFETY: as above.
                unsafe {
                    sys::ncclRecv(
                        buf as *mut c_void,
                        count,
                        t,
                        rank_int(peer, "recv")?,
                        comm,
                        stream,
                    )
                },
                "ncclRecv",
            ),
        };
        if first.is_ok() {
            first = check(r.0, r.1);
        }
    }
    // The group is ended whatever failed in it.
    // SAFETY: the library is checked; a group was started above.
    let end = unsafe { sys::ncclGroupEnd() };
    forget_bound_context();
    first?;
    check(end, "ncclGroupEnd (launching the group's calls)")
}

#[cfg(test)]
mod test;
