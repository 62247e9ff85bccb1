//! What the vendor libraries' wrappers share (§14): the one-time probe of a
//! library (a missing library or function is [`Error::LibraryUnavailable`],
//! never a panic: cudarc's own loader panics), and a pool of per-stream
//! objects (handles, plans, generators) keyed by the runtime's stream slot.

use crate::error::Error;
use parking_lot::Mutex;
use std::collections::HashMap;

/// Defines `fn $name() -> Result<()>`: the library of cudarc's `sys`
/// module `$sys` loaded and every function of `$symbols` present, probed
/// once per process; `$library` names it in errors (`"cuSOLVER"`), `$stem`
/// is cudarc's name for its loader (`"cusolver"`).
macro_rules! library_probe {
    ($(#[$m:meta])* $vis:vis fn $name:ident = $sys:path, $library:expr, $stem:expr, $symbols:expr) => {
        $(#[$m])*
        $vis fn $name() -> $crate::error::Result<()> {
            use $sys as sys;
            static PROBE: std::sync::OnceLock<std::result::Result<(), String>> =
                std::sync::OnceLock::new();
            PROBE
                .get_or_init(|| {
                    // SAFETY: loading the library runs its initialisers, as
                    // cudarc's loader would; the handle is closed again.
                    if !unsafe { sys::is_culib_present() } {
                        return Err(format!(
                            "lib{} could not be loaded (searched for {})",
                            $stem,
                            cudarc::get_lib_name_candidates($stem).join(", ")
                        ));
                    }
                    // SAFETY: `is_culib_present` loaded one of the names
                    // `culib` tries, in the same order, so `culib` finds it
                    // without panicking.
                    let lib = unsafe { sys::culib() };
                    for name in $symbols {
                        // SAFETY: only the symbol's presence is checked; it
                        // is never called through this pointer.
                        let found = unsafe { lib.get::<*const std::ffi::c_void>(name.as_bytes()) };
                        if found.is_err() {
                            return Err(format!("lib{} lacks `{name}`", $stem));
                        }
                    }
                    Ok(())
                })
                .clone()
                .map_err(|why| $crate::error::Error::LibraryUnavailable {
                    library: $library,
                    why,
                })
        }
    };
}
pub(crate) use library_probe;

/// A library's failed status as the typed error: `code` and its `name`
/// from `call` of `library`.
pub(crate) fn status_error(
    library: &'static str,
    call: &'static str,
    code: i32,
    name: String,
) -> Error {
    Error::Library {
        library,
        call,
        code,
        name,
    }
}

/// Per-stream objects of one library for one runtime: for each stream slot
/// of the pool (its ledger index, so bounded by the pool's capacity), the
/// idle objects. One is taken for one call and given back, so two tasks
/// sharing a stream on two threads each get their own; all of a slot's
/// objects queue on its stream, so what they own (a workspace, a plan's
/// scratch) stays in its order. A slot's stream is retired idle before
/// another is made in it, so an object rebound to the new one has no work
/// pending.
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
    #[allow(dead_code)]
    pub(crate) fn idle_count(&self) -> usize {
        self.idle.lock().values().map(Vec::len).sum()
    }
}
