//! What a run of programs reports (tasks, values checked, wrong values,
//! races, the kinds of operations that ran), and [`run`], the harness.

use super::*;

/// What a run did.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Tasks run (scope bodies, spawns, joins' second halves, chunks).
    pub tasks: usize,
    /// Top-level scopes run.
    pub scopes: usize,
    /// Operations submitted.
    pub ops: usize,
    /// Values that differed from the model, and outcomes that differed
    /// from the expected (must be 0).
    pub wrong: usize,
    /// The first wrong value, described.
    pub first_wrong: Option<String>,
    /// Races the host backend's detector found (must be 0).
    pub races: usize,
    /// The first race found.
    pub first_race: Option<String>,
    /// Hand-offs that waited on the device, and that synchronized the host.
    pub device_waits: u64,
    /// Hand-offs that synchronized the old stream on the host.
    pub host_syncs: u64,
    /// Stream switches whose wait the ledger's facts avoided.
    pub waits_avoided: u64,
    /// Operations of the scopes run, by kind (see [`census`]), and the
    /// harness's own between scopes.
    pub census: BTreeMap<&'static str, usize>,
    /// Wall time.
    pub elapsed: Duration,
}

impl Report {
    /// Whether every value was right and no race was found.
    pub fn ok(&self) -> bool {
        self.wrong == 0 && self.races == 0
    }

    /// How many operations of `kind` ran.
    pub fn count(&self, kind: &str) -> usize {
        self.census.get(kind).copied().unwrap_or(0)
    }
}

/// Operations the harness counts itself (besides the generator's kinds).
pub mod harness_kinds {
    /// A parent used (checked, or freed) right after a top-level split that
    /// was not rejoined, while the ledger did not know all the views' work
    /// complete: only the parent's stamps order the use after it.
    pub const USED_AFTER_SPLIT_BUSY: &str =
        "top-level split not rejoined, parent used while the views' work may be queued";
    /// A buffer dropped and made again from the model between scopes.
    pub const REALLOC: &str = "buffer dropped and reallocated";
    /// A shared event dropped (back to the pool) and a new one taken.
    pub const EVENT_REPLACED: &str = "shared event replaced";
    /// A capture refused because its task's stream was shared (the pool
    /// ran out, DESIGN "Streams are a resource"); a graph's work then ran uncaptured.
    pub const CAPTURE_ON_SHARED_STREAM: &str = "capture refused on a shared stream";
    /// A top-level call that covered an injected failure and returned it.
    pub const CALL_REPORTED: &str = "top-level call that returned its failure";
    /// A top-level call with factorizations, none failing, that returned Ok.
    pub const CALL_CLEAN: &str = "top-level call with factorizations, none failing";
    /// A wait inside a task that reported a failure the task held.
    pub const REPORTED_IN_TASK: &str = "wait in a task that reported its failure";
    /// An unrelated task's `to_vec` after a call that failed, which kept
    /// its data.
    pub const UNRELATED_AFTER_FAILURE: &str = "unrelated to_vec after a failed call";
    /// `Runtime::synchronize` after a call, with nothing left to report.
    pub const RUNTIME_SYNCHRONIZE: &str = "runtime synchronize after a call";
}

/// What a run with library failures injected ([`Config::factorizations`])
/// must reach: the generator's and the harness's kinds.
pub const LIBRARY_KINDS: &[&str] = &[
    FACTORIZATION,
    FAILING_FACTORIZATION,
    IDLE_TASK,
    FAILURE_BEHIND_IDLE,
    "top level: scope_on",
    "top level: in_place_scope",
    "top level: join",
    "top level: par_chunks_mut(..).for_each",
    "top level: par_chunks_mut(..).map(..).collect",
    harness_kinds::CALL_REPORTED,
    harness_kinds::CALL_CLEAN,
    harness_kinds::REPORTED_IN_TASK,
    harness_kinds::UNRELATED_AFTER_FAILURE,
    harness_kinds::RUNTIME_SYNCHRONIZE,
];

