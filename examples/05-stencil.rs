//! # 05: a 2D heat step with a halo exchange
//!
//! The grid is split into two halves of rows, two "ranks" as in an MPI
//! code. Each time step, every rank
//!
//! 1. computes its boundary row (the one its neighbour needs) first, copies
//!    it to the host and "sends" it (here: hands the host copy over; an MPI
//!    code would pass it to `MPI_Send`),
//! 2. meanwhile computes its interior rows on other tasks, overlapping the
//!    exchange,
//! 3. "receives" the neighbour's boundary row into its halo row.
//!
//! All tasks of a step are ordered after the previous step by the scope
//! structure alone: the runtime inserts no device wait between steps. The
//! result is checked against a plain host computation of the same steps.
//!
//! ## The stencil
//!
//! An explicit step of the heat equation with the 5-point Laplacian and
//! zero values outside the grid:
//! `u'[i][j] = u + a (u[i-1][j] + u[i+1][j] + u[i][j-1] + u[i][j+1] - 4 u)`.
//!
//! `gpu-kernels` has no stencil kernel, and a buffer's views are its
//! chunks (a row is a view; a row shifted by one element is not), so the
//! rows above and below are views but the left and right neighbours are
//! not. The example keeps the field as a sum of sine modes in `j`,
//! `u[i][j] = sum_k f_k(i) sin(pi k (j + 1) / (cols + 1))`: each mode is a
//! discrete eigenfunction of the horizontal second difference with zero
//! ends, so for mode `k` the horizontal part is exactly a scale,
//! `u[i][j-1] + u[i][j+1] = 2 cos(pi k / (cols + 1)) u[i][j]`, and a row of
//! a mode updates as `u'_i = c_k u_i + a (u_{i-1} + u_{i+1})` with
//! `c_k = 1 - 4a + 2a cos(pi k / (cols + 1))`: a copy, a scale and two
//! `axpy`s on row views. The host check runs the full 5-point stencil on
//! the summed field.
//!
//! ```text
//! cargo run -p gpu-scope --example 05-stencil
//! ```

use gpu::{BackendKind, Buffer, Reason, Scope, TaskContext, ViewMut};
use gpu_kernels::{axpy, copy, scale};
use std::f64::consts::PI;
use std::time::Instant;

/// The diffusion number `a` (stable up to 1/4).
const ALPHA: f32 = 0.2;
/// The horizontal wave numbers of the modes the field is made of.
const MODES: [u32; 2] = [1, 3];
/// Largest difference allowed against the host computation.
const TOLERANCE: f32 = 1e-5;

/// The sizes of one run.
#[derive(Clone, Copy, Debug)]
struct Grid {
    rows: usize,
    cols: usize,
    steps: usize,
}

impl Grid {
    /// Rows per rank (without halos).
    fn half(&self) -> usize {
        self.rows / 2
    }
}

/// The initial field of mode `m` at row `i`, column `j`.
fn mode_value(g: Grid, m: usize, i: usize, j: usize) -> f32 {
    let x = i as f64 / g.rows as f64;
    let profile = match m {
        0 => (-((x - 0.35) / 0.12).powi(2)).exp(),
        _ => 0.5 * (2.0 * PI * x).sin() + 0.25,
    };
    let k = MODES[m] as f64;
    (profile * (PI * k * (j + 1) as f64 / (g.cols + 1) as f64).sin()) as f32
}

/// `c_k` of mode `m` (see the module note).
fn mode_coefficient(g: Grid, m: usize) -> f32 {
    let theta = PI * MODES[m] as f64 / (g.cols + 1) as f64;
    (1.0 - 4.0 * ALPHA as f64 + 2.0 * ALPHA as f64 * theta.cos()) as f32
}

/// One half of the grid: per mode, the current and the next state, each
/// `half + 2` rows of `cols`: row 0 and row `half + 1` are halos.
struct Rank {
    id: usize,
    u: Vec<Buffer<f32>>,
    v: Vec<Buffer<f32>>,
}

impl Rank {
    /// Uploads rank `id`'s rows of every mode, halos included (outside the
    /// grid they are zero).
    fn upload(t: &TaskContext, g: Grid, id: usize) -> gpu::Result<Rank> {
        let h = g.half();
        let mut u = Vec::new();
        let mut v = Vec::new();
        for m in 0..MODES.len() {
            let mut rows = vec![0.0f32; (h + 2) * g.cols];
            for local in 0..h + 2 {
                // Global row of this local row; None outside the grid.
                let Some(i) = (id * h + local).checked_sub(1).filter(|i| *i < g.rows) else {
                    continue;
                };
                for j in 0..g.cols {
                    rows[local * g.cols + j] = mode_value(g, m, i, j);
                }
            }
            u.push(t.from_host(&rows)?);
            v.push(t.zeros((h + 2) * g.cols)?);
        }
        Ok(Rank { id, u, v })
    }
}

