//! Typed kernels (DESIGN "Users' kernels and chunk iterators"): a kernel's signature declared once, as a tuple of
//! parameter types, so that the compiler checks every launch's argument
//! count, kinds and element types, and a host implementation written as
//! safe Rust over slices and scalars.
//!
//! ```text
//! Kernel<(Out<f32>, In<f32>, u64)>   // __global__ void k(float*, const float*, unsigned long long)
//!   .with_host(|out: &mut [f32], inp: &[f32], n: u64| ..)
//! unsafe { k.launch(t, cfg, (&mut out, &inp, n)) }
//! ```

use crate::buffer::{DeviceRepr, DeviceSlice, DeviceSliceMut};
use crate::context::{TaskContext, Touch};
use crate::driver::{HostCall, KernelCall};
use crate::error::{Error, Result};
use crate::kernel::{
    BuiltinEntry, BuiltinHost, BuiltinModule, CParam, ErasedHost, KernelArg, LaunchConfig, Param,
};
use crate::runtime::Runtime;
use smallvec::SmallVec;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A kernel parameter that is a buffer the kernel only reads (`const T*`):
/// a `&` device slice at launch, a `&[T]` in the host implementation.
#[derive(Debug)]
pub struct In<T>(PhantomData<fn() -> T>);

/// A kernel parameter that is a buffer the kernel writes and may read
/// (`T*`): a `&mut` device slice at launch, a `&mut [T]` in the host
/// implementation.
#[derive(Debug)]
pub struct Out<T>(PhantomData<fn() -> T>);

mod gate;
mod scalars;

pub use scalars::Value;

mod sealed {
    pub trait Sealed {}
    pub trait SealedArg {}
    impl<B: ?Sized> SealedArg for &B {}
    impl<B: ?Sized> SealedArg for &mut B {}
    impl<T> SealedArg for super::Untracked<T> {}
    impl<B> SealedArg for Option<B> {}
    impl<T> SealedArg for super::Value<T> {}
    macro_rules! scalars { ($($t:ty),*) => {$(impl SealedArg for $t {})*}; }
    scalars!(
        u64,
        usize,
        u32,
        i32,
        f32,
        f64,
        i64,
        u8,
        bool,
        half::f16,
        half::bf16
    );
}

/// A type that may stand in a kernel's signature: [`In`], [`Out`], `u64`,
/// `u32`, `i32`, `f32`, `f64`, `i64`, `u8`, `bool` (a C `bool`, or an
/// `unsigned char` of 0 or 1), [`half::f16`] (`__half`), [`half::bf16`]
/// (`__nv_bfloat16`), and [`Value<T>`] for a `#[repr(C)]` struct passed by
/// value. Sealed.
pub trait KernelParam: sealed::Sealed + 'static {
    /// The parameter as the runtime checks it.
    const PARAM: Param;
    /// The parameter as a CUDA C source should declare it.
    #[doc(hidden)]
    const C: CParam;
    /// What the host implementation receives for it.
    type Host<'a>;
    /// The host implementation's argument for `arg`, with `len` elements
    /// when it is a buffer.
    ///
    /// # Safety
    ///
    /// A buffer's `arg` points to `len` elements of `T`, live, aligned and
    /// ordered for the access the parameter declares, with no other
    /// reference to them while the result lives.
    #[doc(hidden)]
    unsafe fn host<'a>(arg: KernelArg, len: usize) -> Self::Host<'a>;
}

impl<T: DeviceRepr> sealed::Sealed for In<T> {}
impl<T: DeviceRepr> KernelParam for In<T> {
    const PARAM: Param = Param::PtrRead;
    const C: CParam = CParam {
        buffer: true,
        write: false,
        bytes: std::mem::size_of::<T>(),
        kind: T::C_KIND,
    };
    type Host<'a> = &'a [T];
    unsafe fn host<'a>(arg: KernelArg, len: usize) -> &'a [T] {
        let KernelArg::Ptr(p) = arg else {
            unreachable!("the launch pushed a pointer for a buffer")
        };
        if len == 0 {
            // An absent buffer (`None`, a null pointer) or an empty one.
            return &[];
        }
        // SAFETY: the caller's contract: `p` holds `len` live, aligned,
        // ordered elements that nothing writes while this borrow lives.
        unsafe { std::slice::from_raw_parts(p as *const T, len) }
    }
}

