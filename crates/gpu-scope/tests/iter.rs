//! The chunk iterators (issue 14, item 2; DESIGN "Users' kernels and chunk iterators"): every adaptor and terminal
//! method against the same computation on the CPU, chunk sizes that do not
//! divide the length, the typed errors (zero chunk, zip of unequal chunk
//! counts, `collect_into` of the wrong length) before any task runs, a
//! chunk's error and panic after every chunk ran, sibling chunks that never
//! wait for each other, and runs inside a task.

mod common;

use common::{assert_no_races, runtime, wait_for, TIMEOUT};
use gpu::{Buffer, Error, Runtime, Scope, View};
use gpu_kernels as k;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

const N: usize = 1000;
/// Does not divide `N`: the last chunk is shorter (100 elements).
const CHUNK: usize = 300;

fn host_x() -> Vec<f32> {
    (0..N).map(|i| (i % 97) as f32).collect()
}

/// `x` on the device, its upload finished.
fn upload(rt: &Runtime, x: &[f32]) -> Buffer<f32> {
    let t = rt.begin_task().unwrap();
    let b = t.from_host(x).unwrap();
    t.synchronize().unwrap();
    b
}

/// A chunk's sum on the device (exact here: small integers), read back.
fn device_sum(t: &Scope<'_, '_>, c: &View<'_, f32>) -> gpu::Result<f32> {
    let mut s = t.zeros::<f32>(1)?;
    k::sum_atomic_into(t, c, &mut s)?;
    Ok(t.to_vec(&s)?[0])
}

fn cpu_sums(x: &[f32], chunk: usize) -> Vec<f32> {
    x.chunks(chunk).map(|c| c.iter().sum()).collect()
}

#[test]
fn read_chunks_map_collect_in_chunk_order() {
    let rt = runtime();
    let x = host_x();
    let xb = upload(&rt, &x);

    let spans: Vec<(usize, usize)> = gpu::par_chunks(&xb, CHUNK)
        .map(|_t, c| Ok((c.offset(), c.len())))
        .collect()
        .unwrap();
    assert_eq!(spans, [(0, 300), (300, 300), (600, 300), (900, 100)]);

    let sums: Vec<f32> = gpu::par_chunks(&xb, CHUNK)
        .map(|t, c| device_sum(t, &c))
        .collect()
        .unwrap();
    assert_eq!(sums, cpu_sums(&x, CHUNK));

    // A chunk size larger than the buffer: one chunk, all of it.
    let one: Vec<usize> = gpu::par_chunks(&xb, 5000)
        .map(|_t, c| Ok(c.len()))
        .collect()
        .unwrap();
    assert_eq!(one, [N]);
    assert_no_races(&rt);
}

#[test]
fn zip_of_a_read_and_a_written_side() {
    let rt = runtime();
    let x = host_x();
    let xb = upload(&rt, &x);
    let mut yb = upload(&rt, &vec![0.0; N]);

    gpu::par_chunks(&xb, CHUNK)
        .zip(gpu::par_chunks_mut(&mut yb, CHUNK))
        .for_each(|t, (x, mut y)| {
            k::copy(t, &x, &mut y)?;
            k::add_scalar(t, &mut y, 1.0)
        })
        .unwrap();
    let want: Vec<f32> = x.iter().map(|v| v + 1.0).collect();
    assert_eq!(yb.to_vec().unwrap(), want);

    // The written side first, and a map over the pairs.
    let lens: Vec<(usize, usize)> = gpu::par_chunks_mut(&mut yb, CHUNK)
        .zip(gpu::par_chunks(&xb, CHUNK))
        .map(|t, (mut y, x)| {
            k::axpy(t, 1.0, &x, &mut y)?;
            Ok((y.len(), x.len()))
        })
        .collect()
        .unwrap();
    assert_eq!(lens, [(300, 300), (300, 300), (300, 300), (100, 100)]);
    let want: Vec<f32> = x.iter().map(|v| 2.0 * v + 1.0).collect();
    assert_eq!(yb.to_vec().unwrap(), want);
    assert_no_races(&rt);
}

