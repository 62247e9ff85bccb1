//! The generator's operations: chunk maps, splits, temporaries' scopes,
//! captures (the refused ones too), plain kernels, events and syncs, each
//! applied to the host model as it is planned.

use super::*;

impl Generator {
    pub(super) fn chunks(
        &mut self,
        held: &mut [Slot],
        depth: usize,
        budget: &mut usize,
    ) -> Option<Op> {
        let whole: Vec<usize> = Self::writable(held)
            .into_iter()
            .filter(|&i| held[i].whole && held[i].dev == self.cur_dev)
            .collect();
        if whole.is_empty() {
            return None;
        }
        let target = held[whole[self.rng.below(whole.len())]];
        let pieces = 1 + self.rng.below(8.min(target.len));
        let chunk = target.len.div_ceil(pieces);
        let count = target.len.div_ceil(chunk);
        *budget = budget.saturating_sub(count);
        let readers: Vec<Slot> = held
            .iter()
            .filter(|s| s.key != target.key && self.rng.chance(25))
            .map(|s| Slot { write: false, ..*s })
            .collect();
        let reads = readers.iter().map(|s| s.key).collect();
        let mut per_chunk = Vec::new();
        for c in 0..count {
            let start = c * chunk;
            let mut h = vec![Slot {
                key: target.key,
                id: target.id,
                start: target.start + start,
                len: chunk.min(target.len - start),
                write: true,
                whole: false,
                dev: target.dev,
            }];
            h.extend(readers.iter().copied());
            let sub = if *budget > 0 {
                self.sub_budget(budget).min(4)
            } else {
                0
            };
            per_chunk.push(self.body(&mut h, depth + 1, sub, NO_EVENTS));
        }
        Some(Op::Chunks {
            b: target.key,
            chunk,
            reads,
            per_chunk,
        })
    }

    /// A split of a whole buffer the task holds: most views to tasks of
    /// their own, the rest to the task itself, in a nested scope; then the
    /// split ends, and the parent is used again at once (mostly).
    pub(super) fn split(
        &mut self,
        held: &mut Vec<Slot>,
        depth: usize,
        budget: &mut usize,
        out: &mut Vec<Op>,
    ) {
        let whole: Vec<usize> = Self::writable(held)
            .into_iter()
            .filter(|&i| held[i].whole && held[i].dev == self.cur_dev)
            .collect();
        if whole.is_empty() {
            return;
        }
        let i = whole[self.rng.below(whole.len())];
        let target = held.remove(i);
        let chunk = target.len.div_ceil(1 + self.rng.below(6.min(target.len)));
        let views = self.views(&target, chunk);
        *budget = budget.saturating_sub(1);
        let mut sub = self.sub_budget(budget);
        let mut inner = held.clone();
        inner.extend(views.iter().copied());
        let mut body = Vec::new();
        if depth + 1 < self.cfg.max_depth {
            for v in &views {
                // (An earlier child may have taken it.)
                if inner.iter().any(|s| s.key == v.key && s.write) && self.rng.chance(70) {
                    body.push(self.spawn(
                        &mut inner,
                        depth + 1,
                        &mut sub,
                        Some((v.key, true)),
                        false,
                    ));
                }
            }
        }
        body.extend(self.body(&mut inner, depth + 1, sub, NO_EVENTS));
        // Inside a task the scope's join orders the parent's next use after
        // the views' work whatever the stamps say; an abandoned split costs
        // a wait for every stream: rejoin more of these.
        let end = self.split_end(55);
        let used_after = self.rng.chance(80);
        held.push(target);
        out.push(Op::Split {
            b: target.key,
            chunk,
            views: views.iter().map(|v| v.key).collect(),
            body,
            end,
            used_after,
        });
        if used_after {
            let op = self.use_now(held, &target);
            out.push(op);
        }
    }