impl<T: DeviceRepr> sealed::Sealed for Out<T> {}
impl<T: DeviceRepr> KernelParam for Out<T> {
    const PARAM: Param = Param::PtrWrite;
    const C: CParam = CParam {
        buffer: true,
        write: true,
        bytes: std::mem::size_of::<T>(),
        kind: T::C_KIND,
    };
    type Host<'a> = &'a mut [T];
    unsafe fn host<'a>(arg: KernelArg, len: usize) -> &'a mut [T] {
        let KernelArg::Ptr(p) = arg else {
            unreachable!("the launch pushed a pointer for a buffer")
        };
        if len == 0 {
            // An absent buffer (`None`, a null pointer) or an empty one.
            return &mut [];
        }
        // SAFETY: the caller's contract: `p` holds `len` live, aligned,
        // ordered elements and no other reference to them exists while this
        // borrow lives (the launch took the buffer as `&mut`).
        unsafe { std::slice::from_raw_parts_mut(p as *mut T, len) }
    }
}

/// The arguments of one launch, as [`Args`] lays them out.
#[doc(hidden)]
#[allow(missing_debug_implementations)] // internal; holds borrowed stamps
pub struct ArgList<'b> {
    args: [KernelArg; MAX_ARGS],
    lens: [usize; MAX_ARGS],
    n: usize,
    touches: SmallVec<[Touch<'b>; 4]>,
    /// The kernel's runtime, which every buffer must belong to.
    runtime: u64,
    /// A buffer of another runtime was passed.
    foreign: bool,
}

/// The most parameters a typed kernel has.
const MAX_ARGS: usize = 12;

impl<'b> ArgList<'b> {
    /// The arguments `args` of a launch of `kernel`, of signature `S`, with
    /// every buffer of the runtime `runtime`.
    ///
    /// # Errors
    ///
    /// [`Error::WrongDevice`] for a buffer of another runtime.
    #[inline]
    fn collect<S: Signature>(
        kernel: &'static str,
        runtime: u64,
        args: impl Args<'b, S>,
    ) -> Result<Self> {
        let mut l = ArgList {
            args: [KernelArg::U64(0); MAX_ARGS],
            lens: [0; MAX_ARGS],
            n: 0,
            touches: SmallVec::new(),
            runtime,
            foreign: false,
        };
        args.push_all(&mut l);
        if l.n != S::PARAMS.len() {
            // Only an `Args` of this crate's tuples lays out arguments.
            return Err(Error::BadKernelArgs {
                kernel,
                problem: format!("{} arguments for {} parameters", l.n, S::PARAMS.len()),
            });
        }
        if l.foreign {
            return Err(Error::WrongDevice {
                what: "a kernel argument",
            });
        }
        Ok(l)
    }

    /// Submits the launch (see [`TaskContext::submit_kernel`]).
    ///
    /// # Safety
    ///
    /// As for [`TaskContext::submit_kernel`].
    #[inline]
    unsafe fn submit<'k>(
        mut self,
        t: &TaskContext,
        kernel: &'static str,
        cfg: LaunchConfig,
        resolve: impl FnOnce(&Runtime) -> Result<KernelCall<'k>>,
    ) -> Result<()> {
        let n = self.n;
        // SAFETY: the caller's contract.
        unsafe {
            t.submit_kernel(
                kernel,
                cfg,
                resolve,
                &self.args[..n],
                &self.lens[..n],
                &mut self.touches,
            )
        }
    }

    fn push(&mut self, arg: KernelArg, len: usize) {
        self.args[self.n] = arg;
        self.lens[self.n] = len;
        self.n += 1;
    }

    fn push_buffer(&mut self, ptr: u64, len: usize, runtime: u64) {
        self.foreign |= runtime != self.runtime;
        self.push(KernelArg::Ptr(ptr), len);
    }
}

