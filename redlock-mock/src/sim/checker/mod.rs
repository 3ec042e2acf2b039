//! The safety and liveness checker, the protected resource (fenced or
//! not), and the grant hook with its ready-made fencing check.

mod fence;

use std::time::Duration;

pub use fence::FenceRises;

use super::outcome::{Violation, ViolationKind};
use super::scenario::MAX_KEYS;
use super::trace::fmt_time;

/// One successful acquire, as handed to a [`GrantObserver`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grant<'a> {
    /// The client.
    pub client: usize,
    /// The lock (one per acquire attempt, numbered in the order created).
    pub lock: u32,
    /// When the lock was acquired (simulated real time): the decision of
    /// its acquire round, or of its fence-raising round.
    pub at: Duration,
    /// When the client's validity runs out (simulated real time).
    pub valid_until: Duration,
    /// The locked resources, as a bit mask (bit `k` for resource `k`).
    pub keys: u8,
    /// With [`Scenario::fencing`](crate::sim::Scenario::fencing): each granting
    /// node of the acquire round and the fencing counter it returned (the
    /// largest over the keys). Empty otherwise.
    pub fences: &'a [(usize, u64)],
    /// With [`Scenario::fencing`](crate::sim::Scenario::fencing): the lock's
    /// fencing token (by [`Scenario::fence_scheme`](crate::sim::Scenario::fence_scheme)).
    pub token: Option<u64>,
}

/// A hook called on every successful acquire (in the order of acquisition),
/// for checks the built-in checker does not make. An `Err` becomes a
/// [`ViolationKind::Observer`] violation.
///
/// # Examples
///
/// ```
/// use redlock_mock::sim::{run_observed, FenceRises, Scenario};
/// // The built-in token check, run a second time as an observer.
/// let mut check = FenceRises::default();
/// let outcome = run_observed(&Scenario::fencing(), 3, &mut check);
/// assert!(outcome.is_clean() && outcome.stats.acquired > 0);
/// ```
pub trait GrantObserver {
    /// Called when `grant` is decided.
    ///
    /// # Errors
    ///
    /// A description of what is wrong with the grant.
    fn on_grant(&mut self, grant: &Grant<'_>) -> Result<(), String>;
}

/// What the holders of the run's resources promise each other, as the
/// checker checks it when a belief starts (the most holders at once are
/// reached at some start).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rule {
    /// Each resource is a mutex: no two locks hold it at once
    /// ([`ViolationKind::MutualExclusion`]).
    Mutex,
    /// The resources of `group` are the permits of one semaphore: at most
    /// `permits` locks hold one of them at once, whichever
    /// ([`ViolationKind::TooManyHolders`]).
    Semaphore { group: u8, permits: usize },
    /// The resources of `group` are one read-write lock: a writer holds
    /// with nobody else ([`ViolationKind::WriterShared`]); readers hold
    /// together (their number is counted, not limited).
    RwLock { group: u8 },
}

/// What a lock is for, as the client that holds it sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// A mutex on its resources.
    Lock,
    /// A semaphore's permit.
    Permit,
    /// A read-write lock's read.
    Reader,
    /// A read-write lock's write.
    Writer,
}

/// A belief, held by one lock, that it holds one resource from `start`
/// until `end` (real times).
#[derive(Debug, Clone, Copy)]
struct Hold {
    key: u8,
    lock: u32,
    client: u8,
    role: Role,
    start: u64,
    end: u64,
}

impl Hold {
    fn key_in(&self, group: u8) -> bool {
        group & (1 << self.key) != 0
    }
}

/// The protected resource (one register per key): each write must be based
/// on the latest version, as Jepsen's lock-guarded set. A fenced register
/// also keeps the highest fencing token any access carried, and by which
/// lock.
#[derive(Debug, Clone, Copy, Default)]
struct Register {
    version: u64,
    writer: u32,
    written_at: u64,
    token: u64,
    token_lock: u32,
}

/// Collects violations; the world calls it at each event that matters.
#[derive(Debug)]
pub(crate) struct Checker {
    rule: Rule,
    holds: Vec<Hold>,
    registers: [Register; MAX_KEYS],
    /// The resource rejects lower fencing tokens.
    fenced: bool,
    /// Tokens must rise from holder to holder.
    pub(crate) tokens: FenceRises,
    pub(crate) violations: Vec<Violation>,
    pub(crate) total: u64,
    pub(crate) progress_after: Option<u64>,
    pub(crate) progressed: bool,
    /// The most holders of a semaphore's permits (or a read-write lock's
    /// readers) seen at once.
    pub(crate) most_holders: u64,
}

