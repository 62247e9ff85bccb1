//! The measurement of `02-siblings` and of the B5-cold benchmark: eight
//! tasks of one long kernel each, against the same eight kernels one after
//! another on one task's stream, with when each sibling started and
//! launched (what tells a host that held a launch back from a device that
//! ran launched kernels one after another).

use gpu::Buffer;
use gpu_kernels::spin_touch;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How many sibling tasks.
pub const TASKS: usize = 8;
/// Elements per buffer: one block of the spin kernel.
const N: usize = 256;

/// One sibling task, as the host saw it.
#[derive(Clone, Debug)]
pub struct TaskTimes {
    /// Which sibling (its buffer).
    pub index: usize,
    /// The worker thread that ran it (its name, or its id).
    pub thread: String,
    /// The stream it ran on (its ledger index).
    pub stream: usize,
    /// From the siblings' scope opening to the task's start.
    pub started: Duration,
    /// From the siblings' scope opening to its launch returning.
    pub launched: Duration,
}

/// What [`measure`] saw.
#[derive(Clone, Debug)]
pub struct Siblings {
    /// The eight kernels one after another on one stream.
    pub serial: Duration,
    /// The eight sibling tasks, one kernel each.
    pub together: Duration,
    /// Each sibling task, by start.
    pub tasks: Vec<TaskTimes>,
}

impl Siblings {
    /// `serial / together`: 8 when the siblings overlap fully.
    pub fn speedup(&self) -> f64 {
        self.serial.as_secs_f64() / self.together.as_secs_f64()
    }

    /// The siblings, a line each: thread, stream, start and launch times.
    pub fn detail(&self) -> String {
        self.tasks
            .iter()
            .map(|t| {
                format!(
                    "    sibling {} on {} stream {}: started {:.3} ms, launched {:.3} ms\n",
                    t.index,
                    t.thread,
                    t.stream,
                    t.started.as_secs_f64() * 1e3,
                    t.launched.as_secs_f64() * 1e3
                )
            })
            .collect()
    }
}

/// Warms up (the eight tasks with kernels of no length: the kernels
/// load, the streams start), then times the eight `spin` kernels on one
/// stream and as eight siblings, and checks every buffer.
///
/// # Errors
///
/// The runtime's errors, or a buffer that does not hold what the three
/// rounds wrote.
pub fn measure(spin: Duration) -> Result<Siblings, Box<dyn std::error::Error>> {
    measure_with(spin, &|_, _| Ok(()))
}

/// [`measure`], with `after_launch(task, sibling)` called in each sibling
/// task right after its kernel's launch (B5-cold records an event there,
/// to see when each kernel ended on the device).
///
/// # Errors
///
/// As [`measure`]'s, and `after_launch`'s.
pub fn measure_with(
    spin: Duration,
    after_launch: &(dyn Fn(&gpu::TaskContext, usize) -> gpu::Result<()> + Sync),
) -> Result<Siblings, Box<dyn std::error::Error>> {
    let mut bufs = (0..TASKS)
        .map(|_| Buffer::<f32>::zeros(N))
        .collect::<gpu::Result<Vec<_>>>()?;

    // Warm up: load the kernels, start the streams.
    gpu::scope(|s| {
        s.scope(|inner| {
            for b in bufs.iter_mut() {
                inner.spawn(move |t| spin_touch(t, b, Duration::ZERO));
            }
            Ok(())
        })?;
        s.synchronize()
    })?;

    // One after another, on one task's stream.
    let start = Instant::now();
    gpu::scope(|s| {
        for b in bufs.iter_mut() {
            spin_touch(s, b, spin)?;
        }
        s.synchronize()
    })?;
    let serial = start.elapsed();

    // Siblings: one task each.
    let times = Mutex::new(Vec::with_capacity(TASKS));
    let start = Instant::now();
    gpu::scope(|s| {
        s.scope(|inner| {
            for (index, b) in bufs.iter_mut().enumerate() {
                let times = &times;
                inner.spawn(move |t| {
                    let started = start.elapsed();
                    spin_touch(t, b, spin)?;
                    let launched = start.elapsed();
                    after_launch(t, index)?;
                    let me = std::thread::current();
                    let thread = me
                        .name()
                        .map_or_else(|| format!("{:?}", me.id()), str::to_owned);
                    let stream = t.try_stream_id()?.index();
                    times.lock().expect("times").push(TaskTimes {
                        index,
                        thread,
                        stream,
                        started,
                        launched,
                    });
                    Ok(())
                });
            }
            Ok(())
        })?;
        // This task is ordered after all of them: wait for them on the host.
        s.synchronize()
    })?;
    let together = start.elapsed();

    // Every buffer was touched three times (warm-up, serial, siblings).
    for (i, b) in bufs.iter().enumerate() {
        let v = b.to_vec()?;
        if let Some((j, x)) = v.iter().enumerate().find(|(_, x)| **x != 3.0) {
            return Err(format!("buffer {i}[{j}] = {x}, expected 3").into());
        }
    }
    let mut tasks = times.into_inner().expect("times");
    tasks.sort_by_key(|t| t.started);
    Ok(Siblings {
        serial,
        together,
        tasks,
    })
}
