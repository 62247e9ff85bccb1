//! Pinned staging memory for host <-> device pipelines (`par_map`).

use crate::buffer::{DeviceRepr, DeviceSlice, DeviceSliceMut};
use crate::context::{TaskContext, Touch};
use crate::error::{Error, Result};
use crate::runtime::Runtime;
use std::sync::OnceLock;

/// Host copies of at least this many bytes run on the copy threads.
const PAR_COPY_MIN: usize = 4 << 20;
/// The piece of a host copy one copy thread takes at a time.
const PAR_COPY_PIECE: usize = 1 << 20;

/// The threads of [`par_copy`]: one a CPU, started at the first large
/// copy. `None` on one CPU.
fn copy_pool() -> Option<&'static rayon_core::ThreadPool> {
    static POOL: OnceLock<Option<rayon_core::ThreadPool>> = OnceLock::new();
    POOL.get_or_init(|| {
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        if n < 2 {
            return None;
        }
        rayon_core::ThreadPoolBuilder::new()
            .num_threads(n)
            .thread_name(|i| format!("gpu-host-copy-{i}"))
            .build()
            .ok()
    })
    .as_ref()
}

/// `dst.copy_from_slice(src)` for large host copies, as [`Staging`] does
/// its own (into and out of page-locked memory): split into 1 MiB pieces
/// over one thread a CPU (a pool of its own, started at the first large
/// copy), each piece written with non-temporal stores on x86-64 (no read
/// of the destination into the cache first). On the H200's host one
/// thread's `memcpy` moves about 5 GB/s and sixteen about 45 GB/s (issue
/// 16's probe, `benches/results/investigations/2026-12-01-host-copy-probe/`), so a
/// pipeline from pageable memory is bound by these copies. Below 4 MiB, a
/// plain copy on the calling thread. The calling thread waits (a worker of
/// another Rayon pool runs that pool's jobs meanwhile, as in any cross-pool
/// call).
///
/// # Panics
///
/// If the lengths differ (as `copy_from_slice`).
pub fn par_copy<T: DeviceRepr>(dst: &mut [T], src: &[T]) {
    assert_eq!(dst.len(), src.len(), "par_copy of unequal lengths");
    match copy_pool() {
        Some(pool) if std::mem::size_of_val(src) >= PAR_COPY_MIN => {
            let per = (PAR_COPY_PIECE / std::mem::size_of::<T>().max(1)).max(1);
            pool.scope(|s| {
                for (d, x) in dst.chunks_mut(per).zip(src.chunks(per)) {
                    s.spawn(move |_| stream_copy(d, x));
                }
            });
        }
        _ if std::mem::size_of_val(src) >= PAR_COPY_MIN => stream_copy(dst, src),
        _ => dst.copy_from_slice(src),
    }
}

/// `dst.copy_from_slice(src)` through non-temporal stores on x86-64.
fn stream_copy<T: DeviceRepr>(dst: &mut [T], src: &[T]) {
    assert_eq!(dst.len(), src.len());
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: `src` and `dst` are valid for `size_of_val(src)` bytes
        // (equal lengths, checked), and do not overlap (`&` and `&mut`);
        // the bytes copied are those of valid `T`s, into `T`s.
        unsafe {
            stream_copy_bytes(
                dst.as_mut_ptr() as *mut u8,
                src.as_ptr() as *const u8,
                std::mem::size_of_val(src),
            )
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    dst.copy_from_slice(src);
}

/// Copies `n` bytes, 64 at a time with SSE2 streaming stores (part of
/// x86-64) into 16-byte-aligned destination memory, the ends with
/// `copy_nonoverlapping`, then a store fence: the streamed stores are
/// ordered before every later store of this thread (the release that hands
/// the copy on, a driver call that starts a transfer from it).
///
/// # Safety
///
/// `src` is valid for reads and `dst` for writes of `n` bytes, and they do
/// not overlap.
#[cfg(target_arch = "x86_64")]
unsafe fn stream_copy_bytes(dst: *mut u8, src: *const u8, n: usize) {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_sfence, _mm_stream_si128};
    let head = dst.align_offset(16).min(n);
    // SAFETY: every access lies in the first `n` bytes of
    // `src` or `dst` (the contract): the head below `head <= n`, each
    // 64-byte step below `i + 64 <= n`, the tail from `i <= n` to `n`;
    // `dst + i` is 16-byte aligned in the loop (`i` starts at the
    // alignment offset and steps by 64), as `_mm_stream_si128` needs;
    // unaligned loads need nothing.
    unsafe {
        std::ptr::copy_nonoverlapping(src, dst, head);
        let mut i = head;
        while i + 64 <= n {
            let s = src.add(i) as *const __m128i;
            let d = dst.add(i) as *mut __m128i;
            let (a, b) = (_mm_loadu_si128(s), _mm_loadu_si128(s.add(1)));
            let (c, e) = (_mm_loadu_si128(s.add(2)), _mm_loadu_si128(s.add(3)));
            _mm_stream_si128(d, a);
            _mm_stream_si128(d.add(1), b);
            _mm_stream_si128(d.add(2), c);
            _mm_stream_si128(d.add(3), e);
            i += 64;
        }
        _mm_sfence();
        std::ptr::copy_nonoverlapping(src.add(i), dst.add(i), n - i);
    }
}

