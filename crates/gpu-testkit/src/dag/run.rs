//! Running a plan under `gpu::scope`: the buffers a task holds, its
//! operations on the runtime, the refusals it expects, the counts it keeps.

use super::*;

pub(super) type Dyn<'a> = dyn DeviceSliceMut<f32> + Send + Sync + 'a;

/// How a running task holds a buffer.
pub(super) enum Ref<'a> {
    /// A whole buffer, to write (and split into chunks).
    Buf(&'a mut Buffer<f32>),
    /// A chunk's view, to write.
    View(&'a mut Dyn<'a>),
    /// Shared, to read.
    Read(&'a Dyn<'a>),
}

/// The buffers a running task holds, by key.
pub(super) struct Held<'a>(pub(super) Vec<(usize, Ref<'a>)>);

impl<'a> Held<'a> {
    /// The same buffers for a shorter while (a nested scope, a join).
    pub(super) fn reborrow(&mut self) -> Held<'_> {
        Held(
            self.0
                .iter_mut()
                .map(|(id, r)| {
                    let r = match r {
                        Ref::Buf(b) => Ref::Buf(b),
                        Ref::View(v) => Ref::View(&mut **v),
                        Ref::Read(x) => Ref::Read(*x),
                    };
                    (*id, r)
                })
                .collect(),
        )
    }

    pub(super) fn pos(&self, id: usize) -> usize {
        self.0
            .iter()
            .position(|(i, _)| *i == id)
            .unwrap_or_else(|| {
                panic!(
                    "generator bug: buffer {id} is not held: {:?}",
                    self.0.iter().map(|x| x.0).collect::<Vec<_>>()
                )
            })
    }

    /// Gives buffer `id` away (to a child).
    pub(super) fn take(&mut self, id: usize) -> Ref<'a> {
        let p = self.pos(id);
        self.0.swap_remove(p).1
    }

    /// Makes buffer `id` read-only from now on and returns a shared
    /// reference to it.
    pub(super) fn share(&mut self, id: usize) -> &'a Dyn<'a> {
        let r: &'a Dyn<'a> = match self.take(id) {
            Ref::Buf(b) => b,
            Ref::View(v) => v,
            Ref::Read(x) => x,
        };
        self.0.push((id, Ref::Read(r)));
        r
    }

    pub(super) fn w(&mut self, id: usize) -> &mut Dyn<'a> {
        let p = self.pos(id);
        match &mut self.0[p].1 {
            Ref::Buf(b) => &mut **b,
            Ref::View(v) => &mut **v,
            Ref::Read(_) => panic!("generator bug: buffer {id} is read-only here"),
        }
    }

    pub(super) fn r(&self, id: usize) -> &Dyn<'a> {
        read(&self.0[self.pos(id)].1)
    }

    pub(super) fn pair(&mut self, x: usize, y: usize) -> (&Dyn<'a>, &mut Dyn<'a>) {
        let (ix, iy) = (self.pos(x), self.pos(y));
        assert_ne!(ix, iy, "generator bug: reading and writing one buffer");
        let (lo, hi) = self.0.split_at_mut(ix.max(iy));
        let (ex, ey) = if ix < iy {
            (&lo[ix], &mut hi[0])
        } else {
            (&hi[0], &mut lo[iy])
        };
        let y = match &mut ey.1 {
            Ref::Buf(b) => &mut **b as &mut Dyn<'a>,
            Ref::View(v) => &mut **v,
            Ref::Read(_) => panic!("generator bug: buffer {y} is read-only here"),
        };
        (read(&ex.1), y)
    }
}

pub(super) fn read<'s, 'a>(r: &'s Ref<'a>) -> &'s Dyn<'a> {
    match r {
        Ref::Buf(b) => &**b,
        Ref::View(v) => &**v,
        Ref::Read(x) => *x,
    }
}

/// A task's own events, by slot.
pub(super) type Locals = [Option<Event>; LOCAL_EVENTS];

