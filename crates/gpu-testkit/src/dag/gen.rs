//! The generator's scope-level choices: a top-level scope's plan, a task's
//! body, its spawns and joins, and what its buffers are used for.

use super::*;

impl Generator {
    /// A generator for `cfg`; the buffers start as [`Generator::model`].
    pub fn new(cfg: &Config) -> Self {
        let model = (0..cfg.buffers)
            .map(|b| {
                (0..cfg.len)
                    .map(|i| ((b * 7 + i * 3) % 17) as f32 - 8.0)
                    .collect()
            })
            .collect();
        Generator {
            rng: Rng::new(cfg.seed),
            cfg: cfg.clone(),
            model,
            scopes: 0,
            next_view: VIEW_KEYS,
            ev: Vec::new(),
            cur_dev: 0,
            failing_now: false,
            behind_idle: 0,
        }
    }

    /// Every buffer's expected contents after the scopes generated so far.
    pub fn model(&self) -> &[Vec<f32>] {
        &self.model[..self.cfg.buffers]
    }

    /// The generator's own random numbers (for the harness's choices
    /// between scopes, so that they too follow the seed).
    pub fn rng(&mut self) -> &mut Rng {
        &mut self.rng
    }

    /// The next top-level scope: its body holds every buffer, or the views
    /// of the ones the harness splits around it.
    pub fn next_scope(&mut self) -> Plan {
        self.scopes += 1;
        self.model.truncate(self.cfg.buffers);
        let mut held: Vec<Slot> = (0..self.cfg.buffers)
            .map(|id| Slot {
                key: id,
                id,
                start: 0,
                len: self.cfg.len,
                write: true,
                whole: true,
                dev: id % self.cfg.devices.max(1),
            })
            .collect();
        // With several devices, some scopes run on another device's runtime.
        let device = if self.cfg.devices > 1 && self.rng.chance(35) {
            self.rng.below(self.cfg.devices)
        } else {
            0
        };
        self.cur_dev = device;
        let mut budget = self.cfg.scope_tasks / 2 + self.rng.below(self.cfg.scope_tasks + 1);
        // With factorizations: whether they may fail in this call, and the
        // call (no random numbers drawn otherwise: the same programs).
        let mut entry = Entry::Scope;
        if self.cfg.factorizations > 0 {
            self.failing_now = self.rng.chance(self.cfg.failing);
            entry = match self.rng.below(20) {
                0..=7 => Entry::Scope,
                8..=10 => Entry::InPlace,
                11..=14 if self.cfg.max_depth > 0 => Entry::Join,
                15..=19 if self.cfg.max_depth > 0 => Entry::Chunks {
                    collect: self.rng.chance(50),
                },
                _ => Entry::Scope,
            };
        }
        let mut splits = Vec::new();
        let mut ops = Vec::new();
        if self.cfg.len >= 2 && self.rng.chance(30) {
            for _ in 0..1 + self.rng.below(2) {
                let i = self.rng.below(held.len());
                if !held[i].whole {
                    continue;
                }
                let target = held.remove(i);
                let chunk = target
                    .len
                    .div_ceil(2 + self.rng.below(5.min(target.len - 1)));
                let views = self.views(&target, chunk);
                held.extend(views.iter().copied());
                let end = self.split_end(40);
                splits.push(OuterSplit {
                    b: target.key,
                    chunk,
                    views: views.iter().map(|v| v.key).collect(),
                    end,
                    realloc: end != SplitEnd::Rejoin && self.rng.chance(30),
                });
            }
            // Most views go to tasks of their own at once (in a scope's body).
            if self.cfg.max_depth > 1 && matches!(entry, Entry::Scope | Entry::InPlace) {
                let keys: Vec<usize> = splits.iter().flat_map(|s| s.views.clone()).collect();
                for key in keys {
                    // (An earlier child may have taken it, or be reading it.)
                    if held.iter().any(|s| s.key == key && s.write) && self.rng.chance(60) {
                        ops.push(self.spawn(&mut held, 0, &mut budget, Some((key, true)), false));
                    }
                }
            }
        }
        // A join or a chunk iterator at the top: the plan is that one
        // operation (a scope's body otherwise, or if no buffer of the
        // device is whole for the chunks).
        let one = match entry {
            Entry::Join => Some(self.join(&held, 0, &mut budget)),
            Entry::Chunks { .. } => self.chunks(&mut held, 0, &mut budget),
            _ => None,
        };
        match one {
            Some(op) => ops.push(op),
            None => {
                if matches!(entry, Entry::Join | Entry::Chunks { .. }) {
                    entry = Entry::Scope;
                }
                ops.extend(self.body(&mut held, 0, budget, NO_EVENTS));
            }
        }
        Plan {
            splits,
            device,
            entry,
            ops,
        }
    }

    pub(super) fn values(&self, s: &Slot) -> &[f32] {
        &self.model[s.id][s.start..s.start + s.len]
    }

    pub(super) fn values_mut(&mut self, s: &Slot) -> &mut [f32] {
        &mut self.model[s.id][s.start..s.start + s.len]
    }

