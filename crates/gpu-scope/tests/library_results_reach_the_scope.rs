//! A factorization's result (cuSOLVER's `info`, DESIGN "Numerical libraries and foreign work") in a scope's task is
//! never lost: a spawned task that does not wait hands it to the scope,
//! whose top-level end reports it; a parent that joins its children on the
//! device reports it at its next wait; and a clean factorization adds no
//! error.

use gpu::solver::Potrf;
use gpu::Error;

/// On the global runtime (the GPU where there is one).
#[test]
fn spawned_failure_reaches_the_scope() {
    let mut bad = gpu::with_task(|t| t.from_host(&[1.0f64, 2.0, 2.0, 1.0])).unwrap();
    let mut good = gpu::with_task(|t| t.from_host(&[4.0f64, 2.0, 2.0, 3.0])).unwrap();
    let r = gpu::scope(|s| {
        s.spawn(|t| Potrf::new(2).run(t, &mut bad));
        s.spawn(|t| Potrf::new(2).run(t, &mut good));
        Ok(())
    });
    match r {
        Err(Error::NotPositiveDefinite { minor: 2, .. }) => {}
        r => panic!("expected the spawned task's failure, got {r:?}"),
    }
    let l = gpu::with_task(|t| t.to_vec(&good)).unwrap();
    assert_eq!(l[0], 2.0);
    // A parent that submits joins its children on the device: the failure
    // comes with its own next wait, inside the scope.
    let mut bad = gpu::with_task(|t| t.from_host(&[-4.0f64])).unwrap();
    let mut mine = gpu::with_task(|t| t.from_host(&[1.0f64])).unwrap();
    let r = gpu::scope(|s| {
        gpu_kernels::scale(s, &mut mine, 2.0)?;
        s.scope(|s2| {
            s2.spawn(|t| Potrf::new(1).run(t, &mut bad));
            Ok(())
        })?;
        let seen = s.to_vec(&mine);
        assert!(
            matches!(seen, Err(Error::NotPositiveDefinite { minor: 1, .. })),
            "{seen:?}"
        );
        Ok(())
    });
    r.unwrap();
    // A grandchild's failure, through a task that joins it in a nested
    // scope and submits work of its own: it reaches the top-level scope.
    let mut bad = gpu::with_task(|t| t.from_host(&[-1.0f64])).unwrap();
    let mut other = gpu::with_task(|t| t.from_host(&[1.0f64])).unwrap();
    let r = gpu::scope(|s| {
        s.spawn(|t| {
            gpu_kernels::scale(t, &mut other, 3.0)?;
            t.scope(|s2| {
                s2.spawn(|u| Potrf::new(1).run(u, &mut bad));
                Ok(())
            })
        });
        Ok(())
    });
    match r {
        Err(Error::NotPositiveDefinite { minor: 1, .. }) => {}
        r => panic!("expected the grandchild's failure, got {r:?}"),
    }
    // Clean: no error anywhere.
    let mut good = gpu::with_task(|t| t.from_host(&[9.0f64])).unwrap();
    gpu::scope(|s| {
        s.spawn(|t| Potrf::new(1).run(t, &mut good));
        Ok(())
    })
    .unwrap();
    assert_eq!(gpu::with_task(|t| t.to_vec(&good)).unwrap(), [3.0]);
}
