//! Typed errors: what happened, what was being done, and what to do.

use gpu_epoch::LedgerError;

/// The result of every fallible runtime call.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The driver returned an error code.
    #[error("CUDA driver error {code} ({name}) while {during}")]
    Driver {
        /// The `CUresult` code.
        code: i32,
        /// The driver's name for it.
        name: String,
        /// What the runtime was doing.
        during: &'static str,
    },
    /// An earlier kernel faulted; the context is unusable for good.
    #[error("the device context is broken by an earlier error ({name}, code {code}); every call fails until the process restarts")]
    StickyDeviceError {
        /// The `CUresult` code.
        code: i32,
        /// The driver's name for it.
        name: String,
    },
    /// A host wait that guards memory the device may still use kept
    /// failing past [`crate::RuntimeOptions::wait_limit`] while the device
    /// reported no broken context. Sticky: the runtime treats the device
    /// as broken (every such wait after it fails at once) and keeps that
    /// memory rather than free it under work that may still run.
    #[error("a wait kept failing for {waited_ms} ms (first: {first}) on a device that reports no broken context; the runtime treats it as broken: memory it may still use is kept, not freed, and every later wait fails; restart the process")]
    DeviceUnresponsive {
        /// How long the wait was retried.
        waited_ms: u64,
        /// The first error of the wait.
        first: String,
    },
    /// The device could not allocate.
    #[error("out of device memory: asked for {requested} bytes while {during}; free buffers no longer needed or ask for less")]
    OutOfMemory {
        /// Bytes asked for.
        requested: usize,
        /// What the runtime was doing.
        during: &'static str,
    },
    /// Two lengths that must agree do not.
    #[error("length mismatch: {what} has {got} elements, {expected} expected; pass buffers (or views) of equal length")]
    LengthMismatch {
        /// What was measured.
        what: &'static str,
        /// Expected length.
        expected: usize,
        /// Actual length.
        got: usize,
    },
    /// A range outside the buffer or view it was asked of (`slice`,
    /// `slice_mut`, `split_at_mut`).
    #[error(
        "{what}: the range {start}..{end} is not within 0..{len}; ask for start <= end <= {len}"
    )]
    OutOfRange {
        /// The call.
        what: &'static str,
        /// The range's first element asked for.
        start: usize,
        /// The range's end asked for (exclusive).
        end: usize,
        /// The length of the buffer or view.
        len: usize,
    },
    /// A chunk size of zero.
    #[error("chunk size must be at least 1")]
    ZeroChunk,
    /// A buffer or event of another runtime (device) was passed.
    #[error(
        "{what} belongs to another device or runtime; copy it to this device first \
         (`TaskContext::copy_peer` within a group of devices)"
    )]
    WrongDevice {
        /// What was passed.
        what: &'static str,
    },
    /// A kernel was launched with the wrong arguments.
    #[error("kernel `{kernel}`: {problem}")]
    BadKernelArgs {
        /// The kernel.
        kernel: &'static str,
        /// What is wrong.
        problem: String,
    },
    /// PTX text the runtime (or the driver's JIT) refused.
    #[error("not loadable PTX: {problem}")]
    BadPtx {
        /// What is wrong.
        problem: String,
    },
    /// NVRTC refused a CUDA C source.
    #[error("CUDA C did not compile (NVRTC): {log}")]
    Compile {
        /// NVRTC's log.
        log: String,
    },
    /// NVRTC, which compiles CUDA C at run time, is not installed.
    #[error("NVRTC is not available: {0}; install the CUDA toolkit's NVRTC library, or load PTX instead")]
    NvrtcUnavailable(String),
    /// A launch configuration CUDA refuses.
    #[error("kernel `{kernel}`: {problem}")]
    BadLaunch {
        /// The kernel.
        kernel: String,
        /// What is wrong.
        problem: String,
    },
    /// A kernel (or a foreign operation) without a host implementation, run
    /// on the host backend.
    #[error("kernel `{kernel}` has no host implementation, so it cannot run on the host backend; give it one (`Kernel::with_host`; `Foreign::host` for a foreign operation) or run on a GPU")]
    NoHostImplementation {
        /// The kernel.
        kernel: String,
    },
    /// No kernel of that name in the loaded modules.
    #[error("no kernel `{0}` in the loaded modules")]
    NoSuchKernel(String),
    /// Refused while work is recorded into a graph rather than run: in a
    /// capture (`TaskContext::capture`, `gpu::capture`) or in a graphed
    /// scope (`gpu::Graphed`), whose operations become graph nodes.
    #[error("{what} is not allowed while work is being recorded into a graph (in a capture or a graphed scope); do it before or after the recording")]
    Capturing {
        /// What was attempted.
        what: &'static str,
    },
    /// A task of a scope capture (`TaskContext::capture_scope`) used after
    /// the capture ended: it submits nothing more.
    #[error("this task joined a scope capture that has ended, so it submits nothing more; begin a new task")]
    CaptureEnded,
    /// The ledger refused.
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    /// No CUDA device or driver.
    #[error("no CUDA device available: {0}")]
    NoDevice(String),
    /// The backend cannot do this.
    #[error("not supported by this backend: {0}")]
    Unsupported(&'static str),
    /// A file could not be created or written.
    #[error("I/O error while {during}: {source}")]
    Io {
        /// What the runtime was doing.
        during: &'static str,
        /// The cause.
        #[source]
        source: std::sync::Arc<std::io::Error>,
    },
    /// A size in bytes does not fit in the address space.
    #[error("{elements} elements of {element_bytes} bytes overflow the address space while {during}; ask for fewer")]
    TooLarge {
        /// Elements asked for.
        elements: usize,
        /// Bytes per element.
        element_bytes: usize,
        /// What the runtime was doing.
        during: &'static str,
    },
    /// NCCL, which the CUDA backend's collectives call ([`crate::nccl`]),
    /// could not be loaded, or lacks a function they call.
    #[error("NCCL is not available: {0}; install NCCL (a `libnccl.so` the loader finds, e.g. Debian's `libnccl-dev`) or use the host backend")]
    NcclUnavailable(String),
    /// An NCCL call failed.
    #[error("NCCL error {code} ({name}) while {during}")]
    Nccl {
        /// The `ncclResult_t` code.
        code: i32,
        /// NCCL's text for it.
        name: String,
        /// What the runtime was doing.
        during: &'static str,
    },
    /// A collective or point-to-point call whose arguments cannot match
    /// across its ranks (a root or peer that is no rank, a send without its
    /// receive, a buffer count that is not one per local rank).
    #[error("NCCL {call}: {problem}")]
    BadCollective {
        /// The call.
        call: &'static str,
        /// What is wrong.
        problem: String,
    },
    /// A task panicked (the payload is re-raised by `scope`; this is what
    /// other waiters see).
    #[error("a task panicked")]
    TaskPanicked,
    /// A `join` or scope nested so deep that its worker's stack is nearly
    /// used up: refused rather than overflow the stack (which aborts).
    #[error("nesting too deep for the worker's stack ({left} bytes left); nest less, or give the pool bigger stacks (`ThreadPoolBuilder::stack_size`)")]
    StackExhausted {
        /// About how many bytes of the stack were left.
        left: usize,
    },
    /// A vendor library (cuBLAS, ...) could not be loaded, or lacks a
    /// function the runtime calls. Probed once, before the first call: never
    /// a panic.
    #[error("{library} is not available: {why}; install it (the CUDA toolkit's library folder on the loader's path, e.g. `LD_LIBRARY_PATH=/usr/local/cuda/lib64`) or use the host backend")]
    LibraryUnavailable {
        /// The library (`"cuBLAS"`).
        library: &'static str,
        /// What the probe found.
        why: String,
    },
    /// A vendor library call returned an error status.
    #[error("{library} error {code} ({name}) in {call}")]
    Library {
        /// The library (`"cuBLAS"`).
        library: &'static str,
        /// The call (`"cublasSgemm_v2"`).
        call: &'static str,
        /// The library's status code.
        code: i32,
        /// The status's name.
        name: String,
    },
    /// A Cholesky factorization (`potrf`) found the leading minor of
    /// order `minor` (1-based, as LAPACK's `info`) not positive definite:
    /// the factor is incomplete. Reported at the task's next wait
    /// (`gpu_libs::solver`).
    #[error(
        "{op}: the matrix is not positive definite (its leading minor of order {minor} is not)"
    )]
    NotPositiveDefinite {
        /// The operation (`"potrf"`).
        op: &'static str,
        /// The order of the first leading minor that is not positive
        /// definite (LAPACK's `info`, 1-based).
        minor: usize,
    },
    /// An LU factorization (`getrf`) found the pivot `U(pivot, pivot)`
    /// (1-based, as LAPACK's `info`) exactly zero: the matrix is singular
    /// and a solve with its factors would divide by zero. Reported at the
    /// task's next wait (`gpu_libs::solver`).
    #[error("{op}: the matrix is singular (U({pivot}, {pivot}) is exactly zero)")]
    Singular {
        /// The operation (`"getrf"`).
        op: &'static str,
        /// The 1-based index of the first zero pivot (LAPACK's `info`).
        pivot: usize,
    },
    /// A library operation's shapes, leading dimensions or strides do not
    /// fit its buffers (or the library's integer types): refused before
    /// anything is queued.
    #[error("{op}: {problem}")]
    Shape {
        /// The operation (`"gemm"`).
        op: &'static str,
        /// What does not fit.
        problem: String,
    },
    /// An error from outside the runtime: a library called in a task (a
    /// foreign operation's device closure), or the user's own;
    /// [`Error::external`] makes one of any error. (`?` on a cudarc driver
    /// error gives [`Error::Driver`].)
    #[error("{during}: {source}")]
    External {
        /// What was being done (the library or operation).
        during: &'static str,
        /// The cause.
        #[source]
        source: std::sync::Arc<dyn std::error::Error + Send + Sync>,
    },
    /// A failure of a named task ([`crate::TaskContext::set_name`]; in
    /// `gpu`, `s.task().name(..)`): which task, on which device, and the
    /// failure ([`Error::root`] reaches it through every wrapper). Made
    /// where the failure leaves the task: its body's error, and the
    /// failure of a library result it left to check (a factorization's),
    /// wherever that is reported.
    #[error("in task \"{task}\" (device {device}): {source}")]
    InTask {
        /// The task's name.
        task: std::sync::Arc<str>,
        /// Its device's ordinal.
        device: usize,
        /// The failure.
        #[source]
        source: Box<Error>,
    },
    /// A failure with context said where it was returned
    /// ([`ResultExt::context`]: `.context(format!("system {i}"))?`).
    #[error("{context}: {source}")]
    Context {
        /// What was being done.
        context: String,
        /// The failure.
        #[source]
        source: Box<Error>,
    },
}

