//! What a library built on the public API keeps (issue 37 item 1, the
//! API `gpu-libs` uses): its state per runtime (`Runtime::extension`),
//! made once per runtime and type and torn down once in the runtime's
//! drop; the stream slot its per-stream objects are keyed by
//! (`ForeignStream::slot`); and a status word the device writes, read at
//! the task's next wait (`TaskContext::check_status_later`), whose
//! failure is that wait's error, or, for a task dropped unwaited, the
//! runtime's next synchronize's.

mod common;

use common::backend_tests;
use gpu_sched::{BackendKind, Error, Extension, Runtime, RuntimeOptions, StatusWord, TaskContext};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Teardowns of `Torn` extensions, by the id of the runtime's extension.
static TORN: Mutex<Vec<usize>> = Mutex::new(Vec::new());
/// Ids for `Torn` values.
static NEXT: AtomicUsize = AtomicUsize::new(0);

/// An extension that records its teardown.
struct Torn {
    id: usize,
    uses: AtomicUsize,
}

impl Default for Torn {
    fn default() -> Self {
        Torn {
            id: NEXT.fetch_add(1, Ordering::Relaxed),
            uses: AtomicUsize::new(0),
        }
    }
}

impl Extension for Torn {
    fn teardown(&self) {
        TORN.lock().unwrap().push(self.id);
    }
}

/// One extension per runtime and type, shared by every caller and
/// thread, made on first use; each runtime's torn down exactly once, by
/// its drop, not before.
fn an_extension_is_one_per_runtime_and_torn_down_once(backend: BackendKind) {
    let rt = common::runtime(backend);
    let other = common::same_backend(&rt, RuntimeOptions::default());
    let e = rt.extension::<Torn>();
    let id = e.id;
    let again = std::thread::scope(|s| s.spawn(|| rt.extension::<Torn>()).join().unwrap());
    assert!(Arc::ptr_eq(&e, &again), "a second extension of one type");
    again.uses.fetch_add(1, Ordering::Relaxed);
    assert_eq!(e.uses.load(Ordering::Relaxed), 1);
    let other_id = other.extension::<Torn>().id;
    assert_ne!(id, other_id, "two runtimes share an extension");
    rt.synchronize().unwrap();
    assert!(!TORN.lock().unwrap().contains(&id), "torn down while live");
    drop(rt);
    assert_eq!(
        TORN.lock().unwrap().iter().filter(|&&t| t == id).count(),
        1,
        "the dropped runtime's extension was not torn down once"
    );
    assert!(!TORN.lock().unwrap().contains(&other_id));
    drop(other);
    assert!(TORN.lock().unwrap().contains(&other_id));
    // The value outlives its runtime while held; its teardown ran once.
    assert_eq!(e.uses.load(Ordering::Relaxed), 1);
}

#[test]
fn an_extension_is_one_per_runtime_and_torn_down_once_host() {
    an_extension_is_one_per_runtime_and_torn_down_once(BackendKind::Host);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn an_extension_is_one_per_runtime_and_torn_down_once_cuda() {
    an_extension_is_one_per_runtime_and_torn_down_once(BackendKind::Cuda);
}

/// A nonzero status is a "library" failure naming the operation.
fn judge(op: &'static str, value: i32) -> Error {
    Error::Library {
        library: "test",
        call: op,
        code: value,
        name: format!("status {value}"),
    }
}

/// Queues a write of `value` into `word` on `t`'s stream: a foreign
/// operation whose device closure sets the word with a memset on the
/// stream, and whose host twin writes it. Returns the stream slot the
/// device closure saw (the task's on CUDA; `None` on the host backend).
fn write_status(t: &TaskContext, word: &StatusWord, value: i32) -> Option<usize> {
    let (dev, host) = (word.device_ptr(), word.host_ptr() as usize);
    let slot = std::cell::Cell::new(None);
    let op = t.foreign("write_status", (), ()).host(move |(), ()| {
        // SAFETY: the word lives until its check read it, after the wait
        // that covers this operation; nothing else writes it.
        unsafe { (host as *mut i32).write_volatile(value) };
        Ok(())
    });
    // SAFETY: the memset writes the 4 bytes of the live word, on the
    // operation's stream only.
    unsafe {
        op.run(|s, (), ()| {
            slot.set(Some(s.slot()));
            gpu_sched::cudarc::driver::sys::cuMemsetD32Async(
                dev,
                value as u32,
                1,
                s.raw() as usize as gpu_sched::cudarc::driver::sys::CUstream,
            )
            .result()
            .map_err(Error::from)
        })
    }
    .unwrap();
    slot.get()
}

/// A status word written zero passes the next wait; one written nonzero
/// is that wait's error, judged as the library says; the stream slot a
/// foreign operation sees is its task's stream's ledger index.
fn a_status_word_is_checked_at_the_next_wait(rt: &Runtime) {
    let t = rt.begin_task().unwrap();
    let word = t.status_word().unwrap();
    let slot = write_status(&t, &word, 0);
    t.check_status_later(word, "zero", judge).unwrap();
    assert!(t.has_unchecked_results());
    t.synchronize().unwrap();
    assert!(!t.has_unchecked_results());
    if let Some(slot) = slot {
        assert_eq!(slot, t.stream_id().index());
    }
    assert_eq!(t.stream_slot().unwrap().slot(), t.stream_id().index());

    let word = t.status_word().unwrap();
    write_status(&t, &word, 7);
    t.check_status_later(word, "seven", judge).unwrap();
    match t.synchronize() {
        Err(Error::Library {
            call: "seven",
            code: 7,
            ..
        }) => {}
        r => panic!("expected the status's error, got {r:?}"),
    }
    // Checked once: the next wait has nothing left.
    t.synchronize().unwrap();

    // A task dropped unwaited: the failure goes to the runtime's next
    // synchronize, never lost.
    {
        let u = rt.begin_task().unwrap();
        let word = u.status_word().unwrap();
        write_status(&u, &word, -2);
        u.check_status_later(word, "dropped", judge).unwrap();
    }
    match rt.synchronize() {
        Err(Error::Library {
            call: "dropped",
            code: -2,
            ..
        }) => {}
        r => panic!("expected the dropped task's status error, got {r:?}"),
    }

    // A word of another runtime is refused (its pages may be gone when
    // this task's wait would read it), and nothing is left to check.
    let other = common::same_backend(rt, RuntimeOptions::default());
    let foreign_word = other.begin_task().unwrap().status_word().unwrap();
    drop(other);
    match t.check_status_later(foreign_word, "elsewhere", judge) {
        Err(Error::WrongDevice { .. }) => {}
        r => panic!("expected a refusal of another runtime's word, got {r:?}"),
    }
    assert!(!t.has_unchecked_results());
    t.synchronize().unwrap();
}
backend_tests!(a_status_word_is_checked_at_the_next_wait);
