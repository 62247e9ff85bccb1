//! Ranges of buffers (issue 14, item 1): read-only views (`Buffer::slice`,
//! views of views) that share their parent's stamps, mutable ones
//! (`slice_mut`) that stamp their parent's, and `split_at_mut` halves with
//! stamps of their own; copies between ranges; out-of-range errors. On both
//! backends; each test ends with the host backend's race detector finding
//! nothing (`backend_tests!`).

mod common;

use common::{assert_no_races, backend_tests, same_backend, OPENED_BY_TEST};
use gpu_kernels as k;
use gpu_sched::{Buffer, CounterSnapshot, DeviceSlice, Error, Runtime, RuntimeOptions};
use std::ops::Bound;

/// Elements per buffer: not a multiple of the block size.
const N: usize = 1001;

/// The counters' change since `before`.
fn since(rt: &Runtime, before: &CounterSnapshot) -> CounterSnapshot {
    rt.counters().since(before)
}

/// `0, 1, .., n - 1`.
fn iota(n: usize) -> Vec<f32> {
    (0..n).map(|i| i as f32).collect()
}

#[track_caller]
fn assert_all(v: &[f32], want: f32) {
    assert!(
        v.iter().all(|&x| x == want),
        "want all {want}, got {:?}..",
        &v[..v.len().min(4)]
    );
}

/// Values through read-only views, views of views and mutable views, for
/// every kind of range bound.
fn ranges01_values_through_slices(rt: &Runtime) {
    let t = rt.begin_task().unwrap();
    let want = iota(N);
    let mut a = t.from_host(&want).unwrap();

    let v = a.slice(10..20).unwrap();
    assert_eq!((v.offset(), v.len()), (10, 10));
    assert_eq!(t.to_vec(&v).unwrap(), want[10..20]);
    assert_eq!(t.to_vec(&a.slice(..).unwrap()).unwrap(), want);
    assert_eq!(t.to_vec(&a.slice(N - 3..).unwrap()).unwrap(), want[N - 3..]);
    assert_eq!(t.to_vec(&a.slice(..=4).unwrap()).unwrap(), want[..=4]);
    let b = (Bound::Excluded(3), Bound::Included(5));
    assert_eq!(t.to_vec(&a.slice(b).unwrap()).unwrap(), want[4..6]);
    let empty = a.slice(7..7).unwrap();
    assert!(empty.is_empty() && DeviceSlice::<f32>::is_empty(&empty));
    assert_eq!(t.to_vec(&empty).unwrap(), Vec::<f32>::new());

    // Views of views: offsets and values add up; a view is `Copy`.
    let outer = a.slice(100..).unwrap();
    let inner = outer.slice(5..=9).unwrap();
    let copy = inner;
    assert_eq!((inner.offset(), inner.len()), (105, 5));
    assert_eq!(t.to_vec(&copy).unwrap(), want[105..110]);
    assert_eq!(t.to_vec(&inner.slice(1..2).unwrap()).unwrap(), [106.0]);
    let mut out = t.zeros::<f32>(1).unwrap();
    k::sum_atomic_into(&t, &inner, &mut out).unwrap();
    assert_eq!(t.to_vec(&out).unwrap(), [(105..110).sum::<usize>() as f32]);

    // Writes through a mutable view stay in its range, also through a view
    // of a view, and a `ViewMut` reads through `slice`.
    {
        let mut m = a.slice_mut(200..300).unwrap();
        assert_eq!((m.offset(), m.len(), m.index()), (200, 100, 0));
        k::fill(&t, &mut m, -1.0).unwrap();
        let mut mm = m.slice_mut(10..20).unwrap();
        assert_eq!(mm.offset(), 210);
        k::fill(&t, &mut mm, -2.0).unwrap();
        let r = m.slice(5..15).unwrap();
        assert_eq!(r.offset(), 205);
        let v = t.to_vec(&r).unwrap();
        assert_all(&v[..5], -1.0);
        assert_all(&v[5..], -2.0);
        t.memset_zero(&mut m.slice_mut(90..).unwrap()).unwrap();
    }
    let v = t.to_vec(&a).unwrap();
    assert_eq!(v[..200], want[..200]);
    assert_all(&v[200..210], -1.0);
    assert_all(&v[210..220], -2.0);
    assert_all(&v[220..290], -1.0);
    assert_all(&v[290..300], 0.0);
    assert_eq!(v[300..], want[300..]);
    assert_no_races(rt);
}
backend_tests!(ranges01_values_through_slices);