/// A value that can be passed for parameter `P`: `&B` for [`In<T>`], `&mut
/// B` for [`Out<T>`] (`B` a [`crate::Buffer`] or a view of `T`; for
/// `Out`, a writable one: not a read-only [`crate::View`]), the scalar
/// itself for a scalar (a `usize` for a `u64`). Sealed: a launch's argument
/// list is laid out by the runtime alone.
pub trait Arg<'b, P: KernelParam>: sealed::SealedArg {
    #[doc(hidden)]
    fn push(self, l: &mut ArgList<'b>);
}

impl<'b, T: DeviceRepr, B: DeviceSlice<T> + ?Sized> Arg<'b, In<T>> for &'b B {
    fn push(self, l: &mut ArgList<'b>) {
        l.push_buffer(self.device_ptr(), self.len(), self.runtime_id());
        l.touches.push(Touch::read(self));
    }
}

impl<'b, T: DeviceRepr, B: DeviceSliceMut<T> + ?Sized> Arg<'b, Out<T>> for &'b mut B {
    fn push(self, l: &mut ArgList<'b>) {
        l.push_buffer(self.device_ptr(), self.len(), self.runtime_id());
        l.touches.push(Touch::write(self));
    }
}

/// A raw device pointer to `len` elements of `T` (from
/// [`RawTask::raw_ptr`](crate::raw::RawTask::raw_ptr), or memory of foreign code), passed for an
/// [`In<T>`] or [`Out<T>`] parameter: *untracked*, the runtime neither checks
/// nor orders what the kernel does through it (see the contract of
/// [`Kernel::launch`]). On the host backend the host implementation gets it
/// as a slice of `len` elements.
#[derive(Clone, Copy, Debug)]
pub struct Untracked<T> {
    ptr: u64,
    len: usize,
    _t: PhantomData<fn() -> T>,
}

impl<T> Untracked<T> {
    /// `len` elements of `T` at the device address `ptr`. Nothing is
    /// checked here: the launch that takes it is `unsafe`, and its caller
    /// answers for the memory.
    pub const fn new(ptr: u64, len: usize) -> Self {
        Untracked {
            ptr,
            len,
            _t: PhantomData,
        }
    }
}

/// An optional buffer: `Some` as the buffer itself, `None` as a null
/// pointer of no elements (the kernel must not touch it; a host
/// implementation sees an empty slice). For kernels with parameters a
/// launch may leave out, such as [`gpu_kernels`' element-wise
/// kernels](https://docs.rs/gpu-kernels).
impl<'b, T: DeviceRepr, B: DeviceSlice<T> + ?Sized> Arg<'b, In<T>> for Option<&'b B> {
    fn push(self, l: &mut ArgList<'b>) {
        match self {
            Some(b) => Arg::<In<T>>::push(b, l),
            None => l.push(KernelArg::Ptr(0), 0),
        }
    }
}

/// An optional buffer written: as for reads (`Option<&B>`).
impl<'b, T: DeviceRepr, B: DeviceSliceMut<T> + ?Sized> Arg<'b, Out<T>> for Option<&'b mut B> {
    fn push(self, l: &mut ArgList<'b>) {
        match self {
            Some(b) => Arg::<Out<T>>::push(b, l),
            None => l.push(KernelArg::Ptr(0), 0),
        }
    }
}

impl<'b, T: DeviceRepr> Arg<'b, In<T>> for Untracked<T> {
    fn push(self, l: &mut ArgList<'b>) {
        l.push(KernelArg::Ptr(self.ptr), self.len);
    }
}

impl<'b, T: DeviceRepr> Arg<'b, Out<T>> for Untracked<T> {
    fn push(self, l: &mut ArgList<'b>) {
        l.push(KernelArg::Ptr(self.ptr), self.len);
    }
}