#[test]
fn zip_of_three_and_of_two_written_sides() {
    let rt = runtime();
    let a: Vec<f32> = (0..N).map(|i| (i % 13) as f32).collect();
    let b: Vec<f32> = (0..N).map(|i| (i % 7) as f32).collect();
    let (ab, bb) = (upload(&rt, &a), upload(&rt, &b));
    let mut cb = upload(&rt, &vec![0.0; N]);
    let mut db = upload(&rt, &vec![0.0; N]);

    // c = a + b
    gpu::par_chunks(&ab, CHUNK)
        .zip(gpu::par_chunks(&bb, CHUNK))
        .zip(gpu::par_chunks_mut(&mut cb, CHUNK))
        .for_each(|t, ((a, b), mut c)| {
            k::copy(t, &a, &mut c)?;
            k::axpy(t, 1.0, &b, &mut c)
        })
        .unwrap();
    let sum: Vec<f32> = a.iter().zip(&b).map(|(a, b)| a + b).collect();
    assert_eq!(cb.to_vec().unwrap(), sum);

    // Two written sides: c += 1, d = 2.
    gpu::par_chunks_mut(&mut cb, CHUNK)
        .zip(gpu::par_chunks_mut(&mut db, CHUNK))
        .for_each(|t, (mut c, mut d)| {
            k::add_scalar(t, &mut c, 1.0)?;
            k::fill(t, &mut d, 2.0)
        })
        .unwrap();
    let plus1: Vec<f32> = sum.iter().map(|v| v + 1.0).collect();
    assert_eq!(cb.to_vec().unwrap(), plus1);
    assert_eq!(db.to_vec().unwrap(), vec![2.0; N]);
    assert_no_races(&rt);
}

#[test]
fn zip_pairs_chunks_of_different_sizes_when_the_counts_agree() {
    let rt = runtime();
    let x = host_x();
    let xb = upload(&rt, &x);
    let mut sums = upload(&rt, &[0.0; 4]);
    // Chunk i of x with element i of `sums`: per-chunk results that stay on
    // the device.
    gpu::par_chunks(&xb, CHUNK)
        .zip(gpu::par_chunks_mut(&mut sums, 1))
        .for_each(|t, (c, mut out)| k::sum_atomic_into(t, &c, &mut out))
        .unwrap();
    assert_eq!(sums.to_vec().unwrap(), cpu_sums(&x, CHUNK));
    assert_no_races(&rt);
}

#[test]
fn enumerate_gives_the_chunk_index() {
    let rt = runtime();
    let mut yb = upload(&rt, &vec![0.0; N]);
    gpu::par_chunks_mut(&mut yb, 7)
        .enumerate()
        .for_each(|t, (i, mut c)| k::fill(t, &mut c, i as f32))
        .unwrap();
    let want: Vec<f32> = (0..N).map(|j| (j / 7) as f32).collect();
    assert_eq!(yb.to_vec().unwrap(), want);

    let x = host_x();
    let xb = upload(&rt, &x);
    let idx: Vec<(usize, usize)> = gpu::par_chunks(&xb, CHUNK)
        .zip(gpu::par_chunks_mut(&mut yb, CHUNK))
        .enumerate()
        .map(|_t, (i, (x, _y))| Ok((i, x.offset())))
        .collect()
        .unwrap();
    assert_eq!(idx, [(0, 0), (1, 300), (2, 600), (3, 900)]);
    let idx: Vec<usize> = gpu::par_chunks(&xb, CHUNK)
        .enumerate()
        .zip(gpu::par_chunks(&xb, CHUNK))
        .map(|_t, ((i, a), b)| {
            assert_eq!(a.offset(), b.offset());
            Ok(i)
        })
        .collect()
        .unwrap();
    assert_eq!(idx, [0, 1, 2, 3]);
    assert_no_races(&rt);
}

