//! Sibling library calls merged into one batched call when a graphed
//! scope's graph is built (issue 38 item 5, DESIGN "Graphs without capture
//! by hand"): independent gemms of one shape that sibling tasks record
//! become one node (`cublasSgemmBatched` on CUDA; the host twins one after
//! another on the host backend), with the values of the separate calls;
//! gemms that depend on one another, or differ in shape, stay apart. On
//! `common::runtime()`: the host backend in CI, the GPU where
//! `GPU_BACKEND=cuda`.

mod common;

use common::{assert_no_races, runtime};
use gpu::blas::Gemm;
use gpu::{Buffer, Graphed, Runtime};

/// Member `i`'s left operand: values that differ from member to member,
/// so that a product computed from another member's operand shows.
fn operand(i: usize, len: usize) -> Vec<f32> {
    (0..len)
        .map(|j| ((j * 7 + i * 13) % 17) as f32 * 0.25 - 2.0)
        .collect()
}

/// `count` left operands of `m x k`, one right operand of `k x n`, and
/// `count` outputs of `m x n`, zeroed.
fn operands(
    rt: &Runtime,
    count: usize,
    (m, n, k): (usize, usize, usize),
) -> (Vec<Buffer<f32>>, Buffer<f32>, Vec<Buffer<f32>>) {
    let t = rt.begin_task().unwrap();
    let ins = (0..count)
        .map(|i| t.from_host(&operand(i, m * k)).unwrap())
        .collect();
    let b = t.from_host(&operand(99, k * n)).unwrap();
    let outs = (0..count).map(|_| t.zeros::<f32>(m * n).unwrap()).collect();
    (ins, b, outs)
}

/// Each output as the host reads it.
fn values(outs: &[Buffer<f32>]) -> Vec<Vec<f32>> {
    outs.iter().map(|o| o.to_vec().unwrap()).collect()
}

/// `outs[i] = ins[i] b` in sibling tasks, through `g`.
fn siblings(
    g: &mut Graphed,
    gemm: Gemm<f32>,
    ins: &[Buffer<f32>],
    b: &Buffer<f32>,
    outs: &mut [Buffer<f32>],
) {
    g.scope(|s| {
        for (x, y) in ins.iter().zip(outs.iter_mut()) {
            s.spawn(move |t| gemm.run(t, x, b, y));
        }
        Ok(())
    })
    .unwrap();
}

/// Whether two runs' values agree: bit for bit on the host backend (the
/// same host gemm runs either way); on CUDA within a rounding of the sum
/// (cuBLAS does not promise the batched call the separate calls' kernels).
fn agree(rt: &Runtime, got: &[Vec<f32>], want: &[Vec<f32>], k: usize) {
    if rt.backend() == gpu::BackendKind::Host {
        assert_eq!(got, want);
        return;
    }
    let mut same_bits = true;
    for (g, w) in got.iter().zip(want) {
        for (x, y) in g.iter().zip(w) {
            same_bits &= x.to_bits() == y.to_bits();
            let tol = 1e-5 * k as f32 * y.abs().max(1.0);
            assert!((x - y).abs() <= tol, "{x} against {y}");
        }
    }
    eprintln!("batched products bit for bit the separate ones: {same_bits}");
}

/// (builds, replays) of `runs` runs of one shape with batched calls: on
/// CUDA the first builds and the others replay (the calls' captures are
/// reused, `Foreign::reuse_capture`); the host backend records its twins
/// anew at each run, and builds a batched call anew with them.
fn replays(rt: &Runtime, runs: u64) -> (u64, u64) {
    match rt.backend() {
        gpu::BackendKind::Host => (runs, 0),
        _ => (1, runs - 1),
    }
}

