//! A cycle on a semaphore or a read-write lock
//! ([`Scenario::primitive`](crate::sim::Scenario::primitive)): the
//! acquisition is the one the core makes, built by the core's own
//! [`Slots`] for a permit (the keys `name:permit:i`, the `one_of` sweep over
//! them) and [`Acquire::read`] for a read (a shared claim on the key `rw`,
//! every round queued); a write is an ordinary lock of `rw`. What a permit
//! won names its slot, and so the keys the nodes and the checker see.

use std::time::{Duration, Instant};

use redlock_core::backend::Queued;
use redlock_core::engine::{Acquire, Slots};
use redlock_core::Resources;

use super::Client;
use crate::sim::checker::Role;
use crate::sim::clock::{duration_ns, signed};
use crate::sim::ctx::Ctx;
use crate::sim::event::Step;
use crate::sim::process::LocalWriter;
use crate::sim::scenario::{Primitive, Scenario, MAX_KEYS};

/// The simulated semaphore's name.
const SEMAPHORE: &str = "sem";
/// The simulated read-write lock's name.
const RWLOCK: &str = "rw";

/// What a client locks besides mutexes.
#[derive(Debug, Clone)]
pub(super) enum Prim {
    /// The semaphore's permits.
    Semaphore(Slots),
    /// The read-write lock's key (the scenario's first resource).
    RwLock(Resources),
}

/// What the clients lock for the scenario's primitive: the semaphore's
/// `keys` permits, or the read-write lock.
pub(super) fn primitive(sc: &Scenario) -> Option<Prim> {
    let keys = u32::try_from(sc.keys.min(MAX_KEYS)).ok()?;
    match sc.primitive {
        Primitive::Mutex => None,
        Primitive::Semaphore { .. } => Slots::permits(SEMAPHORE, keys).ok().map(Prim::Semaphore),
        Primitive::RwLock { .. } => Resources::one(RWLOCK).ok().map(Prim::RwLock),
    }
}

/// The resource each key index of a mask names, as the clients' claims
/// name them: `r0`.. (a mutex's keys, `line::resources_of`), the
/// semaphore's permits in slot order, the read-write lock's key (index 0).
pub(crate) fn key_names(sc: &Scenario) -> Vec<Resources> {
    match primitive(sc) {
        None => (0..MAX_KEYS)
            .filter_map(|k| super::line::resources_of(1 << k).ok())
            .collect(),
        Some(Prim::Semaphore(slots)) => slots.slots().to_vec(),
        Some(Prim::RwLock(key)) => vec![key],
    }
}

impl Client {
    /// A new cycle on the primitive: a permit, a read or a write, with
    /// retries until the acquire timeout, as the core's `Semaphore::acquire`,
    /// `RwLock::read` and `RwLock::write` make them.
    pub(super) fn begin_primitive(&mut self, ctx: &mut Ctx<'_>, prim: &Prim) {
        let sc = ctx.sc;
        let local = self.clock.local(ctx.now);
        let deadline = ctx
            .time
            .at(local.saturating_add(signed(sc.acquire_timeout)));
        ctx.process.want(ctx.now);
        // The manager's queued acquires: marks that live for its mark TTL,
        // giving way to other managers' marks.
        let queued =
            Queued::new(ctx.process.manager, ctx.process.mark_ttl, true).with_ticket(ctx.now);
        let settings = self.settings.clone();
        let machine = match prim {
            Prim::RwLock(key) => {
                let write = match sc.primitive {
                    Primitive::RwLock { write, .. } => write,
                    _ => 0.0,
                };
                // The lock is the first resource.
                self.mask = 1;
                if self.rng.chance(write) {
                    // `RwLock::write`: `Redlock::lock` on the key.
                    self.role = Role::Writer;
                    if Self::lined(ctx) {
                        // It waits in the manager's local writers until it
                        // acquired or gave up.
                        let process = &mut *ctx.process;
                        let seq = process.writers.arrive();
                        process.writers.start_waiting(seq);
                        let until = self.real_of(ctx, deadline);
                        ctx.process.writing.push(LocalWriter {
                            seq,
                            caller: self.id,
                            deadline: until,
                        });
                        self.writer_seq = Some(seq);
                        // `Redlock::lock`: it joins the process's local
                        // line for the key.
                        let (c, role) = (self.id, self.role);
                        ctx.line(|| format!("c{c} wants the {role:?} lock"));
                        return self.join_line(ctx, deadline);
                    }
                    Acquire::new(
                        settings,
                        key.clone(),
                        self.ttl,
                        Some(deadline),
                        Some(queued),
                    )
                } else {
                    // `RwLock::read`: a shared claim, every round queued.
                    self.role = Role::Reader;
                    if Self::lined(ctx) {
                        // First the writers of its process that came
                        // before it.
                        let seq = ctx.process.writers.arrive();
                        self.reader_seq = Some(seq);
                        if ctx.process.writers.reader_must_wait(seq) {
                            let c = self.id;
                            ctx.line(|| {
                                format!("c{c} wants the Reader lock, waits for local writers")
                            });
                            self.read_wait = Some(deadline);
                            return self.read_pause(ctx, deadline);
                        }
                    }
                    Acquire::read(settings, key.clone(), self.ttl, Some(deadline), queued)
                }
            }
            Prim::Semaphore(slots) => {
                // `Semaphore::acquire`: one permit, not queued. Until a
                // round names its slot, no key.
                self.mask = 0;
                self.role = Role::Permit;
                slots.acquire_one(settings, self.ttl, Some(deadline), None)
            }
        };
        let c = self.id;
        let role = self.role;
        ctx.line(|| format!("c{c} wants the {role:?} lock"));
        self.run_acquire(ctx, machine);
    }