#[test]
fn reduce_sum_min_max_against_the_cpu() {
    let rt = runtime();
    let x = host_x();
    let xb = upload(&rt, &x);
    let cpu = cpu_sums(&x, CHUNK);
    let chunk_sums = || gpu::par_chunks(&xb, CHUNK).map(|t, c| device_sum(t, &c));

    let total: f32 = chunk_sums().sum().unwrap();
    assert_eq!(total, cpu.iter().sum::<f32>());
    let total: f64 = gpu::par_chunks(&xb, CHUNK)
        .map(|t, c| Ok(f64::from(device_sum(t, &c)?)))
        .sum()
        .unwrap();
    assert_eq!(total, x.iter().map(|&v| f64::from(v)).sum::<f64>());
    // reduce folds in chunk order from one identity.
    let order = gpu::par_chunks(&xb, CHUNK)
        .enumerate()
        .map(|_t, (i, _c)| Ok(vec![i]))
        .reduce(Vec::new, |mut a, b| {
            a.extend(b);
            a
        })
        .unwrap();
    assert_eq!(order, [0, 1, 2, 3]);
    let r = chunk_sums().reduce(|| 0.0, |a, b| a + b).unwrap();
    assert_eq!(r, cpu.iter().sum::<f32>());
    let min = chunk_sums().min().unwrap();
    let max = chunk_sums().max().unwrap();
    assert_eq!(min, cpu.iter().copied().reduce(f32::min));
    assert_eq!(max, cpu.iter().copied().reduce(f32::max));
    assert_eq!(min, Some(cpu[3]));
    // Integer values: min/max by Ord's rules too.
    let lens = || gpu::par_chunks(&xb, CHUNK).map(|_t, c| Ok(c.len()));
    assert_eq!(lens().min().unwrap(), Some(100));
    assert_eq!(lens().max().unwrap(), Some(300));
    assert_eq!(lens().sum::<usize>().unwrap(), N);
    assert_no_races(&rt);
}

#[test]
fn nan_wins_min_and_max_and_ties_keep_std_order() {
    let rt = runtime();
    let xb = upload(&rt, &[0.0; 40]);
    // One value per chunk of 10, then the min and max of those values.
    let min_max = |v: [f32; 4]| {
        let of = |_t: &Scope<'_, '_>, c: View<'_, f32>| Ok(v[c.offset() / 10]);
        let min = gpu::par_chunks(&xb, 10).map(of).min().unwrap().unwrap();
        let max = gpu::par_chunks(&xb, 10).map(of).max().unwrap().unwrap();
        (min, max)
    };
    let (min, max) = min_max([1.0, f32::NAN, -5.0, f32::NAN]);
    assert!(min.is_nan() && max.is_nan(), "{min} {max}");
    let (min, max) = min_max([f32::NAN, 1.0, 2.0, 3.0]);
    assert!(min.is_nan() && max.is_nan(), "{min} {max}");
    let (min, max) = min_max([1.0, 2.0, 3.0, f32::NAN]);
    assert!(min.is_nan() && max.is_nan(), "{min} {max}");
    // Equal values: min keeps the first, max the last (as std's).
    let (min, _) = min_max([1.0, 0.0, -0.0, 1.0]);
    assert!(min == 0.0 && min.is_sign_positive(), "{min}");
    let (_, max) = min_max([-1.0, 0.0, -0.0, -1.0]);
    assert!(max == 0.0 && max.is_sign_negative(), "{max}");
    assert_eq!(min_max([3.0, -2.0, 7.0, 0.5]), (-2.0, 7.0));
    assert_no_races(&rt);
}

#[test]
fn empty_buffers_give_identities() {
    let rt = runtime();
    let xb = upload(&rt, &[]);
    let mut yb = upload(&rt, &[]);
    let never = |_t: &Scope<'_, '_>, _c: View<'_, f32>| -> gpu::Result<f32> {
        panic!("no chunk task may run")
    };
    assert_eq!(
        gpu::par_chunks(&xb, 4).map(never).sum::<f32>().unwrap(),
        0.0
    );
    assert_eq!(gpu::par_chunks(&xb, 4).map(never).min().unwrap(), None);
    assert_eq!(gpu::par_chunks(&xb, 4).map(never).max().unwrap(), None);
    assert_eq!(
        gpu::par_chunks(&xb, 4)
            .map(never)
            .reduce(|| 7.0, |a, b| a + b)
            .unwrap(),
        7.0
    );
    let v: Vec<f32> = gpu::par_chunks(&xb, 4).map(never).collect().unwrap();
    assert!(v.is_empty());
    gpu::par_chunks(&xb, 4)
        .zip(gpu::par_chunks_mut(&mut yb, 4))
        .for_each(|_t, _| panic!("no chunk task may run"))
        .unwrap();
    let mut out = upload(&rt, &[]);
    gpu::par_chunks(&xb, 4)
        .map(never)
        .collect_into(&mut out)
        .unwrap();
    assert_no_races(&rt);
}