#[track_caller]
fn assert_out_of_range<T: std::fmt::Debug>(
    r: gpu_sched::Result<T>,
    what: &str,
    want: (usize, usize, usize),
) {
    match r.unwrap_err() {
        e @ Error::OutOfRange {
            what: w,
            start,
            end,
            len,
        } => {
            assert_eq!((w, (start, end, len)), (what, want), "{e}");
            let msg = e.to_string();
            assert!(
                msg.contains(&format!("{start}..{end}")) && msg.contains(&len.to_string()),
                "{msg}"
            );
        }
        e => panic!("want OutOfRange, got {e:?}"),
    }
}

/// A range outside its buffer or view is an error that says what was asked
/// and the length, never a panic; nothing is submitted.
fn ranges02_out_of_range_is_an_error(rt: &Runtime) {
    let t = rt.begin_task().unwrap();
    let mut a = t.from_host(&iota(N)).unwrap();
    let (five, three) = (5, 3);
    assert_out_of_range(a.slice(0..N + 1), "Buffer::slice", (0, N + 1, N));
    assert_out_of_range(a.slice(five..three), "Buffer::slice", (5, 3, N));
    assert_out_of_range(a.slice(..=N), "Buffer::slice", (0, N + 1, N));
    assert_out_of_range(a.slice(N + 1..), "Buffer::slice", (N + 1, N, N));
    let m = usize::MAX;
    assert_out_of_range(a.slice(..=m), "Buffer::slice", (0, m, N));
    assert_out_of_range(
        a.slice((Bound::Excluded(m), Bound::Unbounded)),
        "Buffer::slice",
        (m, N, N),
    );
    assert_out_of_range(a.slice_mut(N..N + 2), "Buffer::slice_mut", (N, N + 2, N));
    assert_out_of_range(a.split_at_mut(N + 1), "Buffer::split_at_mut", (0, N + 1, N));
    {
        let v = a.slice(10..20).unwrap();
        // Within the buffer, outside the view.
        assert_out_of_range(v.slice(5..11), "View::slice", (5, 11, 10));
    }
    {
        let mut v = a.slice_mut(10..20).unwrap();
        assert_out_of_range(v.slice(..11), "ViewMut::slice", (0, 11, 10));
        assert_out_of_range(v.slice_mut(11..), "ViewMut::slice_mut", (11, 10, 10));
        assert_out_of_range(v.split_at_mut(11), "ViewMut::split_at_mut", (0, 11, 10));
    }
    // The buffer is as it was, and its uses were not forgotten by a failed
    // split.
    assert!(!a.uses().is_unknown());
    assert_eq!(t.to_vec(&a).unwrap(), iota(N));
    // Edges are fine.
    assert!(a.slice(N..).unwrap().is_empty());
    assert_eq!(a.split_at_mut(N).unwrap().len(), 2);
}
backend_tests!(ranges02_out_of_range_is_an_error);

/// A view keeps its buffer's runtime: it is refused by a task of another.
fn ranges03_views_keep_their_runtime(rt: &Runtime) {
    let rt2 = same_backend(rt, RuntimeOptions::default());
    let t = rt.begin_task().unwrap();
    let t2 = rt2.begin_task().unwrap();
    let mut a = t.from_host(&iota(N)).unwrap();
    let mut out = t2.zeros::<f32>(1).unwrap();
    let e =
        k::sum_atomic_into(&t2, &a.slice(..10).unwrap().slice(1..).unwrap(), &mut out).unwrap_err();
    assert!(matches!(e, Error::WrongDevice { .. }), "{e:?}");
    let e = t2.to_vec(&a.slice(..10).unwrap()).unwrap_err();
    assert!(matches!(e, Error::WrongDevice { .. }), "{e:?}");
    let e = k::fill(&t2, &mut a.slice_mut(..10).unwrap(), 1.0).unwrap_err();
    assert!(matches!(e, Error::WrongDevice { .. }), "{e:?}");
    let mut split = a.split_at_mut(10).unwrap();
    let (mut x, _) = split.halves().unwrap();
    let e = k::fill(&t2, &mut x, 1.0).unwrap_err();
    assert!(matches!(e, Error::WrongDevice { .. }), "{e:?}");
    let e = t2.rejoin(split).unwrap_err();
    assert!(matches!(e, Error::WrongDevice { .. }), "{e:?}");
    drop(out);
    t.synchronize().unwrap();
    rt2.synchronize().unwrap();
    assert_no_races(&rt2);
}
backend_tests!(ranges03_views_keep_their_runtime);

