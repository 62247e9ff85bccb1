//! DESIGN "Soundness", soundness: one test per defect a review of the safe API found
//! (`sound01`-`sound10`), the unneeded wait it found (`sound11`), and two
//! found while writing the driver's `# Safety` sections (`sound12`,
//! `sound13`), in safe code through the public API, on both backends. Each failed before its fix
//! (the failing assertion is named in each test's comment).
//!
//! Type-level fixes also have compile-fail doctests: `Builtin::launch` and
//! `TaskContext::block_on` are `unsafe` (sound03), `DeviceSlice` is sealed
//! and its stamps are out of reach (sound04), the runtime's ledger is
//! read-only (sound09), a split cannot be rejoined while a view is alive
//! (sound02).

mod common;

use common::{assert_no_races, backend_tests, error, same_backend, OPENED_BY_TEST, PROBE};
use gpu_kernels as k;
use gpu_sched::raw::RawTask;
use gpu_sched::{
    Binding, CounterSnapshot, DeviceSlice, Error, Runtime, RuntimeOptions, Staging, TaskContext,
};
use std::panic::AssertUnwindSafe;

/// Elements per buffer: not a multiple of the block size.
const N: usize = 1001;

/// The counters' change since `before`.
fn since(rt: &Runtime, before: &CounterSnapshot) -> CounterSnapshot {
    rt.counters().since(before)
}

#[track_caller]
fn assert_all(v: &[f32], want: f32) {
    assert!(
        v.iter().all(|&x| x == want),
        "want all {want}, got {:?}..",
        &v[..v.len().min(4)]
    );
}

/// Defect 1: a hand-off's device wait recorded a pooled event with a raw
/// call and left it covering its previous, tracked record. `Runtime::event`
/// then handed it out, and synchronizing the fresh event taught "Completed"
/// for a stream whose work was still behind a gate: the next reader skipped
/// its wait and read 0 where 1 was being written (seen on the H200).
/// Failed before the fix at `e.covers() == None` (and at the value).
fn sound01_pooled_event_covers_nothing(rt: &Runtime) {
    let p = rt.begin_task().unwrap();
    let q = rt.begin_task().unwrap();
    let r = rt.begin_task().unwrap();
    let r2 = rt.begin_task().unwrap();
    let mut a = p.zeros::<f32>(N).unwrap();
    p.synchronize().unwrap();
    let g = rt.gate().unwrap();
    k::gate(&p, &g, OPENED_BY_TEST).unwrap();
    k::fill(&p, &mut a, 1.0).unwrap();
    // A pooled event covering `a`'s write goes back to the pool...
    drop(p.fence().unwrap());
    // ...and a hand-off takes it for a raw record on q's stream.
    let b = q.zeros::<f32>(N).unwrap();
    let mut c = r.zeros::<f32>(N).unwrap();
    let before = rt.counters();
    k::copy(&r, &b, &mut c).unwrap();
    assert_eq!(since(rt, &before).device_waits, 1, "the hand-off's wait");
    // The same pooled event, as a user's new event: it covers nothing, and
    // waiting on it teaches nothing about p's stream.
    let e = rt.event().unwrap();
    assert_eq!(e.covers(), None, "a new event covers nothing");
    e.synchronize().unwrap();
    assert!(e.query().unwrap());
    r2.wait(&e).unwrap();
    let mut out = r2.zeros::<f32>(N).unwrap();
    let before = rt.counters();
    k::copy(&r2, &a, &mut out).unwrap();
    let d = since(rt, &before);
    assert_eq!(d.device_waits, 1, "`a`'s writer is behind the gate: {d:?}");
    g.open();
    assert_all(&r2.to_vec(&out).unwrap(), 1.0);
    assert!(!g.timed_out());
}
backend_tests!(sound01_pooled_event_covers_nothing);