/// A kernel signature: a tuple of [`KernelParam`]s, `(Out<f32>, In<f32>,
/// u64)` for `(float*, const float*, unsigned long long)`. Implemented for
/// tuples of up to 12.
pub trait Signature: 'static {
    /// The parameters, in order.
    const PARAMS: &'static [Param];
    /// The parameters as a CUDA C source should declare them, in order.
    #[doc(hidden)]
    const C_PARAMS: &'static [CParam];
    /// A host implementation as a plain function over the host forms of
    /// the parameters (`for<'a> fn(&'a mut [f32], &'a [f32], u64)` for
    /// `(Out<f32>, In<f32>, u64)`), as a [`Builtin`] holds it: a closure
    /// that captures nothing coerces to it, in a `static` too.
    type HostImpl: Copy + Send + Sync + 'static;
    /// Runs `f` on one launch's arguments.
    ///
    /// # Safety
    ///
    /// As for [`HostFn::call`].
    #[doc(hidden)]
    unsafe fn call_host(f: Self::HostImpl, args: &[KernelArg], lens: &[usize]);
}

/// The arguments of a launch of a kernel of signature `S`: a tuple of
/// [`Arg`]s, one per parameter.
pub trait Args<'b, S: Signature> {
    #[doc(hidden)]
    fn push_all(self, l: &mut ArgList<'b>);
}

/// A host implementation of a kernel of signature `S`: any `Fn` over the
/// host forms of its parameters (`&[T]` for [`In<T>`], `&mut [T]` for
/// [`Out<T>`], scalars as they are), run once per launch on the stream's
/// thread of the host backend. Annotate the closure's parameter types.
pub trait HostFn<S: Signature>: Send + Sync + 'static {
    /// Runs the implementation on the arguments of one launch.
    ///
    /// # Safety
    ///
    /// `args` and `lens` are a launch's, as [`Args`] laid them out: each
    /// buffer live, ordered and not otherwise referenced while it runs.
    #[doc(hidden)]
    unsafe fn call(&self, args: &[KernelArg], lens: &[usize]);
}

macro_rules! signature {
    ($($p:ident $a:ident $i:tt),+) => {
        impl<$($p: KernelParam),+> Signature for ($($p,)+) {
            const PARAMS: &'static [Param] = &[$($p::PARAM),+];
            const C_PARAMS: &'static [CParam] = &[$($p::C),+];
            type HostImpl = for<'a> fn($($p::Host<'a>),+);
            unsafe fn call_host(f: Self::HostImpl, args: &[KernelArg], lens: &[usize]) {
                // SAFETY: the caller's contract, argument by argument.
                f($(unsafe { $p::host(args[$i], lens[$i]) }),+)
            }
        }
        impl<'b, $($p: KernelParam, $a: Arg<'b, $p>),+> Args<'b, ($($p,)+)> for ($($a,)+) {
            fn push_all(self, l: &mut ArgList<'b>) {
                $(self.$i.push(l);)+
            }
        }
        impl<F, $($p: KernelParam),+> HostFn<($($p,)+)> for F
        where
            F: for<'a> Fn($($p::Host<'a>),+) + Send + Sync + 'static,
        {
            unsafe fn call(&self, args: &[KernelArg], lens: &[usize]) {
                // SAFETY: the caller's contract, argument by argument.
                self($(unsafe { $p::host(args[$i], lens[$i]) }),+)
            }
        }
    };
}
signature!(A0 X0 0);
signature!(A0 X0 0, A1 X1 1);
signature!(A0 X0 0, A1 X1 1, A2 X2 2);
signature!(A0 X0 0, A1 X1 1, A2 X2 2, A3 X3 3);
signature!(A0 X0 0, A1 X1 1, A2 X2 2, A3 X3 3, A4 X4 4);
signature!(A0 X0 0, A1 X1 1, A2 X2 2, A3 X3 3, A4 X4 4, A5 X5 5);
signature!(A0 X0 0, A1 X1 1, A2 X2 2, A3 X3 3, A4 X4 4, A5 X5 5, A6 X6 6);
signature!(A0 X0 0, A1 X1 1, A2 X2 2, A3 X3 3, A4 X4 4, A5 X5 5, A6 X6 6, A7 X7 7);
signature!(A0 X0 0, A1 X1 1, A2 X2 2, A3 X3 3, A4 X4 4, A5 X5 5, A6 X6 6, A7 X7 7, A8 X8 8);
signature!(A0 X0 0, A1 X1 1, A2 X2 2, A3 X3 3, A4 X4 4, A5 X5 5, A6 X6 6, A7 X7 7, A8 X8 8,
    A9 X9 9);