/// A page-locked host buffer for asynchronous copies. The host touches it
/// only when no copy through it is in flight: each method waits for the
/// previous copy first, so it is safe to use from safe code.
pub struct Staging<T: DeviceRepr> {
    rt: Runtime,
    ptr: *mut T,
    cap: usize,
    /// A fence after the last copy that may still read or write the
    /// memory (a fence, not the stream: the stream may be recycled or
    /// retired once its task ends).
    in_flight: Option<crate::fence::Fence>,
    /// A copy may be in flight that nothing tracks (recording its fence
    /// failed, and so did a synchronize): the memory is never freed.
    lost: bool,
}

// SAFETY: the staging memory is owned by this value and only touched by the
// thread holding `&mut self` (or by the device, ordered by `in_flight`).
unsafe impl<T: DeviceRepr> Send for Staging<T> {}

impl<T: DeviceRepr> std::fmt::Debug for Staging<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Staging")
            .field("capacity", &self.cap)
            .finish()
    }
}

impl<T: DeviceRepr> Staging<T> {
    /// Pinned memory for `cap` elements.
    ///
    /// # Errors
    ///
    /// A driver error (out of pinned memory).
    pub fn new(rt: &Runtime, cap: usize) -> Result<Self> {
        let bytes = cap
            .checked_mul(std::mem::size_of::<T>())
            .filter(|&b| b <= isize::MAX as usize)
            .ok_or(Error::TooLarge {
                elements: cap,
                element_bytes: std::mem::size_of::<T>(),
                during: "computing a staging size",
            })?;
        let ptr = rt.pinned_take(bytes.max(1))?;
        Ok(Staging {
            rt: rt.clone(),
            ptr: ptr as *mut T,
            cap,
            in_flight: None,
            lost: false,
        })
    }

    /// The capacity, in elements.
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// The runtime (device) whose page-locked memory this is: copies
    /// through it run on that runtime's streams.
    pub fn runtime(&self) -> &Runtime {
        &self.rt
    }

    fn settle(&mut self) -> Result<()> {
        if let Some(f) = self.in_flight.take() {
            if let Err(e) = f.clone().synchronize() {
                self.in_flight = Some(f);
                return Err(e);
            }
        }
        Ok(())
    }

    /// After a copy through the memory was submitted on `ctx`'s stream: a
    /// fence the next host access (and the drop) waits for.
    fn copied(&mut self, ctx: &TaskContext) -> Result<()> {
        match ctx.fence() {
            Ok(f) => {
                self.in_flight = Some(f);
                Ok(())
            }
            Err(e) => {
                if ctx.synchronize_past_errors().is_err() {
                    self.lost = true;
                }
                Err(e)
            }
        }
    }

    /// The staging memory is pinned by this runtime's driver, and
    /// `in_flight` names a stream of it: a task of another runtime would
    /// name a stream this driver does not know (or another one), and the
    /// host could touch the memory under a copy in flight.
    fn same_runtime(&self, ctx: &TaskContext) -> Result<()> {
        self.rt
            .check_same(ctx.rt.id(), "the task of a staging copy")
    }

