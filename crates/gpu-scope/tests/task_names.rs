//! A failure says which task (issue 40 item 2): a task named at its spawn
//! (`s.task().name(..)`) has its failures wrapped in `Error::InTask` with
//! its name and device, both its body's error and a library result it
//! left to check (a factorization's, reported at the scope's end); context
//! made at run time goes on with `.context(..)` (`gpu::ResultExt`), no
//! host wait; `Error::root` reaches the failure under both. An unnamed
//! task's failure is as before.

mod common;

use common::runtime;
use gpu::solver::Potrf;
use gpu::{Error, ResultExt};

/// `n x n`: `n I` (positive definite), or with a negative diagonal entry
/// at `bad` (not positive definite: its leading minor of order `bad + 1`).
fn matrix(n: usize, bad: Option<usize>) -> Vec<f64> {
    let mut a = vec![0.0; n * n];
    for i in 0..n {
        a[i + i * n] = if Some(i) == bad { -1.0 } else { n as f64 };
    }
    a
}

#[test]
fn the_failing_one_of_sixteen_named_solves_is_named() {
    let rt = runtime();
    let n = 8;
    let mut systems: Vec<gpu::Buffer<f64>> = (0..16)
        .map(|i| {
            let t = rt.begin_task().unwrap();
            let b = t.from_host(&matrix(n, (i == 7).then_some(3))).unwrap();
            t.synchronize().unwrap();
            b
        })
        .collect();
    let e = gpu::scope_on(&rt, |s| {
        for (i, a) in systems.iter_mut().enumerate() {
            s.task()
                .name(format!("system {i}"))
                .spawn(move |t| Potrf::new(n).run(t, a));
        }
        Ok(())
    })
    .expect_err("system 7 is not positive definite");
    assert_eq!(e.task(), Some("system 7"), "{e}");
    assert!(
        matches!(e.root(), Error::NotPositiveDefinite { .. }),
        "{e:?}"
    );
    assert!(
        e.to_string().contains("in task \"system 7\" (device 0)"),
        "{e}"
    );
}

#[test]
fn a_named_task_s_own_error_and_context_say_where() {
    let rt = runtime();
    let mut a = {
        let t = rt.begin_task().unwrap();
        t.from_host(&matrix(4, None)).unwrap()
    };
    let e = gpu::scope_on(&rt, |s| {
        let a = &mut a;
        s.task().name("reader").spawn(move |t| {
            // Too small for 5 x 5: refused at once, with context.
            Potrf::new(5).run(t, a).context("the 5 x 5 block")
        });
        Ok(())
    })
    .expect_err("the shape is refused");
    assert_eq!(e.task(), Some("reader"));
    assert!(matches!(e.root(), Error::Shape { .. }), "{e:?}");
    let msg = e.to_string();
    assert!(
        msg.starts_with("in task \"reader\" (device 0): the 5 x 5 block: potrf"),
        "{msg}"
    );
}

#[test]
fn an_unnamed_task_s_failure_is_as_before() {
    let rt = runtime();
    let mut a = {
        let t = rt.begin_task().unwrap();
        t.from_host(&matrix(4, Some(0))).unwrap()
    };
    let e = gpu::scope_on(&rt, |s| {
        let a = &mut a;
        s.spawn(move |t| Potrf::new(4).run(t, a));
        Ok(())
    })
    .expect_err("not positive definite");
    assert!(matches!(e, Error::NotPositiveDefinite { .. }), "{e:?}");
    assert_eq!(e.task(), None);
    assert!(std::ptr::eq(e.root(), &e));
}
