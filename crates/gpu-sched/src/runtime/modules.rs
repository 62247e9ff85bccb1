//! A runtime's kernel modules: the built-in ones, loaded on first use into
//! lock-free slots a launch scans, and modules loaded from text (users' PTX
//! and CUDA C, DESIGN "Users' kernels and chunk iterators"), loaded once per source and options; the PTX check
//! every module passes before the driver sees it.

use super::Runtime;
use crate::driver::RawKernel;
use crate::error::{Error, Result};
use crate::kernel::ptx::LoadedPtx;
use crate::kernel::BuiltinModule;
use std::sync::Arc;

impl Runtime {
    /// The `index`-th kernel of the built-in module `m`, loading the module
    /// on first use. The common path takes no lock: a scan of the filled
    /// `OnceLock` slots, in load order, for `m`'s address.
    #[inline]
    pub(crate) fn kernel(&self, m: &'static BuiltinModule, index: usize) -> Result<RawKernel> {
        let key = m as *const BuiltinModule as usize;
        if let Some(k) = self.loaded(key) {
            return Ok(k[index]);
        }
        let _g = self.inner.loading.lock();
        if let Some(k) = self.loaded(key) {
            return Ok(k[index]);
        }
        let slot = self
            .inner
            .modules
            .iter()
            .find(|s| s.get().is_none())
            .ok_or(Error::Unsupported(
                "more than 64 kernel modules in one runtime",
            ))?;
        let ptx = self.load_text(m.ptx(), || self.load_checked_ptx(m.ptx().to_owned()))?;
        let k = m
            .entries()
            .iter()
            .map(|e| {
                ptx.entry(e.name(), e.params())
                    .map_err(|problem| Error::BadKernelArgs {
                        kernel: e.name(),
                        problem,
                    })?;
                Ok(RawKernel {
                    handle: self.driver().function(ptx.handle, e.name())?,
                })
            })
            .collect::<Result<Box<[RawKernel]>>>()?;
        let r = k[index];
        // Only loaders set slots, one at a time (the lock): this one is free.
        let _ = slot.set((key, k));
        Ok(r)
    }

    /// The module loaded from `key` (its source and options), loading it
    /// with `load` the first time; a failure is not kept (the next call
    /// tries again).
    pub(crate) fn load_text(
        &self,
        key: &str,
        load: impl FnOnce() -> Result<LoadedPtx>,
    ) -> Result<Arc<LoadedPtx>> {
        let cell = self
            .inner
            .by_source
            .lock()
            .entry(key.to_owned())
            .or_default()
            .clone();
        // Loaded outside the map's lock: loading other sources goes on.
        let r = cell.get_or_init(|| load().map(Arc::new)).clone();
        if r.is_err() {
            self.inner.by_source.lock().remove(key);
        }
        r
    }

    /// Checks `ptx` ([`crate::kernel::ptx`]) and loads it.
    pub(crate) fn load_checked_ptx(&self, ptx: String) -> Result<LoadedPtx> {
        let entries =
            crate::kernel::ptx::entries(&ptx).map_err(|problem| Error::BadPtx { problem })?;
        Ok(LoadedPtx {
            handle: self.driver().load_ptx(&ptx)?,
            entries,
            nvrtc: false,
        })
    }

    /// The kernels of the module at `key`, if loaded.
    #[inline]
    fn loaded(&self, key: usize) -> Option<&[RawKernel]> {
        for slot in self.inner.modules.iter() {
            match slot.get() {
                Some((k, ks)) if *k == key => return Some(ks),
                Some(_) => {}
                None => return None,
            }
        }
        None
    }
}