#[test]
fn collect_into_a_device_buffer() {
    let rt = runtime();
    let x = host_x();
    let xb = upload(&rt, &x);
    let mut out = upload(&rt, &[0.0f32; 4]);
    gpu::par_chunks(&xb, CHUNK)
        .map(|t, c| device_sum(t, &c))
        .collect_into(&mut out)
        .unwrap();
    assert_eq!(out.to_vec().unwrap(), cpu_sums(&x, CHUNK));

    // Into a range of a buffer, then used on the device.
    let mut wide = upload(&rt, &[0.0f32; 6]);
    let mut mid = wide.slice_mut(1..5).unwrap();
    gpu::par_chunks(&xb, CHUNK)
        .map(|_t, c| Ok(c.len() as f32))
        .collect_into(&mut mid)
        .unwrap();
    let t = rt.begin_task().unwrap();
    k::add_scalar(&t, &mut wide, 1.0).unwrap();
    assert_eq!(
        t.to_vec(&wide).unwrap(),
        [1.0, 301.0, 301.0, 301.0, 101.0, 1.0]
    );
    drop(t);

    // One element per chunk, checked before any task runs.
    let mut short = upload(&rt, &[0.0f32; 3]);
    let e = gpu::par_chunks(&xb, CHUNK)
        .map(|_t, _c| -> gpu::Result<f32> { panic!("no chunk task may run") })
        .collect_into(&mut short)
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::LengthMismatch {
                expected: 4,
                got: 3,
                ..
            }
        ),
        "{e:?}"
    );
    assert_no_races(&rt);
}

#[test]
fn zero_chunk_is_an_error_and_no_task_runs() {
    let rt = runtime();
    let xb = upload(&rt, &host_x());
    let mut yb = upload(&rt, &vec![0.0; N]);
    let zero = |r: gpu::Result<()>| {
        let e = r.unwrap_err();
        assert!(matches!(e, Error::ZeroChunk), "{e:?}");
    };
    zero(gpu::par_chunks(&xb, 0).for_each(|_, _| panic!("no chunk task may run")));
    zero(
        gpu::par_chunks(&xb, 0)
            .map(|_, _| -> gpu::Result<f32> { panic!("no chunk task may run") })
            .sum::<f32>()
            .map(drop),
    );
    zero(
        gpu::par_chunks(&xb, CHUNK)
            .zip(gpu::par_chunks_mut(&mut yb, 0))
            .for_each(|_, _| panic!("no chunk task may run")),
    );
    zero(
        gpu::par_chunks_mut(&mut yb, 0)
            .enumerate()
            .for_each(|_, _| panic!("no chunk task may run")),
    );
    zero(gpu::scope_on(&rt, |s| {
        s.par_chunks(&xb, 0)
            .for_each(|_, _| panic!("no chunk task may run"))
    }));
    // Nothing was split: y's stamps are those of its upload.
    assert_eq!(yb.to_vec().unwrap(), vec![0.0; N]);
    assert_no_races(&rt);
}

#[test]
fn zip_of_unequal_chunk_counts_is_a_typed_error() {
    let rt = runtime();
    let xb = upload(&rt, &host_x());
    let mut yb = upload(&rt, &vec![0.0; N + 1]);
    let before = yb.uses();
    let e = gpu::par_chunks(&xb, 100)
        .zip(gpu::par_chunks_mut(&mut yb, 50))
        .for_each(|_, _| panic!("no chunk task may run"))
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::LengthMismatch {
                expected: 10,
                got: 21,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("zip"), "{e}");
    // The written side was not split: its stamps are as they were.
    assert_eq!(format!("{:?}", yb.uses()), format!("{before:?}"));

    // Lengths 1000 and 1001 in chunks of 250: 4 and 5 chunks.
    let e = gpu::par_chunks(&xb, 250)
        .zip(gpu::par_chunks_mut(&mut yb, 250))
        .map(|_, _| -> gpu::Result<()> { panic!("no chunk task may run") })
        .collect::<Vec<()>>()
        .map(drop)
        .unwrap_err();
    assert!(matches!(e, Error::LengthMismatch { .. }), "{e:?}");
    // Nested: the inner zip's check.
    let e = gpu::par_chunks(&xb, 100)
        .zip(gpu::par_chunks(&xb, 200))
        .zip(gpu::par_chunks_mut(&mut yb, 100))
        .for_each(|_, _| panic!("no chunk task may run"))
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::LengthMismatch {
                expected: 10,
                got: 5,
                ..
            }
        ),
        "{e:?}"
    );
    assert_no_races(&rt);
}