const KEEP: usize = 16;

impl Checker {
    pub(crate) fn new(fenced: bool, rule: Rule) -> Self {
        Checker {
            rule,
            holds: Vec::with_capacity(8),
            registers: [Register::default(); MAX_KEYS],
            fenced,
            tokens: FenceRises::default(),
            violations: Vec::new(),
            total: 0,
            progress_after: None,
            progressed: false,
            most_holders: 0,
        }
    }

    pub(crate) fn violation(
        &mut self,
        kind: ViolationKind,
        at: u64,
        detail: impl FnOnce() -> String,
    ) {
        self.total += 1;
        if self.violations.len() < KEEP {
            self.violations.push(Violation {
                kind,
                at: Duration::from_nanos(at),
                detail: detail(),
            });
        }
    }

    /// Lock `lock` of `client` believes, from `now` until `end`, that it
    /// holds `mask` as `role` (after an acquire or an extend).
    pub(crate) fn held(
        &mut self,
        (lock, client, role): (u32, u8, Role),
        mask: u8,
        now: u64,
        end: u64,
    ) {
        self.holds.retain(|h| h.end > now || h.lock == lock);
        match self.rule {
            Rule::Mutex => self.exclusive(lock, client, mask, now),
            Rule::Semaphore { group, permits } if mask & group != 0 => {
                self.at_most(lock, client, now, |h| h.key_in(group), permits);
            }
            Rule::RwLock { group } if mask & group != 0 => {
                self.shared(lock, client, role, group, now);
                if role == Role::Reader {
                    let reader = |h: &Hold| h.key_in(group) && h.role == Role::Reader;
                    self.at_most(lock, client, now, reader, usize::MAX);
                }
            }
            Rule::Semaphore { .. } | Rule::RwLock { .. } => {}
        }
        for key in 0..MAX_KEYS as u8 {
            if mask & (1 << key) == 0 {
                continue;
            }
            match self
                .holds
                .iter_mut()
                .find(|h| h.key == key && h.lock == lock)
            {
                Some(h) => h.end = end,
                None => self.holds.push(Hold {
                    key,
                    lock,
                    client,
                    role,
                    start: now,
                    end,
                }),
            }
        }
    }

    /// The other locks that hold, at `now`, a resource that `of` picks:
    /// one hold of each (the first).
    fn others(&self, lock: u32, now: u64, of: impl Fn(&Hold) -> bool) -> Vec<Hold> {
        let mut found: Vec<Hold> = Vec::new();
        for h in &self.holds {
            if h.lock != lock && h.end > now && of(h) && found.iter().all(|f| f.lock != h.lock) {
                found.push(*h);
            }
        }
        found
    }

    /// A semaphore's promise (or a read-write lock's on its readers): with
    /// lock `lock`, at most `most` locks hold what `of` picks at `now`.
    fn at_most(
        &mut self,
        lock: u32,
        client: u8,
        now: u64,
        of: impl Fn(&Hold) -> bool,
        most: usize,
    ) {
        let others = self.others(lock, now, of);
        let holders = u64::try_from(others.len() + 1).unwrap_or(u64::MAX);
        self.most_holders = self.most_holders.max(holders);
        if others.len() < most {
            return;
        }
        self.violation(ViolationKind::TooManyHolders, now, || {
            let list: Vec<String> = others
                .iter()
                .map(|h| {
                    format!(
                        "c{} L{} (r{} from {} until {})",
                        h.client,
                        h.lock,
                        h.key,
                        fmt_time(h.start),
                        fmt_time(h.end)
                    )
                })
                .collect();
            format!(
                "c{client} L{lock} holds from {} while {} others hold, at most {most} at once: {}",
                fmt_time(now),
                others.len(),
                list.join(", ")
            )
        });
    }

