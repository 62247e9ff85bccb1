//! The one path every kernel launch takes, typed ([`crate::Kernel`]) or
//! built-in ([`crate::Builtin`]): the configuration checked, the kernel
//! resolved, then the tracked submission (hand-offs, stamps, the driver
//! launch, stamps).

use super::{TaskContext, Touch};
use crate::driver::{KernelCall, KernelNode, NodeOp};
use crate::error::{Error, Result};
use crate::kernel::{KernelArg, LaunchConfig};
use crate::runtime::Runtime;

impl TaskContext {
    /// Submits a launch of `name` with `cfg`: `args` its arguments, `lens`
    /// its buffers' lengths in elements (0 for scalars), `touches` the
    /// buffers to hand off and stamp. `resolve` gives the kernel to run
    /// once the configuration passed.
    ///
    /// # Safety
    ///
    /// `args` match the parameters of the kernel `resolve` gives, which is
    /// of this task's runtime's driver; for this configuration it touches
    /// only the buffers in `touches`, within their lengths, writing only
    /// those touched as writes, and memory the caller answers for and
    /// orders (untracked pointers).
    ///
    /// # Errors
    ///
    /// [`Error::BadLaunch`] for a configuration CUDA refuses; `resolve`'s
    /// errors; driver errors. Nothing is submitted then.
    #[inline]
    pub(crate) unsafe fn submit_kernel<'k>(
        &self,
        name: &'static str,
        cfg: LaunchConfig,
        resolve: impl FnOnce(&Runtime) -> Result<KernelCall<'k>>,
        args: &[KernelArg],
        lens: &[usize],
        touches: &mut [Touch<'_>],
    ) -> Result<()> {
        cfg.check().map_err(|problem| Error::BadLaunch {
            kernel: name.to_owned(),
            problem,
        })?;
        let rt = self.runtime();
        let k = resolve(rt)?;
        // SAFETY: this function's contract: the kernel touches only the
        // buffers in `touches` (or memory the caller orders), and the
        // arguments match it. `tracked` handed every buffer to this stream
        // (`mem` lists them), and a buffer's drop frees it only after a
        // hand-off from this stream (X4).
        self.tracked_node(
            name,
            touches,
            |mem| NodeOp::Kernel(KernelNode::new(&k, cfg, args, lens, mem)),
            |mem, raw| unsafe { rt.driver().launch(&k, cfg, args, lens, mem, raw) },
        )
    }
}