/// Context for a failure, where it is returned, as `anyhow` and `eyre`
/// users write it: `Potrf::new(n).run(t, &mut a).context("system 7")?`.
/// Costs nothing unless the result is an error (no host wait, no
/// allocation); [`Error::root`] finds the failure under it.
pub trait ResultExt<T> {
    /// The error, if any, wrapped in [`Error::Context`] with `context`.
    ///
    /// # Errors
    ///
    /// This result's error, wrapped.
    fn context(self, context: impl Into<String>) -> Result<T>;

    /// [`ResultExt::context`] with the context made only on an error.
    ///
    /// # Errors
    ///
    /// This result's error, wrapped.
    fn with_context<C: Into<String>>(self, context: impl FnOnce() -> C) -> Result<T>;
}

impl<T> ResultExt<T> for Result<T> {
    fn context(self, context: impl Into<String>) -> Result<T> {
        self.map_err(|e| Error::Context {
            context: context.into(),
            source: Box::new(e),
        })
    }

    fn with_context<C: Into<String>>(self, context: impl FnOnce() -> C) -> Result<T> {
        self.map_err(|e| Error::Context {
            context: context().into(),
            source: Box::new(e),
        })
    }
}

impl Error {
    /// An [`Error::External`] of `source`, during `during` (say the library
    /// or operation: `"cublasSgemm"`).
    pub fn external(
        during: &'static str,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Error::External {
            during,
            source: std::sync::Arc::new(source),
        }
    }
}

