//! A simulated lock node: the same semantics as [`MockNode`](crate::MockNode)
//! (SET-if-absent with expiry, compare-and-expire, compare-and-delete,
//! multi-key all-or-none, fencing counters that never expire), on its own
//! clock, with persistence modes, crashes and an asynchronous replica.

use std::collections::VecDeque;

use redlock_core::backend::TOKEN_LEN;

use super::clock::NodeClock;
use super::rng::SimRng;
use super::scenario::{Persistence, MAX_KEYS};
use crate::marks::Marks;

/// One live key: the token, the lock that set it (for the checker only),
/// and its expiry on the node's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Slot {
    pub(crate) token: [u8; TOKEN_LEN],
    pub(crate) lock: u32,
    pub(crate) expires: i64,
}

/// How many shared holders (readers of a read-write lock) one key of a
/// simulated node keeps at most; a read that finds them all taken is
/// refused. The scenarios have fewer clients than this, and a client has
/// one attempt under way at a time (late grants of its earlier ones
/// expire).
pub(crate) const MAX_READERS: usize = 8;

/// A node's data set: lock keys, their shared holders and fencing
/// counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Store {
    pub(crate) keys: [Option<Slot>; MAX_KEYS],
    /// Each key's shared holders ([`Claim::shared`](redlock_core::backend::Claim::shared)),
    /// as `MockNode` and the Redis reader sets keep them.
    pub(crate) readers: [[Option<Slot>; MAX_READERS]; MAX_KEYS],
    pub(crate) fences: [u64; MAX_KEYS],
}

fn keys_of(mask: u8) -> impl Iterator<Item = usize> {
    (0..MAX_KEYS).filter(move |k| mask & (1 << k) != 0)
}

impl Store {
    /// Drops the keys whose expiry the node's clock (`now`) has reached.
    pub(crate) fn purge(&mut self, now: i64) {
        for slot in self
            .keys
            .iter_mut()
            .chain(self.readers.iter_mut().flatten())
        {
            if slot.is_some_and(|s| s.expires <= now) {
                *slot = None;
            }
        }
    }

    /// Whether key `k` has a shared holder.
    fn read(&self, k: usize) -> bool {
        self.readers[k].iter().any(Option::is_some)
    }

    /// The place of the shared holder with `token` on key `k`.
    fn reader(&self, k: usize, token: &[u8; TOKEN_LEN]) -> Option<usize> {
        self.readers[k]
            .iter()
            .position(|s| s.is_some_and(|s| &s.token == token))
    }

    fn holds(&self, mask: u8, token: &[u8; TOKEN_LEN]) -> bool {
        keys_of(mask).all(|k| self.keys[k].is_some_and(|s| &s.token == token))
    }

    /// `SET key token NX PX ttl` on every key, all or none. `Some(fence)`
    /// when granted (the largest counter after incrementing, 0 without
    /// fencing), `None` when a key is held.
    pub(crate) fn acquire(
        &mut self,
        mask: u8,
        token: &[u8; TOKEN_LEN],
        lock: u32,
        expires: i64,
        fence: bool,
    ) -> Option<u64> {
        if keys_of(mask).any(|k| self.keys[k].is_some() || self.read(k)) {
            return None;
        }
        for k in keys_of(mask) {
            self.keys[k] = Some(Slot {
                token: *token,
                lock,
                expires,
            });
        }
        Some(self.bump(mask, fence))
    }

    /// A shared acquire (a read) of every key, all or none: granted while
    /// no key has an exclusive holder (`blind`, out of model: whatever the
    /// keys hold). `Some(fence)` as [`Store::acquire`].
    pub(crate) fn acquire_shared(
        &mut self,
        mask: u8,
        token: &[u8; TOKEN_LEN],
        lock: u32,
        expires: i64,
        fence: bool,
        blind: bool,
    ) -> Option<u64> {
        if !blind && keys_of(mask).any(|k| self.keys[k].is_some()) {
            return None;
        }
        let mut places = [0; MAX_KEYS];
        for k in keys_of(mask) {
            places[k] = self
                .reader(k, token)
                .or_else(|| self.readers[k].iter().position(Option::is_none))?;
        }
        for k in keys_of(mask) {
            self.readers[k][places[k]] = Some(Slot {
                token: *token,
                lock,
                expires,
            });
        }
        Some(self.bump(mask, fence))
    }

