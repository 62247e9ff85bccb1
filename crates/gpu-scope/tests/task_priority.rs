//! Task priorities (issue 39 item 3): `Scope::task().priority(..)` gives a
//! task's stream its priority (CUDA stream priorities; the pool keeps
//! streams of each priority apart), without changing what is ordered: a
//! high task and normal ones around it see each other's writes as the
//! scope orders them. Its children have the default priority; in a
//! capture a priority has no effect (the work goes into the graph).

mod common;

use common::{assert_no_races, runtime, zeroed};
use gpu::Priority;
use gpu_kernels::{add_scalar, fill};

const N: usize = 4096;

#[test]
fn a_high_task_is_ordered_as_any_and_its_children_are_normal() {
    let rt = runtime();
    let v = gpu::scope_on(&rt, |s| {
        let mut a = s.zeros::<f32>(N)?;
        fill(s, &mut a, 1.0)?; // the parent's write, before the spawns
        let a_ref = &mut a;
        s.scope(|s| {
            s.task().priority(Priority::High).spawn(|t| {
                assert_eq!(t.priority(), Priority::High);
                add_scalar(t, a_ref, 2.0)?; // reads the parent's write
                assert!(
                    !t.set_priority(Priority::Normal),
                    "a task holding a stream keeps its priority"
                );
                t.spawn(|c| {
                    assert_eq!(c.priority(), Priority::Normal, "a child's default");
                    Ok(())
                });
                Ok(())
            });
            s.spawn(|t| {
                assert_eq!(t.priority(), Priority::Normal);
                Ok(())
            });
            Ok(())
        })?;
        // After the nested scope: ordered after the high task's write.
        add_scalar(s, &mut a, 4.0)?;
        s.to_vec(&a)
    })
    .unwrap();
    assert!(v.iter().all(|&x| x == 7.0), "got {:?}", &v[..4]);
    assert_no_races(&rt);
}

#[test]
fn a_priority_has_no_effect_in_a_capture() {
    let rt = runtime();
    let [mut a] = zeroed(&rt, N);
    let graph = gpu::capture_on(&rt, |s| {
        let a = &mut a;
        s.task().priority(Priority::High).spawn(move |t| {
            assert_eq!(t.priority(), Priority::Normal, "the graph's work");
            fill(t, a, 5.0)
        });
        Ok(())
    })
    .unwrap();
    let t = rt.begin_task().unwrap();
    t.launch_graph(&graph).write(&mut a).submit().unwrap();
    assert!(t.to_vec(&a).unwrap().iter().all(|&x| x == 5.0));
}
