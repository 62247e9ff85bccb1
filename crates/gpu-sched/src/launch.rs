//! Kernel launches with a typed argument builder: `&Buffer` is a read,
//! `&mut Buffer` a write (X2); the list is checked against the kernel's
//! parameters before anything is submitted.

use crate::buffer::{DeviceRepr, DeviceSlice, DeviceSliceMut};
use crate::context::{TaskContext, Touch};
use crate::error::{Error, Result};
use crate::kernel::{KernelArg, KernelDef, LaunchConfig, Module, Param};
use smallvec::SmallVec;

/// A kernel of a module, as a constant: `KernelRef::new(&MODULE, 3)`.
#[derive(Clone, Copy, Debug)]
pub struct KernelRef {
    module: &'static Module,
    index: usize,
}

impl KernelRef {
    /// The `index`-th kernel of `module`.
    ///
    /// # Panics
    ///
    /// At compile time (in a const) or on call, if `index` is out of range.
    pub const fn new(module: &'static Module, index: usize) -> Self {
        assert!(index < module.kernels.len(), "kernel index out of range");
        KernelRef { module, index }
    }

    /// The module.
    pub fn module(&self) -> &'static Module {
        self.module
    }

    /// The kernel's index in its module.
    pub fn index(&self) -> usize {
        self.index
    }

    /// The kernel's definition.
    pub fn def(&self) -> &'static KernelDef {
        &self.module.kernels[self.index]
    }
}

/// A scalar kernel argument.
pub trait ScalarArg: Copy {
    /// As a kernel argument.
    fn to_arg(self) -> KernelArg;
}

macro_rules! scalar {
    ($t:ty, $v:ident) => {
        impl ScalarArg for $t {
            #[inline]
            fn to_arg(self) -> KernelArg {
                KernelArg::$v(self)
            }
        }
    };
}
scalar!(u64, U64);
scalar!(u32, U32);
scalar!(i32, I32);
scalar!(f32, F32);
scalar!(f64, F64);

impl ScalarArg for usize {
    #[inline]
    fn to_arg(self) -> KernelArg {
        KernelArg::U64(self as u64)
    }
}

/// A launch being built: add arguments in the kernel's order, then
/// [`Launch::submit`].
#[must_use = "a launch does nothing until submitted"]
pub struct Launch<'c, 'b> {
    ctx: &'c TaskContext,
    kernel: KernelRef,
    cfg: LaunchConfig,
    args: [KernelArg; 16],
    nargs: usize,
    touches: SmallVec<[Touch<'b>; 4]>,
    error: Option<Error>,
}

impl std::fmt::Debug for Launch<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Launch")
            .field("kernel", &self.kernel.def().name)
            .field("args", &&self.args[..self.nargs])
            .finish()
    }
}

impl TaskContext {
    /// Starts a launch of `kernel` with `cfg` on this task's stream.
    pub fn launch<'c, 'b>(&'c self, kernel: KernelRef, cfg: LaunchConfig) -> Launch<'c, 'b> {
        Launch {
            ctx: self,
            kernel,
            cfg,
            args: [KernelArg::U64(0); 16],
            nargs: 0,
            touches: SmallVec::new(),
            error: None,
        }
    }
}

impl<'c, 'b> Launch<'c, 'b> {
    fn push(&mut self, arg: KernelArg, want: impl Fn(Param) -> bool, what: &str) {
        if self.error.is_some() {
            return;
        }
        let def = self.kernel.def();
        let i = self.nargs;
        match def.params.get(i) {
            None => {
                self.error = Some(Error::BadKernelArgs {
                    kernel: def.name,
                    problem: format!("takes {} arguments; got more", def.params.len()),
                })
            }
            Some(p) if !want(*p) || !p.matches(&arg) => {
                self.error = Some(Error::BadKernelArgs {
                    kernel: def.name,
                    problem: format!("argument {i} is {p:?}; got {what} ({arg:?})"),
                })
            }
            Some(_) if i >= self.args.len() => {
                self.error = Some(Error::BadKernelArgs {
                    kernel: def.name,
                    problem: "more than 16 arguments".into(),
                })
            }
            Some(_) => {
                self.args[i] = arg;
                self.nargs += 1;
            }
        }
    }

    fn check_runtime(&mut self, id: u64) {
        if self.error.is_none() {
            if let Err(e) = self.ctx.runtime().check_same(id, "a kernel argument") {
                self.error = Some(e);
            }
        }
    }

