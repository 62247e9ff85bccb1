//! Unit tests of the lanes.

use super::{lanes, Deps};

/// A random DAG of `n` nodes: each follows up to 3 earlier ones,
/// numbered in a shuffled order (as canonical indices are).
fn dag(n: usize, seed: u64) -> Deps {
    let mut x = seed;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    // `name[i]`: the index of the i-th node in a topological order.
    let mut name: Vec<u32> = (0..n as u32).collect();
    for i in (1..n).rev() {
        name.swap(i, (next() % (i as u64 + 1)) as usize);
    }
    let mut deps: Deps = vec![smallvec::SmallVec::new(); n];
    for i in 1..n {
        for _ in 0..next() % 4 {
            let p = name[(next() % i as u64) as usize];
            if !deps[name[i] as usize].contains(&p) {
                deps[name[i] as usize].push(p);
            }
        }
    }
    deps
}

#[test]
fn lanes_keep_the_dependencies_and_add_no_cycle() {
    for seed in 1..20 {
        let deps = dag(300, seed);
        for max in [0, 1, 3, 16, 1000] {
            let (topo, edges) = lanes(&deps, max);
            let mut at = vec![usize::MAX; deps.len()];
            for (k, &v) in topo.iter().enumerate() {
                assert_eq!(at[v as usize], usize::MAX, "each node once");
                at[v as usize] = k;
            }
            for (v, e) in edges.iter().enumerate() {
                assert!(
                    deps[v].iter().all(|p| e.contains(p)),
                    "the dependencies kept"
                );
                assert!(
                    e.iter().all(|&p| at[p as usize] < at[v]),
                    "edges follow the order"
                );
            }
            if max == 0 {
                assert_eq!(edges, deps, "no lanes, no edges added");
            }
            if max == 1 {
                // One lane: a total order.
                for w in topo.windows(2) {
                    assert!(edges[w[1] as usize].contains(&w[0]), "seed {seed}");
                }
            }
            // Deterministic.
            assert_eq!(lanes(&deps, max), (topo, edges));
        }
    }
}

/// With `max` lanes, no more than `max` nodes can run side by side: of
/// any `max + 1` nodes, one is ordered after another (checked on
/// nodes that all have no dependencies of their own).
#[test]
fn lanes_bound_the_width() {
    let deps: Deps = vec![smallvec::SmallVec::new(); 50];
    let (topo, edges) = lanes(&deps, 4);
    assert_eq!(topo, (0..50).collect::<Vec<u32>>());
    let roots = edges.iter().filter(|e| e.is_empty()).count();
    assert_eq!(roots, 4, "four chains");
    for (v, e) in edges.iter().enumerate().skip(4) {
        assert_eq!(e.as_slice(), [v as u32 - 4], "the shallowest lane: in turn");
    }
}

/// The longest path of `edges`, in nodes.
fn longest(edges: &Deps, topo: &[u32]) -> u32 {
    let mut d = vec![0u32; edges.len()];
    for &v in topo {
        d[v as usize] = 1 + edges[v as usize]
            .iter()
            .map(|&p| d[p as usize])
            .max()
            .unwrap_or(0);
    }
    d.into_iter().max().unwrap_or(0)
}

/// Where no more than `max` nodes can run at once, lanes put the
/// next node behind the shallowest lane, so the longest path does not
/// grow (review 3's examples, which round robin lengthened).
#[test]
fn lanes_join_the_shallowest_lane() {
    let sv = |v: &[u32]| smallvec::SmallVec::<[u32; 4]>::from_slice(v);
    for deps in [
        vec![sv(&[1, 2]), sv(&[]), sv(&[]), sv(&[1])],
        vec![
            sv(&[]),
            sv(&[2]),
            sv(&[0]),
            sv(&[0]),
            sv(&[1, 3]),
            sv(&[1, 2]),
        ],
    ] {
        let (topo, edges) = lanes(&deps, 2);
        let (_, plain) = lanes(&deps, 0);
        assert_eq!(longest(&edges, &topo), longest(&plain, &topo), "{edges:?}");
    }
}
