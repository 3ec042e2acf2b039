//! A simulated lock node: the reference model of a Redis master
//! ([`redlock_core::model::Node`], the same one [`MockNode`](crate::MockNode)
//! runs and the differential tests hold equal to the Redis scripts) on its
//! own clock, with persistence modes, crashes and an asynchronous replica.
//!
//! Each request the world delivers becomes the very command the Redis
//! backend sends for it ([`Command::of`] over the lock's [`Claim`]: its
//! keys by name, its token, shared or queued), run at the node's local
//! time in milliseconds. Helper keys (fencing counters, waiting lines,
//! reader sets) are keys of the same key space, so a crash, a failover or
//! persistence keeps or loses them with the locks, as on Redis. The node
//! keeps nothing about locks beyond its key space: the checker finds a
//! lock by its token ([`SimNode::counts_for`]).
//!
//! Two rules are deliberately **out of model**, for scenarios that show the
//! checker catches a wrong design ([`Rules`]): holder sets (a semaphore
//! whose permits are one set of holders) and blind readers (a read that
//! ignores a writer).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use redlock_core::backend::{AcquireOutcome, Claim, KeyView, Request, Response, Token, TOKEN_LEN};
use redlock_core::keys::{FENCE_SUFFIX, READERS_SUFFIX, WAIT_SUFFIX};
use redlock_core::model::{
    inspection, Command, Entry, Node, Outcome, Published, Reply, Value, READERS_MARKER,
};
use redlock_core::{Resources, Ttl};

use super::clock::NodeClock;
use super::event::{Answer, Op};
use super::rng::SimRng;
use super::scenario::{Persistence, MAX_KEYS};

/// The release channels' prefix of the simulated nodes' commands (they
/// publish nothing anyone listens to: the simulated clients are not told).
const CHANNEL: &[u8] = b"redlock-sim";

/// The nodes' key names: key index `k` of a key mask is always the same
/// resource, the one the simulated clients' claims name (`r0`.. for
/// mutexes, the semaphore's permits, the read-write lock's key).
#[derive(Debug)]
pub(crate) struct Names {
    /// Each key index's lock key and its reader set's key.
    keys: Vec<(Vec<u8>, Vec<u8>)>,
    /// The resources of each key mask (`None` for 0).
    by_mask: Vec<Option<Resources>>,
}

impl Names {
    /// The resource of each key index `0..`, in order (one key each).
    pub(crate) fn new(each: &[Resources]) -> Self {
        let keys = each
            .iter()
            .map(|r| {
                let name = r.keys().concat();
                let readers = format!("{name}{READERS_SUFFIX}");
                (name.into_bytes(), readers.into_bytes())
            })
            .collect();
        let by_mask = (0..1usize << MAX_KEYS)
            .map(|mask| {
                let mut named = keys_of(mask as u8).filter_map(|k| each.get(k));
                match (named.next(), named.next()) {
                    (Some(one), None) => Some(one.clone()),
                    (Some(first), Some(second)) => {
                        let rest = named.flat_map(|r| r.keys().iter().cloned());
                        let keys = [first, second]
                            .into_iter()
                            .flat_map(|r| r.keys().iter().cloned());
                        Resources::new(keys.chain(rest)).ok()
                    }
                    _ => None,
                }
            })
            .collect();
        Names { keys, by_mask }
    }

    /// The lock key of index `k`.
    pub(crate) fn key(&self, k: usize) -> &[u8] {
        self.keys.get(k).map_or(&[], |(key, _)| key)
    }

    fn readers(&self, k: usize) -> &[u8] {
        self.keys.get(k).map_or(&[], |(_, r)| r)
    }

    fn resources(&self, mask: u8) -> Option<&Resources> {
        self.by_mask.get(mask as usize)?.as_ref()
    }
}

fn keys_of(mask: u8) -> impl Iterator<Item = usize> {
    (0..MAX_KEYS).filter(move |k| mask & (1 << k) != 0)
}

