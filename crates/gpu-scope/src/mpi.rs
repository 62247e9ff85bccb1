//! MPI for device buffers (the `mpi` cargo feature), through rsmpi (the
//! `mpi` crate, re-exported as [`rsmpi`]).
//!
//! A task hands a buffer to MPI and goes on; the rest of the program's GPU
//! work goes on without it. This is the seed's scenario (DESIGN "Beyond one GPU"): a rank's
//! boundary goes to its neighbours while its interior is still being
//! computed.
//!
//! ```no_run
//! use gpu::mpi::rsmpi::{self, topology::Communicator};
//! use gpu_kernels as k;
//!
//! fn main() -> gpu::Result<()> {
//!     // Tasks run on worker threads: MPI must allow calls from any thread.
//!     let (universe, _) =
//!         rsmpi::initialize_with_threading(rsmpi::Threading::Multiple).expect("MPI starts");
//!     let world = gpu::mpi::SharedComm::new(universe.world())?; // tasks may share it
//!     let (rank, size) = (world.rank(), world.size());
//!     let mut boundary = gpu::Buffer::<f32>::zeros(1024)?;
//!     let mut halo = gpu::Buffer::<f32>::zeros(1024)?;
//!     let mut interior = gpu::Buffer::<f32>::zeros(1 << 24)?;
//!     gpu::scope(|s| {
//!         k::fill(s, &mut boundary, rank as f32)?; // the boundary's producer
//!         s.spawn(|t| {
//!             let right = world.process_at_rank((rank + 1) % size);
//!             let left = world.process_at_rank((rank + size - 1) % size);
//!             // waits for the fill above, not for the interior below
//!             gpu::mpi::sendrecv(t, &boundary, &right, &mut halo, &left, 0)
//!         });
//!         k::scale(s, &mut interior, 0.5) // runs on meanwhile
//!     })?;
//!     Ok(())
//! }
//! ```
//!
//! # What a transfer waits for
//!
//! Only for the buffer's producers, and the calling task's own work (R11):
//! the buffer is handed to the calling task's stream as a tracked operation
//! hands it, then that one stream is synchronized
//! ([`TaskContext::host_sync_ptr_read`] for what MPI reads,
//! [`TaskContext::host_sync_ptr`] for what it writes). Where the task is
//! already ordered after the producers (they came before its spawn, or
//! before an event it waited for, or the host saw them finish), the
//! hand-off waits for nothing; otherwise it is a device wait on the
//! producer's stream, for what that stream had queued by then. Neither the
//! device nor the spawning task's stream is synchronized: work queued after
//! the producers (the interior, above) runs on, before, during and after
//! the transfer. Each function returns once MPI is done with the buffer
//! (MPI's blocking calls); a received buffer is then ordered like any
//! written one: later work on it waits for this task's stream, nothing
//! else.
//!
//! # Device pointers or staging
//!
//! [`path`] says how a buffer reaches MPI, checked at run time:
//!
//! - [`Path::Direct`]: MPI gets the buffer's address. On the host backend
//!   "device" memory is host memory, so the address is always usable. On
//!   CUDA only where the MPI library says it is CUDA-aware ([`cuda_aware`]:
//!   Open MPI's `MPIX_Query_cuda_support()`, looked up with `dlsym` when
//!   first asked, so the build never depends on `mpi-ext.h` or a CUDA
//!   build of MPI).
//! - [`Path::Staged`] (CUDA without a CUDA-aware MPI, which is Open MPI's
//!   default: `opal_cuda_support = false`): through page-locked host memory
//!   ([`Staging`], from the runtime's cache). A send copies the buffer into
//!   it (a tracked read on the task's stream), waits for that copy, and
//!   hands MPI the host copy; a receive has MPI write into it, then copies
//!   it into the buffer (a tracked write) and waits for that copy.
//!
//! `GPU_MPI_STAGING=1` in the environment forces staging (read once): for
//! testing the staged path on the host backend, and for a CUDA-aware MPI
//! whose direct path fails (Open MPI's CUDA IPC between ranks of one node
//! may refuse memory from the stream-ordered allocator, `cuMemAllocAsync`,
//! which is where this runtime allocates).
//!
//! # MPI's rules that still apply
//!
//! - Threads: tasks run on worker threads, so initialize MPI with
//!   [`rsmpi::Threading::Multiple`], and hand tasks the communicator as a
//!   [`SharedComm`], which checks that level (with Open MPI, rsmpi's
//!   communicators are neither `Send` nor `Sync`: whether MPI may be
//!   called from several threads is only known at run time).
//! - Errors: rsmpi leaves MPI's default error handler in place,
//!   `MPI_ERRORS_ARE_FATAL`: an MPI failure (a message longer than the
//!   receiving buffer, a dead peer) aborts the job and never returns here.
//!   The errors these functions return are the runtime's (driver errors,
//!   a buffer of another runtime) and the length checks below.
//! - Matching: sends and receives pair up as MPI pairs them (ranks, tags,
//!   order); a blocking send to a rank that never receives blocks the task,
//!   and the scope waits for it. A collective must be called by every rank
//!   of the communicator.