signature!(A0 X0 0, A1 X1 1, A2 X2 2, A3 X3 3, A4 X4 4, A5 X5 5, A6 X6 6, A7 X7 7, A8 X8 8,
    A9 X9 9, A10 X10 10);
signature!(A0 X0 0, A1 X1 1, A2 X2 2, A3 X3 3, A4 X4 4, A5 X5 5, A6 X6 6, A7 X7 7, A8 X8 8,
    A9 X9 9, A10 X10 10, A11 X11 11);

/// A kernel of a loaded module with signature `S`, looked up by name
/// ([`crate::LoadedModule::kernel`]) and checked against the module's PTX
/// (each parameter's size and kind; an untyped `.bN` one, as NVRTC passes
/// structs by value and `__grid_constant__` parameters, by size only).
/// Cheap to clone; belongs to one runtime.
///
/// ```
/// use gpu_sched::{Kernel, LaunchConfig, Out};
/// # fn main() -> gpu_sched::Result<()> {
/// const PTX: &str = ".version 7.0\n.target sm_70\n.address_size 64\n\
///     .visible .entry twice(.param .u64 y, .param .u64 n)\n{\n\tret;\n}\n";
/// let rt = gpu_sched::Runtime::global()?;
/// // The signature, checked against the PTX entry; a host twin for the host backend.
/// let k: Kernel<(Out<f32>, u64)> = rt
///     .load_ptx(PTX)?
///     .kernel("twice")?
///     .with_host(|y: &mut [f32], _n: u64| y.iter_mut().for_each(|v| *v *= 2.0));
/// let t = rt.begin_task()?;
/// let mut y = t.from_host(&[1.0f32; 8])?;
/// let n = y.len() as u64;
/// // SAFETY: on the host backend the twin touches `y` only; on CUDA this
/// // kernel does nothing.
/// unsafe { k.launch(&t, LaunchConfig::for_elements(8, 128), (&mut y, n))? };
/// if rt.backend() == gpu_sched::BackendKind::Host {
///     assert_eq!(t.to_vec(&y)?, [2.0; 8]);
/// }
/// # Ok(()) }
/// ```
pub struct Kernel<S: Signature> {
    pub(crate) name: &'static str,
    pub(crate) rt: Runtime,
    /// `CUfunction` on CUDA, 0 on the host backend.
    pub(crate) handle: u64,
    pub(crate) host: Option<Arc<ErasedHost>>,
    pub(crate) _sig: PhantomData<fn(S)>,
}

impl<S: Signature> Clone for Kernel<S> {
    fn clone(&self) -> Self {
        Kernel {
            name: self.name,
            rt: self.rt.clone(),
            handle: self.handle,
            host: self.host.clone(),
            _sig: PhantomData,
        }
    }
}

impl<S: Signature> std::fmt::Debug for Kernel<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kernel")
            .field("name", &self.name)
            .field("params", &S::PARAMS)
            .field("host", &self.host.is_some())
            .finish()
    }
}

impl<S: Signature> Kernel<S> {
    /// The entry's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Gives the kernel a host implementation, which the host backend runs
    /// in place of the PTX (once per launch, whatever the configuration).
    /// Without one, a launch on the host backend is
    /// [`Error::NoHostImplementation`].
    pub fn with_host(mut self, f: impl HostFn<S>) -> Self {
        self.host = Some(Arc::new(move |args: &[KernelArg], lens: &[usize]| {
            // SAFETY: the host backend calls this with a launch's
            // arguments, each buffer live and ordered for the stream's
            // thread, and `&mut` ones not aliased (the launch borrowed them
            // so).
            unsafe { f.call(args, lens) }
        }));
        self
    }

