//! [`HandlePool`] and [`Library`]'s shared parts over a fake library (no
//! CUDA): handles reused per slot and bound again at each use, one per
//! user at a time, a failed bind destroyed and typed, teardown destroying
//! every idle handle.

use super::{probe, HandlePool, Library};
use gpu_sched::{Error, Extension};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock};

/// What the fake library was asked to do, in order.
#[derive(Debug, PartialEq, Eq)]
enum Call {
    Create(u32),
    Bind(u32, u64),
    Destroy(u32),
}

static CALLS: Mutex<Vec<Call>> = Mutex::new(Vec::new());
static NEXT: AtomicU32 = AtomicU32::new(1);

/// A stream the fake library refuses to bind to.
const BAD_STREAM: u64 = 0xbad;

struct Fake;

impl Library for Fake {
    const NAME: &'static str = "fake";
    const STEM: &'static str = "fake";
    const SYMBOLS: &'static [&'static str] = &["fakeCreate"];
    const CREATE: &'static str = "fakeCreate";
    const SET_STREAM: &'static str = "fakeSetStream";
    type Status = i32;
    type Handle = u32;

    fn probed() -> &'static OnceLock<std::result::Result<(), String>> {
        static PROBED: OnceLock<std::result::Result<(), String>> = OnceLock::new();
        &PROBED
    }

    unsafe fn present() -> bool {
        true
    }

    unsafe fn has_symbol(name: &str) -> bool {
        name == "fakeCreate"
    }

    fn succeeded(status: i32) -> bool {
        status == 0
    }

    fn code(status: i32) -> i32 {
        status
    }

    fn create() -> std::result::Result<u32, i32> {
        let h = NEXT.fetch_add(1, Ordering::Relaxed);
        CALLS.lock().unwrap().push(Call::Create(h));
        Ok(h)
    }

    unsafe fn destroy(h: u32) {
        CALLS.lock().unwrap().push(Call::Destroy(h));
    }

    unsafe fn set_stream(h: u32, stream: u64) -> std::result::Result<(), i32> {
        if stream == BAD_STREAM {
            return Err(3);
        }
        CALLS.lock().unwrap().push(Call::Bind(h, stream));
        Ok(())
    }
}

/// The calls made since the last `take_calls`.
fn take_calls() -> Vec<Call> {
    std::mem::take(&mut *CALLS.lock().unwrap())
}

#[test]
fn a_handle_pool_reuses_rebinds_and_tears_down() {
    probe::<Fake>().unwrap();
    assert!(matches!(
        Fake::check(5, "fakeCall"),
        Err(Error::Library {
            library: "fake",
            call: "fakeCall",
            code: 5,
            ..
        })
    ));
    let pool = HandlePool::<Fake>::default();

    // Slot 0: made once, bound to the slot's stream at each use.
    let a = pool.with_handle((0, 100), Ok).unwrap();
    assert_eq!(take_calls(), [Call::Create(a), Call::Bind(a, 100)]);
    let again = pool.with_handle((0, 200), Ok).unwrap();
    assert_eq!(again, a, "slot 0's idle handle was not reused");
    assert_eq!(take_calls(), [Call::Bind(a, 200)]);

    // Two users of one slot at once get two handles; another slot its own.
    let (outer, inner) = pool
        .with_handle((0, 200), |h| {
            let inner = pool.with_handle((0, 200), Ok)?;
            Ok((h, inner))
        })
        .unwrap();
    assert_ne!(outer, inner);
    let b = pool.with_handle((1, 300), Ok).unwrap();
    assert!(b != outer && b != inner);
    take_calls();
    assert_eq!(pool.counts(), (3, 3));

    // An error of the user's call: the handle still goes back.
    let e = pool
        .with_handle((1, 300), |_| Fake::check(7, "fakeCall"))
        .unwrap_err();
    assert!(matches!(e, Error::Library { code: 7, .. }), "{e:?}");
    assert_eq!(pool.counts(), (3, 3));
    take_calls();

    // A failed bind: that handle is destroyed, not given back, and the
    // error names the bind.
    let e = pool.with_handle((1, BAD_STREAM), Ok).unwrap_err();
    assert!(
        matches!(
            e,
            Error::Library {
                library: "fake",
                call: "fakeSetStream",
                code: 3,
                ..
            }
        ),
        "{e:?}"
    );
    assert_eq!(take_calls(), [Call::Destroy(b)]);
    assert_eq!(pool.counts(), (3, 2));

    // Teardown destroys every idle handle, once.
    pool.teardown();
    let mut destroyed: Vec<u32> = take_calls()
        .into_iter()
        .map(|c| match c {
            Call::Destroy(h) => h,
            c => panic!("teardown did more than destroy: {c:?}"),
        })
        .collect();
    destroyed.sort_unstable();
    let mut expected = vec![outer, inner];
    expected.sort_unstable();
    assert_eq!(destroyed, expected);
    assert_eq!(pool.counts(), (3, 0));
    pool.teardown();
    assert!(take_calls().is_empty());
}