use ::mpi::collective::{CommunicatorCollectives, SystemOperation};
use ::mpi::datatype::{
    AsDatatype, Buffer as MpiBuffer, BufferMut as MpiBufferMut, Collection, Equivalence, Pointer,
    PointerMut,
};
use ::mpi::point_to_point::{send_receive_into_with_tags, Destination, Source, Status};
use ::mpi::topology::{Communicator, SimpleCommunicator};
use ::mpi::{Count, Tag, Threading};
use gpu_sched::{
    BackendKind, DeviceRepr, DeviceSlice, DeviceSliceMut, Error, Result, Runtime, Staging,
    TaskContext,
};
use std::ffi::{c_int, c_void};
use std::sync::OnceLock;

/// The rsmpi crate this module is built with (`mpi` 0.8): initialize MPI
/// and name ranks and communicators with it.
pub use ::mpi as rsmpi;

/// An MPI communicator that spawned tasks may share: rsmpi's
/// [`SimpleCommunicator`], checked to be usable from any thread at once
/// (MPI initialized with [`Threading::Multiple`]). It dereferences to the
/// communicator: name ranks with `process_at_rank` inside the task.
///
/// MPI's rules for threads still hold: collectives on one communicator
/// must come in the same order on every rank, so two tasks must not run
/// collectives on one communicator at once (give each its own,
/// `duplicate()`), and concurrent receives from one rank with one tag
/// match in no set order (use tags).
pub struct SharedComm(SimpleCommunicator);

// SAFETY: MPI was initialized with `MPI_THREAD_MULTIPLE` (checked in
// `new`, the only constructor), under which MPI allows any thread to call
// it, at the same time as others, with any communicator; a
// `SimpleCommunicator` is only MPI's handle (no Rust state shared behind
// it), and dropping it on another thread (`MPI_Comm_free`) is such a call.
unsafe impl Send for SharedComm {}
// SAFETY: as above: shared use is concurrent MPI calls on one handle,
// which `MPI_THREAD_MULTIPLE` allows.
unsafe impl Sync for SharedComm {}

impl SharedComm {
    /// Wraps `comm` for tasks to share.
    ///
    /// # Errors
    ///
    /// [`Error::Unsupported`] unless MPI is initialized (and not finalized)
    /// with [`Threading::Multiple`].
    pub fn new(comm: SimpleCommunicator) -> Result<Self> {
        let live = ::mpi::environment::is_initialized() && !::mpi::environment::is_finalized();
        if !live || ::mpi::environment::threading_support() != Threading::Multiple {
            return Err(Error::Unsupported(
                "sharing an MPI communicator between tasks: initialize MPI with Threading::Multiple",
            ));
        }
        Ok(SharedComm(comm))
    }

    /// Gives the communicator back.
    pub fn into_inner(self) -> SimpleCommunicator {
        self.0
    }
}

impl std::ops::Deref for SharedComm {
    type Target = SimpleCommunicator;
    fn deref(&self) -> &SimpleCommunicator {
        &self.0
    }
}

impl std::fmt::Debug for SharedComm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedComm")
            .field("rank", &self.0.rank())
            .field("size", &self.0.size())
            .finish()
    }
}

/// How a device buffer's elements reach MPI ([`path`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Path {
    /// MPI gets the buffer's address: the host backend, or CUDA with a
    /// CUDA-aware MPI.
    Direct,
    /// Through page-locked host memory: CUDA without a CUDA-aware MPI, or
    /// `GPU_MPI_STAGING=1`.
    Staged,
}