/// `out = c * mid + a * (up + down)`, four kernels on `t`'s stream.
fn update_row(
    t: &TaskContext,
    u_rows: &[ViewMut<'_, f32>],
    i: usize,
    out: &mut ViewMut<'_, f32>,
    c: f32,
) -> gpu::Result<()> {
    copy(t, &u_rows[i], out)?;
    scale(t, out, c)?;
    axpy(t, ALPHA, &u_rows[i - 1], out)?;
    axpy(t, ALPHA, &u_rows[i + 1], out)
}

/// One rank's rows of one mode during a step: the current state's rows
/// (read by several tasks) and the next state's rows, split by who writes
/// them.
struct Piece<'v, 'b> {
    rank: usize,
    /// The mode's `c_k`.
    c: f32,
    old: &'v [ViewMut<'b, f32>],
    /// The row the other rank needs, and its local index.
    boundary: (usize, &'v mut ViewMut<'b, f32>),
    /// The interior rows, and the local index of the first.
    interior: (usize, &'v mut [ViewMut<'b, f32>]),
    /// The halo row the other rank's boundary row goes into.
    halo: &'v mut ViewMut<'b, f32>,
}

impl<'v, 'b> Piece<'v, 'b> {
    fn new(
        rank: usize,
        c: f32,
        half: usize,
        old: &'v [ViewMut<'b, f32>],
        new: &'v mut [ViewMut<'b, f32>],
    ) -> Self {
        if rank == 0 {
            // 0: outer halo (stays zero), 1..half: interior, half: boundary,
            // half + 1: halo from rank 1.
            let (head, tail) = new.split_at_mut(half);
            let [boundary, halo] = tail else {
                unreachable!("two rows after the interior")
            };
            let interior = (1, &mut head[1..]);
            Piece {
                rank,
                c,
                old,
                boundary: (half, boundary),
                interior,
                halo,
            }
        } else {
            // 0: halo from rank 0, 1: boundary, 2..=half: interior,
            // half + 1: outer halo (stays zero).
            let (head, tail) = new.split_at_mut(2);
            let [halo, boundary] = head else {
                unreachable!("two rows before the interior")
            };
            let interior = (2, &mut tail[..half - 1]);
            Piece {
                rank,
                c,
                old,
                boundary: (1, boundary),
                interior,
                halo,
            }
        }
    }
}

/// A boundary row to compute and send: (local index, the row, the current
/// state's rows, `c_k`).
type Outgoing<'v, 'b> = (usize, &'v mut ViewMut<'b, f32>, &'v [ViewMut<'b, f32>], f32);

/// Computes one rank's boundary rows (one per mode) and copies them to the
/// host: the message to send. The copy synchronizes this task's stream
/// only, not the streams computing the interiors.
fn compute_and_send(t: &TaskContext, rows: &mut [Outgoing<'_, '_>]) -> gpu::Result<Vec<f32>> {
    let mut message = Vec::new();
    for (i, out, old, c) in rows.iter_mut() {
        update_row(t, old, *i, out, *c)?;
        message.extend(t.to_vec(&**out)?);
    }
    Ok(message)
}