pub(super) fn own(locals: &Locals, e: usize) -> &Event {
    locals[e]
        .as_ref()
        .unwrap_or_else(|| panic!("generator bug: no event in slot {e}"))
}

/// Counters the running tasks share.
#[derive(Debug, Default)]
pub(super) struct Stats {
    pub(super) tasks: AtomicUsize,
    pub(super) ops: AtomicUsize,
    pub(super) wrong: AtomicUsize,
    pub(super) first_wrong: Mutex<Option<String>>,
    /// Captures refused because the task's stream was shared (DESIGN "Streams are a resource": the
    /// pool ran out).
    pub(super) shared_captures: AtomicUsize,
    /// Waits inside tasks that reported a factorization's failure the task
    /// held (the rest reach the top-level call).
    pub(super) reported_in_task: AtomicUsize,
}

impl Stats {
    pub(super) fn compare(&self, what: &str, got: &[f32], want: &[f32]) {
        let bad =
            got.iter().zip(want).filter(|(g, w)| g != w).count() + got.len().abs_diff(want.len());
        if bad > 0 {
            self.wrong.fetch_add(bad, Relaxed);
            let i = got.iter().zip(want).position(|(g, w)| g != w).unwrap_or(0);
            self.note(format!(
                "{what}: {bad} wrong value(s); first at [{i}]: got {:?}, expected {:?}",
                got.get(i),
                want.get(i)
            ));
        }
    }

    /// Counts one wrong outcome (an operation that must fail succeeded, or
    /// failed otherwise).
    pub(super) fn fail(&self, what: String) {
        self.wrong.fetch_add(1, Relaxed);
        self.note(what);
    }

    pub(super) fn note(&self, what: String) {
        let mut f = self.first_wrong.lock().unwrap_or_else(|p| p.into_inner());
        if f.is_none() {
            *f = Some(what);
        }
    }
}

/// What the running tasks share.
pub(super) struct Env<'e> {
    pub(super) events: &'e [Event],
    pub(super) backend: BackendKind,
    pub(super) stats: &'e Stats,
    pub(super) scope: usize,
    /// The devices' runtimes, staging memory and communicators, with
    /// several devices.
    pub(super) multi: Option<&'e MultiEnv>,
}

/// Whether `e` is the refusal of a capture on a stream that another live
/// task shares (DESIGN "Streams are a resource": more tasks than streams), a typed error the programs
/// expect on a small stream pool.
pub(super) fn shared_stream(e: &Error) -> bool {
    matches!(e, Error::Unsupported(m) if m.contains("stream shared"))
}

/// The error a capture body returns on purpose.
pub(super) const CAPTURE_ERROR: &str = "the stress test's capture body fails on purpose";

/// The payload of a capture body's panic on purpose.
pub(super) struct IntendedPanic;

/// Keeps the panic hook quiet for [`IntendedPanic`]s; any other panic is
/// reported as before.
pub(super) fn quiet_intended_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !info.payload().is::<IntendedPanic>() {
                previous(info)
            }
        }));
    });
}

/// A kernel or device copy on `held` (the operations a capture body
/// submits), or `None` for any other operation.
pub(super) fn kernel_op(c: &TaskContext, op: &Op, held: &mut Held<'_>) -> Option<Result<()>> {
    Some(match op {
        Op::Fill { b, v } => k::fill(c, held.w(*b), *v),
        Op::Add { b, v } => k::add_scalar(c, held.w(*b), *v),
        Op::Scale { b, a } => k::scale(c, held.w(*b), *a),
        Op::Axpy { a, x, y } => {
            let (x, y) = held.pair(*x, *y);
            k::axpy(c, *a, x, y)
        }
        Op::Copy { src, dst, kernel } => {
            let (x, y) = held.pair(*src, *dst);
            if *kernel {
                k::copy(c, x, y)
            } else {
                c.copy(x, y)
            }
        }
        _ => return None,
    })
}