/// How a node runs requests besides the model: the scenario's fencing, and
/// the out-of-model rules.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Rules {
    /// Every acquire bumps the fencing counters (the scenario's
    /// `fencing`), whether or not the client asked.
    pub(crate) fencing: bool,
    /// Out of model: the keys of this mask are one set of holders whose
    /// capacity is their number (a semaphore kept as holder sets): a
    /// request for any of them joins, extends or leaves the set, which is
    /// kept in the model's keys under the permits' names (each place holds
    /// a member's token, with its expiry). 0: none.
    pub(crate) holder_set: u8,
    /// Out of model: a reader's command sees a writer's key as the
    /// readers' marker (a read that ignores the writer); the writer's key
    /// is put back as it was after the command.
    pub(crate) blind: bool,
}

impl Rules {
    /// The holder set a request on `mask` is about, if any.
    fn set_of(self, mask: u8) -> Option<u8> {
        let set = self.holder_set;
        (set != 0 && mask != 0 && mask & !set == 0).then_some(set)
    }
}

/// What the world delivers to a node: the lock's claim (keys, token,
/// shared, queued when the request is) and the request.
#[derive(Debug, Clone)]
struct Delivery {
    claim: Claim,
    /// The claim's keys as a key mask.
    mask: u8,
    op: Op,
}

/// A node's time in milliseconds (the model's), from nanoseconds.
fn ms(local_ns: i64) -> i64 {
    local_ns.div_euclid(1_000_000)
}

fn ttl_of(ttl_ns: u64) -> Option<Ttl> {
    Ttl::new(Duration::from_nanos(ttl_ns)).ok()
}

/// Runs `d` on `node` at `now` (ms): the model's command for it, or an
/// out-of-model rule.
fn execute(
    node: &mut Node,
    now: i64,
    names: &Names,
    rules: Rules,
    d: &Delivery,
    published: &mut Vec<Published>,
    blind: &mut Blind,
) -> Answer {
    // Expired keys leave at once, as the simulated nodes always let them
    // (Redis expires them in the background; the model keeps an expired
    // key, unseen, until it is touched, and a snapshot or a replica taken
    // with it would see it again on a clock that reads earlier).
    node.keys.purge(now);
    let token = d.claim.value();
    let mask = d.mask;
    if let Some(set) = rules.set_of(mask) {
        if let Some(answer) = holder_set(node, now, names, set, token, d.op) {
            return answer;
        }
    }
    let claim = &d.claim;
    let request = match d.op {
        Op::Acquire { ttl_ns, fence, .. } => {
            let Some(ttl) = ttl_of(ttl_ns) else {
                return Answer::Failed;
            };
            let fence = fence || rules.fencing;
            Request::Acquire { claim, ttl, fence }
        }
        Op::Extend { ttl_ns } => {
            let Some(ttl) = ttl_of(ttl_ns) else {
                return Answer::Failed;
            };
            Request::Extend { claim, ttl }
        }
        Op::Release(_) => Request::Release { claim },
        Op::RaiseFence(at_least) => Request::RaiseFence { claim, at_least },
    };
    let Some(command) = Command::of(&request, CHANNEL) else {
        return Answer::Failed;
    };
    let reply = if rules.blind && claim.is_shared() {
        apply_blind(node, now, names, mask, &command, published, blind)
    } else {
        node.apply(now, &command, published)
    };
    published.clear();
    match command.outcome(reply) {
        Ok(Outcome::Done(Response::Acquire(AcquireOutcome::Granted { fence }))) => {
            Answer::Granted(fence.unwrap_or(0))
        }
        Ok(Outcome::Done(Response::Acquire(_))) => Answer::Refused,
        Ok(Outcome::Done(Response::Held(held)) | Outcome::Released { held, .. }) => {
            if held {
                Answer::Granted(0)
            } else {
                Answer::Refused
            }
        }
        // An error reply (a counter at its limit, a helper key of another
        // shape): the request failed.
        _ => Answer::Failed,
    }
}

/// What a blind reader's command hides, kept between commands so that
/// hiding allocates nothing.
#[derive(Debug, Clone, Default)]
pub(crate) struct Blind {
    /// Each hidden writer's key index, value and expiry.
    hidden: Vec<(usize, Vec<u8>, Option<i64>)>,
    /// A buffer for the next marker (the last one put back).
    spare: Vec<u8>,
}