/// A read through a `View` is a read of its range of the buffer: a later
/// write to the buffer on another stream waits for it on the device, while
/// another reader (through another view) does not, nor a writer of another
/// range; a writer of an overlapping range does.
fn ranges04_a_read_through_a_view_orders_a_later_write(rt: &Runtime) {
    let p = rt.begin_task().unwrap();
    let r = rt.begin_task().unwrap();
    let r2 = rt.begin_task().unwrap();
    let w = rt.begin_task().unwrap();
    let mut a = p.from_host(&iota(N)).unwrap();
    let mut out = r.zeros::<f32>(1).unwrap();
    let mut out2 = r2.zeros::<f32>(1).unwrap();
    p.synchronize().unwrap();
    r.synchronize().unwrap();
    r2.synchronize().unwrap();

    let g = rt.gate().unwrap();
    k::gate(&r, &g, OPENED_BY_TEST).unwrap();
    k::sum_atomic_into(&r, &a.slice(0..10).unwrap(), &mut out).unwrap();

    // Another read, through another view: no wait; its value comes back
    // while the first reader is still behind the gate.
    let before = rt.counters();
    k::sum_atomic_into(&r2, &a.slice(5..).unwrap().slice(..10).unwrap(), &mut out2).unwrap();
    assert_eq!(since(rt, &before).device_waits, 0, "reads never wait");
    assert_eq!(r2.to_vec(&out2).unwrap(), [(5..15).sum::<usize>() as f32]);
    assert!(
        !g.timed_out(),
        "the second reader did not wait for the gate"
    );

    // A write to the whole buffer waits for the gated read.
    let before = rt.counters();
    k::fill(&w, &mut a, -1.0).unwrap();
    let d = since(rt, &before);
    assert_eq!(
        d.device_waits, 1,
        "the writer waits for the view's read: {d:?}"
    );
    g.open();
    assert_eq!(
        r.to_vec(&out).unwrap(),
        [45.0],
        "the read saw the old values"
    );
    assert_all(&w.to_vec(&a).unwrap(), -1.0);
    assert!(!g.timed_out());

    // A write through a `slice_mut` of another range does not wait for a
    // read of the first (X3, ranges), nor hold up the first range's read:
    // a write of an overlapping range waits for it.
    let g2 = rt.gate().unwrap();
    k::gate(&r, &g2, OPENED_BY_TEST).unwrap();
    k::sum_atomic_into(&r, &a.slice(..10).unwrap(), &mut out).unwrap();
    let before = rt.counters();
    k::fill(&w, &mut a.slice_mut(500..).unwrap(), 2.0).unwrap();
    let d = since(rt, &before);
    assert_eq!(d.device_waits, 0, "disjoint ranges never wait: {d:?}");
    let v = w.to_vec(&a.slice(500..).unwrap()).unwrap();
    assert_all(&v, 2.0);
    assert!(
        !g2.timed_out(),
        "the range's writer did not wait for the gate"
    );
    let before = rt.counters();
    k::fill(&w, &mut a.slice_mut(5..600).unwrap(), 3.0).unwrap();
    let d = since(rt, &before);
    assert_eq!(
        d.device_waits, 1,
        "an overlapping range's writer waits for the read: {d:?}"
    );
    g2.open();
    assert_eq!(r.to_vec(&out).unwrap(), [-10.0]);
    let v = w.to_vec(&a).unwrap();
    assert_all(&v[..5], -1.0);
    assert_all(&v[5..600], 3.0);
    assert_all(&v[600..], 2.0);
    assert!(!g2.timed_out());
    assert_no_races(rt);
}
backend_tests!(ranges04_a_read_through_a_view_orders_a_later_write);