/// A host copy tried inside a capture: it must fail with
/// `Error::Capturing`, which the body then returns.
pub(super) fn refused(r: Result<()>, env: &Env<'_>, what: &str) -> Result<()> {
    match r {
        // Refused only by the synchronize that follows a copy to the host:
        // the copy itself was submitted into the graph.
        Err(Error::Capturing { what: refused }) if refused.contains("synchroniz") => {
            env.stats.fail(format!(
                "scope {}: {what} inside a capture was submitted, then refused \
                 when {refused}",
                env.scope
            ));
            Err(Error::Unsupported(CAPTURE_ERROR))
        }
        Err(e @ Error::Capturing { .. }) => Err(e),
        Ok(()) => {
            env.stats.fail(format!(
                "scope {}: {what} inside a capture succeeded",
                env.scope
            ));
            Err(Error::Unsupported(CAPTURE_ERROR))
        }
        Err(e) => {
            env.stats.fail(format!(
                "scope {}: {what} inside a capture failed with {e}, not Error::Capturing",
                env.scope
            ));
            Err(Error::Unsupported(CAPTURE_ERROR))
        }
    }
}

/// An allocation tried inside a capture: it must fail with
/// `Error::Capturing` for the allocation, which the body then returns.
pub(super) fn refused_alloc<T>(r: Result<T>, env: &Env<'_>, what: &str) -> Result<()> {
    match r {
        Err(e @ Error::Capturing { what: m }) if m.contains("allocat") => Err(e),
        Err(Error::Capturing { what: m }) => {
            env.stats.fail(format!(
                "scope {}: {what} inside a capture was refused, but not for its \
                 allocation: {m}",
                env.scope
            ));
            Err(Error::Unsupported(CAPTURE_ERROR))
        }
        r => refused(r.map(drop), env, what),
    }
}

/// How a capture body (or, for [`CaptureHow::ScopeTask`], the task it
/// spawns) ends: `end` on `c`, holding `held`.
pub(super) fn capture_end(
    c: &TaskContext,
    end: CaptureEnd,
    held: &mut Held<'_>,
    env: &Env<'_>,
) -> Result<()> {
    match end {
        CaptureEnd::Error => Err(Error::Unsupported(CAPTURE_ERROR)),
        CaptureEnd::Panic => std::panic::panic_any(IntendedPanic),
        CaptureEnd::ToVec(x) => refused(c.to_vec(held.r(x)).map(drop), env, "to_vec"),
        CaptureEnd::CopyToHost(x) => {
            let src = held.r(x);
            let mut v = vec![0.0; src.len()];
            refused(c.copy_to_host(src, &mut v), env, "copy_to_host")
        }
        CaptureEnd::CopyFromHost(y) => {
            let dst = held.w(y);
            let v = vec![1.0; dst.len()];
            refused(c.copy_from_host(dst, &v), env, "copy_from_host")
        }
        CaptureEnd::Alloc => refused_alloc(c.alloc::<f32>(64), env, "alloc"),
        CaptureEnd::Zeros => refused_alloc(c.zeros::<f32>(64), env, "zeros"),
        CaptureEnd::FromHost => refused_alloc(c.from_host(&[1.0f32; 64]), env, "from_host"),
        CaptureEnd::Scan { x, y } => {
            let (x, y) = held.pair(x, y);
            refused_alloc(k::inclusive_scan(c, x, y), env, "inclusive_scan")
        }
        CaptureEnd::Reduce(x) => refused_alloc(k::reduce::sum(c, held.r(x)), env, "reduce::sum"),
    }
}

/// Ends a split as `end` says: rejoined on `ctx`'s stream, or abandoned.
pub(super) fn end_split(ctx: &TaskContext, split: Split<'_, f32>, end: SplitEnd) -> Result<()> {
    match end {
        SplitEnd::Rejoin => ctx.rejoin(split),
        _ => {
            abandon(split, end);
            Ok(())
        }
    }
}