/// Defect 2: views had no way back to their parent but an explicit rejoin,
/// and the parent kept its stamps from before the split: dropped views left
/// the parent's next user unordered with their work (failed before the fix
/// at the wait count and at the values), and dropping the parent freed
/// memory the views' queued work still wrote (the host backend's detector
/// reported it; failed at the wait count).
fn sound02_split_without_rejoin(rt: &Runtime) {
    let parent = rt.begin_task().unwrap();
    let child = rt.begin_task().unwrap();
    let half = N / 2 + 1;
    let mut a = parent.zeros::<f32>(N).unwrap();
    parent.synchronize().unwrap();
    let g = rt.gate().unwrap();
    {
        let mut split = a.split_chunks(half).unwrap();
        let mut views = split.views();
        k::gate(&child, &g, OPENED_BY_TEST).unwrap();
        k::fill(&child, &mut views[0], 1.0).unwrap();
        // Views and split dropped here, without a rejoin.
    }
    let mut out = parent.zeros::<f32>(N).unwrap();
    let before = rt.counters();
    k::copy(&parent, &a, &mut out).unwrap();
    let d = since(rt, &before);
    assert!(
        d.device_waits >= 1,
        "the parent's next use waits for the view's work: {d:?}"
    );
    g.open();
    let v = parent.to_vec(&out).unwrap();
    assert_all(&v[..half], 1.0);
    assert_all(&v[half..], 0.0);

    // A leaked split, then the parent dropped: the free waits for the view.
    let g2 = rt.gate().unwrap();
    let mut b = parent.zeros::<f32>(N).unwrap();
    parent.synchronize().unwrap();
    {
        let mut split = b.split_chunks(N).unwrap();
        let mut views = split.views();
        k::gate(&child, &g2, OPENED_BY_TEST).unwrap();
        k::fill(&child, &mut views[0], 2.0).unwrap();
        drop(views);
        std::mem::forget(split);
    }
    let before = rt.counters();
    drop(b);
    let d = since(rt, &before);
    assert!(d.device_waits >= 1, "the free waits for the view: {d:?}");
    g2.open();
    child.synchronize().unwrap();
    assert!(!g.timed_out() && !g2.timed_out());
}
backend_tests!(sound02_split_without_rejoin);

/// Defect 3: a safe `submit()` could pass any pointer or length to any
/// kernel. Now kernel launches (`Builtin::launch`, `Kernel::launch`) and
/// `block_on` are `unsafe` (compile-fail doctests on both); safe wrappers take their lengths from their buffers:
/// a view's kernel writes the view and nothing next to it, and mismatched
/// lengths are refused before anything is submitted.
fn sound03_safe_launches_stay_in_their_buffers(rt: &Runtime) {
    let t = rt.begin_task().unwrap();
    let mut a = t.zeros::<f32>(3 * N).unwrap();
    {
        let mut split = a.split_chunks(N).unwrap();
        let mut views = split.views();
        k::fill(&t, &mut views[1], 5.0).unwrap();
        drop(views);
        t.rejoin(split).unwrap();
    }
    let v = t.to_vec(&a).unwrap();
    assert_all(&v[..N], 0.0);
    assert_all(&v[N..2 * N], 5.0);
    assert_all(&v[2 * N..], 0.0);
    let x = t.zeros::<f32>(N - 1).unwrap();
    let e = k::axpy(&t, 1.0, &x, &mut a).unwrap_err();
    assert!(matches!(e, Error::LengthMismatch { .. }), "{e:?}");
    let g = rt.gate().unwrap();
    k::gate(&t, &g, OPENED_BY_TEST).unwrap();
    g.open();
    t.synchronize().unwrap();
    assert!(!g.timed_out());
}
backend_tests!(sound03_safe_launches_stay_in_their_buffers);

/// A user's generic code over the sealed trait: still works for buffers and
/// views.
fn total(t: &TaskContext, x: &(impl DeviceSlice<f32> + ?Sized)) -> f32 {
    let mut out = t.zeros::<f32>(1).unwrap();
    k::sum_atomic_into(t, x, &mut out).unwrap();
    t.to_vec(&out).unwrap()[0]
}

/// Defect 4: `DeviceSlice` was a safe, open trait whose address, length and
/// stamps the runtime trusted, so a user type could alias a live buffer with
/// fresh stamps. Now sealed, its stamps out of reach (compile-fail doctests
/// on `DeviceSlice`); generic code over it still works, and a buffer's
/// `uses()` is a copy that changes nothing.
fn sound04_device_slice_is_sealed(rt: &Runtime) {
    let t = rt.begin_task().unwrap();
    let mut a = t.from_host(&[1.0f32; N]).unwrap();
    assert_eq!(total(&t, &a), N as f32);
    let before = a.uses();
    assert!(before.is_dirty());
    {
        let mut split = a.split_chunks(10).unwrap();
        let views = split.views();
        assert_eq!(total(&t, &views[0]), 10.0);
        drop(views);
        t.rejoin(split).unwrap();
    }
    assert_eq!(
        a.uses().writer().map(|w| w.stream),
        Some(t.stream_id()),
        "rejoined here"
    );
}
backend_tests!(sound04_device_slice_is_sealed);

