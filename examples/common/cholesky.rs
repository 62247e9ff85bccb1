//! A tiled, right-looking Cholesky in fp64 (`11-cholesky`, B15): POTRF,
//! TRSM, SYRK and GEMM over a grid of `b x b` tiles, each tile a buffer of
//! its own, submitted in program order from one thread to a set of tasks
//! (a stream each). Nothing orders the operations but the tiles they read
//! and write: the ledger finds the DAG (a trsm waits for its column's
//! potrf, an update for the two trsms it reads, the next potrf for its
//! tile's last update) and inserts exactly those cross-stream waits, so
//! the panel of step `k + 1` starts while step `k`'s updates still run.

use gpu::blas::{Gemm, Op, Side, Syrk, Trsm};
use gpu::solver::Potrf;
use gpu::{Buffer, Result, Runtime, TaskContext};

/// The lower tiles of an `n x n` symmetric matrix, `n = t * b`: tile
/// `(i, j)` for `i >= j`, column-major `b x b` each.
#[derive(Debug)]
pub struct Tiles {
    /// Tiles per side.
    pub t: usize,
    /// Tile order.
    pub b: usize,
    /// The lower tiles, by [`Tiles::at`].
    pub tiles: Vec<Buffer<f64>>,
}

impl Tiles {
    /// The index of tile `(i, j)`, `i >= j`.
    pub fn at(i: usize, j: usize) -> usize {
        debug_assert!(i >= j);
        i * (i + 1) / 2 + j
    }

    /// The order of the matrix.
    pub fn n(&self) -> usize {
        self.t * self.b
    }

    /// The test matrix, `A(i, j) = 1 / (1 + |i - j|)` off the diagonal and
    /// `3 + 2 ln n` on it: symmetric and diagonally dominant, so positive
    /// definite. Made tile by tile on `task` (one tile of host memory at a
    /// time).
    pub fn test_matrix(task: &TaskContext, t: usize, b: usize) -> Result<Tiles> {
        let tiles = test_tiles(t, b, |_, _, host| task.from_host(host))?;
        Ok(Tiles { t, b, tiles })
    }

    /// A copy of every tile, on `task`.
    pub fn copy(&self, task: &TaskContext) -> Result<Tiles> {
        Self::copied(self.t, self.b, &self.tiles, task, |s, d| task.copy(s, d))
    }

    /// `t` x `t` tiles of order `b`, each a buffer of `task`'s device that
    /// `copy` fills from one of `srcs`.
    pub(crate) fn copied(
        t: usize,
        b: usize,
        srcs: &[Buffer<f64>],
        task: &TaskContext,
        copy: impl Fn(&Buffer<f64>, &mut Buffer<f64>) -> Result<()>,
    ) -> Result<Tiles> {
        let tiles = srcs
            .iter()
            .map(|s| {
                let mut d = task.alloc::<f64>(s.len())?;
                copy(s, &mut d)?;
                Ok(d)
            })
            .collect::<Result<_>>()?;
        Ok(Tiles { t, b, tiles })
    }
}

/// The lower tiles of [`Tiles::test_matrix`]'s matrix, tile `(i, j)` made
/// by `make(i, j, its values)` (column-major), in [`Tiles::at`]'s order.
pub(crate) fn test_tiles(
    t: usize,
    b: usize,
    mut make: impl FnMut(usize, usize, &[f64]) -> Result<Buffer<f64>>,
) -> Result<Vec<Buffer<f64>>> {
    let n = t * b;
    let mut tiles = Vec::with_capacity(t * (t + 1) / 2);
    let mut host = vec![0.0f64; b * b];
    for ti in 0..t {
        for tj in 0..=ti {
            for c in 0..b {
                for r in 0..b {
                    host[r + c * b] = entry(n, ti * b + r, tj * b + c);
                }
            }
            tiles.push(make(ti, tj, &host)?);
        }
    }
    Ok(tiles)
}

/// Entry `(i, j)` of [`Tiles::test_matrix`]'s matrix of order `n`.
pub fn entry(n: usize, i: usize, j: usize) -> f64 {
    if i == j {
        3.0 + 2.0 * (n as f64).ln()
    } else {
        1.0 / (1.0 + i.abs_diff(j) as f64)
    }
}

