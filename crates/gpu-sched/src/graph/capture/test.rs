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