/// Defect 5: inside a capture, `copy_to_host` submitted its copy into the
/// graph and only then failed: each launch of the graph wrote into a `Vec`
/// that might be gone. Now every operation on host memory is refused in a
/// capture before anything is submitted. Failed before the fix at the
/// graph's touches (the copy's source was in them).
fn sound05_capture_refuses_host_memory(rt: &Runtime) {
    let t = rt.begin_task().unwrap();
    let a = t.from_host(&[1.0f32; N]).unwrap();
    let mut b = t.zeros::<f32>(N).unwrap();
    let mut odd = t.zeros::<u8>(3).unwrap();
    let mut host = vec![0.0f32; N];
    let graph = t
        .capture(|c| {
            let e = c.copy_to_host(&a, &mut host).unwrap_err();
            assert!(matches!(e, Error::Capturing { .. }), "{e:?}");
            let e = c.copy_from_host(&mut b, &[2.0f32; N]).unwrap_err();
            assert!(matches!(e, Error::Capturing { .. }), "{e:?}");
            let e = c.memset_zero(&mut odd).unwrap_err();
            assert!(matches!(e, Error::Capturing { .. }), "{e:?}");
            let e = c.to_vec(&a).unwrap_err();
            assert!(matches!(e, Error::Capturing { .. }), "{e:?}");
            Ok(())
        })
        .unwrap();
    assert_eq!(graph.touches().count(), 0, "nothing was captured");
    drop(host);
    t.launch_graph(&graph).submit().unwrap();
    t.synchronize().unwrap();
    assert_all(&t.to_vec(&b).unwrap(), 0.0);
}
backend_tests!(sound05_capture_refuses_host_memory);

/// Defect 6: `Staging::new` computed its size unchecked: in release it
/// wrapped, and an 8-byte allocation stood behind a slice of 2^61 elements.
/// Failed before the fix at the first `unwrap_err`.
fn sound06_sizes_are_checked(rt: &Runtime) {
    let huge = usize::MAX / 4 + 2;
    let e = Staging::<f64>::new(rt, huge).unwrap_err();
    assert!(matches!(e, Error::TooLarge { .. }), "{e:?}");
    let e = Staging::<u8>::new(rt, usize::MAX).unwrap_err();
    assert!(matches!(e, Error::TooLarge { .. }), "{e:?}");
    let t = rt.begin_task().unwrap();
    let e = t.alloc::<f64>(huge).unwrap_err();
    assert!(matches!(e, Error::TooLarge { .. }), "{e:?}");
    let mut s = Staging::<f64>::new(rt, 4).unwrap();
    assert_eq!(s.as_slice().unwrap().len(), 4);
    assert_eq!(rt.live().allocations, 0);
}
backend_tests!(sound06_sizes_are_checked);

/// Defect 7: a panic inside `capture` left the stream capturing, and it went
/// back to the pool so: the next task's work vanished into a graph nobody
/// launches. Failed before the fix at `is_capturing`.
fn sound07_capture_ends_on_unwind(rt: &Runtime) {
    let t = rt.begin_task().unwrap();
    let s = t.stream_id();
    let mut a = t.zeros::<f32>(N).unwrap();
    let r = std::panic::catch_unwind(AssertUnwindSafe(|| {
        t.capture(|c| {
            k::fill(c, &mut a, 3.0).unwrap();
            panic!("a panic inside a capture (on purpose)");
        })
    }));
    assert!(r.is_err());
    assert!(!rt.ledger().is_capturing(s), "the capture ended on unwind");
    k::fill(&t, &mut a, 2.0).unwrap();
    assert_all(&t.to_vec(&a).unwrap(), 2.0);
    drop(t);
    // The stream goes back to the pool ready for the next task.
    let next: Vec<_> = (0..4).map(|_| rt.begin_task().unwrap()).collect();
    for t in &next {
        assert!(!rt.ledger().is_capturing(t.stream_id()));
        let mut b = t.zeros::<f32>(N).unwrap();
        k::fill(t, &mut b, 4.0).unwrap();
        assert_all(&t.to_vec(&b).unwrap(), 4.0);
    }
}
backend_tests!(sound07_capture_ends_on_unwind);

