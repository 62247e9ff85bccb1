//! The random DAGs' operations across devices (a child of `dag`, see its
//! module doc): peer copies, `Staging` memory of one device copied into
//! buffers of another, collectives through communicators over every
//! device; and [`run_watched`], the harness's watchdog.
//!
//! The generator places each buffer on device `i % devices` (temporaries on
//! their task's device) and runs most operations on the task's own device;
//! the ones here are those that may cross devices. Each is applied to the
//! host model as it is planned, as `dag`'s are.

use super::{Config, Env, Generator, Held, Report, Rng, Slot, LIMIT};
use gpu::memory::Staging;
use gpu::nccl::{Communicator, ReduceOp};
use gpu::{Result, Runtime, Scope};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the host writes into staging memory right after a copy from it
/// returned: a value the model never holds, so a copy that read the
/// memory late shows.
const GARBAGE: f32 = 999.0;

/// How staged values reach a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StageVia {
    /// `copy_from_host(&mut b, staging.as_slice())`: page-locked source,
    /// so the call waits for its copy (the staging memory may be another
    /// device's).
    CopyFromHost,
    /// `staging.send(ctx, &mut b)` (the task's device's staging).
    Send,
    /// `staging.upload(ctx, values, &mut b)` (likewise).
    Upload,
}

/// A collective call.
#[derive(Clone, Debug, PartialEq)]
pub enum Coll {
    /// `all_reduce(bufs, op)` (`Sum` or `Max`), one buffer per device.
    AllReduce(ReduceOp),
    /// `broadcast(bufs, root)`.
    Broadcast { root: usize },
    /// A `group` of `send(from, src, to)` and `recv(to, dst, from)` for
    /// each `(src, from, dst, to)`: keys and devices.
    SendRecv(Vec<(usize, usize, usize, usize)>),
}

/// An operation that may cross devices.
#[derive(Clone, Debug, PartialEq)]
pub enum MultiOp {
    /// `copy_peer(&src, &mut dst)`; `cross`: of two devices.
    Peer { src: usize, dst: usize, cross: bool },
    /// Staging memory of device `dev` filled with `values` by the host,
    /// copied into `b` as `via` says; then the host fills the staging
    /// memory with `GARBAGE` at once.
    Stage {
        dev: usize,
        b: usize,
        via: StageVia,
        cross: bool,
        values: Vec<f32>,
    },
    /// `b` copied into the task's device's staging memory (`receive`, or
    /// `download` into a `Vec`), compared.
    StageCheck {
        b: usize,
        download: bool,
        expect: Vec<f32>,
    },
    /// A collective through communicator `comm` over `bufs` (for
    /// `AllReduce` and `Broadcast`: one per device, in device order).
    Collective {
        comm: usize,
        call: Coll,
        bufs: Vec<usize>,
    },
}

/// The kinds the census counts here.
pub mod kinds {
    /// A top-level scope on another device's runtime than device 0's.
    pub const SCOPE_ON_ANOTHER_DEVICE: &str = "top-level scope on another device";
}

impl MultiOp {
    /// The operation's name, for censuses.
    pub fn kind(&self) -> &'static str {
        match self {
            MultiOp::Peer { cross: true, .. } => "copy_peer across devices",
            MultiOp::Peer { cross: false, .. } => "copy_peer within a device",
            MultiOp::Stage {
                via: StageVia::CopyFromHost,
                cross: true,
                ..
            } => "copy_from_host from another device's staging",
            MultiOp::Stage {
                via: StageVia::CopyFromHost,
                cross: false,
                ..
            } => "copy_from_host from the device's staging",
            MultiOp::Stage {
                via: StageVia::Send,
                ..
            } => "staging send",
            MultiOp::Stage {
                via: StageVia::Upload,
                ..
            } => "staging upload",
            MultiOp::StageCheck {
                download: false, ..
            } => "staging receive, compared",
            MultiOp::StageCheck { download: true, .. } => "staging download, compared",
            MultiOp::Collective { call, .. } => match call {
                Coll::AllReduce(ReduceOp::Sum) => "all_reduce sum",
                Coll::AllReduce(_) => "all_reduce max",
                Coll::Broadcast { .. } => "broadcast",
                Coll::SendRecv(_) => "send/recv group",
            },
        }
    }
}