/// The operations that exercise the runtime's soundness rules (pooled
/// events, splits, frees, captures that end badly), by kind: the
/// generator's and the harness's.
pub const SOUNDNESS_KINDS: &[&str] = &[
    "own event taken",
    "own event record",
    "own event wait before a record",
    "own event wait",
    "own event synchronize before a record",
    "own event synchronize",
    "own event query before a record",
    "own event query",
    "own event dropped",
    "own events handed to a child",
    harness_kinds::EVENT_REPLACED,
    "split rejoined",
    "split dropped",
    "split forgotten",
    "split not rejoined, parent used next",
    "top-level split rejoined",
    "top-level split dropped",
    "top-level split forgotten",
    harness_kinds::USED_AFTER_SPLIT_BUSY,
    "top-level split not rejoined, parent freed",
    "temporary handed to tasks",
    harness_kinds::REALLOC,
    "capture returns an error",
    "capture panics",
    "to_vec in a capture",
    "copy_to_host in a capture",
    "copy_from_host in a capture",
    "alloc in a capture",
    "zeros in a capture",
    "from_host in a capture",
    "inclusive_scan in a capture",
    "reduce::sum in a capture",
    "scope capture returns an error",
    "allocation in a scope capture",
    "allocation in a task of a scope capture",
    "operations captured and discarded",
];

impl Report {
    /// The counts of [`SOUNDNESS_KINDS`], one per line.
    pub fn soundness_census(&self) -> String {
        self.census_of(SOUNDNESS_KINDS)
    }

    /// The counts of [`LIBRARY_KINDS`], one per line.
    pub fn library_census(&self) -> String {
        self.census_of(LIBRARY_KINDS)
    }

    fn census_of(&self, kinds: &[&str]) -> String {
        kinds
            .iter()
            .map(|k| format!("  {:>6}  {k}", self.count(k)))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "tasks run {}, scopes {}, ops {}, wrong values {}, races {}, \
             device waits {}, host syncs {}, waits avoided {}, elapsed {:.2?}",
            self.tasks,
            self.scopes,
            self.ops,
            self.wrong,
            self.races,
            self.device_waits,
            self.host_syncs,
            self.waits_avoided,
            self.elapsed
        )?;
        if let Some(w) = &self.first_wrong {
            write!(f, "\n  first wrong value: {w}")?;
        }
        if let Some(r) = &self.first_race {
            write!(f, "\n  first race: {r}")?;
        }
        Ok(())
    }
}