    /// A temporary handed to tasks: one writer, or a few readers on streams
    /// of their own, then the task's own work; after the scope, maybe read
    /// into a buffer of the task's; then dropped.
    pub(super) fn temp_scope(&mut self, held: &mut [Slot], depth: usize, budget: &mut usize) -> Op {
        *budget = budget.saturating_sub(1);
        let mut sub = self.sub_budget(budget);
        let len = if !held.is_empty() && self.rng.chance(50) {
            held[self.rng.below(held.len())].len
        } else {
            self.cfg.len
        };
        let key = self.model.len();
        let init = match self.rng.below(3) {
            0 => {
                let v = self.rng.int(-8, 8);
                self.model.push(vec![v; len]);
                TempInit::Fill(v)
            }
            1 => {
                self.model.push(vec![0.0; len]);
                TempInit::Zeros
            }
            _ => {
                let v: Vec<f32> = (0..len)
                    .map(|i| ((i * 5 + key) % 13) as f32 - 6.0)
                    .collect();
                self.model.push(v.clone());
                TempInit::FromHost(v)
            }
        };
        let tmp = Slot {
            key,
            id: key,
            start: 0,
            len,
            write: true,
            whole: true,
            dev: self.cur_dev,
        };
        let mut inner = held.to_vec();
        inner.push(tmp);
        let mut body = Vec::new();
        if depth + 1 < self.cfg.max_depth {
            if self.rng.chance(40) {
                body.push(self.spawn(&mut inner, depth + 1, &mut sub, Some((key, true)), false));
            } else {
                if self.rng.chance(50) {
                    // Written on this task's stream before the readers.
                    body.push(self.value_op(&tmp));
                }
                for _ in 0..1 + self.rng.below(3) {
                    body.push(self.spawn(
                        &mut inner,
                        depth + 1,
                        &mut sub,
                        Some((key, false)),
                        false,
                    ));
                }
            }
        }
        body.extend(self.body(&mut inner, depth + 1, sub, NO_EVENTS));
        let ys: Vec<Slot> = held
            .iter()
            .filter(|s| s.write && s.len == len && s.dev == self.cur_dev)
            .copied()
            .collect();
        let after = if !ys.is_empty() && self.rng.chance(70) {
            let y = ys[self.rng.below(ys.len())];
            let a: f32 = [-1.0, 1.0, 2.0][self.rng.below(3)];
            if self.rng.chance(30) || self.max_abs(&y) + a.abs() * self.max_abs(&tmp) > LIMIT {
                let v = self.values(&tmp).to_vec();
                self.values_mut(&y).copy_from_slice(&v);
                Some(TempAfter::Copy { y: y.key })
            } else {
                let xv = self.values(&tmp).to_vec();
                for (yi, xi) in self.values_mut(&y).iter_mut().zip(xv) {
                    *yi += a * xi;
                }
                Some(TempAfter::Axpy { a, y: y.key })
            }
        } else {
            None
        };
        Op::TempScope {
            key,
            len,
            init,
            body,
            after,
        }
    }

    /// A capture that submits a few operations on `held` and ends badly;
    /// the model is left as it was.
    pub(super) fn bad_capture(&mut self, held: &[Slot], y: &Slot) -> Op {
        let saved: Vec<Vec<f32>> = held.iter().map(|s| self.values(s).to_vec()).collect();
        let w = Self::writable(held);
        let mut ops = Vec::new();
        for _ in 0..1 + self.rng.below(3) {
            let z = held[w[self.rng.below(w.len())]];
            let xs: Vec<Slot> = held
                .iter()
                .filter(|s| s.key != z.key && s.len == z.len)
                .copied()
                .collect();
            if xs.is_empty() || self.rng.chance(60) {
                ops.push(self.value_op(&z));
            } else {
                let x = xs[self.rng.below(xs.len())];
                ops.push(if self.rng.chance(50) {
                    Op::Copy {
                        src: x.key,
                        dst: z.key,
                        kernel: self.rng.chance(50),
                    }
                } else {
                    Op::Axpy {
                        a: 1.0,
                        x: x.key,
                        y: z.key,
                    }
                });
            }
        }
        for (s, v) in held.iter().zip(saved) {
            self.values_mut(s).copy_from_slice(&v);
        }
        let any = held[self.rng.below(held.len())].key;
        let how = match self.rng.below(10) {
            0..=6 => CaptureHow::Task,
            7 | 8 => CaptureHow::Scope,
            _ => CaptureHow::ScopeTask,
        };
        let roll = match how {
            CaptureHow::Task => self.rng.below(16),
            CaptureHow::Scope => [0, 9, 10, 11, 12, 14][self.rng.below(6)],
            CaptureHow::ScopeTask => 9 + self.rng.below(3),
        };
        let end = match roll {
            0..=3 => CaptureEnd::Error,
            4 | 5 => CaptureEnd::Panic,
            6 => CaptureEnd::ToVec(any),
            7 => CaptureEnd::CopyToHost(any),
            8 => CaptureEnd::CopyFromHost(y.key),
            9 => CaptureEnd::Alloc,
            10 => CaptureEnd::Zeros,
            11 => CaptureEnd::FromHost,
            12 | 13 => {
                let xs: Vec<usize> = held
                    .iter()
                    .filter(|s| s.key != y.key && s.len == y.len)
                    .map(|s| s.key)
                    .collect();
                if xs.is_empty() {
                    CaptureEnd::Alloc
                } else {
                    CaptureEnd::Scan {
                        x: xs[self.rng.below(xs.len())],
                        y: y.key,
                    }
                }
            }
            _ => CaptureEnd::Reduce(any),
        };
        let check = if self.rng.chance(30) {
            let s = held[self.rng.below(held.len())];
            Some((s.key, self.values(&s).to_vec()))
        } else {
            None
        };
        Op::BadCapture {
            how,
            ops,
            end,
            check,
        }
    }

