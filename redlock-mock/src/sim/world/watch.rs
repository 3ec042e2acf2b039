//! Election observers ([`Scenario::observers`]): each reads resource 0's
//! leader from every node at once and hands the reading to the core's
//! [`Watch`], as [`Observer`](redlock_core::election::Observer) does; the
//! checker compares what they report with the leaderships that were.
//!
//! [`Scenario::observers`]: crate::sim::Scenario::observers

use std::time::Duration;

use redlock_core::backend::{Holder, KeyView};
use redlock_core::engine::{Leader, Observed, Watch, WatchStep, READ_TIMEOUTS};

use super::World;
use crate::sim::clock::duration_ns as ns;
use crate::sim::event::{Ev, View};
use crate::sim::net::Fate;
use crate::sim::outcome::ViolationKind;
use crate::sim::rng::SimRng;

/// One election observer.
#[derive(Debug)]
pub(crate) struct Watcher {
    watch: Watch,
    /// The reading under way (or the last one).
    round: u32,
    /// Whether that reading still waits for answers.
    open: bool,
    /// Its answers so far, one per node (`None`: none yet, or failed).
    views: Vec<Option<KeyView>>,
    /// How many nodes answered (or failed) so far.
    answered: usize,
    /// The term it reported last.
    last_term: Option<u64>,
    /// Its own stream: whether a down node refuses or drops its request
    /// (the clients' runs stay as without observers).
    rng: SimRng,
}

impl Watcher {
    pub(crate) fn new(watch: Watch, nodes: usize, rng: SimRng) -> Self {
        Watcher {
            watch,
            round: 0,
            open: false,
            views: vec![None; nodes],
            answered: 0,
            last_term: None,
            rng,
        }
    }
}

/// A leader an observer reported, for the check at the end.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Report {
    watcher: u8,
    at: u64,
    lock: u32,
    term: u64,
}

impl World<'_, '_> {
    /// The observers of the scenario, each as the core's observer for its
    /// settings (with [`Scenario::observer_settle`] instead, out of model).
    ///
    /// [`Scenario::observer_settle`]: crate::sim::Scenario::observer_settle
    pub(crate) fn watchers(sc: &crate::sim::Scenario, seed: u64) -> Vec<Watcher> {
        (0..sc.observers)
            .map(|w| {
                let mut watch = Watch::new(sc.node_timeout, Watch::default_poll(sc.ttl));
                if let Some(settle) = sc.observer_settle {
                    watch = watch.settle(settle);
                }
                let rng = SimRng::stream(seed, 4_000_000 + w as u64);
                Watcher::new(watch, sc.nodes, rng)
            })
            .collect()
    }

    /// Every observer's first reading, at the start.
    pub(crate) fn start_watchers(&mut self) {
        for w in 0..self.watchers.len() as u8 {
            self.push(0, Ev::Watch { watcher: w });
        }
    }

    /// Observer `w` starts a reading: an inspect request to every node,
    /// and the reading's deadline.
    pub(crate) fn watch_start(&mut self, w: u8) {
        let now = self.now;
        let nodes = self.sc.nodes;
        let Some(watcher) = self.watchers.get_mut(usize::from(w)) else {
            return;
        };
        if watcher.open {
            return;
        }
        watcher.round += 1;
        watcher.open = true;
        watcher.answered = 0;
        watcher.views.iter_mut().for_each(|v| *v = None);
        let round = watcher.round;
        for node in 0..nodes as u8 {
            match self
                .net
                .send_watch((w, node), false, now, (self.sc.net.loss, self.calm))
            {
                Fate::Arrives(at) => self.push(
                    at,
                    Ev::Inspect {
                        watcher: w,
                        node,
                        round,
                        sent: now,
                    },
                ),
                Fate::Lost => self.stats.lost_messages += 1,
            }
        }
        let deadline = now + ns(self.sc.node_timeout) * u64::from(READ_TIMEOUTS);
        self.push(deadline, Ev::WatchEnd { watcher: w, round });
    }

