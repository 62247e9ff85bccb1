//! # 02: sibling tasks overlap on the device
//!
//! Eight tasks spawned into one scope each run a long kernel on a buffer of
//! their own. Each task has its own stream and nothing orders the siblings
//! after each other, so their kernels run at the same time: together they
//! take about as long as one. The same eight kernels submitted one after
//! another on one task's stream take eight times as long.
//!
//! The measurement is `common::siblings` (shared with the B5-cold
//! benchmark, which runs it in 20 fresh processes); `--detail` prints when
//! each sibling started and launched, and on which thread and stream.
//!
//! ```text
//! cargo run -p gpu-examples --example 02-siblings
//! ```

use common::siblings::{measure, TASKS};
use std::time::Duration;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let backend = gpu::backend()?;
    // The host backend runs each stream on a CPU thread, and its "spin" is a
    // sleep; a GPU spins on the device's clock.
    let spin = Duration::from_millis(40);
    println!("02-siblings: backend {backend}; {TASKS} tasks, each a {spin:?} kernel");
    let m = measure(spin)?;
    let ratio = m.speedup();
    println!("  one task, one kernel after another: {:>10.2?}", m.serial);
    println!(
        "  {TASKS} sibling tasks, one kernel each:  {:>10.2?}",
        m.together
    );
    println!("  speed-up {ratio:.2}x (ideal {TASKS}x: one kernel's time); results checked");
    if std::env::args().any(|a| a == "--detail") {
        print!("{}", m.detail());
    }
    if ratio < 2.0 {
        println!("  note: the siblings did not overlap much on this machine");
    }
    Ok(())
}