    /// Launches the kernel with `cfg` on `t`'s stream: `&` buffers are
    /// reads and `&mut` buffers writes for the ledger (X2), checked against
    /// the signature by the compiler; the configuration is checked against
    /// CUDA's limits on both backends.
    ///
    /// # Safety
    ///
    /// The runtime orders every buffer passed, but cannot see what the
    /// kernel does with them. The caller guarantees, for this
    /// configuration and these scalars, that the kernel (and its host
    /// implementation) reads only within the buffers passed and writes only
    /// within those passed as `&mut`, each within its length. A wrapper
    /// that derives the configuration and the scalars from its buffers'
    /// lengths can be a safe function.
    ///
    /// # Errors
    ///
    /// [`Error::BadLaunch`] for a configuration CUDA refuses;
    /// [`Error::NoHostImplementation`] on the host backend without one;
    /// [`Error::WrongDevice`]; driver errors. Nothing is submitted then.
    pub unsafe fn launch<'b>(
        &self,
        t: &TaskContext,
        cfg: LaunchConfig,
        args: impl Args<'b, S>,
    ) -> Result<()> {
        t.runtime().check_same(self.rt.id(), "the kernel")?;
        let l = ArgList::collect::<S>(self.name, self.rt.id(), args)?;
        let resolve = |rt: &Runtime| {
            let host = match (&self.host, rt.backend()) {
                (Some(h), _) => HostCall::User(h),
                (None, crate::BackendKind::Cuda) => HostCall::None,
                (None, crate::BackendKind::Host) => {
                    return Err(Error::NoHostImplementation {
                        kernel: self.name.to_owned(),
                    })
                }
            };
            Ok(KernelCall {
                handle: self.handle,
                host,
            })
        };
        // SAFETY: this function's contract: the kernel stays within the
        // buffers passed, writing only the `&mut` ones. The arguments match
        // the signature, which `LoadedModule::kernel` checked against the
        // PTX entry; `handle` is a function of this runtime's driver (same
        // runtime, checked above).
        unsafe { l.submit(t, self.name, cfg, resolve) }
    }
}

impl BuiltinEntry {
    /// The entry `name`, of signature `S`.
    pub const fn of<S: Signature>(name: &'static str) -> Self {
        BuiltinEntry::new(name, S::PARAMS)
    }
}

impl Runtime {
    /// The driver's handle of the built-in `kernel` (`CUfunction` as an
    /// integer on CUDA, 0 on the host backend), loading its module on first
    /// use; for interop and for benchmarks against raw launches.
    ///
    /// # Errors
    ///
    /// A driver error loading the module; [`Error::BadKernelArgs`] if its
    /// PTX disagrees with a signature; [`Error::NoSuchKernel`] if the
    /// kernel is not in its module's list.
    pub fn cu_function<S: Signature>(&self, kernel: &Builtin<S>) -> Result<u64> {
        let k = self
            .modules()
            .kernel(self.driver(), kernel.module(), kernel.index()?)?;
        Ok(k.handle)
    }
}

/// Index not looked up yet.
const UNRESOLVED: usize = usize::MAX;