    pub(super) fn max_abs(&self, s: &Slot) -> f32 {
        self.values(s).iter().fold(0.0, |m, v| m.max(v.abs()))
    }

    /// A task body over `held`, with about `budget` tasks below it, starting
    /// with its own events `ev`.
    pub(super) fn body(
        &mut self,
        held: &mut Vec<Slot>,
        depth: usize,
        mut budget: usize,
        ev: EvSlots,
    ) -> Vec<Op> {
        self.ev.push(ev);
        let mut ops = Vec::new();
        let mut steps = 1 + self.rng.below(6);
        while steps > 0 || (budget > 0 && ops.len() < 64) {
            steps = steps.saturating_sub(1);
            let structural = budget > 0 && depth < self.cfg.max_depth && self.rng.chance(45);
            if structural {
                self.structural(held, depth, &mut budget, &mut ops);
            } else if let Some(op) = self.plain(held) {
                ops.push(op);
            }
            if !structural && budget > 0 && ops.len() >= 64 {
                break;
            }
        }
        self.ev.pop();
        ops
    }

    pub(super) fn writable(held: &[Slot]) -> Vec<usize> {
        (0..held.len()).filter(|&i| held[i].write).collect()
    }

    pub(super) fn sub_budget(&mut self, budget: &mut usize) -> usize {
        let b = self.rng.below(*budget / 2 + 1);
        *budget -= b;
        b
    }

    /// The views of `target` split in chunks of `chunk`, with new keys.
    pub(super) fn views(&mut self, target: &Slot, chunk: usize) -> Vec<Slot> {
        (0..target.len.div_ceil(chunk))
            .map(|c| {
                self.next_view += 1;
                Slot {
                    key: self.next_view,
                    id: target.id,
                    start: target.start + c * chunk,
                    len: chunk.min(target.len - c * chunk),
                    write: true,
                    whole: false,
                    dev: target.dev,
                }
            })
            .collect()
    }

    /// How a split ends: rejoined `rejoin` times in a hundred, else mostly
    /// dropped, now and then leaked.
    pub(super) fn split_end(&mut self, rejoin: usize) -> SplitEnd {
        let r = self.rng.below(100);
        if r < rejoin {
            SplitEnd::Rejoin
        } else if r < 88 {
            SplitEnd::Drop
        } else {
            SplitEnd::Forget
        }
    }

    /// A spawn from a task holding `held` at `depth`. `must`: a slot the
    /// child must get (its key, and whether to write it); the child's first
    /// operation then uses it. `events`: whether the child may get some of
    /// the task's own events.
    pub(super) fn spawn(
        &mut self,
        held: &mut Vec<Slot>,
        depth: usize,
        budget: &mut usize,
        must: Option<(usize, bool)>,
        events: bool,
    ) -> Op {
        *budget = budget.saturating_sub(1);
        let sub = self.sub_budget(budget);
        // The child's device: the one of the slot it must use, or now and
        // then another (`spawn_on`), with several devices.
        let parent_dev = self.cur_dev;
        let device = if self.cfg.devices <= 1 {
            None
        } else if let Some((key, _)) = must {
            let d = held
                .iter()
                .find(|s| s.key == key)
                .expect("the slot it must get")
                .dev;
            (d != parent_dev || self.rng.chance(20)).then_some(d)
        } else if self.rng.chance(30) {
            Some(self.rng.below(self.cfg.devices))
        } else {
            None
        };
        let child_dev = device.unwrap_or(parent_dev);
        // A task's own events are of its device: recorded only there.
        let events = events && child_dev == parent_dev;
        let mut child = Vec::new();
        let mut writes = Vec::new();
        let mut reads = Vec::new();
        for i in (0..held.len()).rev() {
            let key = held[i].key;
            if !held[i].write || must == Some((key, false)) {
                continue;
            }
            if must == Some((key, true)) || self.rng.chance(35) {
                let s = held.remove(i);
                writes.push(s.key);
                child.push(s);
            }
        }
        for s in held.iter_mut() {
            let forced = must == Some((s.key, false));
            if forced || self.rng.chance(20) {
                s.write = false;
                reads.push(s.key);
                child.push(*s);
            }
        }
        let mut ev = NO_EVENTS;
        let mut moved = Vec::new();
        if events {
            let mut mine = *self.ev.last().expect("inside a body");
            for (e, m) in mine.iter_mut().enumerate() {
                if *m != EvState::Empty && self.rng.chance(30) {
                    ev[e] = *m;
                    *m = EvState::Empty;
                    moved.push(e);
                }
            }
            *self.ev.last_mut().expect("inside a body") = mine;
        }
        let mut ops = Vec::new();
        self.cur_dev = child_dev;
        if let Some((key, write)) = must {
            let s = *child
                .iter()
                .find(|s| s.key == key)
                .expect("the slot it must get");
            ops.push(self.touch(&child, &s, write));
        }
        // With factorizations, now and then a child with no GPU work of
        // its own: it only joins grandchildren (whose failures it hands on).
        let idle = must.is_none()
            && self.cfg.factorizations > 0
            && depth + 2 < self.cfg.max_depth
            && self.rng.chance(15);
        if idle {
            ops.push(self.idle(&child, depth + 1, sub));
        } else {
            ops.extend(self.body(&mut child, depth + 1, sub, ev));
        }
        self.cur_dev = parent_dev;
        Op::Spawn {
            device,
            writes,
            reads,
            events: moved,
            ops,
        }
    }