/// How buffers of `rt` go to MPI (the module's docs say why).
pub fn path(rt: &Runtime) -> Path {
    static FORCED: OnceLock<bool> = OnceLock::new();
    let forced =
        *FORCED.get_or_init(|| std::env::var_os("GPU_MPI_STAGING").is_some_and(|v| v == "1"));
    if forced {
        return Path::Staged;
    }
    match rt.backend() {
        BackendKind::Host => Path::Direct,
        _ if cuda_aware() => Path::Direct,
        _ => Path::Staged,
    }
}

/// Whether the MPI library takes CUDA device pointers: Open MPI's
/// `MPIX_Query_cuda_support()` (from `mpi-ext.h`), looked up at run time
/// with `dlsym`. False before MPI is initialized (Open MPI sets the flag
/// during `MPI_Init`), and where the library has no such function.
pub fn cuda_aware() -> bool {
    type Query = unsafe extern "C" fn() -> c_int;
    static QUERY: OnceLock<Option<Query>> = OnceLock::new();
    if !::mpi::environment::is_initialized() {
        return false;
    }
    let query = QUERY.get_or_init(|| {
        // SAFETY: `dlsym` with `RTLD_DEFAULT` only searches the loaded
        // objects (libmpi among them) for a NUL-terminated name; it reads
        // nothing else of ours.
        let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"MPIX_Query_cuda_support".as_ptr()) };
        // SAFETY: a non-null `MPIX_Query_cuda_support` is the function
        // `mpi-ext.h` declares, `int MPIX_Query_cuda_support(void)`: the
        // type `Query` names.
        (!p.is_null()).then(|| unsafe { std::mem::transmute::<*mut c_void, Query>(p) })
    });
    // SAFETY: the function takes nothing and only reads MPI's flag; MPI is
    // initialized (checked above).
    query.is_some_and(|q| unsafe { q() } == 1)
}

/// Element types MPI can sum (`MPI_SUM` on a predefined type):
/// [`all_reduce_sum`]'s.
pub trait Summable: DeviceRepr + Equivalence + sealed::Sealed {}

mod sealed {
    pub trait Sealed {}
}

macro_rules! summable {
    ($($t:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl Summable for $t {}
    )*};
}
summable!(f32, f64, i32, i64, u32, u64);

/// Sends `buf` to `dest` with `tag` (`MPI_Send`), once its producers are
/// done; returns when MPI is done with it.
///
/// # Errors
///
/// [`Error::TooLarge`] for more than `i32::MAX` elements; as
/// [`TaskContext::host_sync_ptr_read`] (direct) or a tracked copy
/// (staged). MPI's own failures abort (see the module's docs).
pub fn send<T, D>(
    ctx: &TaskContext,
    buf: &(impl DeviceSlice<T> + ?Sized),
    dest: &D,
    tag: Tag,
) -> Result<()>
where
    T: DeviceRepr + Equivalence,
    D: Destination,
{
    let n = count::<T>(buf.len())?;
    match path(ctx.runtime()) {
        Path::Direct => {
            let addr = ctx.host_sync_ptr_read(buf)?;
            // SAFETY: `addr` is `buf`'s `n` elements, whose producers are
            // done (the stream that the hand-off ordered after them was
            // synchronized); `buf` stays borrowed, so alive and unwritten,
            // until MPI's blocking send returns below, and MPI only reads.
            let mem = unsafe { Mem::<T>::new(addr, n) };
            dest.send_with_tag(&mem, tag);
        }
        Path::Staged => {
            let mut host = Staging::<T>::new(ctx.runtime(), buf.len())?;
            host.receive(ctx, buf)?;
            dest.send_with_tag(host.as_slice()?, tag);
        }
    }
    Ok(())
}