/// Eight sibling products become one node, built once and replayed, with
/// the values of the same products unbatched and of a plain scope.
#[test]
fn sibling_products_are_one_batched_call() {
    let rt = runtime();
    let shape = (48, 40, 32);
    let gemm = Gemm::<f32>::new(shape.0, shape.1, shape.2);
    let (ins, b, mut outs) = operands(&rt, 8, shape);
    // A plain scope's values.
    gpu::scope_on(&rt, |s| {
        for (x, y) in ins.iter().zip(outs.iter_mut()) {
            let b = &b;
            s.spawn(move |t| gemm.run(t, x, b, y));
        }
        Ok(())
    })
    .unwrap();
    let want = values(&outs);
    let mut off = Graphed::on(&rt).batching(false);
    siblings(&mut off, gemm, &ins, &b, &mut outs);
    assert_eq!(
        (off.stats().nodes, off.stats().batched),
        (8, 0),
        "{:?}",
        off.stats()
    );
    agree(&rt, &values(&outs), &want, shape.2);
    let mut on = Graphed::on(&rt);
    for round in 0..3 {
        for o in &mut outs {
            let t = rt.begin_task().unwrap();
            gpu_kernels::fill(&t, o, f32::NAN).unwrap();
        }
        siblings(&mut on, gemm, &ins, &b, &mut outs);
        agree(&rt, &values(&outs), &want, shape.2);
        let st = on.stats();
        assert_eq!((st.nodes, st.batched), (1, 8), "round {round}: {st:?}");
    }
    assert_eq!((on.stats().builds, on.stats().replays), replays(&rt, 3));
    assert_no_races(&rt);
}

/// A run whose products write other buffers (the same shape) builds anew:
/// a batched call's pointers are in its arrays, not set in place. Each
/// graph writes its own outputs.
#[test]
fn other_pointers_build_anew() {
    let rt = runtime();
    let shape = (16, 16, 16);
    let gemm = Gemm::<f32>::new(shape.0, shape.1, shape.2);
    let (ins, b, mut first) = operands(&rt, 4, shape);
    let (_, _, mut second) = operands(&rt, 4, shape);
    let mut g = Graphed::on(&rt);
    siblings(&mut g, gemm, &ins, &b, &mut first);
    let want = values(&first);
    siblings(&mut g, gemm, &ins, &b, &mut second);
    agree(&rt, &values(&second), &want, shape.2);
    siblings(&mut g, gemm, &ins, &b, &mut first);
    agree(&rt, &values(&first), &want, shape.2);
    let st = g.stats();
    assert_eq!((st.builds, st.replays, st.batched), (3, 0, 4), "{st:?}");
    // The same outputs again: the graph is replayed (on CUDA).
    siblings(&mut g, gemm, &ins, &b, &mut first);
    let again = match rt.backend() {
        gpu::BackendKind::Host => (4, 0),
        _ => (3, 1),
    };
    assert_eq!(
        (g.stats().builds, g.stats().replays),
        again,
        "{:?}",
        g.stats()
    );
    assert_no_races(&rt);
}

/// Products that depend on one another (a chain in one task) or that
/// differ in shape are not merged; independent ones of one shape at one
/// depth are.
#[test]
fn only_independent_products_of_one_shape_merge() {
    let rt = runtime();
    let n = 16;
    let gemm = Gemm::<f32>::new(n, n, n);
    let half = Gemm::<f32>::new(n, n / 2, n);
    let (ins, b, mut outs) = operands(&rt, 5, (n, n, n));
    let mut run = |batching: bool| {
        let mut g = Graphed::on(&rt).batching(batching);
        g.scope(|s| {
            let (ins, b) = (&ins, &b);
            let [o0, o1, o2, o3, o4] = &mut outs[..] else {
                unreachable!()
            };
            // A chain in one task: o1 = (ins0 b) b.
            s.spawn(move |t| {
                gemm.run(t, &ins[0], b, o0)?;
                gemm.run(t, &*o0, b, o1)
            });
            // Two siblings of the chain's first product.
            s.spawn(move |t| gemm.run(t, &ins[2], b, o2));
            s.spawn(move |t| gemm.run(t, &ins[3], b, o3));
            // Another shape, beside them.
            s.spawn(move |t| half.run(t, &ins[4], b, o4));
            Ok(())
        })
        .unwrap();
        (g.stats(), values(&outs))
    };
    let (plain, want) = run(false);
    let (st, got) = run(true);
    agree(&rt, &got, &want, n);
    // ins0 b, ins2 b and ins3 b merge (one depth); the chain's second and
    // the half product stay apart.
    assert_eq!((plain.batched, plain.nodes), (0, 5), "{plain:?}");
    assert_eq!((st.batched, st.nodes), (3, 3), "{st:?}");
    assert_no_races(&rt);
}