/// The halves of `split_at_mut` have stamps of their own: two tasks writing
/// one each never wait for each other; the rejoin waits for both, and the
/// buffer then holds both tasks' values. Also for a split of a view.
fn ranges05_split_at_mut_halves_never_wait(rt: &Runtime) {
    let p = rt.begin_task().unwrap();
    let c1 = rt.begin_task().unwrap();
    let c2 = rt.begin_task().unwrap();
    let mid = 400;
    let mut a = p.zeros::<f32>(N).unwrap();
    p.synchronize().unwrap();
    let g = rt.gate().unwrap();
    {
        let mut split = a.split_at_mut(mid).unwrap();
        assert_eq!(split.len(), 2);
        let (mut x, mut y) = split.halves().unwrap();
        assert_eq!((x.offset(), x.len(), x.index()), (0, mid, 0));
        assert_eq!((y.offset(), y.len(), y.index()), (mid, N - mid, 1));
        let before = rt.counters();
        k::gate(&c1, &g, OPENED_BY_TEST).unwrap();
        k::fill(&c1, &mut x, 1.0).unwrap();
        k::fill(&c2, &mut y, 2.0).unwrap();
        // The second half's value comes back while the first half's writer
        // is still behind the gate.
        assert_all(&c2.to_vec(&y).unwrap(), 2.0);
        assert_eq!(since(rt, &before).device_waits, 0, "halves never wait");
        assert!(!g.timed_out(), "the second half did not wait for the gate");
        g.open();
        p.rejoin(split).unwrap();
    }
    let v = p.to_vec(&a).unwrap();
    assert_all(&v[..mid], 1.0);
    assert_all(&v[mid..], 2.0);
    assert!(!g.timed_out());
    assert_eq!(a.uses().writer().map(|u| u.stream), Some(p.stream_id()));

    // A split of a mutable view (of a split's view): its halves, rejoined,
    // then the outer split rejoined.
    {
        let mut outer = a.split_chunks(500).unwrap();
        let mut views = outer.views();
        let v1 = &mut views[1];
        assert_eq!(v1.offset(), 500);
        let mut m = v1.slice_mut(10..30).unwrap();
        {
            let mut inner = m.split_at_mut(5).unwrap();
            let (mut x, mut y) = inner.halves().unwrap();
            assert_eq!((x.offset(), y.offset(), y.len()), (510, 515, 15));
            k::fill(&c1, &mut x, 3.0).unwrap();
            k::fill(&c2, &mut y, 4.0).unwrap();
            c1.rejoin(inner).unwrap();
        }
        k::scale(&c1, &mut m, 10.0).unwrap();
        drop(views);
        p.rejoin(outer).unwrap();
    }
    let v = p.to_vec(&a).unwrap();
    assert_all(&v[..mid], 1.0);
    assert_all(&v[mid..510], 2.0);
    assert_all(&v[510..515], 30.0);
    assert_all(&v[515..530], 40.0);
    assert_all(&v[530..], 2.0);

    // A split leaked without a rejoin leaves its parent's uses unknown; one
    // dropped gives the parent its views' uses (`ranges10`), here of a
    // `slice_mut` view, whose stamps are the buffer's: the buffer's uses
    // outside the view stay.
    std::mem::forget(a.split_at_mut(1).unwrap());
    assert!(a.uses().is_unknown());
    k::fill(&p, &mut a, 0.0).unwrap();
    assert!(!a.uses().is_unknown());
    {
        let mut m = a.slice_mut(1..).unwrap();
        drop(m.split_at_mut(1).unwrap());
    }
    assert!(!a.uses().is_unknown());
    assert_eq!(a.uses().writer().map(|u| u.stream), Some(p.stream_id()));
    assert_all(&p.to_vec(&a).unwrap(), 0.0);
    assert_no_races(rt);
}
backend_tests!(ranges05_split_at_mut_halves_never_wait);

/// Device-to-device copies between ranges: of one buffer (the halves of a
/// split), of two buffers, and from a read-only view; lengths must agree.
fn ranges06_copies_between_ranges(rt: &Runtime) {
    let t = rt.begin_task().unwrap();
    let u = rt.begin_task().unwrap();
    let want = iota(N);
    let mut a = t.from_host(&want).unwrap();
    let mut b = t.zeros::<f32>(N).unwrap();

    // Within one buffer: the first 100 elements over the last 100.
    {
        let mut split = a.split_at_mut(N - 100).unwrap();
        let (mut x, mut y) = split.halves().unwrap();
        t.copy(&x.slice(..100).unwrap(), &mut y).unwrap();
        // From the second half back into the first, on another task.
        u.copy(&y.slice(..10).unwrap(), &mut x.slice_mut(200..210).unwrap())
            .unwrap();
        let e = t.copy(&x, &mut y).unwrap_err();
        assert!(matches!(e, Error::LengthMismatch { .. }), "{e:?}");
        t.rejoin(split).unwrap();
    }
    let v = t.to_vec(&a).unwrap();
    assert_eq!(v[..200], want[..200]);
    assert_eq!(v[200..210], want[..10]);
    assert_eq!(v[210..N - 100], want[210..N - 100]);
    assert_eq!(v[N - 100..], want[..100]);

    // Between two buffers, with the runtime's copy and the copy kernel.
    t.copy(
        &a.slice(300..400).unwrap(),
        &mut b.slice_mut(..100).unwrap(),
    )
    .unwrap();
    k::copy(
        &u,
        &a.slice(..=9).unwrap(),
        &mut b.slice_mut(N - 10..).unwrap(),
    )
    .unwrap();
    let e = t
        .copy(&a.slice(..10).unwrap(), &mut b.slice_mut(..11).unwrap())
        .unwrap_err();
    assert!(matches!(e, Error::LengthMismatch { .. }), "{e:?}");
    let v = u.to_vec(&b).unwrap();
    assert_eq!(v[..100], want[300..400]);
    assert_all(&v[100..N - 10], 0.0);
    assert_eq!(v[N - 10..], want[..10]);

    // From host memory into a range, and back.
    t.copy_from_host(&mut b.slice_mut(100..103).unwrap(), &[7.0, 8.0, 9.0])
        .unwrap();
    let mut host = [0.0f32; 4];
    t.copy_to_host(&b.slice(99..103).unwrap(), &mut host)
        .unwrap();
    assert_eq!(host, [want[399], 7.0, 8.0, 9.0]);
    assert_no_races(rt);
}
backend_tests!(ranges06_copies_between_ranges);