    /// An operation that writes `s` (if `write`) or reads it.
    pub(super) fn touch(&mut self, held: &[Slot], s: &Slot, write: bool) -> Op {
        if write {
            return self.value_op(s);
        }
        let ys: Vec<Slot> = held
            .iter()
            .filter(|y| y.write && y.key != s.key && y.len == s.len && y.dev == s.dev)
            .copied()
            .collect();
        match self.rng.below(3) {
            0 if !ys.is_empty() => {
                let y = ys[self.rng.below(ys.len())];
                let v = self.values(s).to_vec();
                self.values_mut(&y).copy_from_slice(&v);
                Op::Copy {
                    src: s.key,
                    dst: y.key,
                    kernel: self.rng.chance(50),
                }
            }
            1 => Op::Sum {
                b: s.key,
                expect: self.values(s).iter().sum(),
            },
            _ => Op::Check {
                b: s.key,
                expect: self.values(s).to_vec(),
            },
        }
    }

    /// An operation that uses `s` on the task that holds it: written, or
    /// read and checked.
    pub(super) fn use_now(&mut self, held: &[Slot], s: &Slot) -> Op {
        let write = self.rng.chance(50);
        self.touch(held, s, write)
    }

    pub(super) fn structural(
        &mut self,
        held: &mut Vec<Slot>,
        depth: usize,
        budget: &mut usize,
        out: &mut Vec<Op>,
    ) {
        match self.rng.below(40) {
            0..=20 => out.push(self.spawn(held, depth, budget, None, true)),
            // nested scope
            21..=26 => {
                let sub = self.sub_budget(budget);
                let mut inner = held.clone();
                out.push(Op::Scope(self.body(&mut inner, depth + 1, sub, NO_EVENTS)));
            }
            27..=30 => out.push(self.join(held, depth, budget)),
            // par_chunks_mut
            31..=34 => {
                if let Some(op) = self.chunks(held, depth, budget) {
                    out.push(op);
                }
            }
            35..=36 => self.split(held, depth, budget, out),
            _ => out.push(self.temp_scope(held, depth, budget)),
        }
    }
}

impl Generator {
    /// A join from a task holding `held` at `depth`: `b` gets some of the
    /// buffers to write and some to read (read-only for both sides).
    pub(super) fn join(&mut self, held: &[Slot], depth: usize, budget: &mut usize) -> Op {
        self.join_with(held, depth, budget, false)
    }

    /// The only operation of a task with no GPU work of its own (at
    /// `depth`, holding `held`): a nested scope whose body only spawns, or
    /// a join whose `a` side (on this task) does nothing or only spawns.
    pub(super) fn idle(&mut self, held: &[Slot], depth: usize, budget: usize) -> Op {
        let mut budget = budget.max(2);
        self.behind_idle += 1;
        let op = self.idle_op(held, depth, &mut budget);
        self.behind_idle -= 1;
        op
    }

    fn idle_op(&mut self, held: &[Slot], depth: usize, budget: &mut usize) -> Op {
        if self.rng.chance(50) {
            let mut inner = held.to_vec();
            let spawns = (0..1 + self.rng.below(3))
                .map(|_| self.spawn(&mut inner, depth + 1, budget, None, false))
                .collect();
            Op::Scope(spawns)
        } else {
            self.join_with(held, depth, budget, true)
        }
    }

    /// [`Generator::join`]; `idle_a`: `a` does nothing, or only spawns.
    fn join_with(&mut self, held: &[Slot], depth: usize, budget: &mut usize, idle_a: bool) -> Op {
        *budget = budget.saturating_sub(1);
        let (sa, sb) = (self.sub_budget(budget), self.sub_budget(budget));
        let mut a_held = held.to_vec();
        let mut b_held = Vec::new();
        let (mut b_writes, mut b_reads) = (Vec::new(), Vec::new());
        for i in (0..a_held.len()).rev() {
            if a_held[i].write && self.rng.chance(40) {
                let s = a_held.remove(i);
                b_writes.push(s.key);
                b_held.push(s);
            }
        }
        for s in a_held.iter_mut() {
            if self.rng.chance(25) {
                s.write = false;
                b_reads.push(s.key);
                b_held.push(*s);
            }
        }
        let a = if !idle_a {
            self.body(&mut a_held, depth + 1, sa, NO_EVENTS)
        } else if self.rng.chance(50) {
            Vec::new()
        } else {
            let mut sa = sa.max(1);
            vec![self.spawn(&mut a_held, depth + 1, &mut sa, None, false)]
        };
        let b = self.body(&mut b_held, depth + 1, sb, NO_EVENTS);
        Op::Join {
            b_writes,
            b_reads,
            a,
            b,
        }
    }
}
