//! A cycle on a semaphore or a read-write lock
//! ([`Scenario::primitive`](crate::sim::Scenario::primitive)): the
//! acquisition is the one the core makes, built by the core's own
//! [`Slots`] (the keys `name:permit:i` and `name:read:i`, the `one_of`
//! sweep over them, queued rounds for reads, every slot at once for a
//! write). What it won names its slot, and so the keys the nodes and the
//! checker see.

use redlock_core::backend::Queued;
use redlock_core::engine::{Acquire, Slots};
use redlock_core::Resources;

use super::Client;
use crate::sim::checker::Role;
use crate::sim::clock::signed;
use crate::sim::ctx::Ctx;
use crate::sim::scenario::{Primitive, Scenario, MAX_KEYS};

/// The simulated semaphore's name.
const SEMAPHORE: &str = "sem";
/// The simulated read-write lock's name.
const RWLOCK: &str = "rw";

/// The slots client `id` knows for the scenario's primitive: the
/// semaphore's `keys` permits, or the read-write lock's `keys` reader
/// slots (one fewer in odd-numbered processes when they are mismatched).
pub(super) fn slots(id: u8, sc: &Scenario) -> Option<Slots> {
    let keys = u32::try_from(sc.keys.min(MAX_KEYS)).ok()?;
    match sc.primitive {
        Primitive::Mutex => None,
        Primitive::Semaphore { .. } => Slots::permits(SEMAPHORE, keys).ok(),
        Primitive::RwLock { mismatched, .. } => {
            let process = usize::from(id) / sc.callers_per_process.max(1);
            let fewer = mismatched && process % 2 == 1;
            Slots::readers(RWLOCK, keys - u32::from(fewer)).ok()
        }
    }
}

/// The mask of the first `count` keys.
fn first_keys(count: u32) -> u8 {
    (0..count.min(MAX_KEYS as u32)).fold(0, |mask, k| mask | (1 << k))
}

impl Client {
    /// A new cycle on the primitive: a permit, a read or a write, with
    /// retries until the acquire timeout, as the core's `Semaphore::acquire`,
    /// `RwLock::read` and `RwLock::write` make them.
    pub(super) fn begin_primitive(&mut self, ctx: &mut Ctx<'_>, slots: &Slots) {
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
        // Until a round names its slot, no key.
        self.mask = 0;
        let machine = match sc.primitive {
            Primitive::RwLock { write, .. } if self.rng.chance(write) => {
                // `RwLock::write`: `Redlock::lock` on every slot at once.
                self.role = Role::Writer;
                Acquire::new(
                    settings,
                    slots.all().clone(),
                    self.ttl,
                    Some(deadline),
                    Some(queued),
                )
            }
            Primitive::RwLock { .. } => {
                // `RwLock::read`: one slot, every round queued.
                self.role = Role::Reader;
                slots.acquire_one(settings, self.ttl, Some(deadline), Some(queued))
            }
            _ => {
                // `Semaphore::acquire`: one permit, not queued.
                self.role = Role::Permit;
                slots.acquire_one(settings, self.ttl, Some(deadline), None)
            }
        };
        let c = self.id;
        let role = self.role;
        ctx.line(|| format!("c{c} wants the {role:?} lock"));
        self.run_acquire(ctx, machine);
    }

    /// The key mask of `resources`, one of the primitive's slots or all of
    /// them (`None` for mutexes: their mask is chosen with the cycle).
    pub(super) fn slot_mask(&self, resources: &Resources) -> Option<u8> {
        let slots = self.slots.as_ref()?;
        match slots.slot_of(resources) {
            Some(slot) => 1u8.checked_shl(slot),
            None => (resources == slots.all()).then(|| first_keys(slots.count())),
        }
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