/// Defect 8: the host backend allocated buffers under 4 bytes with one
/// layout and freed them with another (undefined behaviour), and its memory
/// count drifted by the difference at every free. With a 64-byte limit the
/// drift ran out of "device" memory after a few dozen tiny buffers: failed
/// before the fix at `alloc`.
fn sound08_tiny_buffers_alloc_and_free_alike(rt: &Runtime) {
    let rt2 = same_backend(
        rt,
        RuntimeOptions {
            host_memory_limit: 64,
            ..RuntimeOptions::default()
        },
    );
    for len in 0..4 {
        for _ in 0..50 {
            let t = rt2.begin_task().unwrap();
            let mut b = t.alloc::<u8>(len).unwrap();
            t.memset_zero(&mut b).unwrap();
            assert_eq!(t.to_vec(&b).unwrap(), vec![0u8; len]);
            drop(b);
            drop(t);
            rt2.synchronize().unwrap();
        }
    }
    let live = rt2.live();
    assert_eq!((live.allocations, live.device_bytes), (0, 0), "{live:?}");
}
backend_tests!(sound08_tiny_buffers_alloc_and_free_alike);

/// Defect 9: `Runtime::ledger()` and `TaskContext::task()` handed safe code
/// the ledger's mutators (`mark_completed`, `recycle`, `bind`...): one false
/// fact made a later write skip its wait. The runtime's ledger is now a
/// read-only view (compile-fail doctest on `Runtime::ledger`); the one
/// public call that changes a stream's state, `share_stream_of`, only
/// removes facts.
fn sound09_the_ledger_is_read_only(rt: &Runtime) {
    let parent = rt.begin_task().unwrap();
    let other = rt.begin_task().unwrap();
    let s = parent.stream_id();
    let epoch = rt.ledger().epoch(s);
    assert_eq!(rt.ledger().owner(s), Some(parent.task_id()));
    assert_eq!(other.share_stream_of(&parent).unwrap(), Binding::Shared);
    assert!(rt.ledger().is_shared(s));
    let e = rt.event().unwrap();
    parent.record(&e).unwrap();
    assert_eq!(e.covers(), None, "a shared stream's record covers nothing");
    assert!(rt.ledger().epoch(s) > epoch, "the record closed an epoch");
    assert!(rt.ledger().stream_count() >= 2);
}
backend_tests!(sound09_the_ledger_is_read_only);

/// Defect 10: a stream got its ledger slot before the driver created it; if
/// creating failed, the slot stayed with no stream behind it, and the
/// device-wide synchronize (and the runtime's drop) counted slots and missed
/// the newest stream. The host backend's stream limit makes creating fail:
/// failed before the fix at the slot count.
fn sound10_failed_stream_creation_leaves_no_slot(rt: &Runtime) {
    let rt2 = same_backend(
        rt,
        RuntimeOptions {
            warm_streams: 1,
            host_stream_limit: 3,
            ..RuntimeOptions::default()
        },
    );
    let tasks: Vec<_> = (0..4).map(|_| rt2.begin_task().unwrap()).collect();
    let streams: Vec<_> = tasks.iter().map(|t| t.try_stream_id().unwrap()).collect();
    if rt2.backend() == gpu_sched::BackendKind::Host {
        // The limit is 3 (the reclaim stream and two): the third task shares
        // a stream rather than fail (DESIGN "Streams are a resource").
        assert!(rt2.ledger().is_shared(streams[2]), "{streams:?}");
    }
    assert_eq!(
        rt2.ledger().stream_count(),
        rt2.live().streams,
        "every ledger slot has a driver stream"
    );
    let newest = &tasks[1];
    let probe = rt2.gate().unwrap();
    k::gate(newest, &probe, PROBE).unwrap();
    rt2.synchronize().unwrap();
    assert!(
        probe.timed_out(),
        "the device-wide synchronize waited for the newest stream"
    );
}
backend_tests!(sound10_failed_stream_creation_leaves_no_slot);

