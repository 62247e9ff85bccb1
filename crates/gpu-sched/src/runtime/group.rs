//! The devices of a process (DESIGN "Beyond one GPU"): the group, its one ledger, a core per
//! device (driver and pools) opened on first use, and the runtime of each.

use super::{RtRef, Runtime, RuntimeInner, RuntimeOptions, NEXT_RUNTIME};
use crate::driver::{BackendChoice, BackendKind, Driver, SyncMode};
use crate::error::{Error, Result};
use crate::pool::{EventPool, StreamPool};
use gpu_epoch::{Ledger, StreamId};
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};

/// One device's driver and pools: what every runtime of the group reaches
/// (DESIGN "Beyond one GPU": a hand-off from another device's stream records an event of that
/// device on it). Kept while the group lives, so that a stream id of any
/// member always finds its driver.
pub(crate) struct DeviceCore {
    pub(crate) ordinal: usize,
    pub(crate) driver: Arc<dyn Driver>,
    pub(crate) streams: StreamPool,
    pub(crate) events: EventPool,
}

impl std::fmt::Debug for DeviceCore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceCore")
            .field("ordinal", &self.ordinal)
            .finish_non_exhaustive()
    }
}

/// The devices of a process (DESIGN "Beyond one GPU"): one ledger, one stream-id space, a core
/// per device opened on first use, and the runtime of each device while
/// one lives. Each runtime holds its group; the group holds the cores but
/// not the runtimes (no cycle).
pub(crate) struct Group {
    pub(crate) ledger: Arc<Ledger>,
    opts: RuntimeOptions,
    backend: BackendKind,
    /// The host backend's one driver, which every simulated device shares.
    host: Option<Arc<dyn Driver>>,
    pub(super) cores: Box<[OnceLock<Arc<DeviceCore>>]>,
    pub(super) members: parking_lot::Mutex<Vec<Member>>,
}

/// A device's runtime as its group knows it.
#[derive(Clone, Default)]
pub(super) enum Member {
    #[default]
    None,
    Static(&'static RuntimeInner),
    Counted(std::sync::Weak<RuntimeInner>),
}

impl std::fmt::Debug for Group {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Group")
            .field("devices", &self.cores.len())
            .finish_non_exhaustive()
    }
}

impl Group {
    /// The group of the backend `opts` chooses (DESIGN "Beyond one GPU"), no device open yet
    /// (CUDA `Auto` opens `opts.device` to decide, and takes the host
    /// backend if it does not open).
    pub(super) fn open(opts: RuntimeOptions) -> Result<Arc<Group>> {
        let ledger = Arc::new(Ledger::new(
            opts.max_streams.clamp(2, gpu_epoch::MAX_STREAMS),
        ));
        let host = |opts: RuntimeOptions| -> Arc<Group> {
            let driver = crate::driver::open_host(
                opts.host_memory_limit,
                opts.host_stream_limit,
                opts.fault_injection.clone(),
            );
            Group::with(
                opts.host_devices.max(1),
                BackendKind::Host,
                Some(driver),
                opts,
                ledger.clone(),
            )
        };
        match crate::driver::resolve(opts.backend) {
            BackendChoice::Host => Ok(host(opts)),
            BackendChoice::Cuda => {
                let n = crate::driver::cuda_device_count()?;
                Ok(Group::with(
                    n,
                    BackendKind::Cuda,
                    None,
                    opts,
                    ledger.clone(),
                ))
            }
            BackendChoice::Auto => match crate::driver::cuda_device_count() {
                Ok(n) => {
                    let g = Group::with(n, BackendKind::Cuda, None, opts.clone(), ledger.clone());
                    match g.core(opts.device) {
                        Ok(_) => Ok(g),
                        Err(_) => Ok(host(opts)),
                    }
                }
                Err(_) => Ok(host(opts)),
            },
        }
    }

    fn with(
        n: usize,
        backend: BackendKind,
        host: Option<Arc<dyn Driver>>,
        opts: RuntimeOptions,
        ledger: Arc<Ledger>,
    ) -> Arc<Group> {
        Arc::new(Group {
            ledger,
            opts,
            backend,
            host,
            cores: (0..n).map(|_| OnceLock::new()).collect(),
            members: parking_lot::Mutex::new(vec![Member::None; n]),
        })
    }

