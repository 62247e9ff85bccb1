//! Unit tests of the stream pool: a stream taken from the free list is
//! recycled before another task can see it held (and share it).

use crate::{BackendChoice, Runtime, RuntimeOptions};
use gpu_epoch::{Access, BufferStamps, Decision, StreamId};
use std::cell::RefCell;

type Hook = Box<dyn FnMut(StreamId)>;

thread_local! {
    /// What runs, on this thread, the moment `idle` makes a stream visible
    /// as held: from then on `share` may hand it to another task.
    static HELD: RefCell<Option<Hook>> = const { RefCell::new(None) };
}

/// Called by `StreamPool::idle` as it marks a stream held.
pub(super) fn held(id: StreamId) {
    let hook = HELD.with(|h| h.borrow_mut().take());
    if let Some(mut f) = hook {
        f(id);
    }
}

/// Review 3 (issue 23, a reviewer's finding): `idle` marked a stream held
/// and recycled it after. A task that shared the stream in between (the
/// pool out of streams) bound it, wrote a buffer, and the recycle then
/// moved the stream's generation on, "covering" that write: a reader on
/// another stream skipped its wait and raced with it. Here the sharer acts
/// at the very moment the stream becomes visible as held. Failed before
/// the fix at the decision (`NoWait` by recycling).
#[test]
fn a_stream_is_recycled_before_anyone_can_share_it() {
    let rt = Runtime::new(RuntimeOptions {
        backend: BackendChoice::Host,
        warm_streams: 2,
        ..RuntimeOptions::default()
    })
    .unwrap();
    // A stream used and given back, idle: the free list's first choice.
    let t = rt.begin_task().unwrap();
    t.zeros::<u8>(4).unwrap();
    t.synchronize().unwrap();
    drop(t);
    let ledger = rt.ledger_rw().clone();
    let reclaim = rt.reclaim_stream();
    // The sharer's write, made from the hook.
    let stamps = std::rc::Rc::new(RefCell::new(None::<BufferStamps>));
    let out = stamps.clone();
    let (hook_rt, hook_ledger) = (rt.clone(), ledger.clone());
    HELD.with(|h| {
        *h.borrow_mut() = Some(Box::new(move |id| {
            // The pool, out of streams, gives the stream to a second task.
            let shared = hook_rt.core().streams.share(&hook_ledger);
            assert_eq!(shared, Some(id), "the stream is shareable once held");
            let task = hook_ledger.begin_task();
            hook_ledger.bind(&task, id);
            let mut b = BufferStamps::new();
            hook_ledger.stamp_write(b.get_mut(), id);
            *out.borrow_mut() = Some(b);
        }))
    });
    let (first, recycled) = rt.core().streams.acquire(rt.driver(), &ledger).unwrap();
    assert!(
        recycled,
        "the warm stream was taken from the free list, idle"
    );
    let b = stamps.borrow_mut().take().expect("the hook ran");
    let d = ledger.hand_off(&b.snapshot(), reclaim, Access::Read, true);
    assert!(
        !matches!(d, Decision::NoWait(_)),
        "a write on {first:?} by its sharer, queued after the recycle, is not covered by it: {d:?}"
    );
}

/// Issue 26: a task that leaves work in flight ends with an event of its
/// stream's own recorded just before the end-of-work flag's write (on an
/// H200 the write straight behind a running kernel sometimes held other
/// streams' later kernels back). One event per stream, made at its first
/// use and reused; the flag still tells the stream idle once written.
#[test]
fn each_flag_write_follows_the_stream_s_own_event() {
    let rt = Runtime::new(RuntimeOptions {
        backend: BackendChoice::Host,
        warm_streams: 1,
        end_flags: true,
        ..RuntimeOptions::default()
    })
    .unwrap();
    let pool = &rt.core().streams;
    let mut seen = None;
    for round in 0..2 {
        let t = rt.begin_task().unwrap();
        let id = t.stream_id();
        t.zeros::<u8>(4).unwrap(); // work left in flight: no synchronize
        drop(t);
        let e = pool.end_events[id.index()].load(std::sync::atomic::Ordering::Acquire);
        assert_ne!(e, 0, "round {round}: the stream's end event was made");
        if let Some((sid, first)) = seen {
            if sid == id {
                assert_eq!(e, first, "the same stream's event is reused");
            }
        }
        seen = Some((id, e));
        rt.synchronize().unwrap();
    }
    // Idle once its flag is written: taken again first, recycled.
    let (id, recycled) = pool.acquire(rt.driver(), rt.ledger_rw()).unwrap();
    assert!(recycled, "{id:?} idle by its flag");
    let e = pool.take_end_event(id).expect("its event");
    assert!(pool.take_end_event(id).is_none(), "taken once");
    rt.driver().destroy_event(e).unwrap();
}

/// Issue 39 item 3: a task of high priority gets a stream made with it; a
/// normal task does not take that stream while it can have one of its
/// own; the high stream, given back idle, goes to the next high task.
#[test]
fn streams_are_kept_apart_by_priority() {
    let rt = Runtime::new(RuntimeOptions {
        backend: BackendChoice::Host,
        warm_streams: 1,
        ..RuntimeOptions::default()
    })
    .unwrap();
    let pool = &rt.core().streams;
    let high = |id: StreamId| pool.has(id, crate::Priority::High);
    let t = rt.begin_task().unwrap();
    assert!(t.set_priority(crate::Priority::High));
    t.zeros::<u8>(4).unwrap();
    t.synchronize().unwrap();
    let h = t.stream_id();
    assert!(high(h), "a high task's stream is a high one");
    assert!(
        !t.set_priority(crate::Priority::Normal),
        "it holds a stream now"
    );
    drop(t);
    // Idle and free: a normal task passes it over.
    let n = rt.begin_task().unwrap();
    n.zeros::<u8>(4).unwrap();
    assert_ne!(n.stream_id(), h, "a normal task takes a normal stream");
    assert!(!high(n.stream_id()));
    // The next high task gets it back, recycled.
    let t = rt.begin_task().unwrap();
    t.set_priority(crate::Priority::High);
    t.zeros::<u8>(4).unwrap();
    assert_eq!(t.stream_id(), h, "the idle high stream is reused");
    assert_eq!(t.priority(), crate::Priority::High);
}
