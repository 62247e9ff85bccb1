//! Unit tests of the scope capture's dependency rule.

use super::*;

fn acc(ptr: u64, bytes: usize, access: Access) -> MemAccess {
    MemAccess { ptr, bytes, access }
}

fn nodes(n: &[u64]) -> Nodes {
    n.iter().map(|&x| RawNode(x)).collect()
}

#[test]
fn deps_follow_the_ledger_rule_on_ranges() {
    let mut d = Deps::default();
    // 1 writes [0, 100); 2 reads [0, 100); 3 reads [50, 60) of it.
    d.record(&[acc(0, 100, Access::Write)], &nodes(&[1]));
    assert_eq!(
        d.of(&[], &[acc(0, 100, Access::Read)]).to_vec(),
        vec![RawNode(1)]
    );
    d.record(&[acc(0, 100, Access::Read)], &nodes(&[2]));
    assert_eq!(
        d.of(&[], &[acc(50, 10, Access::Read)]).to_vec(),
        vec![RawNode(1)]
    );
    d.record(&[acc(50, 10, Access::Read)], &nodes(&[3]));
    // A write of [55, 56) follows the writer and both readers.
    let w = d.of(&[], &[acc(55, 1, Access::Write)]);
    assert_eq!(w.to_vec(), vec![RawNode(1), RawNode(2), RawNode(3)]);
    d.record(&[acc(55, 1, Access::Write)], &nodes(&[4]));
    // A read of [0, 100) follows both writers (the part, the whole).
    assert_eq!(
        d.of(&[], &[acc(0, 100, Access::Read)]).to_vec(),
        vec![RawNode(1), RawNode(4)]
    );
    // Disjoint ranges, adjacent ones included, are independent; the
    // chain always comes along.
    assert_eq!(
        d.of(&[RawNode(9)], &[acc(100, 8, Access::Write)]).to_vec(),
        vec![RawNode(9)]
    );
    assert!(d.of(&[], &[acc(200, 0, Access::Write)]).is_empty());
    // The touches: [0, 100) written, [50, 60) read, [55, 56) written.
    let t = {
        let cap = ScopeCapture::new(
            0,
            gpu_epoch::Ledger::new(4).begin_task(),
            (StreamId::from_index(0), RawStream(0)),
        );
        *cap.state.lock() = d;
        cap.touches()
    };
    assert_eq!(t.len(), 3);
    assert_eq!(t[0].access, Access::Write);
    assert_eq!((t[1].ptr, t[1].access), (50, Access::Read));
    assert_eq!((t[2].ptr, t[2].access), (55, Access::Write));
}

/// A run of `ops` (key index, chain, memory) on `d`: each one's
/// dependencies.
fn run(d: &mut Deps, ops: &[(u32, Nodes, Vec<MemAccess>)]) -> Vec<Vec<u32>> {
    ops.iter()
        .map(|(k, chain, mem)| d.next((7, *k), chain, mem).1.to_vec())
        .collect()
}

fn guided(guide: Arc<Trail>) -> Deps {
    Deps {
        guide: Some(guide),
        ..Deps::default()
    }
}

#[test]
fn a_run_that_follows_the_last_gets_its_dependencies_and_one_that_differs_catches_up() {
    use Access::{Read, Write};
    // Four operations over two buffers; the third follows the first
    // through its chain.
    let a = |bytes| vec![acc(0, bytes, Write), acc(100, 8, Read)];
    let ops = vec![
        (0, nodes(&[]), a(8)),
        (1, nodes(&[]), vec![acc(100, 8, Write)]),
        (2, nodes(&[1]), vec![acc(0, 8, Read)]),
        (3, nodes(&[]), a(8)),
    ];
    let plain = run(&mut Deps::default(), &ops);
    assert_eq!(plain, vec![vec![], vec![0], vec![0], vec![0, 1, 2]]);
    // The first run, with an empty guide: computed, and its trail kept.
    let mut d = guided(Arc::default());
    assert_eq!(run(&mut d, &ops), plain);
    let trail = d.take_trail().expect("a guided run has a trail");
    // The same operations follow it: the maps stay empty.
    let mut d = guided(trail.clone());
    assert_eq!(run(&mut d, &ops), plain);
    assert!(d.following() && d.uses.is_empty());
    assert!(Arc::ptr_eq(&d.take_trail().unwrap(), &trail));
    // The third touches more memory now: from there on computed, after
    // the maps caught up with the first two.
    let mut other = ops.clone();
    other[2].2 = vec![acc(0, 8, Read), acc(100, 8, Read)];
    let want = run(&mut Deps::default(), &other);
    assert_eq!(want, vec![vec![], vec![0], vec![0, 1], vec![0, 1, 2]]);
    let mut d = guided(trail.clone());
    assert_eq!(run(&mut d, &other), want);
    assert!(!d.following());
    assert_eq!(d.diverged, Some(2));
    // A key or a chain that differs is a difference too.
    for changed in [
        (9, nodes(&[1]), vec![acc(0, 8, Read)]),
        (2, nodes(&[]), vec![acc(0, 8, Read)]),
    ] {
        let mut o = ops.clone();
        o[2] = changed;
        let want = run(&mut Deps::default(), &o);
        assert_eq!(run(&mut guided(trail.clone()), &o), want);
    }
    // Its trail: the guide's first two steps and its own from there.
    let t2 = d.take_trail().unwrap();
    let mut d = guided(t2);
    assert_eq!(run(&mut d, &other), want);
    assert!(d.following());
}