/// [`Node::apply`] for a blind reader: out of model, it sees a writer's key
/// as the readers' marker (the key is given back afterwards).
fn apply_blind(
    node: &mut Node,
    now: i64,
    names: &Names,
    mask: u8,
    command: &Command<'_>,
    published: &mut Vec<Published>,
    blind: &mut Blind,
) -> Reply {
    let Blind { hidden, spare } = blind;
    hidden.clear();
    for k in keys_of(mask) {
        // The marker takes the key's expiry: no expiry changes, and the
        // next purge still knows the earliest one.
        if let Some((Value::Str(v), expires_at)) = node.keys.value_mut(now, names.key(k)) {
            if v != READERS_MARKER {
                let mut marker = std::mem::take(spare);
                marker.clear();
                marker.extend_from_slice(READERS_MARKER);
                hidden.push((k, std::mem::replace(v, marker), expires_at));
            }
        }
    }
    let reply = node.apply(now, command, published);
    for (k, value, expires_at) in hidden.drain(..) {
        let entry = Entry {
            value: Value::Str(value),
            expires_at,
        };
        if let Some(Entry {
            value: Value::Str(old),
            ..
        }) = node.keys.put(names.key(k), entry)
        {
            *spare = old;
        }
    }
    reply
}

/// Out of model: the holder-set rule ([`Rules::holder_set`]) for
/// acquire, extend and release (`None`: anything else, which the model
/// runs).
fn holder_set(
    node: &mut Node,
    now: i64,
    names: &Names,
    set: u8,
    token: &[u8],
    op: Op,
) -> Option<Answer> {
    let ks = &mut node.keys;
    let holds = |ks: &redlock_core::model::Keyspace, k: usize| matches!(ks.entry(now, names.key(k)), Some(Entry { value: Value::Str(v), .. }) if v == token);
    let member = keys_of(set).find(|&k| holds(ks, k));
    let answer = |yes: bool| {
        if yes {
            Answer::Granted(0)
        } else {
            Answer::Refused
        }
    };
    Some(match op {
        Op::Acquire { ttl_ns, .. } => {
            if member.is_some() {
                return Some(Answer::Granted(0));
            }
            let free = keys_of(set).find(|&k| ks.entry(now, names.key(k)).is_none());
            let ttl = ttl_of(ttl_ns).map_or(0, Ttl::as_millis);
            if let Some(k) = free {
                ks.set(now, names.key(k), token, Some(ttl as i64));
            }
            answer(free.is_some())
        }
        Op::Extend { ttl_ns } => {
            if let Some(k) = member {
                let ttl = ttl_of(ttl_ns).map_or(0, Ttl::as_millis);
                ks.pexpire(now, names.key(k), ttl as i64);
            }
            answer(member.is_some())
        }
        Op::Release(_) => {
            if let Some(k) = member {
                ks.del(now, names.key(k));
            }
            answer(member.is_some())
        }
        Op::RaiseFence(_) => return None,
    })
}

/// One thing the replication stream carries: a request the master ran, at
/// its local time, or an eviction of every lock key.
#[derive(Debug, Clone)]
enum Shipped {
    Ran(Delivery),
    Flush,
}

/// The asynchronous replica of a node: the master's commands arrive after
/// a lag, in order, and run on the replica's copy of the model at the
/// master's time.
#[derive(Debug, Clone, Default)]
pub(crate) struct Replica {
    applied: Node,
    /// (arrival, the master's time in ms, what it did).
    stream: VecDeque<(u64, i64, Shipped)>,
    last_arrival: u64,
}

impl Replica {
    /// Runs what has arrived by real time `t`.
    fn catch_up(&mut self, t: u64, names: &Names, rules: Rules) {
        let mut published = Vec::new();
        let mut blind = Blind::default();
        while let Some(&(arrival, now, _)) = self.stream.front() {
            if arrival > t {
                break;
            }
            if let Some((_, _, shipped)) = self.stream.pop_front() {
                match shipped {
                    Shipped::Ran(d) => {
                        let applied = &mut self.applied;
                        execute(applied, now, names, rules, &d, &mut published, &mut blind);
                    }
                    Shipped::Flush => evict_lock_keys(&mut self.applied, now),
                }
            }
        }
    }

