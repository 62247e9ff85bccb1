//! The host backend's twins of foreign operations: queued on the task's
//! stream, or run in stream order while the caller waits.

use super::*;

/// `f` with its lifetime erased: the same fat pointer.
///
/// # Safety
///
/// `f` is never called once what it borrows is gone, and dropping it then
/// touches none of it.
unsafe fn erase<'a>(f: Arc<dyn Fn() + Send + Sync + 'a>) -> Arc<dyn Fn() + Send + Sync + 'static> {
    // SAFETY: the two types differ in the trait object's lifetime bound
    // only, which has no run-time form; the caller's contract.
    unsafe { std::mem::transmute(f) }
}

/// Queues `job` on the host backend's stream `raw` as an operation over
/// `mem` (so the race detector checks it as a kernel) and returns: the
/// stream runs it when it reaches it. An error or a panic of the twin
/// unwinds out of the operation with a message that names `name`, which
/// the stream takes as a kernel's panic: a fault of the device, sticky,
/// reported by every later wait. A stream that never runs it (a broken
/// context) drops it unrun.
///
/// # Safety
///
/// `mem` lists the buffers `job` was bound to, handed to `raw` for their
/// accesses, and they stay live until the stream passed the operation.
pub(super) unsafe fn queue_twin(
    t: &TaskContext,
    name: &'static str,
    raw: RawStream,
    mem: &[MemAccess],
    job: QueuedTwin,
) -> Result<()> {
    let job = Mutex::new(Some(job));
    let body = Arc::new(move || {
        // Once: a stream runs an operation once (a capture, whose graph
        // would replay it, refuses a twin).
        let Some(job) = job.lock().take() else {
            return;
        };
        let fault = match catch_unwind(AssertUnwindSafe(job)) {
            Ok(Ok(())) => return,
            Ok(Err(e)) => format!("the host twin of `{name}` failed: {e}"),
            Err(p) => format!("the host twin of `{name}` panicked: {}", message(&*p)),
        };
        // No panic hook: the twin's panic was reported where it happened.
        resume_unwind(Box::new(fault))
    });
    // SAFETY: this function's contract: what `body` touches (the buffers of
    // `mem`) is live until the stream ran it; its accesses are `mem`.
    unsafe { t.runtime().driver().host_op(raw, body, mem) }
}

/// A panic's message, if it has one.
fn message(p: &(dyn std::any::Any + Send)) -> &str {
    p.downcast_ref::<&str>()
        .copied()
        .or_else(|| p.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)")
}

/// A panic of a host twin, carried to the caller.
pub(super) struct Payload(pub(super) Box<dyn std::any::Any + Send>);

/// What a host twin left: its result, or its panic.
type Outcome<O> = std::result::Result<Result<O>, Payload>;

/// Runs `twin` on the host backend's stream `raw` as an operation over
/// `mem` (so the race detector checks it as a kernel), waits for the
/// stream, and returns what the twin returned; if the stream never runs it
/// (a failed submission or a broken backend), its error, with the twin
/// disarmed so that it can never run later.
///
/// # Safety
///
/// `mem` lists the buffers of `reads` and `writes`, live and handed to
/// `raw` for their accesses until the stream drained.
pub(super) unsafe fn run_twin<'b, 'f, RE, WE, R: Reads<'b, RE>, W: Writes<'b, WE>, O: Send>(
    t: &TaskContext,
    raw: RawStream,
    mem: &[MemAccess],
    twin: HostTwin<'f, 'b, RE, WE, R, W, O>,
    reads: R::Ptrs,
    writes: W::Ptrs,
) -> Outcome<O> {
    type Armed<'f, 'b, RE, WE, R, W, O> = (
        HostTwin<'f, 'b, RE, WE, R, W, O>,
        <R as Reads<'b, RE>>::Ptrs,
        <W as Writes<'b, WE>>::Ptrs,
    );
    let armed = Arc::new(Mutex::new(Some::<Armed<'f, 'b, RE, WE, R, W, O>>((
        twin, reads, writes,
    ))));
    let out: Arc<Mutex<Option<Outcome<O>>>> = Arc::new(Mutex::new(None));
    let body = {
        let (armed, out) = (armed.clone(), out.clone());
        Arc::new(move || {
            // Held while the twin runs: the caller's disarming below waits
            // for it.
            let mut slot = armed.lock();
            if let Some((twin, reads, writes)) = slot.take() {
                // SAFETY: the stream reached this operation, so the
                // hand-offs before it are done: each pointer holds its
                // buffer's live, ordered elements, written by nothing else
                // (writes were borrowed `&mut`) until the caller returns,
                // which is after this ran (see below).
                let (r, w) = unsafe { (R::host(reads), W::host(writes)) };
                let res = catch_unwind(AssertUnwindSafe(|| twin(r, w))).map_err(Payload);
                *out.lock() = Some(res);
            }
        })
    };
    // SAFETY: only the lifetime is erased (the same fat pointer). The body
    // is never called after this function returns: it either ran (its
    // outcome is in `out`) or is disarmed below, under the lock it runs
    // under, before this returns; once disarmed, what the stream thread
    // still holds is an empty slot, whose drop touches no borrowed data.
    let body = unsafe { erase(body) };
    let rt = t.runtime();
    // SAFETY: this function's contract: `mem` is the operation's accesses,
    // live until the stream drained, which the wait below sees to.
    let queued = unsafe { rt.driver().host_op(raw, body, mem) };
    let drained = queued.and_then(|()| rt.driver().stream_sync(raw, rt.sync_mode()));
    // Disarm: from here the twin cannot run, whatever the stream does.
    drop(armed.lock().take());
    let ran = out.lock().take();
    match (drained, ran) {
        (_, Some(outcome)) => outcome,
        (Err(e), None) => Ok(Err(e)),
        (Ok(()), None) => Ok(Err(Error::Unsupported(
            "a host twin that the drained stream did not run",
        ))),
    }
}