/// Receives a message from `src` with `tag` into `buf` (`MPI_Recv`), once
/// the buffer's earlier users are done; `buf`'s later users are ordered
/// after it.
///
/// # Errors
///
/// [`Error::LengthMismatch`] if the message is shorter than `buf` (then,
/// on the direct path, its first elements were overwritten; on the staged
/// path `buf` is untouched); [`Error::TooLarge`] for more than `i32::MAX`
/// elements; as [`TaskContext::host_sync_ptr`] (direct) or a tracked copy
/// (staged). A longer message aborts (MPI's truncation error).
pub fn recv<T, S>(
    ctx: &TaskContext,
    buf: &mut (impl DeviceSliceMut<T> + ?Sized),
    src: &S,
    tag: Tag,
) -> Result<()>
where
    T: DeviceRepr + Equivalence,
    S: Source,
{
    let len = buf.len();
    let n = count::<T>(len)?;
    match path(ctx.runtime()) {
        Path::Direct => {
            let addr = ctx.host_sync_ptr(buf)?;
            // SAFETY: `addr` is `buf`'s `n` elements, which no device work
            // touches any more (handed to this task's stream, which was
            // synchronized); `buf` stays exclusively borrowed until MPI's
            // blocking receive returns below, and MPI writes at most `n`.
            let mut mem = unsafe { Mem::<T>::new(addr, n) };
            let status = src.receive_into_with_tag(&mut mem, tag);
            received::<T>(&status, len)
        }
        Path::Staged => {
            let mut host = Staging::<T>::new(ctx.runtime(), len)?;
            let status = src.receive_into_with_tag(host.as_mut_slice()?, tag);
            received::<T>(&status, len)?;
            upload(ctx, host, buf)
        }
    }
}

/// Sends `send` to `dest` and receives into `recv` from `src`, both with
/// `tag`, in one call (`MPI_Sendrecv`): a halo exchange that cannot
/// deadlock on the order of sends and receives. Waits, and orders, as
/// [`send`] and [`recv`].
///
/// # Errors
///
/// As [`send`] and [`recv`].
pub fn sendrecv<T, D, S>(
    ctx: &TaskContext,
    send: &(impl DeviceSlice<T> + ?Sized),
    dest: &D,
    recv: &mut (impl DeviceSliceMut<T> + ?Sized),
    src: &S,
    tag: Tag,
) -> Result<()>
where
    T: DeviceRepr + Equivalence,
    D: Destination,
    S: Source,
{
    let (ns, len) = (count::<T>(send.len())?, recv.len());
    let nr = count::<T>(len)?;
    match path(ctx.runtime()) {
        Path::Direct => {
            let from = ctx.host_sync_ptr_read(send)?;
            let to = ctx.host_sync_ptr(recv)?;
            // SAFETY: as in `send` for `send`'s `ns` elements and in `recv`
            // for `recv`'s `nr`; the two borrows are of distinct memory (a
            // shared and an exclusive borrow), as MPI requires.
            let (ms, mut mr) = unsafe { (Mem::<T>::new(from, ns), Mem::<T>::new(to, nr)) };
            let status = send_receive_into_with_tags(&ms, dest, tag, &mut mr, src, tag);
            received::<T>(&status, len)
        }
        Path::Staged => {
            let mut out = Staging::<T>::new(ctx.runtime(), send.len())?;
            out.receive(ctx, send)?;
            let mut host = Staging::<T>::new(ctx.runtime(), len)?;
            let status = send_receive_into_with_tags(
                out.as_slice()?,
                dest,
                tag,
                host.as_mut_slice()?,
                src,
                tag,
            );
            received::<T>(&status, len)?;
            upload(ctx, host, recv)
        }
    }
}

/// `dst = ` the element-wise sum of every rank's `src` (`MPI_Allreduce`
/// with `MPI_SUM`); every rank of `comm` must call it (`&*shared` for a
/// [`SharedComm`]).
///
/// # Errors
///
/// [`Error::LengthMismatch`] unless `src` and `dst` have one length,
/// returned before MPI is called (the other ranks then wait in the
/// collective: treat it as fatal); otherwise as [`send`] and [`recv`].
pub fn all_reduce_sum<T, C>(
    ctx: &TaskContext,
    comm: &C,
    src: &(impl DeviceSlice<T> + ?Sized),
    dst: &mut (impl DeviceSliceMut<T> + ?Sized),
) -> Result<()>
where
    T: Summable,
    C: CommunicatorCollectives,
{
    let len = src.len();
    if dst.len() != len {
        return Err(Error::LengthMismatch {
            what: "the destination buffer",
            expected: len,
            got: dst.len(),
        });
    }
    let n = count::<T>(len)?;
    match path(ctx.runtime()) {
        Path::Direct => {
            let from = ctx.host_sync_ptr_read(src)?;
            let to = ctx.host_sync_ptr(dst)?;
            // SAFETY: as in `sendrecv`, `n` elements each.
            let (ms, mut mr) = unsafe { (Mem::<T>::new(from, n), Mem::<T>::new(to, n)) };
            comm.all_reduce_into(&ms, &mut mr, SystemOperation::sum());
            Ok(())
        }
        Path::Staged => {
            let mut out = Staging::<T>::new(ctx.runtime(), len)?;
            out.receive(ctx, src)?;
            let mut host = Staging::<T>::new(ctx.runtime(), len)?;
            comm.all_reduce_into(
                out.as_slice()?,
                host.as_mut_slice()?,
                SystemOperation::sum(),
            );
            upload(ctx, host, dst)
        }
    }
}