    /// An inspect request reaches node `n`: the node reads the election's
    /// key (or is down) and answers.
    pub(crate) fn inspect(&mut self, w: u8, n: u8, round: u32, sent: u64) {
        let now = self.now;
        let node = &mut self.nodes[usize::from(n)];
        let view = if !node.up || sent < node.reset_at {
            let refuses = self
                .watchers
                .get_mut(usize::from(w))
                .is_some_and(|x| x.rng.chance(0.5));
            if refuses {
                None
            } else {
                self.stats.lost_messages += 1;
                return;
            }
        } else {
            let seen = node.inspect(now, 0).unwrap_or_default();
            let lock = seen
                .value
                .as_deref()
                .and_then(|v| <[u8; redlock_core::backend::TOKEN_LEN]>::try_from(v).ok())
                .and_then(|token| self.locks.by_token(&token))
                .unwrap_or(u32::MAX);
            let ttl_ms = seen.ttl.map_or(u32::MAX, |t| {
                u32::try_from(t.as_millis()).unwrap_or(u32::MAX - 1)
            });
            Some(View {
                lock,
                ttl_ms,
                fence: seen.fence.unwrap_or(0),
            })
        };
        self.trace
            .line(now, || format!("n{n} inspect from o{w} -> {view:?}"));
        match self
            .net
            .send_watch((w, n), true, now, (self.sc.net.reply_loss, self.calm))
        {
            Fate::Arrives(at) => self.push(
                at,
                Ev::Viewed {
                    watcher: w,
                    node: n,
                    round,
                    view,
                },
            ),
            Fate::Lost => self.stats.lost_messages += 1,
        }
    }

    /// Node `n`'s answer reaches observer `w`.
    pub(crate) fn viewed(&mut self, w: u8, n: u8, round: u32, view: Option<View>) {
        let nodes = self.sc.nodes;
        let view = view.map(|v| {
            let value = self.locks.get(v.lock).map(|rec| rec.token.to_vec());
            let ttl = match v.ttl_ms {
                u32::MAX => Duration::MAX,
                ms => Duration::from_millis(u64::from(ms)),
            };
            KeyView::new(
                value.clone(),
                value.map(|_| ttl),
                (v.fence != 0).then_some(v.fence),
            )
        });
        let Some(watcher) = self.watchers.get_mut(usize::from(w)) else {
            return;
        };
        if !watcher.open || watcher.round != round {
            return;
        }
        watcher.views[usize::from(n)] = view;
        watcher.answered += 1;
        if watcher.answered == nodes {
            self.watch_done(w);
        }
    }

    /// Observer `w`'s reading `round` reached its deadline.
    pub(crate) fn watch_end(&mut self, w: u8, round: u32) {
        if self
            .watchers
            .get(usize::from(w))
            .is_some_and(|x| x.open && x.round == round)
        {
            self.watch_done(w);
        }
    }

    /// Observer `w`'s reading is complete: what a quorum shows goes to its
    /// watch, which says what to report and when to read again.
    fn watch_done(&mut self, w: u8) {
        let now = self.now;
        let sc = self.sc;
        let instant = self.time.at(now as i64);
        let Some(watcher) = self.watchers.get_mut(usize::from(w)) else {
            return;
        };
        watcher.open = false;
        let answered = watcher.views.iter().flatten().count();
        let next = if answered < redlock_core::decide::quorum(sc.nodes) {
            // `Redlock::holder` fails with `NoQuorum`: read again later.
            self.stats.watch_failed += 1;
            now + ns(Watch::default_poll(sc.ttl))
        } else {
            let drift = redlock_core::decide::drift(sc.ttl, sc.drift_factor);
            let leader = Holder::of_views(&watcher.views, sc.nodes)
                .and_then(|holder| Leader::of_holder(&holder, drift));
            match watcher.watch.saw(instant, leader) {
                WatchStep::Changed(Observed::Leader(leader)) => {
                    let last = watcher.last_term.replace(leader.term());
                    self.reported(w, last, &leader);
                    now
                }
                WatchStep::Changed(Observed::Vacant) => {
                    self.trace.line(now, || format!("o{w} reports: vacant"));
                    now
                }
                WatchStep::ReadAt(at) => {
                    let local = self.time.local(at);
                    u64::try_from(local).unwrap_or(now).max(now)
                }
            }
        };
        self.push(next, Ev::Watch { watcher: w });
    }

