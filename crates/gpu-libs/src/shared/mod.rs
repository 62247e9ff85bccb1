//! What the vendor libraries' wrappers share (DESIGN "Numerical libraries and foreign work"), written once: the
//! [`Library`] trait each library implements over cudarc's `result` layer
//! (its `sys` layer where `result` lacks the call); the one-time probe of
//! a library (a missing library or function is
//! [`Error::LibraryUnavailable`], never a panic: cudarc's own loader
//! panics); a failed status as the typed [`Error::Library`]; [`ready`];
//! and the pools of per-stream objects, [`HandlePool`] (a library's
//! handles, kept per runtime as a [`gpu_sched::Extension`]) over
//! [`SlotPool`] (per stream slot).

use gpu_sched::{BackendKind, Error, Extension, ForeignStream, Result, TaskContext};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

/// One vendor library: its names, its status type, and its handle's
/// `create`, `destroy` and `set_stream` (cudarc's `result` functions), so
/// that [`probe`], [`ready`], [`Library::check`] and [`HandlePool`] are
/// written once for all of them.
pub(crate) trait Library: 'static {
    /// The library's name in errors (`"cuBLAS"`).
    const NAME: &'static str;
    /// cudarc's name for its loader (`"cublas"`).
    const STEM: &'static str;
    /// The functions the wrappers call, checked by the probe.
    const SYMBOLS: &'static [&'static str];
    /// The names of `create` and `set_stream`'s calls, for their errors.
    const CREATE: &'static str;
    /// See [`Library::CREATE`].
    const SET_STREAM: &'static str;
    /// The library's status (`cublasStatus_t`).
    type Status: Copy + std::fmt::Debug;
    /// A handle (`cublasHandle_t`): a plain pointer or integer.
    type Handle: Copy;

    /// The probe's outcome, one per library and process.
    fn probed() -> &'static OnceLock<std::result::Result<(), String>>;

    /// Whether cudarc's loader finds the library.
    ///
    /// # Safety
    ///
    /// Loads the library (runs its initialisers), as cudarc's loader
    /// would.
    unsafe fn present() -> bool;

    /// Whether the loaded library has the function `name`.
    ///
    /// # Safety
    ///
    /// Only after [`Library::present`] returned `true`.
    unsafe fn has_symbol(name: &str) -> bool;

    /// Whether `status` is the library's success.
    fn succeeded(status: Self::Status) -> bool;

    /// The status's code, as the C enum's value.
    fn code(status: Self::Status) -> i32;

    /// The status's name: the library's own where it names them
    /// (`cublasGetStatusName`), else the enum's.
    fn name(status: Self::Status) -> String {
        format!("{status:?}")
    }

    /// A new handle, set up as every wrapper expects it (cuSPARSE's: in
    /// host pointer mode). The library is probed and the runtime's context
    /// current on this thread.
    fn create() -> std::result::Result<Self::Handle, Self::Status>;

    /// Destroys `h`.
    ///
    /// # Safety
    ///
    /// `h` came from [`Library::create`], is destroyed once and used by
    /// nothing after; the work queued with it finished, or is ordered
    /// before anything that reuses what it owns (the context is current).
    unsafe fn destroy(h: Self::Handle);

    /// Binds `h` to `stream`.
    ///
    /// # Safety
    ///
    /// `h` is live and used by this thread only; `stream` is a live stream
    /// of the current context; `h`'s earlier stream has none of its work
    /// pending, or is ordered before `stream` (the same slot's).
    unsafe fn set_stream(h: Self::Handle, stream: u64) -> std::result::Result<(), Self::Status>;

    /// The typed error of the failed `status` of `call`.
    fn error(status: Self::Status, call: &'static str) -> Error {
        Error::Library {
            library: Self::NAME,
            call,
            code: Self::code(status),
            name: Self::name(status),
        }
    }

    /// `Ok` for success, else the typed error of `status` in `call`.
    fn check(status: Self::Status, call: &'static str) -> Result<()> {
        if Self::succeeded(status) {
            Ok(())
        } else {
            Err(Self::error(status, call))
        }
    }
}