    fn ship(&mut self, now: u64, lag: u64, at_ms: i64, what: Shipped) {
        let arrival = (now + lag).max(self.last_arrival);
        self.last_arrival = arrival;
        self.stream.push_back((arrival, at_ms, what));
    }
}

/// Whether `key` is a fencing counter or a waiting line or place: what an
/// eviction of the lock keys leaves.
fn is_kept_helper(key: &[u8]) -> bool {
    let place = [WAIT_SUFFIX.as_bytes(), b":"].concat();
    key.ends_with(FENCE_SUFFIX.as_bytes())
        || key.ends_with(WAIT_SUFFIX.as_bytes())
        || key.windows(place.len()).any(|w| w == place.as_slice())
}

/// Deletes every lock key and reader set (fencing counters and waiting
/// lines stay).
fn evict_lock_keys(node: &mut Node, now: i64) {
    let doomed: Vec<Vec<u8>> = node
        .keys
        .live(now)
        .filter(|(key, _)| !is_kept_helper(key))
        .map(|(key, _)| key.to_vec())
        .collect();
    for key in doomed {
        node.keys.del(now, &key);
    }
}

/// One simulated node.
#[derive(Debug, Clone)]
pub(crate) struct SimNode {
    pub(crate) clock: NodeClock,
    /// Its key space and what its commands do: the model of a Redis master.
    pub(crate) model: Node,
    pub(crate) persistence: Persistence,
    /// The last fsync (every-second persistence).
    pub(crate) disk: Node,
    pub(crate) up: bool,
    /// Bumped on each crash or failover; a restart event carries the epoch
    /// it belongs to.
    pub(crate) epoch: u32,
    /// Connections were reset at this time: requests sent earlier are lost.
    pub(crate) reset_at: u64,
    /// What the node held when it went down (the checker counts a down
    /// node with these keys).
    pub(crate) at_crash: Node,
    pub(crate) replica: Option<Replica>,
    pub(crate) forward_jumped: bool,
    pub(crate) rng: SimRng,
    pub(crate) rules: Rules,
    names: Arc<Names>,
    published: Vec<Published>,
    blind: Blind,
}

impl SimNode {
    pub(crate) fn new(
        clock: NodeClock,
        persistence: Persistence,
        replica: bool,
        rng: SimRng,
        names: Arc<Names>,
        rules: Rules,
    ) -> Self {
        SimNode {
            clock,
            model: Node::new(),
            persistence,
            disk: Node::new(),
            up: true,
            epoch: 0,
            reset_at: 0,
            at_crash: Node::new(),
            replica: replica.then(Replica::default),
            forward_jumped: false,
            rng,
            rules,
            names,
            published: Vec::new(),
            blind: Blind::default(),
        }
    }

    /// The node's local time in milliseconds at real time `t`.
    fn now_ms(&self, t: u64) -> i64 {
        ms(self.clock.local(t))
    }

    /// Runs request `op` of the lock with `token`, keys `mask` (`shared`:
    /// a read) at real time `now`; with a replica, ships it there to arrive
    /// `lag` later.
    pub(crate) fn deliver(
        &mut self,
        now: u64,
        token: &[u8; TOKEN_LEN],
        mask: u8,
        shared: bool,
        op: Op,
        lag: u64,
    ) -> Answer {
        let Some(resources) = self.names.resources(mask) else {
            return Answer::Failed;
        };
        let mut claim = Claim::new(resources.clone(), Token::from_bytes(*token));
        if shared {
            claim = claim.shared();
        }
        let queued = match op {
            Op::Acquire { queued, .. } | Op::Release(queued) => queued,
            Op::Extend { .. } | Op::RaiseFence(_) => None,
        };
        if let Some(q) = queued {
            claim = claim.queued(q);
        }
        let d = Delivery { claim, mask, op };
        let at = self.now_ms(now);
        let answer = execute(
            &mut self.model,
            at,
            &self.names,
            self.rules,
            &d,
            &mut self.published,
            &mut self.blind,
        );
        if let Some(replica) = &mut self.replica {
            replica.ship(now, lag, at, Shipped::Ran(d));
        }
        answer
    }