/// A `Buffer` and its views are what generic code over the two traits
/// takes: `DeviceSlice` (read) for all, `DeviceSliceMut` (write) for all
/// but `View`.
fn ranges07_generic_code(rt: &Runtime) {
    fn total(t: &gpu_sched::TaskContext, x: &(impl DeviceSlice<f32> + ?Sized)) -> f32 {
        let mut out = t.zeros::<f32>(1).unwrap();
        k::sum_atomic_into(t, x, &mut out).unwrap();
        t.to_vec(&out).unwrap()[0]
    }
    fn ones(t: &gpu_sched::TaskContext, x: &mut (impl gpu_sched::DeviceSliceMut<f32> + ?Sized)) {
        k::fill(t, x, 1.0).unwrap();
    }
    let t = rt.begin_task().unwrap();
    let mut a: Buffer<f32> = t.zeros(N).unwrap();
    ones(&t, &mut a.slice_mut(..10).unwrap());
    assert_eq!(total(&t, &a), 10.0);
    assert_eq!(total(&t, &a.slice(5..).unwrap()), 5.0);
    let mut m = a.slice_mut(..).unwrap();
    ones(&t, &mut m);
    assert_eq!(total(&t, &m), N as f32);
}
backend_tests!(ranges07_generic_code);

/// X3 for `slice_mut`: two tasks writing disjoint ranges of one buffer one
/// after the other on different streams never wait for each other; a
/// third writing a range that overlaps both is ordered after both.
fn ranges08_disjoint_slice_mut_writes_never_wait(rt: &Runtime) {
    let p = rt.begin_task().unwrap();
    let c1 = rt.begin_task().unwrap();
    let c2 = rt.begin_task().unwrap();
    let c3 = rt.begin_task().unwrap();
    let mid = 400;
    let mut a = p.zeros::<f32>(N).unwrap();
    p.synchronize().unwrap();
    let g = rt.gate().unwrap();
    let before = rt.counters();
    k::gate(&c1, &g, OPENED_BY_TEST).unwrap();
    k::fill(&c1, &mut a.slice_mut(..mid).unwrap(), 1.0).unwrap();
    k::fill(&c2, &mut a.slice_mut(mid..).unwrap(), 2.0).unwrap();
    // The second range's value comes back while the first range's writer
    // is still behind the gate.
    assert_all(&c2.to_vec(&a.slice(mid..).unwrap()).unwrap(), 2.0);
    let d = since(rt, &before);
    assert_eq!(d.device_waits, 0, "disjoint ranges never wait: {d:?}");
    assert!(!g.timed_out(), "the second range did not wait for the gate");
    // The zeros' entry (the whole) stays, overlapped only in part by each.
    assert_eq!(a.uses().ranges().count(), 3);

    // Overlapping both: ordered after both writers, by a wait for the
    // gated first one (the second's is known complete: its value came back).
    let before = rt.counters();
    k::scale(&c3, &mut a.slice_mut(mid - 10..mid + 10).unwrap(), 10.0).unwrap();
    let d = since(rt, &before);
    assert_eq!(d.device_waits, 1, "overlapping ranges are ordered: {d:?}");
    g.open();
    let v = c3.to_vec(&a).unwrap();
    assert_all(&v[..mid - 10], 1.0);
    assert_all(&v[mid - 10..mid], 10.0);
    assert_all(&v[mid..mid + 10], 20.0);
    assert_all(&v[mid + 10..], 2.0);
    assert!(!g.timed_out());

    // A write of the whole drops every range: one entry again.
    k::fill(&p, &mut a, 0.0).unwrap();
    assert_eq!(a.uses().ranges().count(), 1);
    assert_all(&p.to_vec(&a).unwrap(), 0.0);
    assert_no_races(rt);
}
backend_tests!(ranges08_disjoint_slice_mut_writes_never_wait);