    fn check(&self, n: usize) -> Result<()> {
        if n > self.cap {
            return Err(Error::LengthMismatch {
                what: "the staging chunk",
                expected: self.cap,
                got: n,
            });
        }
        Ok(())
    }

    /// The staged elements, for the host to read (waits for a copy in
    /// flight first).
    ///
    /// # Errors
    ///
    /// Driver errors from that wait.
    pub fn as_slice(&mut self) -> Result<&[T]> {
        self.settle()?;
        // SAFETY: nothing is in flight; the memory holds `cap` elements.
        Ok(unsafe { std::slice::from_raw_parts(self.ptr, self.cap) })
    }

    /// The staged elements, for the host to write (waits first).
    ///
    /// # Errors
    ///
    /// Driver errors from that wait.
    pub fn as_mut_slice(&mut self) -> Result<&mut [T]> {
        self.settle()?;
        // SAFETY: nothing is in flight; `&mut self` makes this the only view.
        Ok(unsafe { std::slice::from_raw_parts_mut(self.ptr, self.cap) })
    }

    /// Copies the first `dst.len()` staged elements into `dst`,
    /// asynchronously on `ctx`'s stream (no host copy).
    ///
    /// # Errors
    ///
    /// [`Error::LengthMismatch`]; driver errors.
    pub fn send(
        &mut self,
        ctx: &TaskContext,
        dst: &mut (impl DeviceSliceMut<T> + ?Sized),
    ) -> Result<()> {
        self.same_runtime(ctx)?;
        self.check(dst.len())?;
        self.settle()?;
        // SAFETY: the staging memory outlives the copy: `in_flight` makes
        // every later host access and the drop wait for it (`copied`).
        let staged = unsafe { std::slice::from_raw_parts(self.ptr, dst.len()) };
        ctx.copy_from_host_staged(dst, staged)?;
        self.copied(ctx)
    }

    /// Copies `src` into the staging memory asynchronously on `ctx`'s stream
    /// (no host copy); the next host access waits for it.
    ///
    /// # Errors
    ///
    /// [`Error::LengthMismatch`]; driver errors.
    pub fn receive(
        &mut self,
        ctx: &TaskContext,
        src: &(impl DeviceSlice<T> + ?Sized),
    ) -> Result<()> {
        self.same_runtime(ctx)?;
        self.check(src.len())?;
        ctx.host_memory_outside_capture("copying into staging memory")?;
        self.settle()?;
        ctx.rt.check_same(src.runtime_id(), "the source buffer")?;
        let (ptr, bytes, drv) = (src.device_ptr(), src.bytes(), ctx.rt.driver());
        let dst = self.ptr as *mut u8;
        // SAFETY: `tracked` handed `src` to this stream for a read, and its
        // buffer's drop frees it only after a hand-off from this stream
        // (X4). `dst` is this staging memory, `cap` >= `src.len()` elements
        // (checked), with no copy in flight (settled); no capture takes it
        // (checked). The host touches it next only after the fence that
        // `copied` records, or a synchronize, and the drop waits the same.
        ctx.tracked("dtoh", &mut [Touch::read(src)], |_, raw| unsafe {
            drv.copy_dtoh(dst, ptr, bytes, raw)
        })?;
        self.copied(ctx)
    }

    /// The staging memory's address, once no copy through it is in flight;
    /// for asynchronous copies that the caller orders itself (`par_map`
    /// over pinned memory).
    ///
    /// # Errors
    ///
    /// Driver errors from waiting for the copy in flight.
    pub fn settled_ptr(&mut self) -> Result<*mut T> {
        self.settle()?;
        Ok(self.ptr)
    }