/// The kinds a run over several devices makes (with communicators: all
/// of them; without, all but the collectives).
pub const MULTI_KINDS: &[&str] = &[
    "spawn_on",
    kinds::SCOPE_ON_ANOTHER_DEVICE,
    "copy_peer across devices",
    "copy_peer within a device",
    "copy_from_host from another device's staging",
    "copy_from_host from the device's staging",
    "staging send",
    "staging upload",
    "staging receive, compared",
    "staging download, compared",
];

/// The collectives' kinds.
pub const COLLECTIVE_KINDS: &[&str] = &[
    "all_reduce sum",
    "all_reduce max",
    "broadcast",
    "send/recv group",
];

fn pick<T: Copy>(rng: &mut Rng, xs: &[T]) -> Option<T> {
    (!xs.is_empty()).then(|| xs[rng.below(xs.len())])
}

impl Generator {
    /// An operation across devices on `held` (the task's, of any device),
    /// applied to the model; `None` if the task holds nothing it fits.
    pub(super) fn multi_op(&mut self, held: &[Slot]) -> Option<MultiOp> {
        match self.rng.below(10) {
            0..=2 => self.peer(held),
            3..=5 => self.stage(held),
            6 => self.stage_check(held),
            _ if self.cfg.comms > 0 => self.collective(held),
            _ => self.peer(held),
        }
    }

    fn peer(&mut self, held: &[Slot]) -> Option<MultiOp> {
        let ys: Vec<Slot> = held.iter().filter(|s| s.write).copied().collect();
        let y = pick(&mut self.rng, &ys)?;
        let xs: Vec<Slot> = held
            .iter()
            .filter(|s| s.key != y.key && s.len == y.len)
            .copied()
            .collect();
        let cross: Vec<Slot> = xs.iter().filter(|s| s.dev != y.dev).copied().collect();
        let x = if !cross.is_empty() && self.rng.chance(80) {
            pick(&mut self.rng, &cross)?
        } else {
            pick(&mut self.rng, &xs)?
        };
        let v = self.values(&x).to_vec();
        self.values_mut(&y).copy_from_slice(&v);
        Some(MultiOp::Peer {
            src: x.key,
            dst: y.key,
            cross: x.dev != y.dev,
        })
    }

    fn stage(&mut self, held: &[Slot]) -> Option<MultiOp> {
        let here = self.cur_dev;
        let ys: Vec<Slot> = held
            .iter()
            .filter(|s| s.write && s.dev == here)
            .copied()
            .collect();
        let y = pick(&mut self.rng, &ys)?;
        let via = match self.rng.below(4) {
            0 | 1 => StageVia::CopyFromHost,
            2 => StageVia::Send,
            _ => StageVia::Upload,
        };
        let dev = if via == StageVia::CopyFromHost && self.rng.chance(70) {
            // Another device's page-locked memory (DESIGN "Soundness": the copy must still
            // be waited for).
            (here + 1 + self.rng.below(self.cfg.devices - 1)) % self.cfg.devices
        } else {
            here
        };
        let salt = self.rng.below(97);
        let values: Vec<f32> = (0..y.len)
            .map(|i| ((i * 7 + salt) % 11) as f32 - 5.0)
            .collect();
        self.values_mut(&y).copy_from_slice(&values);
        Some(MultiOp::Stage {
            dev,
            b: y.key,
            via,
            cross: dev != here,
            values,
        })
    }

    fn stage_check(&mut self, held: &[Slot]) -> Option<MultiOp> {
        let here = self.cur_dev;
        let xs: Vec<Slot> = held.iter().filter(|s| s.dev == here).copied().collect();
        let x = pick(&mut self.rng, &xs)?;
        Some(MultiOp::StageCheck {
            b: x.key,
            download: self.rng.chance(50),
            expect: self.values(&x).to_vec(),
        })
    }