#[test]
fn the_first_failing_chunk_in_chunk_order_is_the_error_after_all_ran() {
    let rt = runtime();
    let x = host_x();
    let xb = upload(&rt, &x);
    let mut yb = upload(&rt, &vec![0.0; N]);
    let ran = AtomicUsize::new(0);
    let late_failed = AtomicBool::new(false);
    let e = gpu::par_chunks(&xb, 100)
        .zip(gpu::par_chunks_mut(&mut yb, 100))
        .enumerate()
        .map(|t, (i, (x, mut y))| {
            ran.fetch_add(1, Ordering::SeqCst);
            match i {
                // Fails after chunk 7 did: still the error returned.
                2 => {
                    wait_for(&late_failed, "chunk 7's failure");
                    x.slice(0..1000).map(drop)
                }
                7 => {
                    let r = x.slice(50..200).map(drop);
                    late_failed.store(true, Ordering::SeqCst);
                    r
                }
                _ => k::copy(t, &x, &mut y),
            }
        })
        .collect::<Vec<()>>()
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::OutOfRange {
                start: 0,
                end: 1000,
                len: 100,
                ..
            }
        ),
        "{e:?}"
    );
    assert_eq!(ran.load(Ordering::SeqCst), 10, "every chunk ran");
    // The chunks that succeeded wrote; the buffer was rejoined and is used
    // again without a race.
    let v = yb.to_vec().unwrap();
    for (j, (got, want)) in v.iter().zip(&x).enumerate() {
        let failed = (200..300).contains(&j) || (700..800).contains(&j);
        assert_eq!(*got, if failed { 0.0 } else { *want }, "element {j}");
    }
    // A failing chunk of the legacy `for_each`.
    let e = gpu::par_chunks_mut(&mut yb, 100)
        .for_each(|t, c| {
            if c.index() == 4 {
                return Err(Error::ZeroChunk);
            }
            k::fill(t, c, 3.0)
        })
        .unwrap_err();
    assert!(matches!(e, Error::ZeroChunk), "{e:?}");
    assert_eq!(yb.to_vec().unwrap()[0], 3.0);
    assert_no_races(&rt);
}

#[test]
fn a_chunk_panic_propagates_after_every_chunk_ran() {
    let rt = runtime();
    let x = host_x();
    let xb = upload(&rt, &x);
    let mut yb = upload(&rt, &vec![0.0; N]);
    let ran = AtomicUsize::new(0);
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        gpu::par_chunks(&xb, 100)
            .zip(gpu::par_chunks_mut(&mut yb, 100))
            .enumerate()
            .map(|t, (i, (x, mut y))| {
                ran.fetch_add(1, Ordering::SeqCst);
                if i == 3 {
                    panic!("chunk 3 panics");
                }
                k::copy(t, &x, &mut y)?;
                Ok(i)
            })
            .sum::<usize>()
    }));
    let p = caught.expect_err("the panic comes through");
    assert_eq!(p.downcast_ref::<&str>(), Some(&"chunk 3 panics"));
    assert_eq!(ran.load(Ordering::SeqCst), 10, "every chunk ran");
    // The other chunks' work is there, and the buffer is used again
    // without a race.
    let t = rt.begin_task().unwrap();
    k::add_scalar(&t, &mut yb, 1.0).unwrap();
    let v = t.to_vec(&yb).unwrap();
    for (j, (got, want)) in v.iter().zip(&x).enumerate() {
        let want = if (300..400).contains(&j) {
            1.0
        } else {
            want + 1.0
        };
        assert_eq!(*got, want, "element {j}");
    }
    drop(t);
    assert_no_races(&rt);
}

