//! The lanes of a graph built from a recording: a topological order of
//! its nodes and the edges that keep at most a given number of chains side
//! by side (a pure algorithm on the dependency lists).

/// How many lanes a graph's nodes are spread over by default (`lanes`).
/// On an H100, B13's graph (30,046 nodes) without lanes took 23 ms a
/// `cuGraphLaunch`; with 16, 64 or 256 lanes 6.3-10.6 ms, and a serial
/// replay to its end 93 ms without, 62 ms with 64 (DESIGN "Graphs without capture by hand").
pub(crate) const GRAPH_LANES: usize = 64;

/// Per operation, the operations it follows (or the graph's edges into it).
pub(crate) type Deps = Vec<smallvec::SmallVec<[u32; 4]>>;

/// A topological order of the operations (`deps[i]` are the indices `i`
/// follows) and the graph's edges: `deps`, and with `max > 0` an edge from
/// each lane's last node to the next node put in it, so that at most
/// `max` chains run side by side, as at most `max` streams would. A node
/// goes to the lane of a dependency that is that lane's last node (no
/// edge added), else to a new lane while there are fewer than `max`, else
/// to the lane whose last node is shallowest. Both
/// depend on `deps` alone (ready nodes are taken lowest index first), so
/// a recording of the same shape gets the same graph.
pub(crate) fn lanes(deps: &Deps, max: usize) -> (Vec<u32>, Deps) {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    let n = deps.len();
    let mut pending: Vec<u32> = deps.iter().map(|d| d.len() as u32).collect();
    let mut next: Vec<smallvec::SmallVec<[u32; 4]>> = vec![smallvec::SmallVec::new(); n];
    for (i, d) in deps.iter().enumerate() {
        for &p in d {
            next[p as usize].push(i as u32);
        }
    }
    let mut ready: BinaryHeap<Reverse<u32>> = (0..n as u32)
        .filter(|&i| pending[i as usize] == 0)
        .map(Reverse)
        .collect();
    let mut topo = Vec::with_capacity(n);
    let mut edges = deps.clone();
    // Each lane's last node; each node's lane and depth (nodes on its
    // longest path of edges, itself included).
    let mut tails: Vec<u32> = Vec::new();
    let mut lane_of = vec![u32::MAX; n];
    let mut depth = vec![0u32; n];
    while let Some(Reverse(v)) = ready.pop() {
        topo.push(v);
        if max > 0 {
            let vi = v as usize;
            // A lane whose last node this one follows anyway: no edge.
            let own = deps[vi]
                .iter()
                .map(|&p| lane_of[p as usize] as usize)
                .find(|&l| deps[vi].contains(&tails[l]));
            let l = match own {
                Some(l) => l,
                None if tails.len() < max => {
                    tails.push(v);
                    tails.len() - 1
                }
                None => {
                    // The lane whose last node is shallowest: the edge
                    // lengthens the longest path least.
                    let l = (0..tails.len())
                        .min_by_key(|&l| (depth[tails[l] as usize], l))
                        .expect("max > 0 lanes");
                    let t = tails[l];
                    if !edges[vi].contains(&t) {
                        edges[vi].push(t);
                    }
                    l
                }
            };
            tails[l] = v;
            lane_of[vi] = l as u32;
            depth[vi] = 1 + edges[vi]
                .iter()
                .map(|&p| depth[p as usize])
                .max()
                .unwrap_or(0);
        }
        for &w in &next[v as usize] {
            pending[w as usize] -= 1;
            if pending[w as usize] == 0 {
                ready.push(Reverse(w));
            }
        }
    }
    debug_assert_eq!(topo.len(), n, "the dependencies have no cycle");
    (topo, edges)
}

#[cfg(test)]
mod test;