    /// Device `ordinal`'s core, opened on first use: its driver (the host
    /// backend's shared one), its pools, and peer access both ways with
    /// every core open so far.
    fn core(&self, ordinal: usize) -> Result<&Arc<DeviceCore>> {
        let slot = self.cores.get(ordinal).ok_or_else(|| {
            Error::NoDevice(format!(
                "there is no device {ordinal}: the {} backend has {}",
                self.backend,
                self.cores.len()
            ))
        })?;
        if let Some(c) = slot.get() {
            return Ok(c);
        }
        // One opener at a time (the members' lock is not held here when
        // called from `runtime`, which holds it: a separate lock).
        static OPENING: parking_lot::Mutex<()> = parking_lot::Mutex::new(());
        let _g = OPENING.lock();
        if let Some(c) = slot.get() {
            return Ok(c);
        }
        let driver = match &self.host {
            Some(d) => d.clone(),
            None => crate::driver::open_cuda(ordinal)?,
        };
        let opts = &self.opts;
        let streams = StreamPool::new(self.ledger.capacity(), opts.warm_streams);
        if opts.end_flags {
            streams.init_flags(&*driver);
        }
        let events = EventPool::new();
        let core = Arc::new(DeviceCore {
            ordinal,
            driver,
            streams,
            events,
        });
        core.streams
            .warm(&*core.driver, &self.ledger, opts.warm_streams.max(1))?;
        core.events.warm(&*core.driver, opts.warm_events)?;
        if self.host.is_none() {
            for other in self.cores.iter().filter_map(OnceLock::get) {
                // Peer access where the topology allows; without it peer
                // copies still work (staged by the driver).
                let _ = core.driver.enable_peer_access(&*other.driver);
                let _ = other.driver.enable_peer_access(&*core.driver);
            }
        }
        let _ = slot.set(core);
        Ok(slot.get().expect("set above"))
    }

    /// Device `ordinal`'s runtime: the live one, or a new one.
    pub(super) fn runtime(self: &Arc<Self>, ordinal: usize) -> Result<Runtime> {
        let mut members = self.members.lock();
        let live = match members.get(ordinal) {
            Some(Member::Static(r)) => Some(RtRef::Static(r)),
            Some(Member::Counted(w)) => w.upgrade().map(RtRef::Counted),
            _ => None,
        };
        if let Some(inner) = live {
            return Ok(Runtime { inner });
        }
        let core = self.core(ordinal)?.clone();
        let ledger = &self.ledger;
        let reclaimer = ledger.begin_task();
        let (reclaim_stream, _) = core.streams.acquire(&*core.driver, ledger)?;
        core.streams.reserve(reclaim_stream);
        ledger.bind(&reclaimer, reclaim_stream);
        let inner = Arc::new(RuntimeInner {
            // The low byte is the device (see `Group::member`).
            id: (NEXT_RUNTIME.fetch_add(1, Ordering::Relaxed) << 8) | (ordinal as u64 & 0xff),
            core,
            group: self.clone(),
            ledger: ledger.clone(),
            modules: Default::default(),
            sync_mode: self.opts.sync_mode,
            usage: Default::default(),
            reclaimer,
            reclaim_stream,
            tracer: Default::default(),
            pinned: Default::default(),
            deferred_frees: Default::default(),
            cudarc: OnceLock::new(),
            extensions: Default::default(),
            status_words: Default::default(),
            unreported: Default::default(),
            has_unreported: Default::default(),
            deferred_checks: Default::default(),
            side_streams: Default::default(),
            unresponsive: OnceLock::new(),
            wait_limit: self.opts.wait_limit,
        });
        members[ordinal] = Member::Counted(Arc::downgrade(&inner));
        Ok(Runtime {
            inner: RtRef::Counted(inner),
        })
    }

    /// The live runtime whose id is `id`, if it is of this group: a
    /// runtime's id holds its device in its low byte.
    pub(crate) fn member(&self, id: u64) -> Option<Runtime> {
        let members = self.members.lock();
        let inner = match members.get((id & 0xff) as usize)? {
            Member::Static(r) => RtRef::Static(r),
            Member::Counted(w) => RtRef::Counted(w.upgrade()?),
            Member::None => return None,
        };
        (inner.id == id).then_some(Runtime { inner })
    }

    /// The core that owns stream `s` now, if any (`None`: retired, idle).
    /// Its own core first; a read of the handle, which may change before
    /// the caller locks the stream's capture slot and reads it again.
    pub(crate) fn owner<'a>(&'a self, own: &'a DeviceCore, s: StreamId) -> Option<&'a DeviceCore> {
        if own.streams.raw(s).0 != 0 {
            return Some(own);
        }
        self.cores
            .iter()
            .filter_map(OnceLock::get)
            .find(|c| c.streams.raw(s).0 != 0)
            .map(|c| &**c)
    }
}

impl Drop for DeviceCore {
    fn drop(&mut self) {
        // The group goes: every runtime of it dropped, each after
        // synchronizing this device's streams; again here, cheaply, for
        // work queued by hand-offs since.
        for s in self.streams.all_raw() {
            let _ = self.driver.stream_sync(s, SyncMode::Blocking);
        }
        for e in self.events.drain() {
            let _ = self.driver.destroy_event(e.raw);
        }
        if let Some((p, bytes)) = self.streams.flag_memory() {
            // SAFETY: the end-of-work flags came from `alloc_host` with
            // `bytes`; every stream that writes them was synchronized above
            // (on a broken context the CUDA driver refuses the free), and
            // nothing reads them once the core drops.
            let _ = unsafe { self.driver.free_host(p, bytes) };
        }
        for (id, s) in self.streams.all_with_ids() {
            if let Some(e) = self.streams.take_end_event(id) {
                // Recorded only on this stream, synchronized above.
                let _ = self.driver.destroy_event(e);
            }
            let _ = self.driver.destroy_stream(s);
        }
    }
}