    /// Observer `w` reports `leader`, after `last`: terms must rise.
    fn reported(&mut self, w: u8, last: Option<u64>, leader: &Leader) {
        let now = self.now;
        let term = leader.term();
        let lock = <[u8; redlock_core::backend::TOKEN_LEN]>::try_from(leader.value())
            .ok()
            .and_then(|token| self.locks.by_token(&token))
            .unwrap_or(u32::MAX);
        self.stats.observed_leaders += 1;
        self.trace
            .line(now, || format!("o{w} reports: L{lock} leads, term {term}"));
        if let Some(last) = last.filter(|&last| term <= last) {
            self.checker
                .violation(ViolationKind::ObservedTermBack, now, || {
                    format!("o{w} reports L{lock} with term {term} after term {last}")
                });
        }
        self.reports.push(Report {
            watcher: w,
            at: now,
            lock,
            term,
        });
    }

    /// A grant of `lock`'s acquire ran on node `n`.
    pub(crate) fn landed(&mut self, n: u8, lock: u32) {
        let now = self.now;
        let quorum = redlock_core::decide::quorum(self.sc.nodes);
        let l = self.leaderships.entry(lock).or_default();
        l.granted_on |= 1 << n;
        if l.on_quorum.is_none() && l.granted_on.count_ones() as usize >= quorum {
            l.on_quorum = Some(now);
        }
    }

    /// `lock` leads with term `term` from now on.
    pub(crate) fn led(&mut self, lock: u32, term: u64) {
        let now = self.now;
        let before = self.top_term;
        self.top_term = self.top_term.max(term);
        let l = self.leaderships.entry(lock).or_default();
        l.term = Some((term, now, before));
    }

    /// At the end, each reported leader that led: its reported term is at
    /// most its own and above every earlier leader's, and is its own when
    /// its term was raised within the core's settle time of its keys being
    /// on a quorum (a leader that stopped in between may be reported with
    /// a lower one). A reported leader that never led is counted.
    pub(crate) fn check_reports(&mut self) {
        let settle =
            Watch::new(self.sc.node_timeout, Watch::default_poll(self.sc.ttl)).settles_after();
        for r in std::mem::take(&mut self.reports) {
            let (w, lock, seen) = (r.watcher, r.lock, r.term);
            let Some(l) = self.leaderships.get(&r.lock) else {
                self.stats.observed_phantoms += 1;
                continue;
            };
            let Some((term, led_at, before)) = l.term else {
                self.stats.observed_phantoms += 1;
                continue;
            };
            let prompt = l
                .on_quorum
                .is_some_and(|q| led_at <= q.saturating_add(ns(settle)));
            let problem = if seen > term || seen <= before {
                Some(format!(
                    "o{w} reports L{lock} with term {seen}: its own is {term}, the earlier leaders' up to {before}"
                ))
            } else if seen < term && prompt {
                Some(format!(
                    "o{w} reports L{lock} with term {seen}, but its term is {term}, raised within {settle:?} of its keys being on a quorum"
                ))
            } else {
                None
            };
            match problem {
                Some(problem) => {
                    self.checker
                        .violation(ViolationKind::ObservedWrongTerm, r.at, || problem)
                }
                None if seen < term => self.stats.observed_early += 1,
                None => {}
            }
        }
    }
}

/// What the checker knows of one lock of an election.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Leadership {
    /// The nodes its acquire was granted on.
    granted_on: u32,
    /// When it was first granted on a quorum.
    on_quorum: Option<u64>,
    /// Once it led: its term, when it was granted, and the largest term
    /// granted before it.
    term: Option<(u64, u64, u64)>,
}
