//! Blocking a task's stream on a [`Gate`] (see `crate::gate`): on CUDA
//! the gate kernel spinning on the gate's flags, on the host backend the
//! stream's thread. Here rather than in `context/`, since the gate kernel
//! is a [`Builtin`], whose launch takes a `TaskContext`: so `context`
//! names nothing of this module's layer.

use super::{Builtin, Out, Untracked};
use crate::context::TaskContext;
use crate::driver::BackendKind;
use crate::error::Result;
use crate::gate::Gate;
use crate::kernel::LaunchConfig;
use std::sync::atomic::Ordering;
use std::time::Duration;

impl TaskContext {
    /// Blocks this task's stream until `gate` opens or `timeout` passes (then
    /// the gate's `timed_out` flag is set). `kernel` is the gate kernel
    /// (`gate(open*, timed_out*, timeout_ns)`), used on CUDA (the host
    /// backend blocks the stream's thread itself). `unsafe`:
    ///
    /// ```compile_fail,E0133
    /// # fn f(t: &gpu_sched::TaskContext, g: &gpu_sched::Gate, k: &'static gpu_sched::Builtin<(gpu_sched::Out<u32>, gpu_sched::Out<u32>, u64)>) {
    /// let _ = t.block_on(g, k, std::time::Duration::from_secs(1)); // error: unsafe
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`crate::Error::WrongDevice`]; [`crate::Error::Capturing`] in a capture
    /// (every launch of the graph would wait on flags it cannot own);
    /// driver errors.
    ///
    /// # Safety
    ///
    /// `kernel` is a gate kernel: `gate(open: *const u32, timed_out: *mut
    /// u32, timeout_ns: u64)`, launched on one thread, which reads only
    /// `*open` and writes only `*timed_out` (`gpu-kernels`' `gate` wrapper
    /// passes its own). On the host backend it is not used.
    pub unsafe fn block_on(
        &self,
        gate: &Gate,
        kernel: &'static Builtin<(Out<u32>, Out<u32>, u64)>,
        timeout: Duration,
    ) -> Result<()> {
        self.runtime().check_same(gate.rt.id(), "the gate")?;
        self.bind()?;
        if self.in_scope_capture() || self.runtime().ledger_rw().is_capturing(self.sid()) {
            // Every launch of the graph would wait on the gate's flags,
            // which the graph cannot own: refused before anything is
            // queued (the gate keeps no lost flags).
            return Err(crate::Error::Capturing {
                what: "blocking on a gate in a capture",
            });
        }
        let ns = timeout.as_nanos().min(u64::MAX as u128) as u64;
        match self.runtime().backend() {
            // SAFETY: the two flags are 4-aligned words within the gate's
            // allocation; the gate frees them only after a fence after every
            // operation blocked on it passed (`used_by`, below), or the
            // device's synchronize (`unfenced`), and touches them only
            // through atomics (`flag`).
            BackendKind::Host => unsafe {
                let (open, timed_out) = (gate.host as *const u32, gate.host.add(4) as *mut u32);
                self.runtime()
                    .driver()
                    .host_gate(self.raw(), open, timed_out, ns)
            },
            // SAFETY: the caller passes a gate kernel (this fn's contract),
            // which touches only the gate's two flags: mapped pinned memory
            // the gate owns and frees only after a fence after every
            // operation blocked on it passed (`used_by`, below), or the
            // device's synchronize (`unfenced`).
            BackendKind::Cuda => unsafe {
                let (open, timed_out) =
                    (Untracked::new(gate.dev, 1), Untracked::new(gate.dev + 4, 1));
                kernel.launch(self, LaunchConfig::linear(1, 1), (open, timed_out, ns))
            },
        }?;
        match self.fence() {
            Ok(f) => {
                gate.used_by.lock().push(f);
                Ok(())
            }
            Err(e) => {
                gate.unfenced.store(true, Ordering::SeqCst);
                Err(e)
            }
        }
    }
}