    /// One writable slot of length `len` per device, in device order, or
    /// `None`.
    fn per_device(&mut self, held: &[Slot], len: usize) -> Option<Vec<Slot>> {
        (0..self.cfg.devices)
            .map(|d| {
                let c: Vec<Slot> = held
                    .iter()
                    .filter(|s| s.write && s.dev == d && s.len == len)
                    .copied()
                    .collect();
                pick(&mut self.rng, &c)
            })
            .collect()
    }

    fn collective(&mut self, held: &[Slot]) -> Option<MultiOp> {
        let comm = self.rng.below(self.cfg.comms);
        let writable: Vec<Slot> = held.iter().filter(|s| s.write).copied().collect();
        let first = pick(&mut self.rng, &writable)?;
        let roll = self.rng.below(10);
        if roll >= 7 {
            // Sends to other devices, all keys distinct.
            let mut pairs = Vec::new();
            let mut used = Vec::new();
            for _ in 0..1 + self.rng.below(2) {
                let srcs: Vec<Slot> = held
                    .iter()
                    .filter(|s| !used.contains(&s.key))
                    .copied()
                    .collect();
                let Some(x) = pick(&mut self.rng, &srcs) else {
                    break;
                };
                let dsts: Vec<Slot> = writable
                    .iter()
                    .filter(|s| s.dev != x.dev && s.len == x.len)
                    .filter(|s| s.key != x.key && !used.contains(&s.key))
                    .copied()
                    .collect();
                let Some(y) = pick(&mut self.rng, &dsts) else {
                    continue;
                };
                used.extend([x.key, y.key]);
                pairs.push((x, y));
            }
            if pairs.is_empty() {
                return None;
            }
            // Every send reads what the model held before the group.
            let before: Vec<Vec<f32>> =
                pairs.iter().map(|(x, _)| self.values(x).to_vec()).collect();
            for ((_, y), v) in pairs.iter().zip(before) {
                self.values_mut(y).copy_from_slice(&v);
            }
            return Some(MultiOp::Collective {
                comm,
                call: Coll::SendRecv(
                    pairs
                        .iter()
                        .map(|(x, y)| (x.key, x.dev, y.key, y.dev))
                        .collect(),
                ),
                bufs: Vec::new(),
            });
        }
        let slots = self.per_device(held, first.len)?;
        let vals: Vec<Vec<f32>> = slots.iter().map(|s| self.values(s).to_vec()).collect();
        let n = first.len;
        let (call, out): (Coll, Vec<f32>) = match roll {
            0..=3 => {
                let sum: Vec<f32> = (0..n).map(|i| vals.iter().map(|v| v[i]).sum()).collect();
                if sum.iter().all(|v| v.abs() <= LIMIT) {
                    (Coll::AllReduce(ReduceOp::Sum), sum)
                } else {
                    let max = (0..n)
                        .map(|i| vals.iter().map(|v| v[i]).fold(f32::MIN, f32::max))
                        .collect();
                    (Coll::AllReduce(ReduceOp::Max), max)
                }
            }
            4 | 5 => {
                let max = (0..n)
                    .map(|i| vals.iter().map(|v| v[i]).fold(f32::MIN, f32::max))
                    .collect();
                (Coll::AllReduce(ReduceOp::Max), max)
            }
            _ => {
                let root = self.rng.below(self.cfg.devices);
                (Coll::Broadcast { root }, vals[root].clone())
            }
        };
        for s in &slots {
            self.values_mut(s).copy_from_slice(&out);
        }
        Some(MultiOp::Collective {
            comm,
            call,
            bufs: slots.iter().map(|s| s.key).collect(),
        })
    }
}

// ----- running them --------------------------------------------------------

/// What tasks share across devices: the devices' runtimes (in order),
/// staging memory of each (a pool: a block is used by one task at a time,
/// by tasks of any device one after another), and the communicators.
#[allow(missing_debug_implementations)] // holds communicators and runtimes; printed by its counts
pub struct MultiEnv {
    pub devices: Vec<Runtime>,
    staging: Vec<Mutex<Vec<Staging<f32>>>>,
    comms: Vec<Communicator>,
    len: usize,
}