/// `L` loaded and every function of [`Library::SYMBOLS`] present, probed
/// once per process. Never panics: nothing calls cudarc's loader of `L`
/// before this succeeded.
pub(crate) fn probe<L: Library>() -> Result<()> {
    L::probed()
        .get_or_init(|| {
            // SAFETY: loading the library runs its initialisers, as
            // cudarc's loader would; the handle is closed again.
            if !unsafe { L::present() } {
                return Err(format!(
                    "lib{} could not be loaded (searched for {})",
                    L::STEM,
                    cudarc::get_lib_name_candidates(L::STEM).join(", ")
                ));
            }
            for name in L::SYMBOLS {
                // SAFETY: the library is present (above).
                if !unsafe { L::has_symbol(name) } {
                    return Err(format!("lib{} lacks `{name}`", L::STEM));
                }
            }
            Ok(())
        })
        .clone()
        .map_err(|why| Error::LibraryUnavailable {
            library: L::NAME,
            why,
        })
}

/// On the CUDA backend, `L` loaded and checked ([`probe`], before anything
/// is queued); nothing on the host backend, whose twins need no library.
pub(crate) fn ready<L: Library>(t: &TaskContext) -> Result<()> {
    match t.runtime().backend() {
        BackendKind::Cuda => probe::<L>(),
        BackendKind::Host => Ok(()),
    }
}

/// The slot whose objects serve captures alone ([`stream_of`]): they
/// queue nothing that runs at the call, so no stream's order keeps what
/// they own; they own no memory that the captured work uses (a cuBLAS
/// handle of this slot has no workspace), so a graph that holds their
/// work, launched later on any stream, shares nothing with other work.
pub(crate) const CAPTURE_SLOT: usize = usize::MAX;

/// The slot and stream by which a library call of `s` takes its objects
/// ([`HandlePool::with_handle`]): the stream's own slot, or, while its
/// work is captured into a graph ([`ForeignStream::capturing`]), the
/// [`CAPTURE_SLOT`].
pub(crate) fn stream_of(s: &ForeignStream<'_>) -> (usize, u64) {
    let slot = if s.capturing() {
        CAPTURE_SLOT
    } else {
        s.slot()
    };
    (slot, s.raw())
}

/// Implements [`Library::probed`], [`Library::present`] and
/// [`Library::has_symbol`] over cudarc's `sys` module `$sys`.
macro_rules! loader {
    ($sys:path) => {
        fn probed() -> &'static std::sync::OnceLock<std::result::Result<(), String>> {
            static PROBED: std::sync::OnceLock<std::result::Result<(), String>> =
                std::sync::OnceLock::new();
            &PROBED
        }

        unsafe fn present() -> bool {
            use $sys as sys;
            // SAFETY: the caller's contract (the library's initialisers
            // run, as cudarc's loader would run them).
            unsafe { sys::is_culib_present() }
        }

        unsafe fn has_symbol(name: &str) -> bool {
            use $sys as sys;
            // SAFETY: `present` loaded one of the names `culib` tries, in
            // the same order, so `culib` finds it without panicking.
            let lib = unsafe { sys::culib() };
            // SAFETY: only the symbol's presence is checked; it is never
            // called through this pointer.
            unsafe { lib.get::<*const std::ffi::c_void>(name.as_bytes()) }.is_ok()
        }
    };
}
pub(crate) use loader;

/// Per-stream objects of one library for one runtime: for each stream slot
/// of the pool ([`gpu_sched::ForeignStream::slot`], bounded by the pool's
/// capacity), the idle objects. One is taken for one call and given back,
/// so two tasks sharing a stream on two threads each get their own; all
/// of a slot's objects queue on its stream, so what they own (a workspace,
/// a plan's scratch) stays in its order. A slot's stream is retired idle
/// before another is made in it, so an object rebound to the new one has
/// no work pending.
#[derive(Debug)]
pub(crate) struct SlotPool<H> {
    idle: Mutex<HashMap<usize, Vec<H>>>,
}

impl<H> Default for SlotPool<H> {
    fn default() -> Self {
        SlotPool {
            idle: Mutex::new(HashMap::new()),
        }
    }
}

#[allow(dead_code)] // which of these a build uses depends on its features
impl<H> SlotPool<H> {
    /// An idle object of `slot` for which `keep` holds, if any.
    pub(crate) fn take_where(&self, slot: usize, keep: impl Fn(&H) -> bool) -> Option<H> {
        let mut idle = self.idle.lock();
        let v = idle.get_mut(&slot)?;
        let i = v.iter().rposition(keep)?;
        Some(v.swap_remove(i))
    }

    /// An idle object of `slot`, if any.
    pub(crate) fn take(&self, slot: usize) -> Option<H> {
        self.idle.lock().get_mut(&slot).and_then(Vec::pop)
    }