/// Runs top-level scopes from `cfg` on `rt` until `cfg.tasks` tasks ran,
/// checking every buffer against the model after each scope. Calls
/// `after_scope` after each with the report so far; it returns false to
/// stop early.
///
/// # Errors
///
/// The first error a scope returned (none is expected), with its seed and
/// scope number in the message printed by the caller.
pub fn run(
    rt: &Runtime,
    cfg: &Config,
    mut after_scope: impl FnMut(&Report) -> bool,
) -> std::result::Result<Report, String> {
    quiet_intended_panics();
    let start = Instant::now();
    let counters = rt.counters();
    let races_before = rt.races().len();
    let mut gen = Generator::new(cfg);
    let ctx = |what: &str, scope: usize, e: gpu::Error| {
        format!("seed {} scope {scope}: {what}: {e}", cfg.seed)
    };
    let multi = if cfg.devices > 1 {
        Some(MultiEnv::new(rt, cfg).map_err(|e| ctx("opening the devices", 0, e))?)
    } else {
        None
    };
    let devs: Vec<Runtime> = match &multi {
        Some(m) => m.devices.clone(),
        None => vec![rt.clone()],
    };
    // Buffer `i` is device `i % devices`'s (as the generator's model).
    let dev_of = |i: usize| &devs[i % devs.len()];
    // Load the kernels now, not in a first launch inside a graph capture.
    for d in &devs {
        d.cu_function(&k::FILL_F32)
            .map_err(|e| ctx("loading the kernels", 0, e))?;
    }
    let mut bufs = gen
        .model()
        .iter()
        .enumerate()
        .map(|(i, m)| dev_of(i).begin_task()?.from_host(m))
        .collect::<Result<Vec<_>>>()
        .map_err(|e| ctx("allocating", 0, e))?;
    let mut events = (0..cfg.events)
        .map(|_| rt.event())
        .collect::<Result<Vec<_>>>()
        .map_err(|e| ctx("taking events", 0, e))?;
    // With library failures: a buffer no call holds, which an unrelated
    // task writes and reads back after each call (it must keep its data).
    let library = cfg.factorizations > 0;
    let global = gpu::runtime().ok();
    let mut bystander = if library {
        Some(
            rt.begin_task()
                .and_then(|t| t.from_host(&[0.0f32; 16]))
                .map_err(|e| ctx("allocating", 0, e))?,
        )
    } else {
        None
    };
    let stats = Stats::default();
    let mut report = Report::default();
    while report.tasks < cfg.tasks {
        let scope = report.scopes + 1;
        let plan = gen.next_scope();
        plan.census(&mut report.census);
        let env = Env {
            events: &events,
            backend: rt.backend(),
            stats: &stats,
            scope,
            multi: multi.as_ref(),
        };
        // The buffers split around the scope, and the others.
        let mut outer = Vec::new();
        let mut splits = Vec::new();
        let mut whole = Vec::new();
        for (i, b) in bufs.iter_mut().enumerate() {
            match plan.splits.iter().find(|s| s.b == i) {
                Some(s) => {
                    outer.push(s);
                    splits.push(
                        b.split_chunks(s.chunk)
                            .map_err(|e| ctx("split_chunks", scope, e))?,
                    );
                }
                None => whole.push((i, Ref::Buf(b))),
            }
        }
        let mut views: Vec<Vec<ViewMut<'_, f32>>> = splits.iter_mut().map(|s| s.views()).collect();
        let mut held = Held(whole);
        for (s, vs) in outer.iter().zip(views.iter_mut()) {
            for (&key, v) in s.views.iter().zip(vs.iter_mut()) {
                held.0.push((key, Ref::View(v as &mut Dyn<'_>)));
            }
        }
        stats.tasks.fetch_add(1, Relaxed);
        let on = &devs[plan.device];
        let is_global = global.is_some_and(|g| g.same(on));
        let (entry, r) = top_level(on, is_global, &plan, &mut held, &env);
        if library {
            *report.census.entry(entry.kind()).or_default() += 1;
        }
        // The call returns a factorization's failure exactly when one of
        // the tasks it covers had one.
        let injected = failures(&plan.ops);
        match r {
            Ok(()) if injected > 0 => stats.fail(format!(
                "scope {scope} ({}): {injected} factorization(s) failed in it, and it \
                 returned Ok: the failure was lost",
                entry.kind()
            )),
            Ok(()) => {
                let mut kinds = BTreeMap::new();
                census(&plan.ops, &mut kinds);
                if kinds.contains_key(FACTORIZATION) {
                    *report.census.entry(harness_kinds::CALL_CLEAN).or_default() += 1;
                }
            }
            Err(e) if is_failure(&e) && injected > 0 => {
                *report
                    .census
                    .entry(harness_kinds::CALL_REPORTED)
                    .or_default() += 1;
            }
            Err(e) if is_failure(&e) => stats.fail(format!(
                "scope {scope} ({}): no factorization failed in it, and it returned {e}: \
                 another call's failure reached it",
                entry.kind()
            )),
            Err(e) => return Err(ctx("the scope failed", scope, e)),
        }
        drop(held);
        // No scope orders what comes next after the views' tasks: only the
        // parent's stamps do, once the split ends. So each parent is used
        // at once: checked (a read) or, if `realloc`, dropped (its free)
        // and made again from the model.
        let busy: Vec<bool> = outer
            .iter()
            .zip(&views)
            .map(|(s, vs)| s.end != SplitEnd::Rejoin && views_busy(rt, vs))
            .collect();
        drop(views);
        for (s, split) in outer.iter().zip(splits) {
            if s.end == SplitEnd::Rejoin {
                let t = dev_of(s.b)
                    .begin_task()
                    .map_err(|e| ctx("begin_task", scope, e))?;
                t.rejoin(split).map_err(|e| ctx("rejoin", scope, e))?;
            } else {
                abandon(split, s.end);
            }
        }
        let mut realloc = Vec::new();
        for (s, busy) in outer.iter().zip(busy) {
            if busy {
                *report
                    .census
                    .entry(harness_kinds::USED_AFTER_SPLIT_BUSY)
                    .or_default() += 1;
            }
            if s.realloc {
                realloc.push(s.b);
            } else {
                let what = format!("scope {scope}: buffer {} right after its split", s.b);
                if let Some(got) = unrelated_to_vec(&bufs[s.b], &stats, &what)
                    .map_err(|e| ctx("to_vec", scope, e))?
                {
                    stats.compare(&what, &got, &gen.model()[s.b]);
                }
            }
        }
        // Now and then drop a buffer whose work may still be queued (X4)
        // and start it again from the model.
        if gen.rng().chance(20) {
            realloc.push(gen.rng().below(bufs.len()));
        }
        for i in realloc {
            let t = dev_of(i)
                .begin_task()
                .map_err(|e| ctx("begin_task", scope, e))?;
            bufs[i] = t
                .from_host(&gen.model()[i])
                .map_err(|e| ctx("reallocating", scope, e))?;
            *report.census.entry(harness_kinds::REALLOC).or_default() += 1;
        }
        // Now and then give a shared event back to the pool (where the
        // runtime's hand-offs take it next) and take another, which covers
        // nothing until recorded.
        if !events.is_empty() && gen.rng().chance(25) {
            let i = gen.rng().below(events.len());
            events[i] = rt.event().map_err(|e| ctx("taking an event", scope, e))?;
            *report
                .census
                .entry(harness_kinds::EVENT_REPLACED)
                .or_default() += 1;
        }
        for (i, (b, want)) in bufs.iter().zip(gen.model()).enumerate() {
            let what = format!("scope {scope}: buffer {i} after the scope");
            if let Some(got) =
                unrelated_to_vec(b, &stats, &what).map_err(|e| ctx("to_vec", scope, e))?
            {
                stats.compare(&what, &got, want);
            }
        }
        if let Some(x) = bystander.as_mut() {
            // Unrelated work after the call: its wait keeps its data.
            let v = (scope % 17) as f32;
            let what = format!("scope {scope}: an unrelated task's to_vec after the call");
            let t = rt.begin_task().map_err(|e| ctx("begin_task", scope, e))?;
            k::fill(&t, x, v).map_err(|e| ctx("fill", scope, e))?;
            match t.to_vec(x) {
                Ok(got) => {
                    stats.compare(&what, &got, &[v; 16]);
                    if injected > 0 {
                        *report
                            .census
                            .entry(harness_kinds::UNRELATED_AFTER_FAILURE)
                            .or_default() += 1;
                    }
                }
                Err(e) if is_failure(&e) => {
                    stats.fail(format!("{what} returned {e}: its data was lost"))
                }
                Err(e) => return Err(ctx("to_vec", scope, e)),
            }
            drop(t);
            // Nothing is left for the runtime's synchronize: every failure
            // went to its call (now and then, and after every failed call).
            if injected > 0 || gen.rng().chance(30) {
                for d in &devs {
                    match d.synchronize() {
                        Ok(()) => {}
                        Err(e) if is_failure(&e) => stats.fail(format!(
                            "scope {scope}: Runtime::synchronize after the call returned \
                             {e}: a failure nobody took (from this call or one since \
                             the last synchronize)"
                        )),
                        Err(e) => return Err(ctx("synchronize", scope, e)),
                    }
                }
                *report
                    .census
                    .entry(harness_kinds::RUNTIME_SYNCHRONIZE)
                    .or_default() += 1;
            }
        }
        report.scopes = scope;
        let shared = stats.shared_captures.load(Relaxed);
        if shared > 0 {
            report
                .census
                .insert(harness_kinds::CAPTURE_ON_SHARED_STREAM, shared);
        }
        let in_task = stats.reported_in_task.load(Relaxed);
        if in_task > 0 {
            report
                .census
                .insert(harness_kinds::REPORTED_IN_TASK, in_task);
        }
        report.tasks = stats.tasks.load(Relaxed);
        report.ops = stats.ops.load(Relaxed);
        report.wrong = stats.wrong.load(Relaxed);
        report.races = rt.races().len() - races_before;
        report.elapsed = start.elapsed();
        if !after_scope(&report) {
            break;
        }
    }
    drop(bufs);
    drop(bystander);
    drop(events);
    drop(multi);
    if library {
        // The last word: nothing left unreported on any device.
        for d in &devs {
            match d.synchronize() {
                Ok(()) => {}
                Err(e) if is_failure(&e) => stats.fail(format!(
                    "Runtime::synchronize at the end returned {e}: a failure nobody took"
                )),
                Err(e) => return Err(ctx("synchronize", report.scopes, e)),
            }
        }
        report.wrong = stats.wrong.load(Relaxed);
    }
    let d = rt.counters().since(&counters);
    report.device_waits = d.device_waits;
    report.host_syncs = d.host_syncs;
    report.waits_avoided = d.switches_avoided();
    report.first_wrong = stats
        .first_wrong
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    report.first_race = rt.races().get(races_before).cloned();
    report.elapsed = start.elapsed();
    Ok(report)
}

/// `x.to_vec()` from a task of its own, unrelated to every call: a
/// factorization's failure reaching it is counted as a wrong outcome
/// (`None`: no values to compare); other errors are returned.
fn unrelated_to_vec(x: &Buffer<f32>, stats: &Stats, what: &str) -> Result<Option<Vec<f32>>> {
    match x.to_vec() {
        Ok(v) => Ok(Some(v)),
        Err(e) if is_failure(&e) => {
            stats.fail(format!(
                "{what}: to_vec returned {e}: a failure reached an unrelated task"
            ));
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// Runs `plan` under its top-level call on `rt` (`global`: the global
/// runtime, where `in_place_scope` and `join` run; elsewhere those plans
/// run under `scope_on`, the join nested). The call that ran, and what it
/// returned.
fn top_level<'h>(
    rt: &Runtime,
    global: bool,
    plan: &Plan,
    held: &mut Held<'h>,
    env: &Env<'_>,
) -> (Entry, Result<()>) {
    let owed = Owed::default();
    match (plan.entry, &plan.ops[..]) {
        (Entry::InPlace, _) if global => (
            Entry::InPlace,
            gpu::in_place_scope(|s| {
                let mut h = held.reborrow();
                run_body(s, &plan.ops, &mut h, env, Locals::default(), &owed)
            }),
        ),
        (
            Entry::Join,
            [Op::Join {
                b_writes,
                b_reads,
                a,
                b,
            }],
        ) if global => {
            let mut ha = held.reborrow();
            let mut hb = Held(Vec::new());
            for &id in b_writes {
                hb.0.push((id, ha.take(id)));
            }
            for &id in b_reads {
                hb.0.push((id, Ref::Read(ha.share(id))));
            }
            let owed = &owed;
            let r = gpu::join(
                move |sa| {
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
            );
            (Entry::Join, r.map(drop))
        }
        (
            Entry::Chunks { collect },
            [Op::Chunks {
                b,
                chunk,
                reads,
                per_chunk,
            }],
        ) => {
            let Ref::Buf(buf) = held.take(*b) else {
                panic!("generator bug: chunks of a view or a shared buffer")
            };
            let r = {
                let shared: Vec<(usize, &Dyn<'_>)> =
                    reads.iter().map(|&id| (id, held.r(id))).collect();
                let shared = &shared;
                let it = gpu::par_chunks_mut(&mut *buf, *chunk);
                if collect {
                    it.map(|t, mut view| run_chunk(t, *b, &mut view, per_chunk, shared, env))
                        .collect::<Vec<()>>()
                        .map(drop)
                } else {
                    it.for_each(|t, view| run_chunk(t, *b, view, per_chunk, shared, env))
                }
            };
            held.0.push((*b, Ref::Buf(buf)));
            (plan.entry, r)
        }
        _ => (
            Entry::Scope,
            gpu::scope_on(rt, |s| {
                let mut h = held.reborrow();
                run_body(s, &plan.ops, &mut h, env, Locals::default(), &owed)
            }),
        ),
    }
}