    /// What [`Command::Inspect`] of key index `k` reads at real time `now`
    /// (`None` for a key name that is not UTF-8, which no scenario has).
    pub(crate) fn inspect(&mut self, now: u64, k: usize) -> Option<KeyView> {
        let at = self.now_ms(now);
        let key = std::str::from_utf8(self.names.key(k)).ok()?;
        inspection(self.model.apply(
            at,
            &Command::Inspect { key, watcher: None },
            &mut Vec::new(),
        ))
    }

    /// Evicts every lock key at real time `now` (fencing counters and
    /// waiting lines stay); the replica follows.
    pub(crate) fn flush(&mut self, now: u64) {
        let at = self.now_ms(now);
        evict_lock_keys(&mut self.model, at);
        if let Some(replica) = &mut self.replica {
            replica.ship(now, 0, at, Shipped::Flush);
        }
    }

    /// A crash: the node goes down and will come back with what its
    /// persistence kept.
    pub(crate) fn crash(&mut self) {
        self.up = false;
        self.epoch += 1;
        self.at_crash = self.model.clone();
        match self.persistence {
            Persistence::Always => {}
            Persistence::EverySecond => self.model = self.disk.clone(),
            Persistence::None => self.model = Node::new(),
        }
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
        self.epoch += 1;
        self.at_crash = self.model.clone();
        if let Some(replica) = &mut self.replica {
            replica.catch_up(now, &self.names, self.rules);
            self.model = std::mem::take(&mut replica.applied);
            *replica = Replica::default();
        }
    }

    /// The node comes back up at `now`.
    pub(crate) fn restart(&mut self, now: u64) {
        self.up = true;
        self.reset_at = now;
        if let Some(replica) = &mut self.replica {
            replica.applied = self.model.clone();
            replica.last_arrival = now;
        }
    }

    /// Whether the lock with `token` on keys `mask` counts as present here
    /// at real time `t`: every key holds the token, as its exclusive
    /// holder's value or a live member of its reader set (in a holder set:
    /// one place holds it), or the node is down and held them when it went
    /// down.
    pub(crate) fn counts_for(&self, mask: u8, token: &[u8; TOKEN_LEN], t: u64) -> bool {
        let now = self.now_ms(t);
        let node = if self.up { &self.model } else { &self.at_crash };
        let names = &self.names;
        let holds = |k: usize| matches!(node.keys.entry(now, names.key(k)), Some(Entry { value: Value::Str(v), .. }) if v == token);
        if let Some(set) = self.rules.set_of(mask) {
            return keys_of(set).any(holds);
        }
        let reads = |k: usize| match node.keys.entry(now, names.readers(k)) {
            Some(Entry {
                value: Value::Zset(members),
                ..
            }) => members
                .iter()
                .any(|(score, m)| m == token && *score > now as f64),
            _ => false,
        };
        keys_of(mask).all(|k| holds(k) || reads(k))
    }

    /// The tokens the node holds at real time `t` (up or not), with the key
    /// that holds each: lock keys' values and live readers.
    pub(crate) fn held_tokens(&self, t: u64) -> Vec<(String, [u8; TOKEN_LEN])> {
        let now = self.now_ms(t);
        let mut held = Vec::new();
        for (key, entry) in self.model.keys.live(now) {
            let name = || String::from_utf8_lossy(key).into_owned();
            match &entry.value {
                Value::Str(v) => {
                    if let Ok(token) = <[u8; TOKEN_LEN]>::try_from(v.as_slice()) {
                        held.push((name(), token));
                    }
                }
                Value::Zset(members) => {
                    for (score, m) in members {
                        if let (true, Ok(token)) = (
                            *score > now as f64,
                            <[u8; TOKEN_LEN]>::try_from(m.as_slice()),
                        ) {
                            held.push((name(), token));
                        }
                    }
                }
            }
        }
        held.sort();
        held
    }