const BIG: usize = 1 << 16;
const BIG_CHUNK: usize = 1 << 12;
const BIG_CHUNKS: usize = BIG / BIG_CHUNK;

#[test]
fn sibling_chunks_need_no_device_wait() {
    let rt = runtime();
    let x: Vec<f32> = (0..BIG).map(|i| (i % 97) as f32).collect();
    let xb = upload(&rt, &x);
    let mut yb = upload(&rt, &vec![0.0; BIG]);

    let before = rt.counters();
    gpu::par_chunks(&xb, BIG_CHUNK)
        .zip(gpu::par_chunks_mut(&mut yb, BIG_CHUNK))
        .for_each(|t, (x, mut y)| {
            k::copy(t, &x, &mut y)?;
            k::add_scalar(t, &mut y, 1.0)
        })
        .unwrap();
    let d = rt.counters().since(&before);
    assert_eq!(d.device_waits, 0, "{d:?}");
    assert_eq!(d.host_syncs, 0, "{d:?}");

    // Reads of one buffer by every chunk, each reading back its own sum:
    // host synchronizes of the chunks' own streams only, no device wait.
    let before = rt.counters();
    let sums: Vec<f32> = gpu::par_chunks(&xb, BIG_CHUNK)
        .map(|t, c| device_sum(t, &c))
        .collect()
        .unwrap();
    let d = rt.counters().since(&before);
    assert_eq!(d.device_waits, 0, "{d:?}");
    assert_eq!(sums, cpu_sums(&x, BIG_CHUNK));

    // The buffer, used whole by another task, is ordered after every chunk.
    let t = rt.begin_task().unwrap();
    k::add_scalar(&t, &mut yb, 1.0).unwrap();
    let v = t.to_vec(&yb).unwrap();
    assert!(v.iter().zip(&x).all(|(got, h)| *got == h + 2.0));
    drop(t);
    assert_no_races(&rt);
}

#[test]
fn a_gated_chunk_does_not_hold_up_its_siblings() {
    let rt = runtime();
    let x: Vec<f32> = (0..BIG).map(|i| (i % 97) as f32).collect();
    let xb = upload(&rt, &x);
    let mut yb = upload(&rt, &vec![0.0; BIG]);
    let g = rt.gate().unwrap();
    let finished = AtomicUsize::new(0);
    let gated = AtomicBool::new(false);

    let before = rt.counters();
    let sums: Vec<f32> = gpu::par_chunks(&xb, BIG_CHUNK)
        .zip(gpu::par_chunks_mut(&mut yb, BIG_CHUNK))
        .enumerate()
        .map(|t, (i, (x, mut y))| {
            if i == 0 {
                // This chunk's stream blocks until every sibling is done.
                k::gate(t, &g, TIMEOUT)?;
                k::copy(t, &x, &mut y)?;
                gated.store(true, Ordering::SeqCst);
                return Ok(0.0);
            }
            wait_for(&gated, "chunk 0's gated work being queued");
            k::copy(t, &x, &mut y)?;
            // A host synchronize of this chunk's own stream: it returns
            // while chunk 0 is gated unless it wrongly waits for it.
            let s = device_sum(t, &x)?;
            assert!(!g.timed_out(), "chunk {i} waited for the gate");
            if finished.fetch_add(1, Ordering::SeqCst) + 1 == BIG_CHUNKS - 1 {
                g.open();
            }
            Ok(s)
        })
        .collect()
        .unwrap();
    let d = rt.counters().since(&before);
    assert_eq!(d.device_waits, 0, "{d:?}");
    assert!(!g.timed_out());
    let mut want = cpu_sums(&x, BIG_CHUNK);
    want[0] = 0.0;
    assert_eq!(sums, want);
    assert_eq!(yb.to_vec().unwrap(), x);
    assert_no_races(&rt);
}