/// A built-in kernel of signature `S`, as a `static`: its module, its PTX
/// entry name and its host implementation (which the host backend runs in
/// place of the PTX), declared once. Resolved per runtime through the
/// runtime's module cache; launched like a [`Kernel`], checked by the
/// compiler against `S`.
///
/// ```
/// use gpu_sched::{Builtin, BuiltinEntry, BuiltinModule, LaunchConfig, Out};
/// # fn main() -> gpu_sched::Result<()> {
/// const PTX: &str = ".version 7.0\n.target sm_70\n.address_size 64\n\
///     .visible .entry twice(.param .u64 y, .param .u64 n)\n{\n\tret;\n}\n";
/// static MODULE: BuiltinModule =
///     BuiltinModule::new("doc", PTX, &[BuiltinEntry::of::<(Out<f32>, u64)>("twice")]);
/// // The signature named in the call too: the closure's parameter types
/// // come from it.
/// static TWICE: Builtin<(Out<f32>, u64)> = Builtin::<(Out<f32>, u64)>::new(&MODULE, "twice", |y, _n| {
///     y.iter_mut().for_each(|v| *v *= 2.0)
/// });
/// let rt = gpu_sched::Runtime::global()?;
/// let t = rt.begin_task()?;
/// let mut y = t.from_host(&[1.0f32; 8])?;
/// let n = y.len();
/// // SAFETY: on the host backend the host implementation touches `y`
/// // only; on CUDA this kernel does nothing.
/// unsafe { TWICE.launch(&t, LaunchConfig::for_elements(8, 128), (&mut y, n))? };
/// if rt.backend() == gpu_sched::BackendKind::Host {
///     assert_eq!(t.to_vec(&y)?, [2.0; 8]);
/// }
/// # Ok(()) }
/// ```
///
/// A wrong argument list does not compile: too few arguments, too many, a
/// scalar of another type, a read (`&`) buffer for an [`Out`], a scalar
/// for an `Out`, a written buffer for a scalar:
///
/// ```compile_fail,E0277
/// # fn f(t: &gpu_sched::TaskContext, k: &'static gpu_sched::Builtin<(gpu_sched::Out<f32>, f32, u64)>, a: &mut gpu_sched::Buffer<f32>) {
/// let _ = unsafe { k.launch(t, gpu_sched::LaunchConfig::linear(1, 1), (a, 0.0f32)) };
/// # }
/// ```
///
/// ```compile_fail,E0277
/// # fn f(t: &gpu_sched::TaskContext, k: &'static gpu_sched::Builtin<(gpu_sched::Out<f32>, f32, u64)>, a: &mut gpu_sched::Buffer<f32>) {
/// let _ = unsafe { k.launch(t, gpu_sched::LaunchConfig::linear(1, 1), (a, 0.0f32, 4u64, 1u32)) };
/// # }
/// ```
///
/// ```compile_fail,E0277
/// # fn f(t: &gpu_sched::TaskContext, k: &'static gpu_sched::Builtin<(gpu_sched::Out<f32>, f32, u64)>, a: &mut gpu_sched::Buffer<f32>) {
/// let _ = unsafe { k.launch(t, gpu_sched::LaunchConfig::linear(1, 1), (a, 0.0f64, 4u64)) };
/// # }
/// ```
///
/// ```compile_fail,E0277
/// # fn f(t: &gpu_sched::TaskContext, k: &'static gpu_sched::Builtin<(gpu_sched::Out<f32>, f32, u64)>, a: &gpu_sched::Buffer<f32>) {
/// let _ = unsafe { k.launch(t, gpu_sched::LaunchConfig::linear(1, 1), (a, 0.0f32, 4u64)) };
/// # }
/// ```
///
/// ```compile_fail,E0277
/// # fn f(t: &gpu_sched::TaskContext, k: &'static gpu_sched::Builtin<(gpu_sched::Out<f32>, f32, u64)>, a: &mut gpu_sched::Buffer<f32>) {
/// let _ = unsafe { k.launch(t, gpu_sched::LaunchConfig::linear(1, 1), (4u64, 0.0f32, 4u64)) };
/// # }
/// ```
///
/// ```compile_fail,E0277
/// # fn f(t: &gpu_sched::TaskContext, k: &'static gpu_sched::Builtin<(gpu_sched::Out<f32>, f32, u64)>, a: &mut gpu_sched::Buffer<f32>, b: &mut gpu_sched::Buffer<f32>) {
/// let _ = unsafe { k.launch(t, gpu_sched::LaunchConfig::linear(1, 1), (a, b, 4u64)) };
/// # }
/// ```
///
/// A launch is `unsafe` (the runtime cannot see what the kernel does with
/// the buffers):
///
/// ```compile_fail,E0133
/// # fn f(t: &gpu_sched::TaskContext, k: &'static gpu_sched::Builtin<(gpu_sched::Out<f32>, u64)>, b: &mut gpu_sched::Buffer<f32>) {
/// let _ = k.launch(t, gpu_sched::LaunchConfig::linear(1, 1), (b, 1u64 << 40)); // error: unsafe
/// # }
/// ```
pub struct Builtin<S: Signature> {
    module: &'static BuiltinModule,
    name: &'static str,
    host: S::HostImpl,
    /// The kernel's index in `module.entries`, found by name at the first
    /// launch ([`UNRESOLVED`] until then).
    index: AtomicUsize,
}

