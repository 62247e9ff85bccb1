//! What a running task knows of the factorizations' failures it holds
//! (DESIGN "Where a failure goes"), and the judgement of a wait against it.

use super::*;

/// Whether `e` is a factorization's failure (what [`Op::Factor`] injects).
pub(super) fn is_failure(e: &Error) -> bool {
    matches!(e, Error::NotPositiveDefinite { .. })
}

/// What a running task knows of the factorizations' failures it holds,
/// unreported (DESIGN "Where a failure goes"): its own, and those handed to it by the nested
/// scopes, joins and chunk runs it joined. Shared by the bodies that run on
/// the task (a nested scope's, a join's `a` side); a spawned task, a join's
/// `b` side and a chunk have their own.
#[derive(Debug, Default)]
pub(super) struct Owed(AtomicU8);

impl Owed {
    /// None: the task's next wait must succeed.
    pub(super) const NONE: u8 = 0;
    /// At least one: the task's next wait must report it.
    pub(super) const SURE: u8 = 1;
    /// Maybe (a construct below reported one; others it covered may have
    /// been handed over): the next wait may report one.
    pub(super) const MAYBE: u8 = 2;

    pub(super) fn get(&self) -> u8 {
        self.0.load(Relaxed)
    }

    pub(super) fn set(&self, v: u8) {
        self.0.store(v, Relaxed)
    }
}

/// How an operation may meet a factorization's failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Meets {
    /// A wait of the task on the host (`synchronize`, `to_vec`, the host
    /// pointer): it reports what the task holds, and nothing else.
    Wait,
    /// It joins tasks that may have failed (a nested scope, a join, a
    /// chunk run, a split's or a temporary's scope): it returns a failure
    /// it covers, or hands it to the task.
    Joins,
    /// Something whose waits are inside, with more of it after them (a
    /// capture, an operation across devices): the task waits before it
    /// when it may hold a failure, so that it reports none.
    WaitsInside,
    /// Something that does not wait on the host: it never reports one.
    Never,
}

pub(super) fn meets(op: &Op) -> Meets {
    match op {
        Op::Sync | Op::Check { .. } | Op::Sum { .. } | Op::HostSync { .. } => Meets::Wait,
        Op::Scope(_)
        | Op::Join { .. }
        | Op::Chunks { .. }
        | Op::Split { .. }
        | Op::TempScope { .. } => Meets::Joins,
        Op::Graph { .. } | Op::BadCapture { .. } | Op::Multi(_) => Meets::WaitsInside,
        _ => Meets::Never,
    }
}

/// Judges the outcome `r` of a wait (`what`) of a task that held `before`
/// (see [`Owed`]); the task then holds none. A failure it reports is kept
/// in `first` (the task goes on: its other work still runs, so the model
/// stays right); other errors are returned.
pub(super) fn judged_wait(
    env: &Env<'_>,
    owed: &Owed,
    before: u8,
    what: &dyn Fn() -> String,
    r: Result<()>,
    first: &mut Option<Error>,
) -> Result<()> {
    match r {
        Ok(()) if before == Owed::SURE => env.stats.fail(format!(
            "scope {}: {} in a task that holds a factorization's failure returned Ok: \
             the failure was lost",
            env.scope,
            what()
        )),
        Ok(()) => {}
        Err(e) if is_failure(&e) => {
            if before == Owed::NONE {
                env.stats.fail(format!(
                    "scope {}: {} in a task that holds no failure returned {e}: \
                     it reached an unrelated task",
                    env.scope,
                    what()
                ));
            } else {
                env.stats.reported_in_task.fetch_add(1, Relaxed);
            }
            first.get_or_insert(e);
        }
        Err(e) => return Err(e),
    }
    owed.set(Owed::NONE);
    Ok(())
}