    /// An operation on buffers or events, applied to the model: on the
    /// buffers of the task's device, or, with several devices, now and then
    /// one across devices ([`multi`]).
    pub(super) fn plain(&mut self, held: &[Slot]) -> Option<Op> {
        if self.cfg.devices > 1 {
            if self.rng.chance(if self.cfg.comms > 0 { 20 } else { 12 }) {
                if let Some(op) = self.multi_op(held) {
                    return Some(Op::Multi(op));
                }
            }
            let here: Vec<Slot> = held
                .iter()
                .filter(|s| s.dev == self.cur_dev)
                .copied()
                .collect();
            return self.plain_here(&here);
        }
        self.plain_here(held)
    }

    /// [`Generator::plain`] over `held`, all of the task's device.
    pub(super) fn plain_here(&mut self, held: &[Slot]) -> Option<Op> {
        let w = Self::writable(held);
        let factorizations = if self.behind_idle > 0 && self.failing_now {
            30
        } else {
            self.cfg.factorizations
        };
        if !w.is_empty() && factorizations > 0 && self.rng.chance(factorizations) {
            let y = held[w[self.rng.below(w.len())]];
            return Some(self.factor(&y));
        }
        let roll = self.rng.below(100);
        if w.is_empty() || roll >= 88 {
            return self.sync_op();
        }
        let y = held[w[self.rng.below(w.len())]];
        Some(match roll {
            0..=14 => self.value_op(&y),
            15..=34 => {
                let xs: Vec<Slot> = held
                    .iter()
                    .filter(|s| s.key != y.key && s.len == y.len)
                    .copied()
                    .collect();
                if xs.is_empty() {
                    return Some(self.value_op(&y));
                }
                let x = xs[self.rng.below(xs.len())];
                if self.rng.chance(30) {
                    let v = self.values(&x).to_vec();
                    self.values_mut(&y).copy_from_slice(&v);
                    Op::Copy {
                        src: x.key,
                        dst: y.key,
                        kernel: self.rng.chance(50),
                    }
                } else {
                    let a: f32 = [-2.0, -1.0, 1.0, 2.0][self.rng.below(4)];
                    if self.max_abs(&y) + a.abs() * self.max_abs(&x) > LIMIT {
                        return Some(self.fill(&y));
                    }
                    let xv = self.values(&x).to_vec();
                    for (yi, xi) in self.values_mut(&y).iter_mut().zip(xv) {
                        *yi += a * xi;
                    }
                    Op::Axpy {
                        a,
                        x: x.key,
                        y: y.key,
                    }
                }
            }
            35..=44 => {
                let v = self.rng.int(-3, 3);
                if !self.add(&y, v) {
                    return Some(self.fill(&y));
                }
                Op::Temp { b: y.key, v }
            }
            45..=52 => {
                let v = self.rng.int(-3, 3);
                if !self.add(&y, v) {
                    return Some(self.fill(&y));
                }
                Op::RawAdd { b: y.key, v }
            }
            53..=57 => Op::HostSync {
                b: y.key,
                expect: self.values(&y).to_vec(),
            },
            58..=62 => {
                let x = held[self.rng.below(held.len())];
                Op::Check {
                    b: x.key,
                    expect: self.values(&x).to_vec(),
                }
            }
            63..=66 => {
                let x = held[self.rng.below(held.len())];
                Op::Sum {
                    b: x.key,
                    expect: self.values(&x).iter().sum(),
                }
            }
            67..=71 => {
                let v = self.rng.int(-3, 3);
                if !self.add(&y, v) {
                    return Some(self.fill(&y));
                }
                Op::Graph { b: y.key, v }
            }
            72 | 73 => self.bad_capture(held, &y),
            _ => self.value_op(&y),
        })
    }

    pub(super) fn sync_op(&mut self) -> Option<Op> {
        if !self.ev.is_empty() && self.rng.chance(45) {
            return Some(self.own_event_op());
        }
        let e = self.cfg.events;
        if e == 0 {
            return Some(Op::Sync);
        }
        Some(match self.rng.below(10) {
            // The shared events are device 0's: recorded only there.
            0..=3 if self.cur_dev != 0 => Op::Wait(self.rng.below(e)),
            0..=3 => Op::Record(self.rng.below(e)),
            4..=6 => Op::Wait(self.rng.below(e)),
            7 => Op::EventSync(self.rng.below(e)),
            8 => Op::EventQuery(self.rng.below(e)),
            _ => Op::Sync,
        })
    }