    /// A reader waiting for its process's earlier writers pauses a retry
    /// pause drawn as `RwLock::read` draws it (the retry delay with the
    /// client's jitter, no later than its deadline, at least 1 ms).
    fn read_pause(&mut self, ctx: &mut Ctx<'_>, deadline: Instant) {
        ctx.stats.readers_waited += 1;
        let now = self.now_at(ctx);
        let pause = self.retry.pick(self.rng.next_u64());
        let pause = pause
            .min(deadline.saturating_duration_since(now))
            .max(Duration::from_millis(1));
        self.read_wait_seq = self.read_wait_seq.wrapping_add(1);
        let at = self.after(ctx, duration_ns(pause));
        self.step_at(ctx, at, Step::ReadWait(self.read_wait_seq), false);
    }

    /// The reader's pause is over: it looks at its process's writers
    /// again; gives up at its deadline, waits again while an earlier
    /// writer waits, or starts its read.
    pub(super) fn read_wait_due(&mut self, ctx: &mut Ctx<'_>, seq: u32) {
        if seq != self.read_wait_seq {
            return;
        }
        let (Some(deadline), Some(me)) = (self.read_wait, self.reader_seq) else {
            return;
        };
        let c = self.id;
        if !ctx.process.writers.reader_must_wait(me) {
            self.read_wait = None;
            let Some(Prim::RwLock(key)) = self.primitive.clone() else {
                return;
            };
            let queued =
                Queued::new(ctx.process.manager, ctx.process.mark_ttl, true).with_ticket(ctx.now);
            let machine =
                Acquire::read(self.settings.clone(), key, self.ttl, Some(deadline), queued);
            ctx.line(|| format!("c{c} reads after its local writers"));
            return self.run_acquire(ctx, machine);
        }
        if self.now_at(ctx) >= deadline {
            // As a timed-out acquire.
            self.read_wait = None;
            self.reader_seq = None;
            ctx.process.unwant();
            ctx.stats.gave_up += 1;
            ctx.line(|| format!("c{c} gives up waiting for local writers"));
            return self.think(ctx);
        }
        self.read_pause(ctx, deadline);
    }

    /// The key mask of `resources` when it is one of the semaphore's
    /// permits (`None` otherwise: a mutex's mask is chosen with the cycle,
    /// a read-write lock's is its one key).
    pub(super) fn slot_mask(&self, resources: &Resources) -> Option<u8> {
        let Some(Prim::Semaphore(slots)) = self.primitive.as_ref() else {
            return None;
        };
        1u8.checked_shl(slots.slot_of(resources)?)
    }

    /// The keys of the protected resource the cycle's lock reads (or, with
    /// `write`, writes): a read-write lock's readers read, its writers
    /// read and write; a semaphore's permit touches nothing (the checker
    /// counts holders instead).
    pub(super) fn access(&self, write: bool) -> u8 {
        match self.role {
            Role::Lock | Role::Writer => self.mask,
            Role::Reader if !write => self.mask,
            Role::Reader | Role::Permit => 0,
        }
    }
}