/// MPI's count for `len` elements.
fn count<T>(len: usize) -> Result<Count> {
    Count::try_from(len).map_err(|_| Error::TooLarge {
        elements: len,
        element_bytes: std::mem::size_of::<T>(),
        during: "counting elements for MPI (at most i32::MAX a message)",
    })
}

/// Whether the message `status` describes filled all `len` elements.
fn received<T: Equivalence>(status: &Status, len: usize) -> Result<()> {
    // `MPI_UNDEFINED` (negative): not a whole number of elements.
    let got = usize::try_from(status.count(T::equivalent_datatype())).ok();
    if got == Some(len) {
        return Ok(());
    }
    Err(Error::LengthMismatch {
        what: match got {
            Some(_) => "the received message",
            None => "the received message (not a whole number of elements)",
        },
        expected: len,
        got: got.unwrap_or(0),
    })
}

/// The staged path's last step: copies the received `host` memory into
/// `dst` (a tracked write on `ctx`'s stream) and waits for the copy, so
/// that its errors are returned here (the staging memory's drop would wait
/// for it too, but silently).
fn upload<T: DeviceRepr>(
    ctx: &TaskContext,
    mut host: Staging<T>,
    dst: &mut (impl DeviceSliceMut<T> + ?Sized),
) -> Result<()> {
    host.send(ctx, dst)?;
    host.settled_ptr().map(|_| ())
}

/// A buffer's memory as MPI takes it: an address and a count, never a Rust
/// reference, since the address may be device memory, which the host must
/// not dereference.
struct Mem<T> {
    ptr: *mut T,
    count: Count,
}

impl<T> Mem<T> {
    /// # Safety
    ///
    /// `addr` holds `count` elements of `T` (device memory only where MPI
    /// takes device pointers, [`Path::Direct`]), valid while the value
    /// lives; only read through unless it is passed to MPI as a receive
    /// buffer, and then nothing else uses the memory meanwhile.
    unsafe fn new(addr: u64, count: Count) -> Self {
        Mem {
            ptr: addr as usize as *mut T,
            count,
        }
    }
}

// The six `unsafe impl`s below rest on `Mem::new`'s contract: `count`
// elements of `T`, whose MPI datatype is `T`'s equivalent, start at `ptr`
// and stay valid while the `Mem` lives; MPI writes through `pointer_mut`
// only for a receive, which `new`'s caller allowed.
//
// SAFETY: as above.
unsafe impl<T: Equivalence> Collection for Mem<T> {
    fn count(&self) -> Count {
        self.count
    }
}
// SAFETY: as above.
unsafe impl<T: Equivalence> Pointer for Mem<T> {
    fn pointer(&self) -> *const c_void {
        self.ptr as *const c_void
    }
}
// SAFETY: as above.
unsafe impl<T: Equivalence> PointerMut for Mem<T> {
    fn pointer_mut(&mut self) -> *mut c_void {
        self.ptr.cast()
    }
}
// SAFETY: as above.
unsafe impl<T: Equivalence> AsDatatype for Mem<T> {
    type Out = T::Out;
    fn as_datatype(&self) -> T::Out {
        T::equivalent_datatype()
    }
}
// SAFETY: as above.
unsafe impl<T: Equivalence> MpiBuffer for Mem<T> {}
// SAFETY: as above.
unsafe impl<T: Equivalence> MpiBufferMut for Mem<T> {}