    /// Copies `src` into the staging memory, then asynchronously into `dst`
    /// on `ctx`'s stream.
    ///
    /// # Errors
    ///
    /// [`Error::LengthMismatch`]; driver errors.
    pub fn upload(
        &mut self,
        ctx: &TaskContext,
        src: &[T],
        dst: &mut (impl DeviceSliceMut<T> + ?Sized),
    ) -> Result<()> {
        self.same_runtime(ctx)?;
        if src.len() != dst.len() {
            return Err(Error::LengthMismatch {
                what: "the host source",
                expected: dst.len(),
                got: src.len(),
            });
        }
        self.check(src.len())?;
        self.settle()?;
        // SAFETY: no copy is in flight (settled above), `&mut self` makes
        // this the only view of the memory, and `src` fits (checked).
        let staged = unsafe { std::slice::from_raw_parts_mut(self.ptr, src.len()) };
        par_copy(staged, src);
        self.send(ctx, dst)
    }

    /// Copies `src` asynchronously into the staging memory on `ctx`'s
    /// stream, synchronizes that stream (R5), and copies into `dst`.
    ///
    /// # Errors
    ///
    /// [`Error::LengthMismatch`]; driver errors.
    pub fn download(
        &mut self,
        ctx: &TaskContext,
        src: &(impl DeviceSlice<T> + ?Sized),
        dst: &mut [T],
    ) -> Result<()> {
        self.same_runtime(ctx)?;
        self.check(dst.len())?;
        self.settle()?;
        // SAFETY: no copy is in flight; `copy_to_host` waits for its copy
        // before returning.
        let staged = unsafe { std::slice::from_raw_parts_mut(self.ptr, dst.len()) };
        ctx.copy_to_host(src, staged)?;
        par_copy(dst, staged);
        Ok(())
    }
}

impl<T: DeviceRepr> Drop for Staging<T> {
    fn drop(&mut self) {
        if self.lost {
            return;
        }
        if let Some(f) = self.in_flight.take() {
            if self
                .rt
                .wait_past_errors(|| f.clone().synchronize())
                .is_err()
            {
                // Broken context: the device may still read it; keep it.
                return;
            }
        }
        let bytes = (self.cap * std::mem::size_of::<T>()).max(1);
        // SAFETY: the memory came from `pinned_take` of these bytes in `new`
        // and goes back once; the copy in flight, if any, was waited for.
        unsafe { self.rt.pinned_give(self.ptr as *mut u8, bytes) };
    }
}

impl Runtime {
    /// Pinned host memory of `bytes`, from the runtime's cache when it has
    /// a block of that size (pinning pages costs milliseconds).
    pub(crate) fn pinned_take(&self, bytes: usize) -> Result<*mut u8> {
        let ptr = match self.pinned().take_cached(bytes) {
            Some(p) => p as *mut u8,
            None => {
                let (p, _) = self.driver().alloc_host(bytes, false)?;
                self.usage().pinned_allocated(bytes);
                p
            }
        };
        self.pinned().hand_out(ptr as usize, bytes);
        Ok(ptr)
    }

    /// Whether `[addr, addr + bytes)` overlaps page-locked memory this
    /// runtime handed out (a [`Staging`] buffer's).
    pub(crate) fn is_pinned(&self, addr: usize, bytes: usize) -> bool {
        self.pinned().overlaps_live(addr, bytes)
    }

    /// Gives pinned memory back to the cache (up to 1 GiB cached; the rest
    /// is freed).
    ///
    /// # Safety
    ///
    /// `ptr` came from [`Runtime::pinned_take`] with `bytes` and is given
    /// back once; no copy through it is in flight and no reference into it
    /// is left.
    pub(crate) unsafe fn pinned_give(&self, ptr: *mut u8, bytes: usize) {
        if self.pinned().give_back(ptr as usize, bytes) {
            return;
        }
        // SAFETY: the caller's contract; the block is not in the cache.
        if unsafe { self.driver().free_host(ptr, bytes) }.is_ok() {
            self.usage().pinned_freed(bytes);
        }
    }

    /// Frees the cached pinned memory.
    pub fn release_cached_memory(&self) {
        for (p, bytes) in self.pinned().drain_cache() {
            // SAFETY: a cached block came from `alloc_host` with `bytes` and
            // was given back with no copy in flight (`pinned_give`); it left
            // the cache above, once.
            if unsafe { self.driver().free_host(p as *mut u8, bytes) }.is_ok() {
                self.usage().pinned_freed(bytes);
            }
        }
    }
}

#[cfg(test)]
mod test;
