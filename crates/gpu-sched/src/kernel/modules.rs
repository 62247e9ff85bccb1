//! A runtime's kernel modules: the built-in ones, loaded on first use into
//! lock-free slots a launch scans, and modules loaded from text (users' PTX
//! and CUDA C, DESIGN "Users' kernels and chunk iterators"), loaded once per source and options; the PTX check
//! every module passes before the driver sees it. The runtime holds them
//! ([`Modules`]) and passes its driver to load them: this file sits below
//! the runtime.

use crate::driver::{Driver, RawKernel};
use crate::error::{Error, Result};
use crate::kernel::ptx::LoadedPtx;
use crate::kernel::BuiltinModule;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

/// How many built-in modules one runtime can load.
const MAX_MODULES: usize = 64;

/// A loaded built-in module: the address of its `BuiltinModule`, and its
/// kernels.
type LoadedBuiltins = (usize, Box<[RawKernel]>);

/// A module being loaded from text, or its outcome.
type LoadSlot = Arc<OnceLock<Result<Arc<LoadedPtx>>>>;

/// The modules one runtime loaded (`Runtime::modules`).
pub(crate) struct Modules {
    /// Loaded built-in modules by the address of their `BuiltinModule`,
    /// filled front to back: a launch finds its kernel with a load or two,
    /// no lock.
    builtins: Box<[OnceLock<LoadedBuiltins>]>,
    /// Serializes loading, so a module is loaded once.
    loading: Mutex<()>,
    /// Modules loaded from text, by their source and options (DESIGN
    /// "Users' kernels and chunk iterators"): a source is loaded (or
    /// compiled) once per runtime, the built-in modules and users' alike.
    by_source: Mutex<HashMap<String, LoadSlot>>,
}

impl Default for Modules {
    fn default() -> Self {
        Modules {
            builtins: (0..MAX_MODULES).map(|_| OnceLock::new()).collect(),
            loading: Mutex::new(()),
            by_source: Mutex::default(),
        }
    }
}

impl Modules {
    /// The `index`-th kernel of the built-in module `m`, loading the module
    /// with `driver` (the runtime's) on first use. The common path takes no
    /// lock: a scan of the filled `OnceLock` slots, in load order, for
    /// `m`'s address.
    #[inline]
    pub(crate) fn kernel(
        &self,
        driver: &dyn Driver,
        m: &'static BuiltinModule,
        index: usize,
    ) -> Result<RawKernel> {
        let key = m as *const BuiltinModule as usize;
        if let Some(k) = self.loaded(key) {
            return Ok(k[index]);
        }
        let _g = self.loading.lock();
        if let Some(k) = self.loaded(key) {
            return Ok(k[index]);
        }
        let slot = self
            .builtins
            .iter()
            .find(|s| s.get().is_none())
            .ok_or(Error::Unsupported(
                "more than 64 kernel modules in one runtime",
            ))?;
        let ptx = self.load_text(m.ptx(), || {
            Self::load_checked_ptx(driver, m.ptx().to_owned())
        })?;
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
                    handle: driver.function(ptx.handle, e.name())?,
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
            .by_source
            .lock()
            .entry(key.to_owned())
            .or_default()
            .clone();
        // Loaded outside the map's lock: loading other sources goes on.
        let r = cell.get_or_init(|| load().map(Arc::new)).clone();
        if r.is_err() {
            self.by_source.lock().remove(key);
        }
        r
    }

    /// Checks `ptx` ([`crate::kernel::ptx`]) and loads it with `driver`.
    pub(crate) fn load_checked_ptx(driver: &dyn Driver, ptx: String) -> Result<LoadedPtx> {
        let entries =
            crate::kernel::ptx::entries(&ptx).map_err(|problem| Error::BadPtx { problem })?;
        Ok(LoadedPtx {
            handle: driver.load_ptx(&ptx)?,
            entries,
            nvrtc: false,
        })
    }

    /// The kernels of the module at `key`, if loaded.
    #[inline]
    fn loaded(&self, key: usize) -> Option<&[RawKernel]> {
        for slot in self.builtins.iter() {
            match slot.get() {
                Some((k, ks)) if *k == key => return Some(ks),
                Some(_) => {}
                None => return None,
            }
        }
        None
    }
}