impl MultiEnv {
    /// The devices of `rt`'s group (`cfg.devices` of them) and
    /// `cfg.comms` communicators over them.
    pub fn new(rt: &Runtime, cfg: &Config) -> Result<MultiEnv> {
        let devices = (0..cfg.devices)
            .map(|d| rt.device(d))
            .collect::<Result<Vec<_>>>()?;
        let comms = (0..cfg.comms)
            .map(|_| Communicator::all_devices(rt))
            .collect::<Result<Vec<_>>>()?;
        Ok(MultiEnv {
            staging: devices.iter().map(|_| Mutex::new(Vec::new())).collect(),
            devices,
            comms,
            len: cfg.len,
        })
    }

    /// Staging memory of device `dev` for at least `len` elements, from the
    /// pool (its last copy maybe still in flight) or new.
    fn take(&self, dev: usize, len: usize) -> Result<Staging<f32>> {
        let mut pool = self.staging[dev].lock().unwrap_or_else(|p| p.into_inner());
        match pool.iter().position(|s| s.capacity() >= len) {
            Some(i) => Ok(pool.swap_remove(i)),
            None => Staging::new(&self.devices[dev], len.max(self.len)),
        }
    }

    fn give(&self, dev: usize, s: Staging<f32>) {
        self.staging[dev]
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(s);
    }
}

impl Held<'_> {
    /// Shared references to `reads` and exclusive ones to `writes`, in
    /// their orders (all keys distinct).
    fn many(
        &mut self,
        reads: &[usize],
        writes: &[usize],
    ) -> (Vec<&super::Dyn<'_>>, Vec<&mut super::Dyn<'_>>) {
        let mut r: Vec<Option<&super::Dyn<'_>>> = vec![None; reads.len()];
        let mut w: Vec<Option<&mut super::Dyn<'_>>> = writes.iter().map(|_| None).collect();
        for (id, x) in self.0.iter_mut() {
            if let Some(i) = writes.iter().position(|k| k == id) {
                w[i] = Some(match x {
                    super::Ref::Buf(b) => &mut **b,
                    super::Ref::View(v) => &mut **v,
                    super::Ref::Read(_) => panic!("generator bug: buffer {id} is read-only here"),
                });
            } else if let Some(i) = reads.iter().position(|k| k == id) {
                r[i] = Some(super::read(x));
            }
        }
        fn missing<T>(k: &usize) -> T {
            panic!("generator bug: buffer {k} is not held")
        }
        (
            r.into_iter()
                .zip(reads)
                .map(|(x, k)| x.unwrap_or_else(|| missing(k)))
                .collect(),
            w.into_iter()
                .zip(writes)
                .map(|(x, k)| x.unwrap_or_else(|| missing(k)))
                .collect(),
        )
    }
}