/// The unneeded wait: a buffer made by one task and read back by another,
/// then written on a third stream. The first task's last epoch never
/// closed, so the read-back's device wait could not teach that it was
/// ordered after it, and the writer waited again. A task's end now closes
/// its epoch. Failed before the fix at the wait count.
fn sound11_no_wait_after_from_host_then_to_vec(rt: &Runtime) {
    let maker = rt.begin_task().unwrap();
    let reader = rt.begin_task().unwrap();
    let writer = rt.begin_task().unwrap();
    let mut a = maker.from_host(&[1.0f32; N]).unwrap();
    drop(maker);
    assert_all(&reader.to_vec(&a).unwrap(), 1.0);
    let before = rt.counters();
    k::fill(&writer, &mut a, 2.0).unwrap();
    let d = since(rt, &before);
    assert_eq!((d.device_waits, d.host_syncs), (0, 0), "{d:?}");
    assert_all(&writer.to_vec(&a).unwrap(), 2.0);

    // The same through the one-off tasks of `Buffer`'s own methods.
    let writer2 = rt.begin_task().unwrap();
    let b = rt.begin_task().unwrap().from_host(&[3.0f32; N]).unwrap();
    let mut b = b;
    assert_all(&rt.begin_task().unwrap().to_vec(&b).unwrap(), 3.0);
    let before = rt.counters();
    k::fill(&writer2, &mut b, 4.0).unwrap();
    let d = since(rt, &before);
    assert_eq!((d.device_waits, d.host_syncs), (0, 0), "{d:?}");
    assert_all(&writer2.to_vec(&b).unwrap(), 4.0);
}
backend_tests!(sound11_no_wait_after_from_host_then_to_vec);

/// Found while writing the driver's `# Safety` sections (issue 12): a view
/// of bytes may start off a word boundary, and zeroing it set whole words
/// at a misaligned address (on the host backend a misaligned `&mut [u32]`;
/// on CUDA a driver error). Such views are zeroed from host memory now.
fn sound12_memset_of_a_misaligned_view(rt: &Runtime) {
    let t = rt.begin_task().unwrap();
    let mut a = t.from_host(&[7u8; 10]).unwrap();
    {
        let mut split = a.split_chunks(6).unwrap();
        let mut views = split.views();
        // Bytes 6..10: 4 bytes at an address that is 2 mod 4.
        t.memset_zero(&mut views[1]).unwrap();
        t.rejoin(split).unwrap();
    }
    let want = [7, 7, 7, 7, 7, 7, 0, 0, 0, 0];
    assert_eq!(t.to_vec(&a).unwrap(), want);
    assert_no_races(rt);
}
backend_tests!(sound12_memset_of_a_misaligned_view);

/// Found with sound12: `copy_from_host` waited for the copy only when the
/// source was this runtime's page-locked memory. Another runtime's
/// `Staging` slice (or memory another library pinned) was copied
/// asynchronously by CUDA, and the device read it after the borrow ended:
/// here, after the host wrote 2 into it. The driver is asked now.
fn sound13_copy_from_foreign_page_locked_memory(rt: &Runtime) {
    let other = same_backend(rt, RuntimeOptions::default());
    let mut pinned = Staging::<f32>::new(&other, N).unwrap();
    pinned.as_mut_slice().unwrap().fill(1.0);
    let t = rt.begin_task().unwrap();
    let mut a = t.zeros::<f32>(N).unwrap();
    t.synchronize().unwrap();
    let g = rt.gate().unwrap();
    k::gate(&t, &g, OPENED_BY_TEST).unwrap();
    std::thread::scope(|scope| {
        let g = &g;
        scope.spawn(move || {
            // Not a threshold: the copy must not have run when the host
            // writes below, whichever comes first.
            std::thread::sleep(std::time::Duration::from_millis(100));
            g.open();
        });
        t.copy_from_host(&mut a, pinned.as_slice().unwrap())
            .unwrap();
        // `copy_from_host` returned: the source may change.
        pinned.as_mut_slice().unwrap().fill(2.0);
    });
    assert_all(&t.to_vec(&a).unwrap(), 1.0);
    assert!(!g.timed_out());
}
backend_tests!(sound13_copy_from_foreign_page_locked_memory);

// ----- review 3 (issue 23): a second attack on the safe API -------------

/// Review 3, defect 1 (unsound on CUDA): `alloc` inside
/// `TaskContext::capture` was allowed. The buffer moved out of the capture
/// was the graph's allocation: using it later read freed memory
/// (`CUDA_ERROR_ILLEGAL_ADDRESS` on the H200, the context lost), and a
/// captured scan's temporary was freed before the graph's first launch.
/// Now any capture refuses allocation, before anything is queued. Failed
/// before the fix at the first `error(..)` (the capture returned `Ok`).
fn sound14_no_allocation_in_a_capture(rt: &Runtime) {
    let t = rt.begin_task().unwrap();
    let src = t.from_host(&vec![1.0f32; 5000]).unwrap();
    let mut dst = t.zeros::<f32>(5000).unwrap();
    let before = rt.live();
    let mut kept = None;
    let e = error(t.capture(|c| {
        kept = Some(c.alloc::<f32>(N)?);
        Ok(())
    }));
    assert!(matches!(e, Error::Capturing { .. }), "{e:?}");
    assert!(kept.is_none());
    // A reduction with a temporary: an error, not a graph whose every
    // launch fails.
    let e = error(t.capture(|c| k::inclusive_scan(c, &src, &mut dst)));
    assert!(matches!(e, Error::Capturing { .. }), "{e:?}");
    // Nothing was allocated, and the task still works outside a capture.
    t.synchronize().unwrap();
    assert_eq!(rt.live().allocations, before.allocations);
    k::inclusive_scan(&t, &src, &mut dst).unwrap();
    assert_eq!(t.to_vec(&dst).unwrap()[4999], 5000.0);
    assert_no_races(rt);
}
backend_tests!(sound14_no_allocation_in_a_capture);