    /// An operation on one of the task's own events.
    pub(super) fn own_event_op(&mut self) -> Op {
        let mine = *self.ev.last().expect("inside a body");
        // Mostly an event the task has, if it has one.
        let live: Vec<usize> = (0..LOCAL_EVENTS)
            .filter(|&e| mine[e] != EvState::Empty)
            .collect();
        let e = if !live.is_empty() && self.rng.chance(75) {
            live[self.rng.below(live.len())]
        } else {
            self.rng.below(LOCAL_EVENTS)
        };
        let st = mine[e];
        let fresh = st == EvState::Fresh;
        let (act, next) = match st {
            EvState::Empty => (EvAct::New, EvState::Fresh),
            // A fresh event is recorded sooner.
            _ => match self.rng.below(100) + if fresh { 0 } else { 15 } {
                0..=34 => (EvAct::Record, EvState::Recorded),
                35..=59 => (EvAct::Wait { fresh }, st),
                60..=74 => (EvAct::Sync { fresh }, st),
                75..=89 => (EvAct::Query { fresh }, st),
                90..=104 => (EvAct::Drop, EvState::Empty),
                _ => (EvAct::New, EvState::Fresh),
            },
        };
        self.ev.last_mut().expect("inside a body")[e] = next;
        Op::Ev { e, act }
    }

    /// Adds `v` to the slot in the model, unless it would pass [`LIMIT`].
    pub(super) fn add(&mut self, s: &Slot, v: f32) -> bool {
        if self.max_abs(s) + v.abs() > LIMIT {
            return false;
        }
        self.values_mut(s).iter_mut().for_each(|x| *x += v);
        true
    }

    pub(super) fn fill(&mut self, s: &Slot) -> Op {
        let v = self.rng.int(-8, 8);
        self.values_mut(s).fill(v);
        Op::Fill { b: s.key, v }
    }

    pub(super) fn value_op(&mut self, s: &Slot) -> Op {
        match self.rng.below(3) {
            0 => self.fill(s),
            1 => {
                let v = self.rng.int(-5, 5);
                if !self.add(s, v) {
                    return self.fill(s);
                }
                Op::Add { b: s.key, v }
            }
            _ => {
                let a: f32 = [-1.0, 2.0, -2.0, 3.0][self.rng.below(4)];
                if self.max_abs(s) * a.abs() > LIMIT {
                    return self.fill(s);
                }
                self.values_mut(s).iter_mut().for_each(|x| *x *= a);
                Op::Scale { b: s.key, a }
            }
        }
    }
}

impl Generator {
    /// A Cholesky factorization in `y`: an `n x n` matrix `A = L L^T` with
    /// a small integer `L` whose diagonal holds powers of two, so that
    /// every step of any algorithm (square roots, divisions, sums in any
    /// order) is exact in `f32`, and the factor is `L` on any device. In a
    /// scope where factorizations may fail, one time in three a pivot of
    /// `A` is made negative instead (a known failure, reported later).
    pub(super) fn factor(&mut self, y: &Slot) -> Op {
        let mut most = 1;
        while (most + 1) * (most + 1) <= y.len && most < 4 {
            most += 1;
        }
        let n = 1 + self.rng.below(most);
        // L, row-major (i, j) for i >= j.
        let mut l = vec![0.0f32; n * n];
        for i in 0..n {
            for j in 0..i {
                l[i * n + j] = self.rng.int(-2, 2);
            }
            l[i * n + i] = [1.0, 2.0, 4.0][self.rng.below(3)];
        }
        // A = L L^T, column-major (symmetric: the same either way).
        let mut a = vec![0.0f32; n * n];
        for i in 0..n {
            for j in 0..n {
                a[i + j * n] = (0..n).map(|k| l[i * n + k] * l[j * n + k]).sum();
            }
        }
        let fail = self.failing_now && self.rng.chance(if self.behind_idle > 0 { 60 } else { 33 });
        if fail {
            // The pivot of column k becomes -p: the leading minors of
            // orders 1..=k are positive, that of order k + 1 is not.
            let k = self.rng.below(n);
            let p = self.rng.int(1, 3);
            a[k + k * n] -= l[k * n + k] * l[k * n + k] + p;
        }
        let mut upload = self.values(y).to_vec();
        upload[..n * n].copy_from_slice(&a);
        let refill = self.rng.int(-8, 8);
        let v = self.values_mut(y);
        if fail {
            v.fill(refill);
        } else {
            // The lower triangle gets L; the upper one keeps A's.
            v.copy_from_slice(&upload);
            for j in 0..n {
                for i in j..n {
                    v[i + j * n] = l[i * n + j];
                }
            }
        }
        Op::Factor {
            b: y.key,
            n,
            upload,
            fail,
            refill,
        }
    }
}