/// One time step of both ranks, as tasks of a nested scope of `s`.
fn step(s: &Scope<'_, '_>, g: Grid, ranks: &mut [Rank; 2], coef: &[f32]) -> gpu::Result<()> {
    // Every buffer as row views, with what hands the rows back.
    let mut olds = Vec::new();
    let mut news = Vec::new();
    for r in ranks.iter_mut() {
        for b in r.u.iter_mut() {
            olds.push((r.id, b.split_chunks(g.cols)?));
        }
        for b in r.v.iter_mut() {
            news.push(b.split_chunks(g.cols)?);
        }
    }
    let old_views: Vec<_> = olds
        .iter_mut()
        .map(|(r, split)| (*r, split.views()))
        .collect();
    let mut new_views: Vec<_> = news.iter_mut().map(|split| split.views()).collect();
    let pieces = old_views
        .iter()
        .zip(new_views.iter_mut())
        .zip(coef)
        .map(|(((rank, old), new), c)| Piece::new(*rank, *c, g.half(), old, new));

    s.scope(|inner| {
        let mut outgoing: [Vec<Outgoing<'_, '_>>; 2] = Default::default();
        let mut halos: [Vec<&mut ViewMut<'_, f32>>; 2] = Default::default();
        for p in pieces {
            // The interior of this rank and mode: a task of its own, which
            // overlaps the exchange below.
            let (old, c, (first, interior)) = (p.old, p.c, p.interior);
            inner.spawn(move |t| {
                for (n, out) in interior.iter_mut().enumerate() {
                    update_row(t, old, first + n, out, c)?;
                }
                Ok(())
            });
            outgoing[p.rank].push((p.boundary.0, p.boundary.1, old, c));
            halos[p.rank].push(p.halo);
        }
        // Each rank computes and sends its boundary rows: rank 0 on this
        // task, rank 1 on a spawned one.
        let [out0, out1] = &mut outgoing;
        let (from0, from1) =
            inner.join(|a| compute_and_send(a, out0), |b| compute_and_send(b, out1))?;
        // Each rank receives the other's rows into its halo rows.
        let [halos0, halos1] = &mut halos;
        for (halos, message) in [(halos0, from1), (halos1, from0)] {
            for (halo, row) in halos.iter_mut().zip(message.chunks(g.cols)) {
                inner.copy_from_host(&mut **halo, row)?;
            }
        }
        Ok(())
    })?;

    // Every task of the step has been joined: hand the rows back to their
    // buffers, which this task is now ordered after.
    drop((old_views, new_views));
    for split in olds.into_iter().map(|(_, split)| split).chain(news) {
        s.rejoin(split)?;
    }
    for r in ranks.iter_mut() {
        std::mem::swap(&mut r.u, &mut r.v);
    }
    Ok(())
}

/// The same steps on the host, on the summed field, with the full stencil.
fn host_reference(g: Grid) -> Vec<f32> {
    let (rows, cols) = (g.rows, g.cols);
    let mut u: Vec<f32> = (0..rows * cols)
        .map(|k| {
            (0..MODES.len())
                .map(|m| mode_value(g, m, k / cols, k % cols))
                .sum()
        })
        .collect();
    let at = |u: &[f32], i: isize, j: isize| -> f32 {
        if i < 0 || j < 0 || i >= rows as isize || j >= cols as isize {
            0.0
        } else {
            u[i as usize * cols + j as usize]
        }
    };
    for _ in 0..g.steps {
        let mut next = vec![0.0f32; rows * cols];
        for i in 0..rows as isize {
            for j in 0..cols as isize {
                let c = at(&u, i, j);
                let around =
                    at(&u, i - 1, j) + at(&u, i + 1, j) + at(&u, i, j - 1) + at(&u, i, j + 1);
                next[i as usize * cols + j as usize] = c + ALPHA * (around - 4.0 * c);
            }
        }
        u = next;
    }
    u
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let backend = gpu::backend()?;
    let g = match backend {
        BackendKind::Cuda => Grid {
            rows: 256,
            cols: 256,
            steps: 20,
        },
        BackendKind::Host => Grid {
            rows: 64,
            cols: 64,
            steps: 10,
        },
    };
    println!(
        "05-stencil: backend {backend}; {}x{} grid in 2 ranks of {} rows, {} steps, {} modes",
        g.rows,
        g.cols,
        g.half(),
        g.steps,
        MODES.len()
    );
    let coef: Vec<f32> = (0..2)
        .flat_map(|_| (0..MODES.len()).map(|m| mode_coefficient(g, m)))
        .collect();
    let start = Instant::now();
    let (field, counts) = gpu::scope(|s| {
        let mut ranks = [Rank::upload(s, g, 0)?, Rank::upload(s, g, 1)?];
        let before = s.runtime().counters();
        for _ in 0..g.steps {
            step(s, g, &mut ranks, &coef)?;
        }
        let counts = s.runtime().counters().since(&before);
        // The field: each rank's interior rows, summed over the modes.
        let half = g.half();
        let mut field = vec![0.0f32; g.rows * g.cols];
        for r in &ranks {
            for u in &r.u {
                let rows = s.to_vec(u)?;
                for local in 1..=half {
                    let i = r.id * half + local - 1;
                    let (dst, src) = (i * g.cols, local * g.cols);
                    for j in 0..g.cols {
                        field[dst + j] += rows[src + j];
                    }
                }
            }
        }
        Ok((field, counts))
    })?;
    let elapsed = start.elapsed();

    let want = host_reference(g);
    let (worst, at) = field
        .iter()
        .zip(&want)
        .map(|(a, b)| (a - b).abs())
        .enumerate()
        .fold(
            (0.0f32, 0),
            |(w, k), (i, d)| if d > w { (d, i) } else { (w, k) },
        );
    println!("  {elapsed:.2?} (upload, steps, download)");
    println!(
        "  largest difference from the host: {worst:.2e} (row {}, col {})",
        at / g.cols,
        at % g.cols
    );
    println!(
        "  hand-offs during the steps: {} device waits, {} host syncs; waits avoided: {} ordered, {} same stream",
        counts.device_waits,
        counts.host_syncs,
        counts.avoided(Reason::Ordered),
        counts.avoided(Reason::SameStream),
    );
    if worst.is_nan() || worst > TOLERANCE {
        return Err(format!(
            "the field differs from the host computation by {worst:e} (> {TOLERANCE:e})"
        )
        .into());
    }
    println!("  matches the host computation (tolerance {TOLERANCE:e})");
    Ok(())
}