/// `?` on a cudarc driver call (in a foreign operation's device closure,
/// say): the driver's code, named without asking the driver (cudarc's own
/// `Display` loads it, and panics where there is none).
impl From<cudarc::driver::DriverError> for Error {
    fn from(e: cudarc::driver::DriverError) -> Self {
        Error::Driver {
            code: e.0 as i32,
            name: format!("{:?}", e.0),
            during: "a CUDA driver call through cudarc",
        }
    }
}

impl Error {
    /// Whether the device context is broken for good.
    pub fn is_sticky(&self) -> bool {
        matches!(
            self.root(),
            Error::StickyDeviceError { .. } | Error::DeviceUnresponsive { .. }
        )
    }

    /// The failure under every [`Error::InTask`] and [`Error::Context`]
    /// (`matches!(e.root(), Error::NotPositiveDefinite { .. })`).
    pub fn root(&self) -> &Error {
        let mut e = self;
        while let Error::InTask { source, .. } | Error::Context { source, .. } = e {
            e = source;
        }
        e
    }

    /// The name of the task the failure happened in, if it was named
    /// (the innermost [`Error::InTask`]).
    pub fn task(&self) -> Option<&str> {
        let mut e = self;
        let mut found = None;
        while let Error::InTask { source, .. } | Error::Context { source, .. } = e {
            if let Error::InTask { task, .. } = e {
                found = Some(&**task);
            }
            e = source;
        }
        found
    }

    /// This error as a failure of the task `task` on device `device`
    /// (unchanged if it already names a task).
    pub fn in_task(self, task: std::sync::Arc<str>, device: usize) -> Error {
        if self.task().is_some() {
            return self;
        }
        Error::InTask {
            task,
            device,
            source: Box::new(self),
        }
    }
}