#[test]
fn inside_a_task_chunks_are_ordered_after_it_and_it_after_them() {
    let rt = runtime();
    let x = host_x();
    let mut xb = upload(&rt, &vec![0.0; N]);
    let mut yb = upload(&rt, &vec![0.0; N]);
    let total = gpu::scope_on(&rt, |s| {
        // The task's own work, then chunks that read it.
        s.copy_from_host(&mut xb, &x)?;
        let total: f64 = s
            .par_chunks(&xb, CHUNK)
            .map(|t, c| Ok(f64::from(device_sum(t, &c)?)))
            .sum()?;
        // Written chunks in the task, then the task's own work after them.
        gpu::par_chunks_mut(&mut yb, CHUNK)
            .in_task(s)
            .enumerate()
            .for_each(|t, (i, mut c)| k::fill(t, &mut c, i as f32))?;
        k::add_scalar(s, &mut yb, 1.0)?;
        // The legacy form, with nested work in a chunk's task.
        s.par_chunks_mut(&mut xb, CHUNK, |t, c| {
            let (_, ()) = t.join(|_| Ok(()), |_| Ok(()))?;
            k::scale(t, c, 2.0)
        })?;
        Ok(total)
    })
    .unwrap();
    assert_eq!(total, x.iter().map(|&v| f64::from(v)).sum::<f64>());
    let want: Vec<f32> = (0..N).map(|j| (j / CHUNK) as f32 + 1.0).collect();
    assert_eq!(yb.to_vec().unwrap(), want);
    let twice: Vec<f32> = x.iter().map(|v| 2.0 * v).collect();
    assert_eq!(xb.to_vec().unwrap(), twice);
    assert_no_races(&rt);
}

#[test]
fn map_then_for_each_runs_in_every_chunk() {
    let rt = runtime();
    let xb = upload(&rt, &host_x());
    let seen = std::sync::Mutex::new(Vec::new());
    gpu::par_chunks(&xb, CHUNK)
        .enumerate()
        .map(|_t, (i, c)| Ok((i, c.len())))
        .for_each(|v| seen.lock().unwrap().push(v))
        .unwrap();
    let mut seen = seen.into_inner().unwrap();
    seen.sort();
    assert_eq!(seen, [(0, 300), (1, 300), (2, 300), (3, 100)]);
    assert_no_races(&rt);
}

/// Where B14's time goes (a probe, run by hand on a GPU:
/// `cargo test --release --test iter -- --ignored --nocapture b14_parts`):
/// a sum over 1 GiB of f32 (1 MiB on the host backend) as one reduction,
/// and by 2 to 16 chunks combined on the device, as siblings and one after
/// another on one task; the medians of 30 runs, each to its host read.
#[test]
#[ignore = "a probe: prints times"]
fn b14_parts() {
    let rt = Runtime::global().unwrap();
    let n: usize = if rt.backend() == gpu::BackendKind::Cuda {
        1 << 28
    } else {
        1 << 18
    };
    let x = upload(rt, &vec![1.0f32; n]);
    let t = rt.begin_task().unwrap();
    let median = |f: &mut dyn FnMut() -> f32| {
        let mut times: Vec<std::time::Duration> = (0..30)
            .map(|_| {
                let t0 = std::time::Instant::now();
                assert_eq!(f(), n as f32);
                t0.elapsed()
            })
            .collect();
        times.sort();
        times[15]
    };
    eprintln!(
        "one reduction: {:?}",
        median(&mut || k::reduce::sum(&t, &x).unwrap())
    );
    for parts in [2, 4, 8, 16] {
        let mut partials = Buffer::<f32>::zeros(parts).unwrap();
        let siblings = median(&mut || {
            gpu::scope(|s| {
                gpu::par_chunks(&x, n / parts)
                    .zip(gpu::par_chunks_mut(&mut partials, 1))
                    .for_each(|t, (chunk, mut out)| k::reduce::sum_into(t, &chunk, &mut out))?;
                k::reduce::sum(s, &partials)
            })
            .unwrap()
        });
        let serial = median(&mut || {
            for p in 0..parts {
                let chunk = x.slice(p * (n / parts)..(p + 1) * (n / parts)).unwrap();
                let mut out = partials.slice_mut(p..p + 1).unwrap();
                k::reduce::sum_into(&t, &chunk, &mut out).unwrap();
            }
            k::reduce::sum(&t, &partials).unwrap()
        });
        eprintln!(
            "{parts} chunks: siblings {siblings:?}, one after another on one task {serial:?}"
        );
    }
}
