//! `cargo xtask model`: past one node, on paper. A simple model of the
//! heat equation and of conjugate gradients on many nodes of many GPUs,
//! built from what the two-GPU machine measured (the rows of
//! newest committed run, `benches/results/*-nvidia-h200-x2/bench.json`) and from stated assumptions about
//! the network between nodes, which nothing here measured.
//!
//! The model (per time step of one GPU holding a block of rows):
//!
//! - `t_c`: compute, measured as `B11/2-gpu-no-halo` (a 16384 x 8192 block:
//!   the interior and the boundary rows, no exchange);
//! - `o`: what the exchange adds on one node, measured as `B11/2-gpu`
//!   minus `t_c` (the boundary rows' copies that the interior does not
//!   hide, and the waits they cost);
//! - across nodes a halo row of 64 KiB goes over the network: `a_net +
//!   64 KiB / b_net` (assumed), hidden behind the interior when shorter
//!   than it (the example's structure), else added;
//! - a global sum of 8 bytes (a dot product of CG): `log2` stages of
//!   latency, `a_nvl` within a node (taken from the measured NCCL
//!   all-reduce of the smallest size, an upper bound), `a_net` between
//!   nodes (assumed).
//!
//! Weak scaling keeps the block per GPU; strong scaling splits B11's grid
//! (16384 x 16384) over P GPUs, so each GPU's compute is `t_1 / P` while
//! the per-step overheads stay.

use crate::{fail, workspace_root, Error};
use std::path::PathBuf;

/// GPUs a node (an HGX board: eight joined by NVLink).
const GPUS_PER_NODE: f64 = 8.0;
/// Assumed: one-way latency of a message between nodes, us (InfiniBand NDR
/// with GPUDirect RDMA, software included).
const A_NET_US: f64 = 5.0;
/// Assumed: network bandwidth a GPU, GB/s (400 Gb/s NDR, one NIC a GPU).
const B_NET_GBS: f64 = 50.0;
/// A halo row of B11's grid, bytes.
const HALO_BYTES: f64 = 16384.0 * 4.0;
/// The GPU counts of the table.
const COUNTS: [f64; 7] = [2.0, 8.0, 16.0, 64.0, 256.0, 512.0, 1024.0];

/// Runs the model over `--json FILE` (default the committed two-GPU
/// results) and prints its table in markdown.
pub(crate) fn run(args: &[String]) -> Result<(), Error> {
    let mut path =
        crate::bench::newest_run(&workspace_root().join("benches/results"), "nvidia-h200-x2")
            .unwrap_or_default();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--json" => {
                path = PathBuf::from(
                    it.next()
                        .ok_or_else(|| Error::Usage("--json takes a file".into()))?,
                )
            }
            other => return Err(Error::Usage(format!("unknown argument {other}"))),
        }
    }
    let text = std::fs::read_to_string(&path)
        .map_err(|e| fail(format!("reading {}: {e}", path.display())))?;
    let rows = parse_rows(&text);
    let get = |name: &str| -> Result<f64, Error> {
        rows.iter()
            .find(|(n, _)| n == name)
            .map(|(_, us)| *us)
            .ok_or_else(|| fail(format!("{} has no row {name}", path.display())))
    };
    let steps = 100.0;
    let m = Measured {
        t1: get("B11/1-gpu")? / steps,
        t2: get("B11/2-gpu")? / steps,
        tc: get("B11/2-gpu-no-halo")? / steps,
        a_nvl: rows
            .iter()
            .filter(|(n, _)| n.starts_with("B12/library-"))
            .map(|&(_, us)| us)
            .fold(f64::INFINITY, f64::min),
    };
    print!("{}", table(&m));
    Ok(())
}

/// What the model is built from, in microseconds a step (or a call).
struct Measured {
    /// One GPU, the whole grid, a step.
    t1: f64,
    /// Two GPUs, with the exchange, a step.
    t2: f64,
    /// Two GPUs, no exchange, a step.
    tc: f64,
    /// The fastest NCCL all-reduce through the library, a call (an upper
    /// bound on a small one's latency within a node).
    a_nvl: f64,
}

/// The rows of a bench JSON: `(name, value in microseconds)`. The format
/// is the bench's own (one row a line), so a line scan does.
fn parse_rows(text: &str) -> Vec<(String, f64)> {
    text.lines()
        .filter_map(|l| {
            let field = |key: &str| -> Option<&str> {
                let at = l.find(&format!("\"{key}\":"))? + key.len() + 3;
                let rest = l[at..].trim_start();
                let end = rest.find([',', '}'])?;
                Some(rest[..end].trim().trim_matches('"'))
            };
            let name = field("name")?.to_owned();
            let value: f64 = field("value")?.parse().ok()?;
            let scale = match field("unit")? {
                "ns" => 1e-3,
                "us" => 1.0,
                "ms" => 1e3,
                "s" => 1e6,
                _ => return None,
            };
            Some((name, value * scale))
        })
        .collect()
}

/// The model's table.
fn table(m: &Measured) -> String {
    let o = (m.t2 - m.tc).max(0.0);
    let net_msg = A_NET_US + HALO_BYTES / (B_NET_GBS * 1e3);
    let a_nvl = if m.a_nvl.is_finite() { m.a_nvl } else { 20.0 };
    let mut s = format!(
        "Measured: one GPU {:.1} us a step, two {:.1} us ({:.1} without the exchange: \
         the exchange adds {o:.1} us); smallest NCCL all-reduce {a_nvl:.1} us.\n\
         Assumed: {GPUS_PER_NODE} GPUs a node; between nodes {A_NET_US} us + {B_NET_GBS} GB/s \
         a message (a halo row: {net_msg:.1} us).\n\n\
         | GPUs | heat, weak | CG, weak (2 sums a step) | heat, strong (B11's grid) |\n\
         |---:|---:|---:|---:|\n",
        m.t1, m.t2, m.tc
    );
    for p in COUNTS {
        let nodes = (p / GPUS_PER_NODE).max(1.0);
        // Weak: the interior hides a network halo shorter than it.
        let interior = m.tc;
        let net = if nodes > 1.0 {
            (net_msg - interior).max(0.0)
        } else {
            0.0
        };
        let heat_weak = m.tc / (m.tc + o + net);
        // A global sum: log2 stages within a node and between nodes.
        let stages = |n: f64| n.log2().max(0.0);
        // (The measured all-reduce spans two GPUs: one stage.)
        let sum = a_nvl * stages(p.min(GPUS_PER_NODE)) + 2.0 * A_NET_US * stages(nodes);
        let cg_weak = m.tc / (m.tc + o + net + 2.0 * sum);
        // Strong: compute shrinks, the per-step overheads stay, and a
        // network halo is hidden only while the shrinking interior is
        // longer.
        let exposed = if nodes > 1.0 {
            (net_msg - m.t1 / p).max(0.0)
        } else {
            0.0
        };
        let strong_step = m.t1 / p + o + exposed;
        let heat_strong = m.t1 / (p * strong_step);
        s.push_str(&format!(
            "| {p} | {heat_weak:.3} | {cg_weak:.3} | {heat_strong:.3} |\n"
        ));
    }
    s
}

#[cfg(test)]
mod test;