    /// A read-write lock's promise on writers: lock `lock` of `role`
    /// holds with no writer, and as a writer with nobody.
    fn shared(&mut self, lock: u32, client: u8, role: Role, group: u8, now: u64) {
        let writer = role == Role::Writer;
        let others = self.others(lock, now, |h| {
            h.key_in(group) && (writer || h.role == Role::Writer)
        });
        let Some(other) = others.first().copied() else {
            return;
        };
        self.violation(ViolationKind::WriterShared, now, || {
            format!(
                "c{client} L{lock} holds as {role:?} (from {}) while c{} L{} holds r{} as {:?} from {} until {}",
                fmt_time(now),
                other.client,
                other.lock,
                other.key,
                other.role,
                fmt_time(other.start),
                fmt_time(other.end)
            )
        });
    }

    /// Mutual exclusion per resource: no other lock holds a key of `mask`
    /// at `now`.
    fn exclusive(&mut self, lock: u32, client: u8, mask: u8, now: u64) {
        for key in 0..MAX_KEYS as u8 {
            if mask & (1 << key) == 0 {
                continue;
            }
            let clash = self
                .holds
                .iter()
                .find(|h| h.key == key && h.lock != lock && h.end > now)
                .copied();
            if let Some(other) = clash {
                self.violation(ViolationKind::MutualExclusion, now, || {
                    format!(
                        "c{client} L{lock} holds r{key} from {} while c{} L{} holds it from {} until {}",
                        fmt_time(now),
                        other.client,
                        other.lock,
                        fmt_time(other.start),
                        fmt_time(other.end)
                    )
                });
            }
        }
    }

    /// Lock `lock` stops believing it holds anything at `now` (release,
    /// crash, a loss it learned of), or earlier if it already did.
    pub(crate) fn end(&mut self, lock: u32, now: u64) {
        for h in self.holds.iter_mut().filter(|h| h.lock == lock) {
            h.end = h.end.min(now);
        }
    }

    /// The fenced resource's gate for an access to `mask` with `token`:
    /// rejected (a description) when some register has seen a higher token;
    /// otherwise every register of `mask` records the token. Unfenced
    /// resources and accesses without a token always pass.
    fn admit(&mut self, lock: u32, mask: u8, token: Option<u64>) -> Result<(), String> {
        let Some(token) = token.filter(|_| self.fenced) else {
            return Ok(());
        };
        let keys = (0..MAX_KEYS).filter(|k| mask & (1 << k) != 0);
        if let Some(key) = keys.clone().find(|&k| self.registers[k].token > token) {
            let reg = self.registers[key];
            return Err(format!(
                "r{key} rejects L{lock}'s token {token}: it has seen {} from L{}",
                reg.token, reg.token_lock
            ));
        }
        for key in keys {
            let reg = &mut self.registers[key];
            if token > reg.token {
                reg.token = token;
                reg.token_lock = lock;
            }
        }
        Ok(())
    }

    /// Reads the current version of every resource in `mask` into `seen`,
    /// unless the fenced resource rejects `token`.
    pub(crate) fn read(
        &mut self,
        lock: u32,
        mask: u8,
        token: Option<u64>,
        seen: &mut [u64; MAX_KEYS],
    ) -> Result<(), String> {
        self.admit(lock, mask, token)?;
        for (key, slot) in seen.iter_mut().enumerate() {
            if mask & (1 << key) != 0 {
                *slot = self.registers[key].version;
            }
        }
        Ok(())
    }

    /// Writes every resource in `mask`, based on the versions read earlier,
    /// unless the fenced resource rejects `token` (nothing is written then).
    pub(crate) fn write(
        &mut self,
        (lock, client): (u32, u8),
        mask: u8,
        token: Option<u64>,
        seen: &[u64; MAX_KEYS],
        now: u64,
    ) -> Result<(), String> {
        self.admit(lock, mask, token)?;
        for (key, &based_on) in seen.iter().enumerate() {
            if mask & (1 << key) == 0 {
                continue;
            }
            let reg = self.registers[key];
            if reg.version != based_on {
                self.violation(ViolationKind::LostUpdate, now, || {
                    format!(
                        "c{client} L{lock} writes r{key} based on version {based_on} but L{} wrote version {} at {}",
                        reg.writer,
                        reg.version,
                        fmt_time(reg.written_at)
                    )
                });
            }
            let reg = &mut self.registers[key];
            reg.version = reg.version.max(based_on) + 1;
            reg.writer = lock;
            reg.written_at = now;
        }
        Ok(())
    }
}