    /// With `fence`, increments the counters of `mask` and makes each the
    /// largest (as the backends do); returns it, 0 without.
    fn bump(&mut self, mask: u8, fence: bool) -> u64 {
        let mut top = 0;
        for k in keys_of(mask) {
            if fence {
                self.fences[k] += 1;
                top = top.max(self.fences[k]);
            }
        }
        if fence {
            // As the backends do: every key's counter ends at the largest.
            for k in keys_of(mask) {
                self.fences[k] = top;
            }
        }
        top
    }

    /// Resets the expiry of every key, only if every key holds `token`.
    pub(crate) fn extend(&mut self, mask: u8, token: &[u8; TOKEN_LEN], expires: i64) -> bool {
        if !self.holds(mask, token) {
            return false;
        }
        for k in keys_of(mask) {
            if let Some(slot) = &mut self.keys[k] {
                slot.expires = expires;
            }
        }
        true
    }

    /// Deletes the keys that hold `token`; whether all of them did.
    pub(crate) fn release(&mut self, mask: u8, token: &[u8; TOKEN_LEN]) -> bool {
        let held = self.holds(mask, token);
        for k in keys_of(mask) {
            if self.keys[k].is_some_and(|s| &s.token == token) {
                self.keys[k] = None;
            }
        }
        held
    }

    /// Raises the fencing counter of every key to at least `at_least`, only
    /// if every key holds `token` (the backends' `raise_fence`).
    pub(crate) fn raise_fence(&mut self, mask: u8, token: &[u8; TOKEN_LEN], at_least: u64) -> bool {
        if !self.holds(mask, token) {
            return false;
        }
        for k in keys_of(mask) {
            self.fences[k] = self.fences[k].max(at_least);
        }
        true
    }

    /// Whether every key of `mask` has the shared holder with `token`.
    fn holds_shared(&self, mask: u8, token: &[u8; TOKEN_LEN]) -> bool {
        keys_of(mask).all(|k| self.reader(k, token).is_some())
    }

    /// Resets the expiry of the shared holder with `token` on every key,
    /// only if every key has it.
    pub(crate) fn extend_shared(
        &mut self,
        mask: u8,
        token: &[u8; TOKEN_LEN],
        expires: i64,
    ) -> bool {
        if !self.holds_shared(mask, token) {
            return false;
        }
        for k in keys_of(mask) {
            for slot in self.readers[k].iter_mut().flatten() {
                if &slot.token == token {
                    slot.expires = expires;
                }
            }
        }
        true
    }

    /// Removes the shared holder with `token` from every key; whether
    /// every key had it.
    pub(crate) fn release_shared(&mut self, mask: u8, token: &[u8; TOKEN_LEN]) -> bool {
        let held = self.holds_shared(mask, token);
        for k in keys_of(mask) {
            if let Some(place) = self.reader(k, token) {
                self.readers[k][place] = None;
            }
        }
        held
    }

    /// [`Store::raise_fence`] for a shared holder.
    pub(crate) fn raise_fence_shared(
        &mut self,
        mask: u8,
        token: &[u8; TOKEN_LEN],
        at_least: u64,
    ) -> bool {
        if !self.holds_shared(mask, token) {
            return false;
        }
        for k in keys_of(mask) {
            self.fences[k] = self.fences[k].max(at_least);
        }
        true
    }

    /// Whether every key of `mask` is live (at node time `now`) and was set
    /// by lock `lock`, as its exclusive holder or one of its shared ones:
    /// the checker's view, by lock identity, not token bytes.
    pub(crate) fn has_lock(&self, mask: u8, lock: u32, now: i64) -> bool {
        let live = |s: &Option<Slot>| s.is_some_and(|s| s.lock == lock && s.expires > now);
        keys_of(mask).all(|k| live(&self.keys[k]) || self.readers[k].iter().any(live))
    }

    // A set of holders (out of model, [`SimNode::holder_set`]): the keys of
    // `set` are the set's places, so a holder is in the set whichever key
    // it asked for, and the set is full when every place is taken.

    /// The place of the holder with `token` in `set`.
    fn member(&self, set: u8, token: &[u8; TOKEN_LEN]) -> Option<usize> {
        keys_of(set).find(|&k| self.keys[k].is_some_and(|s| &s.token == token))
    }