    /// Copies the data set to disk (an every-second fsync).
    pub(crate) fn fsync(&mut self) {
        self.disk = self.model.clone();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redlock_core::backend::Queued;

    fn node(rules: Rules) -> SimNode {
        let names = Arc::new(Names::new(&names(&["r0", "r1"])));
        let clock = NodeClock::new(0, 0);
        SimNode::new(
            clock,
            Persistence::Always,
            false,
            SimRng::stream(0, 0),
            names,
            rules,
        )
    }

    const MS: u64 = 1_000_000;

    fn names(keys: &[&str]) -> Vec<Resources> {
        keys.iter()
            .filter_map(|k| Resources::one(*k).ok())
            .collect()
    }

    fn acquire(ttl_ms: u64) -> Op {
        Op::Acquire {
            ttl_ns: ttl_ms * MS,
            fence: true,
            queued: None,
        }
    }

    #[test]
    fn requests_run_as_the_model_runs_the_backend_commands() {
        let (a, b) = ([1u8; TOKEN_LEN], [2u8; TOKEN_LEN]);
        let mut n = node(Rules::default());
        assert_eq!(
            n.deliver(0, &a, 0b01, false, acquire(100), 0),
            Answer::Granted(1)
        );
        // All or none: key 0 is held, so key 1 is not set either.
        assert_eq!(
            n.deliver(0, &b, 0b11, false, acquire(100), 0),
            Answer::Refused
        );
        assert!(!n.counts_for(0b10, &b, 0));
        let extend = Op::Extend { ttl_ns: 200 * MS };
        assert_eq!(n.deliver(0, &a, 0b11, false, extend, 0), Answer::Refused);
        assert_eq!(n.deliver(0, &a, 0b01, false, extend, 0), Answer::Granted(0));
        // Redis keeps a key through its last millisecond.
        assert!(n.counts_for(0b01, &a, 200 * MS));
        assert!(!n.counts_for(0b01, &a, 201 * MS));
        let release = Op::Release(None);
        assert_eq!(n.deliver(0, &b, 0b01, false, release, 0), Answer::Refused);
        assert_eq!(
            n.deliver(0, &a, 0b01, false, release, 0),
            Answer::Granted(0)
        );
        // Fencing counters survive the key.
        assert_eq!(
            n.deliver(0, &b, 0b01, false, acquire(100), 0),
            Answer::Granted(2)
        );
        // A reader holds with others, never with a writer.
        let (r1, r2) = ([3u8; TOKEN_LEN], [4u8; TOKEN_LEN]);
        assert_eq!(
            n.deliver(0, &r1, 0b10, true, acquire(100), 0),
            Answer::Granted(1)
        );
        assert_eq!(
            n.deliver(0, &r2, 0b10, true, acquire(100), 0),
            Answer::Granted(2)
        );
        assert_eq!(
            n.deliver(0, &a, 0b10, false, acquire(100), 0),
            Answer::Refused
        );
        assert!(n.counts_for(0b10, &r1, 0) && n.counts_for(0b10, &r2, 0));
        assert_eq!(
            n.deliver(0, &r1, 0b01, true, acquire(100), 0),
            Answer::Refused
        );
        let tokens: Vec<_> = n
            .held_tokens(0)
            .into_iter()
            .map(|(k, t)| (k, t[0]))
            .collect();
        let readers = format!("r1{READERS_SUFFIX}");
        assert_eq!(
            tokens,
            [("r0".into(), 2), (readers.clone(), 3), (readers, 4)]
        );
    }

    #[test]
    fn a_queued_release_leaves_the_line() -> Result<(), redlock_core::ConfigError> {
        let (a, b) = ([1u8; TOKEN_LEN], [2u8; TOKEN_LEN]);
        let mut n = node(Rules::default());
        let ttl = Ttl::new(Duration::from_millis(50))?;
        let q = |m| Some(Queued::new(m, ttl, true).with_ticket(m));
        let queued = |m| Op::Acquire {
            ttl_ns: 100 * MS,
            fence: false,
            queued: q(m),
        };
        let c = [3u8; TOKEN_LEN];
        assert_eq!(
            n.deliver(0, &c, 1, false, acquire(100), 0),
            Answer::Granted(1)
        );
        assert_eq!(n.deliver(0, &a, 1, false, queued(1), 0), Answer::Refused);
        assert_eq!(n.deliver(0, &b, 1, false, queued(2), 0), Answer::Refused);
        let line = format!("r0{WAIT_SUFFIX}");
        assert_eq!(n.model.first_in_line(0, line.as_bytes()), Some(&b"1"[..]));
        // The lock's own release leaves the line, held or not.
        assert_eq!(
            n.deliver(0, &a, 1, false, Op::Release(q(1)), 0),
            Answer::Refused
        );
        assert_eq!(n.model.first_in_line(0, line.as_bytes()), Some(&b"2"[..]));
        Ok(())
    }

    #[test]
    fn a_holder_set_admits_any_key_until_full() {
        let (a, b, c) = ([1u8; TOKEN_LEN], [2u8; TOKEN_LEN], [3u8; TOKEN_LEN]);
        let mut n = node(Rules {
            holder_set: 0b11,
            ..Rules::default()
        });
        // Both ask for the first place: both are in, a set of two is full.
        assert_eq!(
            n.deliver(0, &a, 0b01, false, acquire(100), 0),
            Answer::Granted(0)
        );
        assert_eq!(
            n.deliver(0, &b, 0b01, false, acquire(100), 0),
            Answer::Granted(0)
        );
        assert_eq!(
            n.deliver(0, &c, 0b10, false, acquire(100), 0),
            Answer::Refused
        );
        assert!(n.counts_for(0b01, &b, 0) && !n.counts_for(0b01, &c, 0));
        let extend = Op::Extend { ttl_ns: 200 * MS };
        assert_eq!(n.deliver(0, &b, 0b01, false, extend, 0), Answer::Granted(0));
        let release = Op::Release(None);
        assert_eq!(
            n.deliver(0, &a, 0b10, false, release, 0),
            Answer::Granted(0)
        );
        assert_eq!(n.deliver(0, &a, 0b10, false, release, 0), Answer::Refused);
        assert_eq!(
            n.deliver(0, &c, 0b01, false, acquire(100), 0),
            Answer::Granted(0)
        );
        assert!(n.counts_for(0b01, &b, 150 * MS) && !n.counts_for(0b01, &c, 150 * MS));
    }

    #[test]
    fn a_blind_reader_ignores_the_writer_and_leaves_its_key() {
        let (w, r) = ([1u8; TOKEN_LEN], [2u8; TOKEN_LEN]);
        let mut n = node(Rules {
            blind: true,
            ..Rules::default()
        });
        assert_eq!(
            n.deliver(0, &w, 1, false, acquire(100), 0),
            Answer::Granted(1)
        );
        assert_eq!(
            n.deliver(0, &r, 1, true, acquire(100), 0),
            Answer::Granted(2)
        );
        assert!(n.counts_for(1, &w, 0) && n.counts_for(1, &r, 0));
        let extend = Op::Extend { ttl_ns: 100 * MS };
        assert_eq!(n.deliver(0, &r, 1, true, extend, 0), Answer::Granted(0));
        assert_eq!(
            n.deliver(0, &r, 1, true, Op::Release(None), 0),
            Answer::Granted(0)
        );
        assert!(n.counts_for(1, &w, 0) && !n.counts_for(1, &r, 0));
        assert_eq!(
            n.deliver(0, &w, 1, false, Op::Release(None), 0),
            Answer::Granted(0)
        );
    }

    #[test]
    fn the_replica_runs_the_masters_commands_after_the_lag() {
        let a = [1u8; TOKEN_LEN];
        let names = Arc::new(Names::new(&names(&["r0"])));
        let clock = NodeClock::new(0, 0);
        let rng = SimRng::stream(0, 0);
        let mut n = SimNode::new(clock, Persistence::None, true, rng, names, Rules::default());
        assert_eq!(
            n.deliver(0, &a, 1, false, acquire(100), 10 * MS),
            Answer::Granted(1)
        );
        let mut early = n.clone();
        early.failover(5 * MS);
        assert!(!early.up);
        early.restart(5 * MS);
        assert!(!early.counts_for(1, &a, 5 * MS), "not arrived yet");
        n.failover(10 * MS);
        n.restart(10 * MS);
        assert!(n.counts_for(1, &a, 10 * MS));
    }
}
