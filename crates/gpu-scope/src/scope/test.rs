//! Tests of scope, spawn, join.

use super::{scope_on, ScopeState};
use gpu_sched::{Error, Runtime, RuntimeOptions};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};

fn runtime() -> Runtime {
    Runtime::new(RuntimeOptions::default()).unwrap()
}

#[test]
fn state_keeps_the_first_error() {
    let s = ScopeState::default();
    assert!(!s.failed());
    s.fail(Error::ZeroChunk);
    s.fail(Error::Unsupported("second"));
    assert!(s.failed());
    assert!(matches!(s.finish(), Err(Error::ZeroChunk)));
    // Reported once: the error was taken.
    assert!(s.finish().is_ok());
}

#[test]
fn state_keeps_the_first_panic_and_prefers_it_to_an_error() {
    let s = ScopeState::default();
    s.fail(Error::ZeroChunk);
    s.panicked(Box::new("first"));
    s.panicked(Box::new("second"));
    assert!(s.failed());
    let p = catch_unwind(AssertUnwindSafe(|| s.finish())).unwrap_err();
    assert_eq!(p.downcast_ref::<&str>(), Some(&"first"));
}

#[test]
fn an_empty_scope_returns_the_bodys_value() {
    let rt = runtime();
    assert_eq!(scope_on(&rt, |_s| Ok(7)).unwrap(), 7);
    assert_eq!(
        rt.live().streams_in_use,
        1,
        "only the reclaim stream stays held"
    );
}

#[test]
fn every_spawned_task_runs_once_and_leaves_its_final_fence_to_the_join() {
    let rt = runtime();
    let ran = AtomicUsize::new(0);
    scope_on(&rt, |s| {
        for _ in 0..16 {
            s.spawn(|t| {
                t.spawn(|_| {
                    ran.fetch_add(1, Ordering::SeqCst);
                    Ok(())
                });
                ran.fetch_add(1, Ordering::SeqCst);
                Ok(())
            });
        }
        Ok(())
    })
    .unwrap();
    assert_eq!(ran.load(Ordering::SeqCst), 32);
    // The join consumed every fence and every task gave its stream back.
    let live = rt.live();
    assert_eq!(live.events_in_use, 0, "{live:?}");
    assert_eq!(live.streams_in_use, 1, "{live:?}");
}

#[test]
fn a_nested_scope_error_is_the_nested_scopes_result() {
    let rt = runtime();
    let r = scope_on(&rt, |s| {
        let inner = s.scope(|i| {
            i.spawn(|_| Err(Error::ZeroChunk));
            Ok(())
        });
        assert!(matches!(inner, Err(Error::ZeroChunk)));
        // The enclosing scope goes on: the error was reported once.
        Ok(1)
    });
    assert_eq!(r.unwrap(), 1);
}
