//! T14 through the public API (X3): `par_chunks_mut` hands each task a view
//! with its own stamps. Siblings on disjoint chunks never wait for each
//! other (no device wait at all, and a gated chunk does not hold up the
//! others' host synchronizes), the join hands every chunk back to the
//! joining stream by order alone, and the buffer is then used on another
//! task with correct values and no races.

mod common;

use common::{assert_no_races, runtime, wait_for, TIMEOUT};
use gpu::{Buffer, Runtime};
use gpu_kernels::{add_scalar, gate};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

const N: usize = 1 << 16;
const CHUNK: usize = 1 << 12;
const CHUNKS: usize = N / CHUNK;

fn setup(rt: &Runtime) -> (Vec<f32>, Buffer<f32>) {
    let host: Vec<f32> = (0..N).map(|i| (i % 97) as f32).collect();
    let t = rt.begin_task().unwrap();
    let buf = t.from_host(&host).unwrap();
    // The initial copy is Completed: every chunk's first hand-off is free,
    // so any device wait counted below is one sibling waiting for another.
    t.synchronize().unwrap();
    (host, buf)
}

#[test]
fn add_scalar_on_chunks_is_correct_and_needs_no_device_wait() {
    let rt = runtime();
    let (host, mut buf) = setup(&rt);

    let before = rt.counters();
    gpu::par_chunks_mut(&mut buf, CHUNK)
        .for_each(|t, chunk| add_scalar(t, chunk, 1.0))
        .unwrap();
    let d = rt.counters().since(&before);
    assert_eq!(d.device_waits, 0, "{d:?}");
    assert_eq!(d.host_syncs, 0, "{d:?}");
    // Each chunk's two hand-offs (to its task, and back to the joining
    // stream at the rejoin) need no wait: ordered by the join's fences,
    // completed, recycled since (only once idle), or on the same stream (a
    // task binds a stream at its first operation, so the joining task and a
    // chunk's may get the same one, DESIGN "Streams are a resource").
    assert!(
        d.switches_avoided() + d.avoided(gpu::diag::Reason::SameStream) >= 2 * CHUNKS as u64,
        "{d:?}"
    );

    // Another task uses the whole buffer: ordered after every chunk.
    let t = rt.begin_task().unwrap();
    add_scalar(&t, &mut buf, 1.0).unwrap();
    let v = t.to_vec(&buf).unwrap();
    for (i, (got, h)) in v.iter().zip(&host).enumerate() {
        assert_eq!(*got, h + 2.0, "element {i}");
    }
    drop(t);
    assert_no_races(&rt);
}

#[test]
fn a_gated_chunk_does_not_hold_up_its_siblings() {
    let rt = runtime();
    let (host, mut buf) = setup(&rt);
    let g = rt.gate().unwrap();
    let finished = AtomicUsize::new(0);
    let gated = AtomicBool::new(false);

    let before = rt.counters();
    gpu::par_chunks_mut(&mut buf, CHUNK)
        .for_each(|t, chunk| {
            if chunk.index() == 0 {
                // This chunk's stream blocks until every sibling is done.
                gate(t, &g, TIMEOUT)?;
                add_scalar(t, chunk, 1.0)?;
                gated.store(true, Ordering::SeqCst);
                return Ok(());
            }
            // Chunk 0's task is the first out of the pool's FIFO injector;
            // once its gated work is queued, a wrong wait would cover it.
            wait_for(&gated, "chunk 0's gated work being queued");
            add_scalar(t, chunk, 1.0)?;
            // A host synchronize of this sibling's own stream: it returns
            // while chunk 0 is gated unless it wrongly waits for chunk 0.
            let v = t.to_vec(chunk)?;
            let o = chunk.offset();
            assert!(v.iter().zip(&host[o..]).all(|(a, h)| *a == h + 1.0));
            assert!(
                !g.timed_out(),
                "chunk {} waited for the gate",
                chunk.index()
            );
            if finished.fetch_add(1, Ordering::SeqCst) + 1 == CHUNKS - 1 {
                g.open();
            }
            Ok(())
        })
        .unwrap();
    let d = rt.counters().since(&before);
    assert_eq!(d.device_waits, 0, "{d:?}");
    assert!(!g.timed_out());
    assert_eq!(finished.load(Ordering::SeqCst), CHUNKS - 1);

    let v = buf.to_vec().unwrap();
    for (i, (got, h)) in v.iter().zip(&host).enumerate() {
        assert_eq!(*got, h + 1.0, "element {i}");
    }
    assert_no_races(&rt);
}
