//! State that code outside the runtime keeps per runtime, found by its
//! type ([`Runtime::extension`]): a vendor library's handles, plans or
//! generators per stream slot, which the runtime never names, torn down
//! with the runtime while its context is current and its streams idle.

use super::Runtime;
use parking_lot::RwLock;
use std::any::{Any, TypeId};
use std::sync::Arc;

/// State kept per runtime by a library built on the public API (see
/// [`Runtime::extension`]): made on first use with [`Default`], it lives
/// as long as the runtime.
///
/// The runtime calls [`Extension::teardown`] once, from its drop, after
/// every stream of the runtime finished its work and with the runtime's
/// context current on the dropping thread, before the context and the
/// runtime's memory go: the place to destroy per-stream library objects
/// (cuBLAS handles, cuFFT plans) whose work was queued on the runtime's
/// streams. On the host backend (no context) it is always called. If the
/// CUDA context cannot be made current (a broken device), `teardown` is
/// not called and the objects are left to the process's end.
/// The value itself is dropped after `teardown` (or later, while a clone of
/// the [`Arc`] that [`Runtime::extension`] returned lives).
///
/// `Default` may run more than once for one runtime when threads ask for
/// the extension first at the same time: one value is kept, the others are
/// dropped unused, without `teardown`. Make what needs tearing down later,
/// on use, not in `default`.
pub trait Extension: Default + Send + Sync + 'static {
    /// Destroys what needs the runtime's context, which is current; every
    /// stream of the runtime is idle. Called at most once. The default does
    /// nothing.
    fn teardown(&self) {}
}

/// One extension, with its teardown.
struct Entry {
    ty: TypeId,
    value: Arc<dyn Any + Send + Sync>,
    teardown: fn(&(dyn Any + Send + Sync)),
}

/// A runtime's extensions, in the order they were made. Read-locked to
/// find one (every library call does: sibling tasks' calls do not wait for
/// each other), write-locked only to add one or tear them down.
#[derive(Default)]
pub(crate) struct Extensions {
    entries: RwLock<Vec<Entry>>,
}

impl std::fmt::Debug for Extensions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Extensions")
            .field("count", &self.entries.read().len())
            .finish()
    }
}

/// [`Extension::teardown`] of the `E` behind `value`.
fn teardown_of<E: Extension>(value: &(dyn Any + Send + Sync)) {
    if let Some(e) = value.downcast_ref::<E>() {
        e.teardown();
    }
}

impl Extensions {
    /// The extension of type `E`, made now if there is none. `E::default`
    /// runs without the lock held (it may ask for another extension); if
    /// two threads make one at once, the first stored wins.
    fn get<E: Extension>(&self) -> Arc<E> {
        let ty = TypeId::of::<E>();
        let found =
            |entries: &[Entry]| entries.iter().find(|e| e.ty == ty).map(|e| e.value.clone());
        // The guard is dropped at the end of this statement, before
        // `E::default` runs.
        let existing = found(&self.entries.read());
        let value = match existing {
            Some(v) => v,
            None => {
                let made: Arc<dyn Any + Send + Sync> = Arc::new(E::default());
                let mut entries = self.entries.write();
                match found(&entries) {
                    Some(v) => v,
                    None => {
                        entries.push(Entry {
                            ty,
                            value: made.clone(),
                            teardown: teardown_of::<E>,
                        });
                        made
                    }
                }
            }
        };
        value
            .downcast::<E>()
            .unwrap_or_else(|_| unreachable!("the entry of E's TypeId holds an E"))
    }

    /// Calls every extension's teardown, in the order they were made, and
    /// drops the runtime's references to them. Only from the runtime's drop
    /// (streams idle, context current).
    pub(crate) fn teardown(&self) {
        let entries = std::mem::take(&mut *self.entries.write());
        for e in entries {
            (e.teardown)(&*e.value);
        }
    }
}

impl Runtime {
    /// The state of type `E` this runtime keeps for a library built on
    /// the public API, made with `E::default()` on the first call (one per
    /// runtime and type, shared by every thread): how a library keeps its
    /// handles, plans or generators per stream slot
    /// ([`ForeignStream::slot`](crate::ForeignStream::slot)) without the
    /// runtime naming it. [`Extension::teardown`] runs in the runtime's drop,
    /// with the context current and the streams idle, before the context
    /// goes. Costs a read lock and a short search: take it once per operation,
    /// not per element.
    ///
    /// ```
    /// use gpu_sched::{Extension, Runtime};
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    ///
    /// #[derive(Default)]
    /// struct Calls(AtomicUsize);
    /// impl Extension for Calls {}
    ///
    /// # fn main() -> gpu_sched::Result<()> {
    /// let rt = Runtime::global()?;
    /// rt.extension::<Calls>().0.fetch_add(1, Ordering::Relaxed);
    /// assert!(rt.extension::<Calls>().0.load(Ordering::Relaxed) >= 1);
    /// # Ok(()) }
    /// ```
    pub fn extension<E: Extension>(&self) -> Arc<E> {
        self.inner.extensions.get::<E>()
    }
}