/// Runs `op` on task `s`, holding `held`.
pub(super) fn run_op(
    s: &Scope<'_, '_>,
    op: &MultiOp,
    held: &mut Held<'_>,
    env: &Env<'_>,
) -> Result<()> {
    let m = env
        .multi
        .expect("generator bug: an operation across devices with one device");
    match op {
        MultiOp::Peer { src, dst, .. } => {
            let (x, y) = held.pair(*src, *dst);
            s.copy_peer(x, y)
        }
        MultiOp::Stage {
            dev,
            b,
            via,
            values,
            ..
        } => {
            let y = held.w(*b);
            let n = y.len();
            let mut st = m.take(*dev, n)?;
            let r = (|| {
                match via {
                    StageVia::CopyFromHost => {
                        st.as_mut_slice()?[..n].copy_from_slice(values);
                        s.copy_from_host(y, &st.as_slice()?[..n])?;
                    }
                    StageVia::Send => {
                        st.as_mut_slice()?[..n].copy_from_slice(values);
                        st.send(s, y)?;
                    }
                    StageVia::Upload => st.upload(s, values, y)?,
                }
                // The copy returned: the host may write the memory at once
                // (for `send` and `upload`, after waiting for their copy).
                st.as_mut_slice()?.fill(GARBAGE);
                Ok(())
            })();
            m.give(*dev, st);
            r
        }
        MultiOp::StageCheck {
            b,
            download,
            expect,
        } => {
            let x = held.r(*b);
            let n = x.len();
            let mut st = m.take(s.device(), n)?;
            let got = (|| -> Result<Vec<f32>> {
                if *download {
                    let mut v = vec![0.0; n];
                    st.download(s, x, &mut v)?;
                    Ok(v)
                } else {
                    st.receive(s, x)?;
                    Ok(st.as_slice()?[..n].to_vec())
                }
            })();
            m.give(s.device(), st);
            env.stats.compare(
                &format!(
                    "scope {}: buffer {b} through staging memory ({})",
                    env.scope,
                    if *download { "download" } else { "receive" }
                ),
                &got?,
                expect,
            );
            Ok(())
        }
        MultiOp::Collective { comm, call, bufs } => {
            let comm = &m.comms[*comm];
            match call {
                Coll::AllReduce(op) => {
                    let (_, mut w) = held.many(&[], bufs);
                    comm.all_reduce(&mut w, *op)
                }
                Coll::Broadcast { root } => {
                    let (_, mut w) = held.many(&[], bufs);
                    comm.broadcast(&mut w, *root)
                }
                Coll::SendRecv(pairs) => {
                    let srcs: Vec<usize> = pairs.iter().map(|p| p.0).collect();
                    let dsts: Vec<usize> = pairs.iter().map(|p| p.2).collect();
                    let (r, mut w) = held.many(&srcs, &dsts);
                    comm.group(|g| {
                        for ((x, y), &(_, from, _, to)) in r.iter().zip(w.iter_mut()).zip(pairs) {
                            g.send(from, &**x, to)?;
                            g.recv(to, &mut **y, from)?;
                        }
                        Ok(())
                    })
                }
            }
        }
    }
}

// ----- the watchdog --------------------------------------------------------

enum Msg {
    Scope(Report),
    Done(std::result::Result<Report, String>),
}

/// [`super::run`] on a thread of its own, `after_scope` called here after
/// each top-level scope. If no scope ends within `stall`, it gives up:
/// an error naming the seed and the scope that hangs (the run's thread is
/// left behind, stuck).
///
/// # Errors
///
/// As [`super::run`]; the hang; a panic of the run (its message printed
/// by the panic hook).
pub fn run_watched(
    rt: &Runtime,
    cfg: &Config,
    stall: Duration,
    mut after_scope: impl FnMut(&Report) -> bool,
) -> std::result::Result<Report, String> {
    let (tx, rx) = mpsc::channel();
    let stop = Arc::new(AtomicBool::new(false));
    let (rt2, cfg2, stop2) = (rt.clone(), cfg.clone(), stop.clone());
    std::thread::Builder::new()
        .name(format!("dag seed {}", cfg.seed))
        .spawn(move || {
            let scopes = tx.clone();
            let r = super::run(&rt2, &cfg2, |r| {
                let _ = scopes.send(Msg::Scope(r.clone()));
                !stop2.load(Relaxed)
            });
            let _ = tx.send(Msg::Done(r));
        })
        .map_err(|e| format!("seed {}: cannot start the run's thread: {e}", cfg.seed))?;
    let mut scopes = 0;
    loop {
        match rx.recv_timeout(stall) {
            Ok(Msg::Scope(r)) => {
                scopes = r.scopes;
                if !after_scope(&r) {
                    stop.store(true, Relaxed);
                }
            }
            Ok(Msg::Done(r)) => return r,
            Err(RecvTimeoutError::Timeout) => {
                return Err(format!(
                    "seed {} scope {}: no top-level scope ended in {stall:?}: the run hangs \
                     (its thread is left behind)",
                    cfg.seed,
                    scopes + 1
                ))
            }
            Err(RecvTimeoutError::Disconnected) => {
                return Err(format!(
                    "seed {} scope {}: the run panicked",
                    cfg.seed,
                    scopes + 1
                ))
            }
        }
    }
}