    /// Gives `h` back to `slot`'s idle objects.
    pub(crate) fn give(&self, slot: usize, h: H) {
        self.idle.lock().entry(slot).or_default().push(h);
    }

    /// Every idle object, taken out (to be destroyed: the runtime's streams
    /// are idle and its context current).
    pub(crate) fn drain(&self) -> Vec<H> {
        self.idle.lock().drain().flat_map(|(_, v)| v).collect()
    }

    /// The number of idle objects (for tests of boundedness).
    pub(crate) fn idle_count(&self) -> usize {
        self.idle.lock().values().map(Vec::len).sum()
    }
}

/// A handle of `L`, owned by a [`HandlePool`].
struct Owned<L: Library>(L::Handle);

// SAFETY: the vendor libraries' handles (cuBLAS's, cuSOLVER's, cuSPARSE's,
// cuRAND's generators) may be used from any thread, by one thread at a
// time: the pool hands each to one user at a time.
unsafe impl<L: Library> Send for Owned<L> {}

/// A runtime's handles of `L`, per stream slot ([`SlotPool`]: what a
/// handle owns, its default workspace, stays in its stream's order), kept
/// as the runtime's extension ([`HandlePool::of`]) and destroyed by its
/// teardown, after the runtime's streams finished, while its context is
/// current.
pub(crate) struct HandlePool<L: Library> {
    idle: SlotPool<Owned<L>>,
    made: AtomicUsize,
}

impl<L: Library> Default for HandlePool<L> {
    fn default() -> Self {
        HandlePool {
            idle: SlotPool::default(),
            made: AtomicUsize::new(0),
        }
    }
}

impl<L: Library> std::fmt::Debug for HandlePool<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HandlePool")
            .field("library", &L::NAME)
            .field("made", &self.made.load(Ordering::Relaxed))
            .field("idle", &self.idle.idle_count())
            .finish()
    }
}

impl<L: Library> Extension for HandlePool<L> {
    /// Destroys every idle handle: the runtime's streams are idle (its drop
    /// synchronized them) and its context current.
    fn teardown(&self) {
        for h in self.idle.drain() {
            // SAFETY: an idle handle of this pool, made by `L::create`,
            // destroyed once (it left the pool); its work finished.
            unsafe { L::destroy(h.0) };
        }
    }
}

#[allow(dead_code)] // which of these a build uses depends on its features
impl<L: Library> HandlePool<L> {
    /// The pool of `rt`'s handles of `L`.
    pub(crate) fn of(rt: &gpu_sched::Runtime) -> std::sync::Arc<Self> {
        rt.extension::<Self>()
    }

    /// Handles made, handles idle (for tests of the pool).
    pub(crate) fn counts(&self) -> (usize, usize) {
        (self.made.load(Ordering::Relaxed), self.idle.idle_count())
    }

    /// Runs `f` with a handle bound to `stream`, the stream of slot `slot`:
    /// an idle one of the slot, or a new one. Bound again on every take
    /// (`set_stream`, no measurable cost: B17/raw-setstream), since a
    /// slot's stream may have been retired and another made since, maybe
    /// at the same address. The handle goes back to the slot after `f`.
    /// The library is probed and the runtime's context current on this
    /// thread (a foreign operation's device closure, or
    /// [`TaskContext::stream_slot`], binds it).
    pub(crate) fn with_handle<R>(
        &self,
        (slot, stream): (usize, u64),
        f: impl FnOnce(L::Handle) -> Result<R>,
    ) -> Result<R> {
        let h = match self.idle.take(slot) {
            Some(h) => h,
            None => {
                let h = Owned::<L>(L::create().map_err(|s| L::error(s, L::CREATE))?);
                self.made.fetch_add(1, Ordering::Relaxed);
                h
            }
        };
        // SAFETY: `h` is a live handle, idle (used by this thread only);
        // `stream` is the caller's live stream of the current context; the
        // handle's earlier stream (if another) was the slot's, retired
        // idle, so none of its work is pending.
        if let Err(s) = unsafe { L::set_stream(h.0, stream) } {
            // SAFETY: idle (taken above), used by nothing else; nothing
            // was queued with it since it last went idle.
            unsafe { L::destroy(h.0) };
            return Err(L::error(s, L::SET_STREAM));
        }
        let r = f(h.0);
        self.idle.give(slot, h);
        r
    }
}

#[cfg(test)]
mod test;