    /// Adds the holder to `set` if it is not full (`SADD` under a size
    /// check); whether it is in the set now.
    pub(crate) fn join_set(
        &mut self,
        set: u8,
        token: &[u8; TOKEN_LEN],
        lock: u32,
        expires: i64,
    ) -> bool {
        if self.member(set, token).is_some() {
            return true;
        }
        let Some(free) = keys_of(set).find(|&k| self.keys[k].is_none()) else {
            return false;
        };
        self.keys[free] = Some(Slot {
            token: *token,
            lock,
            expires,
        });
        true
    }

    /// Resets the expiry of the holder with `token` in `set`, if it is in.
    pub(crate) fn extend_in_set(&mut self, set: u8, token: &[u8; TOKEN_LEN], expires: i64) -> bool {
        let Some(place) = self.member(set, token) else {
            return false;
        };
        if let Some(slot) = &mut self.keys[place] {
            slot.expires = expires;
        }
        true
    }

    /// Removes the holder with `token` from `set`; whether it was in.
    pub(crate) fn leave_set(&mut self, set: u8, token: &[u8; TOKEN_LEN]) -> bool {
        let Some(place) = self.member(set, token) else {
            return false;
        };
        self.keys[place] = None;
        true
    }

    /// Whether lock `lock` is live in `set` at node time `now`.
    pub(crate) fn in_set(&self, set: u8, lock: u32, now: i64) -> bool {
        keys_of(set).any(|k| self.keys[k].is_some_and(|s| s.lock == lock && s.expires > now))
    }
}

/// The asynchronous replica of a node: the replication stream arrives
/// after a lag, in order.
#[derive(Debug, Clone, Default)]
pub(crate) struct Replica {
    applied: Store,
    stream: VecDeque<(u64, Store)>,
    last_arrival: u64,
}

impl Replica {
    /// The replica's data set at real time `t`.
    fn catch_up(&mut self, t: u64) -> Store {
        while let Some(&(arrival, store)) = self.stream.front() {
            if arrival > t {
                break;
            }
            self.applied = store;
            self.stream.pop_front();
        }
        self.applied
    }
}

/// One simulated node.
#[derive(Debug, Clone)]
pub(crate) struct SimNode {
    pub(crate) clock: NodeClock,
    pub(crate) store: Store,
    pub(crate) persistence: Persistence,
    /// The last fsync (every-second persistence).
    pub(crate) disk: Store,
    pub(crate) up: bool,
    /// Bumped on each crash or failover; a restart event carries the epoch
    /// it belongs to.
    pub(crate) epoch: u32,
    /// Connections were reset at this time: requests sent earlier are lost.
    pub(crate) reset_at: u64,
    /// What the node held when it went down (the checker counts a down
    /// node with these keys).
    pub(crate) at_crash: Store,
    pub(crate) replica: Option<Replica>,
    pub(crate) forward_jumped: bool,
    pub(crate) rng: SimRng,
    /// The waiting marks of queued acquires, by key index, on the node's
    /// clock (as [`MockNode`](crate::MockNode) and the Redis scripts keep
    /// them: `crate::marks`). Fairness hints only: lost in a crash or a
    /// failover.
    pub(crate) marks: Marks<u8, i64>,
    /// Out of model: the keys of this mask are one set of holders, whose
    /// capacity is their number (a semaphore kept as holder sets); a
    /// request for any of them joins, extends or leaves the set. 0: none.
    pub(crate) holder_set: u8,
}

impl SimNode {
    pub(crate) fn new(
        clock: NodeClock,
        persistence: Persistence,
        replica: bool,
        rng: SimRng,
    ) -> Self {
        SimNode {
            clock,
            store: Store::default(),
            persistence,
            disk: Store::default(),
            up: true,
            epoch: 0,
            reset_at: 0,
            at_crash: Store::default(),
            replica: replica.then(Replica::default),
            forward_jumped: false,
            rng,
            marks: Marks::new(),
            holder_set: 0,
        }
    }

    /// Ships the current data set to the replica after a lag of `lag`.
    pub(crate) fn replicate(&mut self, now: u64, lag: u64) {
        if let Some(replica) = &mut self.replica {
            let arrival = (now + lag).max(replica.last_arrival);
            replica.last_arrival = arrival;
            replica.stream.push_back((arrival, self.store));
        }
    }