/// `v`'s element `w` mutably and a reader of the others.
pub(crate) fn split<'a>(
    v: &'a mut [Buffer<f64>],
    w: usize,
) -> (&'a mut Buffer<f64>, impl Fn(usize) -> &'a Buffer<f64>) {
    let (before, rest) = v.split_at_mut(w);
    let (mine, after) = rest.split_first_mut().expect("a tile index in range");
    let (before, after) = (&*before, &*after);
    let read = move |x: usize| {
        assert_ne!(x, w, "a tile read and written by one operation");
        if x < w {
            &before[x]
        } else {
            &after[x - w - 1]
        }
    };
    (mine, read)
}

/// Factors `a` in place, `A = L L^T` (`L` in the lower tiles; the
/// diagonal tiles' upper triangles keep `A`'s values), submitting every
/// operation in program order to `tasks`, tile `(i, j)`'s on task
/// `(i + 2 j) % tasks.len()` (a tile's updates stay on one stream). Returns
/// once everything is queued; a matrix that is not positive definite is
/// `Error::NotPositiveDefinite` at the next wait of the potrf's task.
pub fn factor(tasks: &[TaskContext], a: &mut Tiles) -> Result<()> {
    factor_with_panel(tasks, &[], a)
}

/// [`factor`] with the panel (each step's potrf and its column's trsms,
/// the critical path) on `panel`'s tasks, tile `(i, k)`'s on
/// `panel[i % panel.len()]` (for example tasks of
/// [`gpu::Priority::High`]: [`panel_tasks`]), the trailing updates on
/// `tasks` as in [`factor`]; with no panel tasks, [`factor`]. The ledger
/// orders each tile's operations across the two sets of streams.
pub fn factor_with_panel(
    tasks: &[TaskContext],
    panel: &[TaskContext],
    a: &mut Tiles,
) -> Result<()> {
    let (t, b) = (a.t, a.b);
    let on = |i: usize, j: usize| &tasks[(i + 2 * j) % tasks.len()];
    let panel_on = |i: usize, k: usize| match panel.len() {
        0 => on(i, k),
        p => &panel[i % p],
    };
    for k in 0..t {
        // The panel: factor the diagonal tile, then solve the column.
        Potrf::new(b).run(panel_on(k, k), &mut a.tiles[Tiles::at(k, k)])?;
        for i in k + 1..t {
            let (aik, tile) = split(&mut a.tiles, Tiles::at(i, k));
            // A(i,k) = A(i,k) L(k,k)^-T.
            Trsm::new(b, b).side(Side::Right).op(Op::T).run(
                panel_on(i, k),
                tile(Tiles::at(k, k)),
                aik,
            )?;
        }
        // The trailing update: A(i,j) -= L(i,k) L(j,k)^T.
        for j in k + 1..t {
            {
                let (ajj, tile) = split(&mut a.tiles, Tiles::at(j, j));
                Syrk::new(b, b)
                    .alpha(-1.0)
                    .beta(1.0)
                    .run(on(j, j), tile(Tiles::at(j, k)), ajj)?;
            }
            for i in j + 1..t {
                let (aij, tile) = split(&mut a.tiles, Tiles::at(i, j));
                Gemm::new(b, b, b).op_b(Op::T).alpha(-1.0).beta(1.0).run(
                    on(i, j),
                    tile(Tiles::at(i, k)),
                    tile(Tiles::at(j, k)),
                    aij,
                )?;
            }
        }
    }
    Ok(())
}

/// `count` tasks of `rt` for [`factor_with_panel`]'s panel, each to take
/// a stream of [`gpu::Priority::High`].
pub fn panel_tasks(rt: &Runtime, count: usize) -> Result<Vec<TaskContext>> {
    (0..count)
        .map(|_| {
            let t = rt.begin_task()?;
            t.set_priority(gpu::Priority::High);
            Ok(t)
        })
        .collect()
}

/// `tasks` tasks of `rt`, one stream each.
pub fn tasks(rt: &Runtime, count: usize) -> Result<Vec<TaskContext>> {
    (0..count).map(|_| rt.begin_task()).collect()
}

/// `L` as a dense column-major `n x n` matrix (zeros above the diagonal),
/// downloaded by `task`.
pub fn dense_factor(task: &TaskContext, l: &Tiles) -> Result<Vec<f64>> {
    let (t, b, n) = (l.t, l.b, l.n());
    let mut out = vec![0.0; n * n];
    for ti in 0..t {
        for tj in 0..=ti {
            let h = task.to_vec(&l.tiles[Tiles::at(ti, tj)])?;
            for c in 0..b {
                for r in 0..b {
                    let (i, j) = (ti * b + r, tj * b + c);
                    if i >= j {
                        out[i + j * n] = h[r + c * b];
                    }
                }
            }
        }
    }
    Ok(out)
}
