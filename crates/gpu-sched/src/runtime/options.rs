//! How a runtime is set up (`RuntimeOptions`), and the read-only views it
//! hands out: its ledger (`LedgerView`) and its live resources (`LiveCounts`).

use crate::driver::{BackendChoice, SyncMode};
use gpu_epoch::{CounterSnapshot, Generation, Ledger, StreamEpoch, StreamId, TaskId};
use std::sync::Arc;

/// How a runtime is set up.
#[derive(Clone, Debug)]
pub struct RuntimeOptions {
    /// The backend.
    pub backend: BackendChoice,
    /// The CUDA device ordinal.
    pub device: usize,
    /// Streams created up front (X5).
    pub warm_streams: usize,
    /// Events created up front (X5).
    pub warm_events: usize,
    /// The most streams the ledger tracks (at most 256).
    pub max_streams: usize,
    /// How stream synchronizes wait.
    pub sync_mode: SyncMode,
    /// Host backend: bytes of "device" memory before allocations fail.
    pub host_memory_limit: usize,
    /// Host backend: how many streams it creates before creating one fails
    /// (a driver error, as a device out of resources gives).
    pub host_stream_limit: usize,
    /// Whether the device marks the end of each task's work in mapped
    /// pinned memory (`cuStreamWriteValue32`), so that the stream pool sees
    /// a stream idle with a load. Off, or where the device refuses, the pool
    /// asks the driver (`cuStreamQuery`, about 1.4 us on an H200).
    ///
    /// Default: off (on if the environment sets `GPU_END_FLAGS=1`). Each
    /// write follows an event recorded on the stream; written straight
    /// behind a running kernel, it sometimes held kernels launched just
    /// after it on other streams back until that kernel ended, and with the
    /// event before it, still in 1 of 20 fresh processes on an H100
    /// (DESIGN "Cold start"): sibling overlap on a cold start comes first.
    pub end_flags: bool,
    /// Host backend: how many devices it simulates (one driver, one race
    /// detector, so that ordering across devices is checked). CUDA counts
    /// the devices the driver reports.
    pub host_devices: usize,
    /// Host backend, tests only: faults injected into its driver calls
    /// (the `k`-th fails, see [`crate::FaultInjector`]). Ignored by CUDA.
    #[doc(hidden)]
    pub fault_injection: Option<Arc<crate::FaultInjector>>,
    /// How long a host wait that guards memory (a copy through borrowed
    /// host memory, a gate's end, a dropped buffer's hand-off) retries a
    /// driver error while the device reports no broken context. Past it
    /// the wait returns [`crate::Error::DeviceUnresponsive`], and so does
    /// every such wait after it: the runtime treats the device as broken
    /// and keeps (never frees) memory it may still use. Default: 60 s.
    pub wait_limit: std::time::Duration,
}

impl Default for RuntimeOptions {
    fn default() -> Self {
        RuntimeOptions {
            backend: BackendChoice::Auto,
            device: 0,
            warm_streams: 8,
            warm_events: 32,
            max_streams: 256,
            sync_mode: SyncMode::SpinThenYield,
            host_memory_limit: 8 << 30,
            host_stream_limit: usize::MAX,
            end_flags: std::env::var_os("GPU_END_FLAGS").is_some_and(|v| v == "1"),
            host_devices: 1,
            fault_injection: None,
            wait_limit: std::time::Duration::from_secs(60),
        }
    }
}

/// Read-only questions to a runtime's ledger ([`Runtime::ledger`](crate::Runtime::ledger)).
#[derive(Clone, Copy, Debug)]
pub struct LedgerView<'a>(pub(super) &'a Ledger);

impl LedgerView<'_> {
    /// `s`'s current epoch (the stamp of new work).
    pub fn epoch(&self, s: StreamId) -> StreamEpoch {
        self.0.epoch(s)
    }

    /// The highest epoch of `s` known finished.
    pub fn completed(&self, s: StreamId) -> StreamEpoch {
        self.0.completed(s)
    }

    /// The highest epoch of `of` that `s` is known ordered after.
    pub fn waited(&self, s: StreamId, of: StreamId) -> StreamEpoch {
        self.0.waited(s, of)
    }

    /// `s`'s generation (moves on when it is recycled).
    pub fn generation(&self, s: StreamId) -> Generation {
        self.0.generation(s)
    }

    /// The task that owns `s`, if any.
    pub fn owner(&self, s: StreamId) -> Option<TaskId> {
        self.0.owner(s)
    }

    /// Whether `s` is shared (its closes no longer count).
    pub fn is_shared(&self, s: StreamId) -> bool {
        self.0.is_shared(s)
    }

    /// Whether `s` is being captured into a graph.
    pub fn is_capturing(&self, s: StreamId) -> bool {
        self.0.is_capturing(s)
    }

    /// How many streams the ledger tracks (retired ones left out).
    pub fn stream_count(&self) -> usize {
        self.0.live_stream_count()
    }

    /// The decision counters.
    pub fn counters(&self) -> CounterSnapshot {
        self.0.counters()
    }
}

/// Counts of live resources, to check that faults leak nothing.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct LiveCounts {
    /// Streams created.
    pub streams: usize,
    /// Streams held by tasks (not in the pool).
    pub streams_in_use: usize,
    /// Events created.
    pub events: usize,
    /// Events out of the pool.
    pub events_in_use: usize,
    /// Live device allocations.
    pub allocations: usize,
    /// Bytes of live device allocations.
    pub device_bytes: usize,
    /// Bytes of live pinned host allocations.
    pub pinned_bytes: usize,
}