/// Ends a split without a rejoin: dropped, or leaked (a small `Vec` of
/// stamps). Either way the parent's uses are unknown from now on.
pub(super) fn abandon(split: Split<'_, f32>, end: SplitEnd) {
    if end == SplitEnd::Forget {
        std::mem::forget(split);
    } else {
        drop(split);
    }
}

/// Whether a use of a view may still be queued, as far as the ledger knows:
/// its stream was not recycled since, and its epoch is not known complete.
pub(super) fn views_busy(rt: &Runtime, views: &[ViewMut<'_, f32>]) -> bool {
    let l = rt.ledger();
    views.iter().any(|v| {
        let u = v.uses();
        let w = u.writer();
        w.iter()
            .chain(u.readers())
            .any(|x| l.generation(x.stream) == x.generation && l.completed(x.stream) < x.epoch)
    })
}

/// Runs one task body (`ops`) holding `held` and its own events `locals`,
/// spawning into `s`'s scope; `owed`: the failures the task holds.
///
/// A factorization's failure reported on the way (by a wait, or by a
/// construct that joined the task it happened in) is checked against what
/// the task holds, kept, and returned at the end: the body runs to its
/// end, so every value stays the model's.
pub(super) fn run_body<'sc>(
    s: &Scope<'_, 'sc>,
    ops: &'sc [Op],
    held: &mut Held<'sc>,
    env: &'sc Env<'sc>,
    mut locals: Locals,
    owed: &Owed,
) -> Result<()> {
    let mut first = None;
    for op in ops {
        env.stats.ops.fetch_add(1, Relaxed);
        let kind = meets(op);
        if kind == Meets::WaitsInside && owed.get() != Owed::NONE {
            let before = owed.get();
            let what = || format!("the synchronize before a `{}`", op.kind());
            judged_wait(env, owed, before, &what, s.synchronize(), &mut first)?;
        }
        let before = owed.get();
        let r = run_op(s, op, held, env, &mut locals, owed);
        match kind {
            Meets::Wait => {
                let what = || format!("a `{}`", op.kind());
                judged_wait(env, owed, before, &what, r, &mut first)?;
            }
            Meets::Joins => {
                let covered = failures(std::slice::from_ref(op));
                match r {
                    Ok(()) if covered > 0 => owed.set(Owed::SURE),
                    Ok(()) => {}
                    Err(e) if is_failure(&e) => {
                        if covered == 0 && before == Owed::NONE && owed.get() == Owed::NONE {
                            env.stats.fail(format!(
                                "scope {}: a `{}` that covers no failure, in a task that \
                                 holds none, returned {e}: it reached an unrelated task",
                                env.scope,
                                op.kind()
                            ));
                        }
                        if covered > 0 || owed.get() != Owed::NONE {
                            owed.set(Owed::MAYBE);
                        }
                        first.get_or_insert(e);
                    }
                    Err(e) => return Err(e),
                }
            }
            Meets::WaitsInside | Meets::Never => {
                match r {
                    Ok(()) => {}
                    Err(e) if is_failure(&e) => {
                        env.stats.fail(format!(
                            "scope {}: a `{}` returned {e}: an operation that does not \
                             wait reported a failure",
                            env.scope,
                            op.kind()
                        ));
                        first.get_or_insert(e);
                    }
                    Err(e) => return Err(e),
                }
                if matches!(op, Op::Factor { fail: true, .. }) {
                    owed.set(Owed::SURE);
                }
            }
        }
    }
    first.map_or(Ok(()), Err)
}