impl<S: Signature> std::fmt::Debug for Builtin<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Builtin")
            .field("module", &self.module.name())
            .field("name", &self.name)
            .field("params", &S::PARAMS)
            .finish()
    }
}

impl<S: Signature> Builtin<S> {
    /// The kernel `name` of `module` (an entry of its list) with the host
    /// implementation `host`, a closure that captures nothing. Name the
    /// signature in the call, `Builtin::<S>::new(..)`: the closure's
    /// parameter types are inferred from it.
    pub const fn new(
        module: &'static BuiltinModule,
        name: &'static str,
        host: S::HostImpl,
    ) -> Self {
        Builtin {
            module,
            name,
            host,
            index: AtomicUsize::new(UNRESOLVED),
        }
    }

    /// The PTX entry's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    pub(crate) fn module(&self) -> &'static BuiltinModule {
        self.module
    }

    /// The kernel's index in its module, looked up by name once.
    #[inline]
    pub(crate) fn index(&self) -> Result<usize> {
        let i = self.index.load(Ordering::Relaxed);
        if i != UNRESOLVED {
            return Ok(i);
        }
        let i = self
            .module
            .entries()
            .iter()
            .position(|e| e.name() == self.name)
            .ok_or_else(|| Error::NoSuchKernel(self.name.to_owned()))?;
        self.index.store(i, Ordering::Relaxed);
        Ok(i)
    }

    /// Launches the kernel with `cfg` on `t`'s stream, as
    /// [`Kernel::launch`] does a loaded one (loading its module into `t`'s
    /// runtime on first use).
    ///
    /// # Safety
    ///
    /// As for [`Kernel::launch`]: for this configuration and these scalars
    /// the kernel (and its host implementation) reads only within the
    /// buffers passed and writes only within those passed as `&mut` (or,
    /// for an [`Untracked`], memory the caller answers for and orders).
    ///
    /// # Errors
    ///
    /// [`Error::BadLaunch`] for a configuration CUDA refuses;
    /// [`Error::WrongDevice`]; [`Error::BadKernelArgs`] if the module's PTX
    /// disagrees with a signature (when it is loaded); driver errors.
    /// Nothing is submitted then.
    #[inline]
    pub unsafe fn launch<'b>(
        &'static self,
        t: &TaskContext,
        cfg: LaunchConfig,
        args: impl Args<'b, S>,
    ) -> Result<()> {
        let l = ArgList::collect::<S>(self.name, t.runtime().id(), args)?;
        let resolve = |rt: &Runtime| {
            let k = rt
                .modules()
                .kernel(rt.driver(), self.module, self.index()?)?;
            Ok(KernelCall {
                handle: k.handle,
                host: HostCall::Builtin(self),
            })
        };
        // SAFETY: this function's contract; the arguments match `S`, which
        // the module's load checked against the PTX entry, and the handle
        // is of `t`'s runtime's driver (its module cache).
        unsafe { l.submit(t, self.name, cfg, resolve) }
    }
}

impl<S: Signature> BuiltinHost for Builtin<S> {
    unsafe fn call(&self, args: &[KernelArg], lens: &[usize]) {
        // SAFETY: the caller's contract (a launch of this kernel).
        unsafe { S::call_host(self.host, args, lens) }
    }
}