    /// A crash: the node goes down and will come back with what its
    /// persistence kept.
    pub(crate) fn crash(&mut self) {
        self.up = false;
        self.marks.clear();
        self.epoch += 1;
        self.at_crash = self.store;
        self.store = match self.persistence {
            Persistence::Always => self.store,
            Persistence::EverySecond => self.disk,
            Persistence::None => Store::default(),
        };
        if let Some(replica) = &mut self.replica {
            // The replica resyncs in full from the restarted master.
            replica.stream.clear();
        }
    }

    /// A failover at real time `now`: the master is gone and its replica,
    /// with whatever replication had delivered, takes over (after a short
    /// unavailability handled by the caller). A fresh replica follows.
    pub(crate) fn failover(&mut self, now: u64) {
        self.up = false;
        self.marks.clear();
        self.epoch += 1;
        self.at_crash = self.store;
        if let Some(replica) = &mut self.replica {
            self.store = replica.catch_up(now);
            *replica = Replica::default();
        }
    }

    /// The node comes back up at `now`.
    pub(crate) fn restart(&mut self, now: u64) {
        self.up = true;
        self.reset_at = now;
        if let Some(replica) = &mut self.replica {
            replica.applied = self.store;
            replica.last_arrival = now;
        }
    }

    /// Whether lock `lock` counts as present here at real time `t`: its keys
    /// are live, or the node is down and held them when it went down.
    pub(crate) fn counts_for(&self, mask: u8, lock: u32, t: u64) -> bool {
        let now = self.clock.local(t);
        let store = if self.up { &self.store } else { &self.at_crash };
        match self.set_of(mask) {
            Some(set) => store.in_set(set, lock, now),
            None => store.has_lock(mask, lock, now),
        }
    }

    /// The holder set a request on `mask` is about, if any.
    pub(crate) fn set_of(&self, mask: u8) -> Option<u8> {
        let set = self.holder_set;
        (set != 0 && mask != 0 && mask & !set == 0).then_some(set)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_semantics_match_the_mock() {
        let (a, b) = ([1u8; TOKEN_LEN], [2u8; TOKEN_LEN]);
        let mut s = Store::default();
        assert_eq!(s.acquire(0b01, &a, 0, 100, true), Some(1));
        // All or none: key 0 is held, so key 1 is not set either.
        assert_eq!(s.acquire(0b11, &b, 1, 100, true), None);
        assert!(s.keys[1].is_none());
        // Extend only where our token is, never creating a key.
        assert!(!s.extend(0b11, &a, 200));
        assert!(s.keys[1].is_none());
        assert!(s.extend(0b01, &a, 200));
        assert!(!s.release(0b01, &b));
        assert!(s.release(0b01, &a));
        // Fencing counters survive the key.
        assert_eq!(s.acquire(0b01, &b, 1, 100, true), Some(2));
        s.purge(100);
        assert!(s.keys[0].is_none());
        assert_eq!(s.fences[0], 2);
        // Raise only where every key holds the token; never lowers.
        assert!(!s.raise_fence(0b01, &a, 9));
        assert!(s.acquire(0b01, &a, 2, 300, true).is_some());
        assert!(!s.raise_fence(0b11, &a, 9));
        assert!(s.raise_fence(0b01, &a, 9));
        assert!(s.raise_fence(0b01, &a, 5));
        assert_eq!(s.fences, [9, 0, 0, 0]);
    }

    #[test]
    fn a_holder_set_admits_any_key_until_full() {
        let (a, b, c) = ([1u8; TOKEN_LEN], [2u8; TOKEN_LEN], [3u8; TOKEN_LEN]);
        let mut s = Store::default();
        // Both ask for the first place: both are in, a set of two is full.
        assert!(s.join_set(0b11, &a, 0, 100));
        assert!(s.join_set(0b11, &b, 1, 100));
        assert!(!s.join_set(0b11, &c, 2, 100));
        assert!(s.in_set(0b11, 1, 0) && !s.in_set(0b11, 2, 0));
        assert!(s.extend_in_set(0b11, &b, 200));
        assert!(s.leave_set(0b11, &a) && !s.leave_set(0b11, &a));
        assert!(s.join_set(0b11, &c, 2, 100));
        s.purge(100);
        assert!(s.in_set(0b11, 1, 150) && !s.in_set(0b11, 2, 50));
    }
}