/// The task of one chunk of a chunk run (`par_chunks_mut`, in a task or at
/// the top): `per_chunk[view.index()]` on the view (key `b`) and `shared`.
pub(super) fn run_chunk(
    t: &Scope<'_, '_>,
    b: usize,
    view: &mut ViewMut<'_, f32>,
    per_chunk: &[Vec<Op>],
    shared: &[(usize, &Dyn<'_>)],
    env: &Env<'_>,
) -> Result<()> {
    env.stats.tasks.fetch_add(1, Relaxed);
    let ops = &per_chunk[view.index()];
    t.scope(|x| {
        let mut h = Held(vec![(b, Ref::View(view as &mut Dyn<'_>))]);
        for &(id, r) in shared {
            h.0.push((id, Ref::Read(r)));
        }
        run_body(x, ops, &mut h, env, Locals::default(), &Owed::default())
    })
}

/// Runs one operation of a task body (see [`run_body`]).
fn run_op<'sc>(
    s: &Scope<'_, 'sc>,
    op: &'sc Op,
    held: &mut Held<'sc>,
    env: &'sc Env<'sc>,
    locals: &mut Locals,
    owed: &Owed,
) -> Result<()> {
    {
        if let Some(r) = kernel_op(s, op, held) {
            return r;
        }
        match op {
            Op::Fill { .. }
            | Op::Add { .. }
            | Op::Scale { .. }
            | Op::Axpy { .. }
            | Op::Copy { .. } => unreachable!("run by kernel_op"),
            Op::Temp { b, v } => {
                let y = held.w(*b);
                let mut tmp = s.alloc::<f32>(y.len())?;
                k::fill(s, &mut tmp, *v)?;
                k::axpy(s, 1.0, &tmp, y)?;
                drop(tmp);
            }
            Op::RawAdd { b, v } => {
                let y = held.w(*b);
                let n = y.len();
                let p = s.raw_ptr(y)?;
                // SAFETY: the kernel touches only the buffers passed, within their
                // lengths (its length arguments are theirs), or the launch is refused
                // before anything is submitted.
                unsafe {
                    k::ADD_SCALAR_F32.launch(
                        s,
                        LaunchConfig::for_elements(n, k::BLOCK),
                        (gpu::kernel::Untracked::new(p, n), *v, n),
                    )
                }?;
            }
            Op::HostSync { b, expect } => {
                let y = held.w(*b);
                let n = y.len();
                let p = s.host_sync_ptr(y)?;
                if env.backend == BackendKind::Host {
                    // SAFETY: on the host backend a device pointer is host
                    // memory; `host_sync_ptr` returned after every write to
                    // the buffer finished, and this task holds it
                    // exclusively (`&mut`), so nothing writes it meanwhile.
                    let got = unsafe { std::slice::from_raw_parts(p as *const f32, n) };
                    env.stats.compare(
                        &format!("scope {}: host_sync_ptr of buffer {b}", env.scope),
                        got,
                        expect,
                    );
                }
            }
            Op::Check { b, expect } => {
                let got = s.to_vec(held.r(*b))?;
                env.stats.compare(
                    &format!("scope {}: to_vec of buffer {b} in a task", env.scope),
                    &got,
                    expect,
                );
            }
            Op::Sum { b, expect } => {
                let mut out = s.alloc::<f32>(1)?;
                k::sum_atomic_into(s, held.r(*b), &mut out)?;
                let got = s.to_vec(&out)?;
                env.stats.compare(
                    &format!("scope {}: sum of buffer {b}", env.scope),
                    &got,
                    &[*expect],
                );
            }
            Op::Graph { b, v } => {
                let y = held.w(*b);
                match s.capture(|c| k::add_scalar(c, &mut *y, *v)) {
                    Ok(g) => s.launch_graph(&g).write(y).submit()?,
                    // Nothing captured: the same work, uncaptured.
                    Err(e) if shared_stream(&e) => {
                        env.stats.shared_captures.fetch_add(1, Relaxed);
                        k::add_scalar(s, y, *v)?
                    }
                    Err(e) => return Err(e),
                }
            }
            Op::Record(e) => s.record(&env.events[*e])?,
            Op::Wait(e) => s.wait(&env.events[*e])?,
            Op::EventSync(e) => env.events[*e].synchronize()?,
            Op::EventQuery(e) => {
                env.events[*e].query()?;
            }
            Op::Sync => s.synchronize()?,
            Op::Ev { e, act } => match act {
                // The event there before, if any, goes back to the pool.
                EvAct::New => locals[*e] = Some(s.runtime().event()?),
                EvAct::Record => s.record(own(locals, *e))?,
                EvAct::Wait { .. } => s.wait(own(locals, *e))?,
                EvAct::Sync { .. } => own(locals, *e).synchronize()?,
                EvAct::Query { .. } => {
                    own(locals, *e).query()?;
                }
                EvAct::Drop => locals[*e] = None,
            },
            Op::Spawn {
                device,
                writes,
                reads,
                events,
                ops,
            } => {
                let mut child = Held(Vec::new());
                for &id in writes {
                    child.0.push((id, held.take(id)));
                }
                for &id in reads {
                    child.0.push((id, Ref::Read(held.share(id))));
                }
                let mut theirs = Locals::default();
                for &e in events {
                    theirs[e] = locals[e].take();
                }
                let body = move |t: &Scope<'_, 'sc>| {
                    env.stats.tasks.fetch_add(1, Relaxed);
                    run_body(t, ops, &mut child, env, theirs, &Owed::default())
                };
                match device {
                    Some(d) => s.spawn_on(*d, body),
                    None => s.spawn(body),
                }
            }
            Op::Scope(body) => s.scope(|inner| {
                let mut h = held.reborrow();
                run_body(inner, body, &mut h, env, Locals::default(), owed)
            })?,
            Op::Join {
                b_writes,
                b_reads,
                a,
                b,
            } => {
                let mut ha = held.reborrow();
                let mut hb = Held(Vec::new());
                for &id in b_writes {
                    hb.0.push((id, ha.take(id)));
                }
                for &id in b_reads {
                    hb.0.push((id, Ref::Read(ha.share(id))));
                }
                s.join(
                    |sa| {
                        sa.scope(|x| {
                            let mut h = ha.reborrow();
                            run_body(x, a, &mut h, env, Locals::default(), owed)
                        })
                    },
                    move |sb| {
                        env.stats.tasks.fetch_add(1, Relaxed);
                        sb.scope(|x| {
                            let mut h = hb.reborrow();
                            run_body(x, b, &mut h, env, Locals::default(), &Owed::default())
                        })
                    },
                )?;
            }
            Op::Chunks {
                b,
                chunk,
                reads,
                per_chunk,
            } => {
                let Ref::Buf(buf) = held.take(*b) else {
                    panic!("generator bug: chunks of a view or a shared buffer")
                };
                let r = {
                    let shared: Vec<(usize, &Dyn<'_>)> =
                        reads.iter().map(|&id| (id, held.r(id))).collect();
                    let shared = &shared;
                    s.par_chunks_mut(&mut *buf, *chunk, |t, view| {
                        run_chunk(t, *b, view, per_chunk, shared, env)
                    })
                };
                held.0.push((*b, Ref::Buf(buf)));
                r?
            }
            Op::Split {
                b,
                chunk,
                views,
                body,
                end,
                ..
            } => {
                let Ref::Buf(buf) = held.take(*b) else {
                    panic!("generator bug: a split of a view or a shared buffer")
                };
                let r = (|| {
                    let mut split = buf.split_chunks(*chunk)?;
                    let r = {
                        let mut vs = split.views();
                        s.scope(|inner| {
                            let mut h = held.reborrow();
                            for (&key, v) in views.iter().zip(vs.iter_mut()) {
                                h.0.push((key, Ref::View(v as &mut Dyn<'_>)));
                            }
                            run_body(inner, body, &mut h, env, Locals::default(), owed)
                        })
                    };
                    end_split(s, split, *end)?;
                    r
                })();
                held.0.push((*b, Ref::Buf(buf)));
                r?
            }
            Op::TempScope {
                key,
                len,
                init,
                body,
                after,
            } => {
                let mut tmp = match init {
                    TempInit::Fill(v) => {
                        let mut t = s.alloc::<f32>(*len)?;
                        k::fill(s, &mut t, *v)?;
                        t
                    }
                    TempInit::Zeros => s.zeros::<f32>(*len)?,
                    TempInit::FromHost(v) => s.from_host(v)?,
                };
                // A failure the scope reports comes after `after`, so that
                // the values stay the model's.
                let r = s.scope(|inner| {
                    let mut h = held.reborrow();
                    h.0.push((*key, Ref::Buf(&mut tmp)));
                    run_body(inner, body, &mut h, env, Locals::default(), owed)
                });
                match after {
                    Some(TempAfter::Axpy { a, y }) => k::axpy(s, *a, &tmp, held.w(*y))?,
                    Some(TempAfter::Copy { y }) => s.copy(&tmp, held.w(*y))?,
                    None => {}
                }
                // Freed in stream order, after the readers on the children's
                // streams and this task's work, which may all be queued (X4).
                drop(tmp);
                r?;
            }
            Op::BadCapture {
                how,
                ops,
                end,
                check,
            } => {
                let submit = |c: &TaskContext, held: &mut Held<'sc>| -> Result<()> {
                    for op in ops {
                        kernel_op(c, op, held).expect("generator bug: not a kernel")?;
                    }
                    Ok(())
                };
                let r = catch_unwind(AssertUnwindSafe(|| match how {
                    CaptureHow::Task => s.capture(|c| {
                        submit(c, held)?;
                        capture_end(c, *end, held, env)
                    }),
                    CaptureHow::Scope => gpu::capture_on(s.runtime(), |cs| {
                        submit(cs, held)?;
                        capture_end(cs, *end, held, env)
                    }),
                    CaptureHow::ScopeTask => gpu::capture_on(s.runtime(), |cs| {
                        submit(cs, held)?;
                        let end = *end;
                        cs.spawn(move |t| capture_end(t, end, &mut Held(Vec::new()), env));
                        Ok(())
                    }),
                }));
                let what = format!("scope {}: a capture ({how:?}) ending as {end:?}", env.scope);
                match r {
                    Ok(Ok(_graph)) => env.stats.fail(format!("{what} returned a graph")),
                    Ok(Err(e)) if shared_stream(&e) => {
                        env.stats.shared_captures.fetch_add(1, Relaxed);
                    }
                    Ok(Err(e)) => match (end, &e) {
                        (CaptureEnd::Error, Error::Unsupported(m)) if *m == CAPTURE_ERROR => {}
                        (
                            CaptureEnd::ToVec(_)
                            | CaptureEnd::CopyToHost(_)
                            | CaptureEnd::CopyFromHost(_),
                            Error::Capturing { .. } | Error::Unsupported(CAPTURE_ERROR),
                        ) => {}
                        (_, Error::Capturing { what: m })
                            if end.allocates() && m.contains("allocat") => {}
                        // Counted already, by `refused_alloc`.
                        (_, Error::Unsupported(CAPTURE_ERROR)) if end.allocates() => {}
                        _ => env.stats.fail(format!("{what} failed with {e}")),
                    },
                    Err(p) if *end == CaptureEnd::Panic && p.is::<IntendedPanic>() => {}
                    Err(p) => resume_unwind(p),
                }
                if let Some((x, expect)) = check {
                    let got = s.to_vec(held.r(*x))?;
                    env.stats.compare(
                        &format!("{what}: to_vec of buffer {x} after it"),
                        &got,
                        expect,
                    );
                }
            }
            Op::Multi(m) => multi::run_op(s, m, held, env)?,
            Op::Factor {
                b,
                n,
                upload,
                fail,
                refill,
            } => {
                let y = held.w(*b);
                s.copy_from_host(y, upload)?;
                Potrf::new(*n).run(s, y)?;
                if *fail {
                    // The factor's values after a failure are not
                    // specified: known ones, in stream order.
                    k::fill(s, y, *refill)?;
                }
            }
        }
    }
    Ok(())
}