/// Review 3, defect 4: `share_stream_of` with a task of another runtime
/// indexed this runtime's stream table with the other's stream id (out of
/// bounds, a panic) or bound a stream of another device. Failed before
/// the fix at `error(..)` (a panic: index out of bounds).
fn sound15_share_stream_of_another_runtime(rt: &Runtime) {
    let mine = same_backend(
        rt,
        RuntimeOptions {
            max_streams: 4,
            warm_streams: 1,
            ..RuntimeOptions::default()
        },
    );
    // Tasks of `rt` bound to streams past `mine`'s table.
    let theirs: Vec<TaskContext> = (0..10)
        .map(|_| {
            let t = rt.begin_task().unwrap();
            t.zeros::<u8>(1).unwrap();
            t
        })
        .collect();
    let t = mine.begin_task().unwrap();
    for other in &theirs {
        let e = error(t.share_stream_of(other));
        assert!(matches!(e, Error::WrongDevice { .. }), "{e:?}");
    }
    // A task of the same runtime still shares.
    let u = mine.begin_task().unwrap();
    u.zeros::<u8>(1).unwrap();
    t.share_stream_of(&u).unwrap();
}
backend_tests!(sound15_share_stream_of_another_runtime);

/// Review 3, defect 5: a gate blocked on inside `TaskContext::capture`
/// was queued into the graph, then its fence was refused and the gate's
/// page-locked flags leaked (kept for good) at every attempt. Now refused
/// before anything is queued, in any capture. Failed before the fix at the
/// `pinned_bytes` assertion (the gate could not free its flags).
fn sound16_gate_in_a_capture(rt: &Runtime) {
    let t = rt.begin_task().unwrap();
    let mut a = t.zeros::<f32>(N).unwrap();
    t.synchronize().unwrap();
    let before = rt.live();
    for _ in 0..3 {
        let g = rt.gate().unwrap();
        let e = error(t.capture(|c| {
            k::gate(c, &g, OPENED_BY_TEST)?;
            k::fill(c, &mut a, 1.0)
        }));
        assert!(matches!(e, Error::Capturing { .. }), "{e:?}");
        g.open();
    }
    assert_eq!(
        rt.live().pinned_bytes,
        before.pinned_bytes,
        "the gates' flags"
    );
    k::fill(&t, &mut a, 2.0).unwrap();
    assert_all(&t.to_vec(&a).unwrap(), 2.0);
}
backend_tests!(sound16_gate_in_a_capture);

/// Review 3, defect 5: `wait_fence` inside `TaskContext::capture` was `Ok`
/// on the host backend and `CUDA_ERROR_STREAM_CAPTURE_ISOLATION` on CUDA
/// (a device wait on an event recorded outside the capture). The host
/// backend now refuses such a wait as CUDA does, and the runtime waits for
/// a fence of pre-capture work on the host, on both backends. Failed
/// before the fix at the capture's `unwrap` (the isolation error).
fn sound17_wait_fence_in_a_capture(rt: &Runtime) {
    let p = rt.begin_task().unwrap();
    let mut a = p.zeros::<f32>(N).unwrap();
    k::fill(&p, &mut a, 1.0).unwrap();
    let f = p.fence().unwrap();
    let t = rt.begin_task().unwrap();
    let mut b = t.zeros::<f32>(N).unwrap();
    t.synchronize().unwrap();
    let g = t
        .capture(|c| {
            c.wait_fence(f)?;
            k::fill(c, &mut b, 3.0)
        })
        .unwrap();
    t.launch_graph(&g).write(&mut b).submit().unwrap();
    assert_all(&t.to_vec(&b).unwrap(), 3.0);
    assert_all(&t.to_vec(&a).unwrap(), 1.0);
    assert_no_races(rt);
}
backend_tests!(sound17_wait_fence_in_a_capture);