/// X3: a read `View` of one half does not hold up a write of the other
/// half; a write of the read half waits for it.
fn ranges09_a_read_of_one_half_never_holds_up_the_other(rt: &Runtime) {
    let p = rt.begin_task().unwrap();
    let r = rt.begin_task().unwrap();
    let w = rt.begin_task().unwrap();
    let mid = 500;
    let mut a = p.from_host(&iota(N)).unwrap();
    let mut out = r.zeros::<f32>(1).unwrap();
    p.synchronize().unwrap();
    r.synchronize().unwrap();
    let g = rt.gate().unwrap();
    k::gate(&r, &g, OPENED_BY_TEST).unwrap();
    k::sum_atomic_into(&r, &a.slice(..mid).unwrap(), &mut out).unwrap();
    let before = rt.counters();
    k::fill(&w, &mut a.slice_mut(mid..).unwrap(), -1.0).unwrap();
    assert_all(&w.to_vec(&a.slice(mid..).unwrap()).unwrap(), -1.0);
    let d = since(rt, &before);
    assert_eq!(
        d.device_waits, 0,
        "the other half's writer never waits: {d:?}"
    );
    assert!(!g.timed_out());
    let before = rt.counters();
    k::fill(&w, &mut a.slice_mut(..mid).unwrap(), -2.0).unwrap();
    let d = since(rt, &before);
    assert_eq!(d.device_waits, 1, "the read half's writer waits: {d:?}");
    g.open();
    assert_eq!(
        r.to_vec(&out).unwrap(),
        [(0..mid).sum::<usize>() as f32],
        "the read saw the old values"
    );
    let v = w.to_vec(&a).unwrap();
    assert_all(&v[..mid], -2.0);
    assert_all(&v[mid..], -1.0);
    assert!(!g.timed_out());
    assert_no_races(rt);
}
backend_tests!(ranges09_a_read_of_one_half_never_holds_up_the_other);

/// X3: a split dropped without a rejoin gives its parent its views' uses,
/// each of its own half (`Split`'s drop, `Ledger::merge_views`): the
/// parent's next use waits for the views' work, not for every stream's.
/// Before, the parent's uses were unknown, and a read of it waited for an
/// unrelated stream's gated work (here until the gate gave up).
fn ranges10_a_dropped_split_gives_its_parent_its_views_uses(rt: &Runtime) {
    let p = rt.begin_task().unwrap();
    let c1 = rt.begin_task().unwrap();
    let c2 = rt.begin_task().unwrap();
    let other = rt.begin_task().unwrap();
    let mut a = p.zeros::<f32>(N).unwrap();
    let mut z = other.zeros::<f32>(N).unwrap();
    p.synchronize().unwrap();
    other.synchronize().unwrap();
    let g = rt.gate().unwrap();
    k::gate(&other, &g, OPENED_BY_TEST).unwrap();
    k::fill(&other, &mut z, 5.0).unwrap();
    let mid = N / 2;
    {
        let mut split = a.split_at_mut(mid).unwrap();
        let (mut x, mut y) = split.halves().unwrap();
        k::fill(&c1, &mut x, 1.0).unwrap();
        k::fill(&c2, &mut y, 2.0).unwrap();
    }
    assert!(!a.uses().is_unknown(), "{:?}", a.uses());
    let before = rt.counters();
    let v = p.to_vec(&a).unwrap();
    assert!(
        !g.timed_out(),
        "the read waited for the unrelated stream's gated work"
    );
    assert_all(&v[..mid], 1.0);
    assert_all(&v[mid..], 2.0);
    let d = since(rt, &before);
    assert!(d.device_waits <= 2, "the two views' streams at most: {d:?}");
    g.open();
    assert_all(&other.to_vec(&z).unwrap(), 5.0);
    assert!(!g.timed_out());
    assert_no_races(rt);
}
backend_tests!(ranges10_a_dropped_split_gives_its_parent_its_views_uses);
