//! A foreign operation in a graphed scope (DESIGN "Graphs without capture
//! by hand"): recorded as a child graph node, captured on a side stream or
//! reused from the last run.

use super::*;

/// What a graphed scope may reuse of an operation
/// (`Foreign::reuse_capture`): its key and the value `run` returns without
/// running the device closure; and its batched form, if it declared one
/// (`Foreign::batchable`).
pub(super) type Reuse<O> = ((CallKey, O), Option<Arc<BatchTag>>);

/// [`Foreign::run`] in a graphed scope (DESIGN "Graphs without capture by
/// hand"): the operation's buffers handed to the scope's stream and
/// stamped as for any recorded operation, then its work captured on a
/// side stream into a child graph (the device closure on CUDA; the queued
/// twin on the host backend, which runs once per launch: each run of the
/// scope records it anew and launches its graph once), recorded as one
/// node.
pub(super) fn record<'b, 'f, RE, WE, R: Reads<'b, RE>, W: Writes<'b, WE>, O>(
    t: &TaskContext,
    name: &'static str,
    list: &mut TouchList<'b>,
    (reads, writes): (R::Ptrs, W::Ptrs),
    host: Option<Twin<'f, 'b, RE, WE, R, W, O>>,
    reuse: Option<Reuse<O>>,
    device: impl FnOnce(&ForeignStream<'_>, R::Ptrs, W::Ptrs) -> Result<O>,
) -> Result<O> {
    let rt = t.runtime();
    // The captures kept from the last run, where the operation declared
    // what its work depends on (on CUDA: a host twin runs once per launch,
    // so it is recorded at every run).
    let (reuse, batch) = match reuse {
        Some((r, batch)) => (Some(r), batch),
        None => (None, None),
    };
    let kept = match (rt.backend(), reuse) {
        (BackendKind::Cuda, Some((key, value))) => t
            .capture
            .borrow()
            .as_ref()
            .and_then(|c| c.children().cloned())
            .map(|children| (children, key, value)),
        _ => None,
    };
    let twin = match (rt.backend(), host) {
        (BackendKind::Cuda, _) => None,
        (BackendKind::Host, Some(Twin::Queued(job, value))) => Some((job, value)),
        (BackendKind::Host, Some(Twin::Waited(_))) => {
            return Err(Error::Capturing {
                what: "a foreign operation whose host twin is waited for (`Foreign::host_sync`)",
            })
            .with_context(|| format!("`{name}` in a graphed scope"))
        }
        (BackendKind::Host, None) => {
            return Err(Error::NoHostImplementation {
                kernel: name.to_owned(),
            })
        }
    };
    // The device closure on a side stream whose work is captured.
    let on_side = |side: RawStream| -> Result<O> {
        rt.driver().bind_context()?;
        let s = ForeignStream {
            raw: side.0,
            slot: t.sid().index(),
            rt,
            capturing: true,
        };
        device(&s, reads, writes)
    };
    let recorded = |mem: &[MemAccess]| -> Result<(NodeOp, O)> {
        let mem: SmallVec<[MemAccess; 4]> = mem.iter().copied().collect();
        if let Some((children, key, value)) = kept {
            let sig = (name, key, mem.clone());
            // The caller's promise (`reuse_capture`): the same name, key
            // and buffers capture the same work.
            let graph = match children.get(&sig) {
                Some(graph) => graph,
                None => {
                    let (child, _) = capture_child(rt, on_side)?;
                    let graph = Arc::new(child);
                    children.put(sig, graph.clone());
                    graph
                }
            };
            let node = ChildNode {
                name,
                graph,
                mem,
                batch,
            };
            return Ok((NodeOp::Child(node), value));
        }
        let (child, out) = capture_child(rt, |side| match twin {
            // SAFETY: as `run`'s: `mem` lists every declared buffer,
            // handed to the scope's stream and stamped there, where the
            // graph holding the twin is launched (once) after the body.
            Some((job, value)) => unsafe { queue_twin(t, name, side, &mem, job) }.map(|()| value),
            None => on_side(side),
        })?;
        let node = ChildNode {
            name,
            graph: Arc::new(child),
            mem,
            batch,
        };
        Ok((NodeOp::Child(node), out))
    };
    t.tracked_recorded(name, &mut list.touches, recorded)
}