    /// A buffer the kernel reads.
    pub fn read<T: DeviceRepr>(mut self, buf: &'b (impl DeviceSlice<T> + ?Sized)) -> Self {
        self.check_runtime(buf.runtime_id());
        self.push(
            KernelArg::Ptr(buf.device_ptr()),
            |p| p == Param::PtrRead,
            "a read buffer (&)",
        );
        self.touches.push(Touch::read(buf));
        self
    }

    /// A buffer the kernel writes (and may read).
    pub fn write<T: DeviceRepr>(mut self, buf: &'b mut (impl DeviceSliceMut<T> + ?Sized)) -> Self {
        self.check_runtime(buf.runtime_id());
        self.push(
            KernelArg::Ptr(buf.device_ptr()),
            |p| matches!(p, Param::PtrRead | Param::PtrWrite),
            "a written buffer (&mut)",
        );
        self.touches.push(Touch::write(buf));
        self
    }

    /// A scalar.
    pub fn arg(mut self, v: impl ScalarArg) -> Self {
        let a = v.to_arg();
        self.push(
            a,
            |p| !matches!(p, Param::PtrRead | Param::PtrWrite),
            "a scalar",
        );
        self
    }

    /// A raw device pointer (see [`TaskContext::raw_ptr`]); untracked: the
    /// runtime neither checks nor orders what the kernel does through it
    /// (see the contract of [`Launch::submit`]).
    pub fn raw_ptr(mut self, p: u64) -> Self {
        self.push(
            KernelArg::Ptr(p),
            |p| matches!(p, Param::PtrRead | Param::PtrWrite),
            "a raw pointer",
        );
        self
    }

    /// Submits the launch: hand-offs, stamps, the driver launch, stamps.
    ///
    /// The runtime checks the argument list against the kernel's parameters
    /// and orders every buffer passed with [`Launch::read`] and
    /// [`Launch::write`]; it cannot know what the kernel does with them.
    /// Safe wrappers (as in `gpu-kernels`) take their lengths from the
    /// buffers and call this in an `unsafe` block that says why.
    ///
    /// ```compile_fail
    /// # fn f(t: &gpu_sched::TaskContext, k: gpu_sched::KernelRef, b: &mut gpu_sched::Buffer<f32>) {
    /// t.launch(k, gpu_sched::LaunchConfig::linear(1, 1)).write(b).arg(1u64 << 40).submit(); // error: unsafe
    /// # }
    /// ```
    ///
    /// # Safety
    ///
    /// As for a raw `cuLaunchKernel` (cudarc's `launch` is `unsafe` for the
    /// same reasons), and on the host backend for the kernel's host
    /// implementation:
    /// - the kernel reads only memory of the buffers passed with `read` or
    ///   `write`, and writes only memory of those passed with `write`, each
    ///   within its length (scalars that are lengths or indices must say so
    ///   truthfully);
    /// - pointers passed with [`Launch::raw_ptr`] are valid for everything
    ///   the kernel does through them, for as long as it runs, and the caller
    ///   orders that work with every other use of the memory;
    /// - the configuration is one the kernel is written for (no thread reads
    ///   or writes past the ranges above because of it).
    ///
    /// # Errors
    ///
    /// [`Error::BadLaunch`] for a configuration CUDA refuses;
    /// [`Error::BadKernelArgs`] for a wrong argument list (nothing is
    /// submitted); [`Error::WrongDevice`]; driver errors.
    pub unsafe fn submit(mut self) -> Result<()> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        let def = self.kernel.def();
        self.cfg.check().map_err(|problem| Error::BadLaunch {
            kernel: def.name.to_owned(),
            problem,
        })?;
        if self.nargs != def.params.len() {
            return Err(Error::BadKernelArgs {
                kernel: def.name,
                problem: format!("takes {} arguments; got {}", def.params.len(), self.nargs),
            });
        }
        let ctx = self.ctx;
        let rt = ctx.runtime();
        let k = rt.kernel(self.kernel.module, self.kernel.index)?;
        let (cfg, args, n) = (self.cfg, self.args, self.nargs);
        // SAFETY: this function's contract: the kernel touches only the
        // buffers passed, within their lengths, and raw pointers are valid
        // and ordered by the caller. `k` is the kernel loaded by this
        // runtime's driver, and the arguments match its parameters (count
        // above, types as pushed). `tracked` handed every buffer to this
        // stream (`mem` lists them), and a buffer's drop frees it only after
        // a hand-off from this stream (X4).
        ctx.tracked(def.name, &mut self.touches, |mem, raw| unsafe {
            rt.driver()
                .launch(&k.into(), cfg, &args[..n], &[], mem, raw)
        })
    }
}
