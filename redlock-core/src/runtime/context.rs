//! The shell's context: the node workers and settings that every caller
//! and guard of one manager uses, how a machine's requests reach every
//! node's worker at once, and the loop that drives a machine on the calling
//! thread with the real clock.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::backend::Started;
use crate::decide::deadline::later;
use crate::engine::{
    Entropy, Machine as _, OwnRound, RoundId, Single, Timer, Transmit, Until, WAIT_SLICE,
};
use crate::events::{CallKind, CallOutcome, Event, ManagerCounters, Observer, RoundSummary};
use crate::runtime::config::Config;
use crate::runtime::mailbox::{Driven, Inbox, Mailbox, Pause};
use crate::runtime::poller::{LazyPoller, Poller};
use crate::runtime::wake::Wakeups;
use crate::runtime::worker::{Job, Worker};
use crate::{
    Claim, EntropyError, LockError, LostReason, NodeFailure, Queued, Resources, Token, Ttl,
};

/// Where the jobs of a round sent now go ([`Shared::route`]).
struct Route<'a, E> {
    /// The poller, when the manager has one and it was started.
    poller: Option<&'a Poller<E>>,
    /// Every node's job goes through it.
    all: bool,
}

impl<E> Route<'_, E> {
    /// An empty list for the jobs bound for the poller, with room for
    /// every one of the `nodes`' at once when the poller may take them.
    fn jobs(&self, nodes: usize) -> Vec<Job<E>> {
        Vec::with_capacity(if self.poller.is_some() { nodes } else { 0 })
    }

    /// Whether the job for `worker`'s node goes through the poller: every
    /// job does, or the poller still has jobs for the node (behind them).
    fn polls(&self, worker: &Worker<E>) -> bool {
        self.poller.is_some() && (self.all || worker.poller_owes())
    }

    /// Hands the poller the jobs bound for it.
    fn submit(&self, workers: &[Arc<Worker<E>>], jobs: Vec<Job<E>>) {
        if let Some(poller) = self.poller {
            poller.submit(workers, jobs);
        }
    }
}

/// What every caller and guard of one manager uses: the workers and the
/// settings.
pub(crate) struct Shared<E> {
    /// A random id for this manager's waiting marks.
    pub(crate) id: u64,
    /// How long this manager's waiting marks live: twice its longest pause
    /// between rounds plus a round, so that they last from one refused
    /// round to the next.
    pub(crate) mark_ttl: Ttl,
    pub(crate) workers: Vec<Arc<Worker<E>>>,
    /// Where the rounds of many callers at once go, when every node's
    /// backend starts batches ([`Builder::poller`](crate::Builder::poller)).
    pub(crate) poller: LazyPoller<E>,
    /// The (never executed) claim carried by flush barriers.
    pub(crate) flush_claim: Arc<Claim>,
    pub(crate) config: Config,
    /// The retry jitter's generator when it is seeded (reproducible runs);
    /// otherwise each thread uses its own, so callers never contend on it.
    pub(crate) rng: Option<Mutex<fastrand::Rng>>,
    /// Callers driving a machine right now.
    pub(crate) waiting: AtomicUsize,
    /// The event hook and the manager's counters.
    pub(crate) observer: Arc<Observer>,
    /// Release notifications that end waiters' pauses.
    pub(crate) wakeups: Wakeups,
}

/// The blocking manager's randomness: tokens from the OS, jitter from the
/// manager's seeded generator or the thread's own.
pub(crate) struct ShellEntropy<'a>(Option<&'a Mutex<fastrand::Rng>>);

impl Entropy for ShellEntropy<'_> {
    fn token(&mut self) -> Result<Token, EntropyError> {
        Token::random()
    }
    fn holder(&mut self) -> Result<u64, EntropyError> {
        Token::random_u64()
    }
    fn jitter(&mut self) -> u64 {
        match self.0 {
            Some(rng) => rng.lock().u64(..),
            None => fastrand::u64(..),
        }
    }
}

/// The real-time deadlines of the rounds a driver sent.
#[derive(Debug, Default)]
pub(crate) struct Deadlines(Vec<(RoundId, Instant)>);

impl Deadlines {
    pub(crate) fn of(round: RoundId, at: Instant) -> Self {
        // Room for the rounds of a lock's acquire and release at once.
        let mut rounds = Vec::with_capacity(4);
        rounds.push((round, at));
        Deadlines(rounds)
    }

    fn insert(&mut self, round: RoundId, at: Instant) {
        // Only the latest few rounds matter.
        if self.0.len() >= 8 {
            self.0.remove(0);
        }
        self.0.push((round, at));
    }

    fn get(&self, round: RoundId) -> Option<Instant> {
        self.0
            .iter()
            .rev()
            .find(|(r, _)| *r == round)
            .map(|(_, at)| *at)
    }
}

/// The nodes whose queue turned a request away, for their
/// [`Event::QueueFull`]: [`FullQueues::report`] sends them once the caller
/// let go of every lock it held while sending (the lines'), since the hook
/// may call back into the manager.
#[derive(Debug, Default)]
pub(crate) struct FullQueues(Vec<usize>);

impl FullQueues {
    /// Notes node `node`'s failure to queue a request.
    fn saw<E>(&mut self, node: usize, failure: &NodeFailure<E>) {
        if matches!(failure, NodeFailure::Overloaded) {
            self.0.push(node);
        }
    }

    /// Sends the events; call it with no lock of the manager held.
    pub(crate) fn report<E>(self, shared: &Shared<E>) {
        for node in self.0 {
            shared.workers[node].report_full();
        }
    }
}

impl<E: Send + Sync + 'static> Shared<E> {
    /// Counts a finished acquisition and, with a hook, reports it
    /// (`resources` is given only then).
    pub(crate) fn observe_lock<T>(
        &self,
        resources: Option<&Resources>,
        started: Instant,
        rounds: u32,
        result: &Result<T, LockError<E>>,
    ) {
        let outcome = CallOutcome::of(result);
        let counters = &self.observer.manager;
        let counter = match outcome {
            CallOutcome::Ok => Some(&counters.acquired),
            CallOutcome::Contended => Some(&counters.contended),
            CallOutcome::NoQuorum => Some(&counters.no_quorum),
            CallOutcome::Timeout => Some(&counters.timed_out),
            _ => None,
        };
        if let Some(counter) = counter {
            ManagerCounters::bump(counter);
        }
        if let Some(resources) = resources {
            let summary = self.last_round(result);
            self.observer.emit(|| Event::Call {
                kind: CallKind::Lock,
                resources,
                outcome,
                rounds,
                elapsed: started.elapsed(),
                last_round: summary.as_ref(),
            });
        }
    }

    /// Counts and reports an extension (by a caller or the keeper).
    pub(crate) fn observe_extend<T>(
        &self,
        resources: &Resources,
        started: Instant,
        result: &Result<T, LockError<E>>,
    ) {
        if result.is_ok() {
            ManagerCounters::bump(&self.observer.manager.extended);
        }
        let summary = self.last_round(result);
        self.observer.emit(|| Event::Call {
            kind: CallKind::Extend,
            resources,
            outcome: CallOutcome::of(result),
            rounds: 1,
            elapsed: started.elapsed(),
            last_round: summary.as_ref(),
        });
    }

    /// Reports a release: confirmed by `release` (`Some` of its result),
    /// or sent by a dropped guard without waiting for the nodes (`None`,
    /// reported as [`CallOutcome::Ok`]).
    pub(crate) fn observe_release(
        &self,
        resources: &Resources,
        started: Instant,
        result: Option<&Result<(), LockError<E>>>,
    ) {
        let summary = result.and_then(|result| self.last_round(result));
        self.observer.emit(|| Event::Call {
            kind: CallKind::Release,
            resources,
            outcome: result.map_or(CallOutcome::Ok, CallOutcome::of),
            rounds: 1,
            elapsed: started.elapsed(),
            last_round: summary.as_ref(),
        });
    }

    /// The summary of a failed call's last round, for a hook only.
    fn last_round<T>(&self, result: &Result<T, LockError<E>>) -> Option<RoundSummary> {
        if !self.observer.wants_events() {
            return None;
        }
        result
            .as_ref()
            .err()
            .and_then(LockError::report)
            .map(RoundSummary::of)
    }

    /// Counts and reports a held lock newly found lost.
    pub(crate) fn observe_lost(&self, resources: &Resources, reason: LostReason) {
        ManagerCounters::bump(&self.observer.manager.lost);
        self.observer.emit(|| Event::Lost { resources, reason });
    }

    pub(crate) fn entropy(&self) -> ShellEntropy<'_> {
        ShellEntropy(self.rng.as_ref())
    }

    /// How an acquire of a caller in this manager's line waits; `yields`
    /// gives way to other managers' waiting marks.
    pub(crate) fn queued(&self, yields: bool) -> Queued {
        let ticket = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
        Queued::new(self.id, self.mark_ttl, yields).with_ticket(ticket)
    }

    fn job(
        &self,
        t: &Transmit,
        node: usize,
        stale_after: Instant,
        inbox: Option<&Arc<dyn Inbox<E>>>,
    ) -> Job<E> {
        Job {
            message: t.message(),
            claim: Arc::clone(t.claim()),
            node,
            stale_after,
            reply: inbox
                .filter(|_| t.wants_reply(node))
                .map(|inbox| (Arc::clone(inbox), t.round())),
            retry: None,
        }
    }

    /// Sends `t` to every node at once, the replies to `inbox`; returns the
    /// real-time deadline of its round (one per-node timeout from now).
    /// The nodes whose queue was full are noted in `full`, for the caller
    /// to report once it holds no lock.
    pub(crate) fn send(
        &self,
        t: &Transmit,
        inbox: Option<&Arc<dyn Inbox<E>>>,
        full: &mut FullQueues,
    ) -> Instant {
        self.send_within(t, inbox, self.config.settings.node_timeout, full)
    }

    fn send_within(
        &self,
        t: &Transmit,
        inbox: Option<&Arc<dyn Inbox<E>>>,
        wait: Duration,
        full: &mut FullQueues,
    ) -> Instant {
        let deadline = later(Instant::now(), wait);
        let route = self.route();
        let mut polled = route.jobs(self.workers.len());
        for (node, worker) in self.workers.iter().enumerate() {
            if !t.sends_to(node) {
                continue;
            }
            let job = self.job(t, node, deadline, inbox);
            if route.polls(worker) {
                self.admit(worker, job, &mut polled, full);
            } else if let Err(failure) = worker.submit(job) {
                full.saw(node, &failure);
                if let Some(inbox) = inbox.filter(|_| t.wants_reply(node)) {
                    let _ = inbox.deliver(t.round(), node, Err(failure));
                }
            }
        }
        route.submit(&self.workers, polled);
        deadline
    }

    /// Where a round sent now goes: the poller, when the manager has one
    /// and started it, and whether every node's job goes through it: when
    /// at least [`Builder::poller_from`](crate::Builder::poller_from)
    /// callers are driving rounds (the poller is started the first time).
    /// Otherwise only the nodes the poller still has jobs for get theirs
    /// through it, behind those; the others through their workers.
    fn route(&self) -> Route<'_, E> {
        if !self.poller.exists() {
            return Route {
                poller: None,
                all: false,
            };
        }
        // The sender counts, also before it drives (a release's first round).
        if self.waiting.load(Ordering::Relaxed).max(1) >= self.config.poller_from {
            let poller = self.poller.start();
            Route {
                poller,
                all: poller.is_some(),
            }
        } else {
            Route {
                poller: self.poller.started(),
                all: false,
            }
        }
    }

    /// Adds `job` to `jobs`, bound for the poller, unless its node's queue
    /// is full: then the job's round gets the failure at once, and the
    /// node is noted in `full`.
    fn admit(
        &self,
        worker: &Worker<E>,
        job: Job<E>,
        jobs: &mut Vec<Job<E>>,
        full: &mut FullQueues,
    ) {
        if worker.admit(&job) {
            jobs.push(job);
            return;
        }
        let failure = NodeFailure::Overloaded;
        full.saw(job.node, &failure);
        job.deliver(Err(failure));
    }

    /// Sends `t` as [`Shared::send`] does, or, when the caller is alone on
    /// the manager (`drivers` counts the callers driving a machine it knows
    /// of: itself, when it drives one), sends it to the nodes itself and
    /// reads their answers into `inbox` before returning: no worker thread
    /// is woken and nothing wakes the caller, while the worker threads'
    /// batching would gain nothing with nobody to batch with. A node whose
    /// worker has jobs queued or whose last request failed, or whose
    /// backend cannot start the request without blocking, gets it through
    /// its worker as usual.
    ///
    /// The caller reads every started node's answer, waiting on each a
    /// short slice at a time (see [`Sent::finish`]), so a node that froze
    /// since its last answer holds the round only until the others decided
    /// it, plus a short grace; from then on the node goes through its
    /// worker until it answers again.
    pub(crate) fn dispatch(
        &self,
        t: &Transmit,
        inbox: Option<&Arc<dyn Inbox<E>>>,
        drivers: usize,
    ) -> Instant
    where
        E: std::error::Error + 'static,
    {
        self.start_round(t, inbox, drivers).finish()
    }

    /// The first half of [`Shared::dispatch`]: sends `t` (to the nodes
    /// themselves or to their workers); [`Sent::finish`] reports the full
    /// queues and reads the answers. In between, the caller may hold a
    /// lock, and a request any other caller sends a node started here runs
    /// there after `t`.
    pub(crate) fn start_round<'a>(
        &'a self,
        t: &'a Transmit,
        inbox: Option<&'a Arc<dyn Inbox<E>>>,
        drivers: usize,
    ) -> Sent<'a, E>
    where
        E: std::error::Error + 'static,
    {
        let queued = |inbox| {
            let mut full = FullQueues::default();
            let deadline = self.send(t, inbox, &mut full);
            Sent {
                shared: self,
                t,
                inbox,
                deadline,
                sent_at: Instant::now(),
                started: Vec::new(),
                elsewhere: false,
                full,
            }
        };
        let (Some(inbox), Some(request)) = (inbox, t.message().request(t.claim())) else {
            return queued(inbox);
        };
        let waiting = self.waiting.load(Ordering::Relaxed);
        if !OwnRound::applies(self.config.own_rounds, waiting, drivers) {
            return queued(Some(inbox));
        }
        let mut full = FullQueues::default();
        let sent_at = Instant::now();
        let deadline = later(sent_at, self.config.settings.node_timeout);
        let mut started = Vec::with_capacity(self.workers.len());
        let route = self.route();
        let mut polled = route.jobs(self.workers.len());
        let mut elsewhere = false;
        for (node, worker) in self.workers.iter().enumerate() {
            if !t.sends_to(node) {
                continue;
            }
            let s = worker.try_start(request);
            elsewhere |= s.is_none();
            match s {
                Some(s) => started.push((node, s)),
                // Behind what the poller has queued for the node.
                None if route.polls(worker) => {
                    let job = self.job(t, node, deadline, Some(inbox));
                    self.admit(worker, job, &mut polled, &mut full);
                }
                None => {
                    let job = self.job(t, node, deadline, Some(inbox));
                    if let Err(failure) = worker.submit(job) {
                        full.saw(node, &failure);
                        if t.wants_reply(node) {
                            let _ = inbox.deliver(t.round(), node, Err(failure));
                        }
                    }
                }
            }
        }
        route.submit(&self.workers, polled);
        if !started.is_empty() {
            ManagerCounters::bump(&self.observer.manager.direct_rounds);
        }
        Sent {
            shared: self,
            t,
            inbox: Some(inbox),
            deadline,
            sent_at,
            started,
            elsewhere,
            full,
        }
    }

    /// Sends `first` and then `then` to every node in the same batch (for
    /// Redis, the same write): a release with the next caller's acquire
    /// right behind it. Returns the deadline of `then`'s round; notes the
    /// full queues in `full`, as [`Shared::send`] does.
    pub(crate) fn send_pair(
        &self,
        first: (&Transmit, Option<&Arc<dyn Inbox<E>>>),
        then: (&Transmit, &Arc<dyn Inbox<E>>),
        full: &mut FullQueues,
    ) -> Instant {
        let deadline = later(Instant::now(), self.config.settings.node_timeout);
        let route = self.route();
        let mut polled = route.jobs(self.workers.len());
        for (node, worker) in self.workers.iter().enumerate() {
            if route.polls(worker) {
                for (t, inbox) in [first, (then.0, Some(then.1))] {
                    if t.sends_to(node) {
                        self.admit(
                            worker,
                            self.job(t, node, deadline, inbox),
                            &mut polled,
                            full,
                        );
                    }
                }
                continue;
            }
            let a = self.job(first.0, node, deadline, first.1);
            let b = self.job(then.0, node, deadline, Some(then.1));
            let queued = match (first.0.sends_to(node), then.0.sends_to(node)) {
                (true, true) => worker.submit_all([a, b]),
                (true, false) => worker.submit(a),
                (false, true) => worker.submit(b),
                (false, false) => Ok(()),
            };
            if let Err(failure) = queued {
                full.saw(node, &failure);
                // Releases are always queued: only the acquire was turned away.
                if then.0.wants_reply(node) {
                    let _ = then.1.deliver(then.0.round(), node, Err(failure));
                }
            }
        }
        route.submit(&self.workers, polled);
        deadline
    }

    /// Drives the machine in `mailbox` on this thread until it is done:
    /// sends what it asks to send, waits for replies (parked, woken by the
    /// node workers), tells it when a round's per-node timeout passed, and
    /// sleeps its pauses on the configured clock. `deadlines` holds rounds
    /// already sent for it by another thread.
    pub(crate) fn drive<M: Driven<E> + 'static>(
        &self,
        mailbox: &Arc<Mailbox<M>>,
        mut deadlines: Deadlines,
    ) -> M::Output
    where
        E: std::error::Error,
    {
        let inbox: Arc<dyn Inbox<E>> = Arc::clone(mailbox) as Arc<dyn Inbox<E>>;
        let clock = mailbox.clock();
        let alone = self.waiting.fetch_add(1, Ordering::Relaxed) == 0;
        let _leave = Leave(&self.waiting);
        // Registered for the whole call once notifications flow, so that a
        // release that comes while a round is out still ends the next pause.
        let mut waiting = None;
        let mut first = true;
        let since = Instant::now();
        loop {
            let (transmits, output, timer, rounds) = {
                let mut machine = mailbox.lock();
                if std::mem::take(&mut first) && self.wakeups.started() {
                    waiting = machine
                        .waits_for()
                        .map(|keys| self.wakeups.wait_for(keys, since));
                }
                let mut transmits = Vec::new();
                while let Some(t) = machine.poll_transmit() {
                    transmits.push(t);
                }
                // Decided rounds' records exist only when a hook is set.
                let mut rounds = Vec::new();
                while let Some(r) = machine.poll_round() {
                    rounds.push(r);
                }
                let output = machine.poll();
                (transmits, output, machine.poll_timeout(), rounds)
            };
            for r in &rounds {
                self.observer.emit(|| Event::Round(r));
            }
            for t in &transmits {
                let deadline = self.dispatch(t, Some(&inbox), 1);
                deadlines.insert(t.round(), deadline);
            }
            if let Some(output) = output {
                return output;
            }
            match timer {
                Some(Timer::Round(round)) => {
                    let deadline = deadlines.get(round).unwrap_or_else(|| {
                        later(Instant::now(), self.config.settings.node_timeout)
                    });
                    if Instant::now() >= deadline {
                        mailbox.lock().handle_expired(clock.now(), round);
                    } else {
                        mailbox.park_until(deadline, alone);
                    }
                }
                Some(Timer::At(at)) => {
                    if self.wakeups.enabled() && waiting.is_none() {
                        // Refused: this caller waits for other managers.
                        let machine = mailbox.lock();
                        if let Some(keys) = machine.waits_for() {
                            self.wakeups.contended(keys);
                            self.wakeups.start();
                            waiting = Some(self.wakeups.wait_for(keys, since));
                        }
                    }
                    // Between rounds nothing is held: a cancelled machine
                    // stops here.
                    let quorum = u32::try_from(crate::decide::quorum::quorum(self.workers.len()))
                        .unwrap_or(u32::MAX);
                    let woken = waiting.as_ref().map(|w| (w.flag(), quorum));
                    match mailbox.pause_until(at, woken) {
                        Pause::Cancelled => {
                            if let Some(output) = mailbox.lock().cancelled() {
                                return output;
                            }
                            mailbox
                                .lock()
                                .handle_timeout(clock.now(), &mut self.entropy());
                        }
                        Pause::Woken => {
                            self.wakeups.woke();
                            mailbox.lock().released(clock.now(), &mut self.entropy());
                        }
                        Pause::Elapsed => mailbox
                            .lock()
                            .handle_timeout(clock.now(), &mut self.entropy()),
                    }
                }
                // A machine with nothing under way and no result does not
                // exist; wait for a worker all the same rather than spin.
                None => mailbox.park_until(
                    later(Instant::now(), self.config.settings.node_timeout),
                    false,
                ),
            }
        }
    }

    /// Releases `claim`, a lock taken outside a line (`try_lock`, a
    /// permit, a read), on every node with `message` (its release), not
    /// sent to the nodes `skips` marks; nothing to hand over, and no need
    /// to take the lines' lock. With `wait`, returns the release's decided
    /// round; without, the release is sent and nobody waits for it.
    pub(crate) fn release(
        &self,
        claim: &Arc<Claim>,
        (message, skips): (crate::engine::Message, Option<Arc<[bool]>>),
        wait: bool,
    ) -> Option<crate::engine::Decided<E>>
    where
        E: std::error::Error + 'static,
    {
        let (sent, mine) = self.release_round(claim, (message, skips), wait)?;
        let inbox = mine.clone().map(|m| m as Arc<dyn Inbox<E>>);
        let deadline = self.dispatch(&sent, inbox.as_ref(), 0);
        mine.map(|m| self.drive(&m, Deadlines::of(sent.round(), deadline)))
    }

    /// A release round of `claim` started now: its transmit (none when it
    /// goes to no node) and, with `wait`, the mailbox to drive it in.
    #[allow(clippy::type_complexity)]
    pub(crate) fn release_round(
        &self,
        claim: &Arc<Claim>,
        (message, skips): (crate::engine::Message, Option<Arc<[bool]>>),
        wait: bool,
    ) -> Option<(Transmit, Option<Arc<Mailbox<Single<E>>>>)>
    where
        E: Send + Sync,
    {
        let clock = &self.config.clock;
        let mut release = Single::new(
            &self.config.settings,
            message,
            Arc::clone(claim),
            Until::Decided,
        )
        .skipping(skips);
        release.start(clock.now());
        let sent = release.poll_transmit()?;
        let mine = wait.then(|| {
            Arc::new(Mailbox::new(
                release,
                Arc::clone(clock),
                std::thread::current(),
            ))
        });
        Some((sent, mine))
    }

    /// Runs one round of `single`, started now, to its decision.
    pub(crate) fn run_single(&self, mut single: Single<E>) -> crate::engine::Decided<E>
    where
        E: std::error::Error,
    {
        single.start(self.config.clock.now());
        let mailbox = Arc::new(Mailbox::new(
            single,
            Arc::clone(&self.config.clock),
            std::thread::current(),
        ));
        self.drive(&mailbox, Deadlines::default())
    }

    /// Waits until every request queued so far has run on every node (and
    /// no failed release is kept), or `timeout` passes.
    pub(crate) fn flush(&self, timeout: Duration) -> bool
    where
        E: std::error::Error,
    {
        let n = self.workers.len();
        let mut barrier = Single::new(
            &self.config.settings,
            crate::engine::Message::Flush,
            Arc::clone(&self.flush_claim),
            Until::AllAnswered,
        );
        barrier.start(self.config.clock.now());
        let Some(t) = barrier.poll_transmit() else {
            return false;
        };
        let mailbox = Arc::new(Mailbox::new(
            barrier,
            Arc::clone(&self.config.clock),
            std::thread::current(),
        ));
        let inbox: Arc<dyn Inbox<E>> = Arc::clone(&mailbox) as Arc<dyn Inbox<E>>;
        // A barrier is never turned away.
        let mut full = FullQueues::default();
        let deadline = self.send_within(&t, Some(&inbox), timeout, &mut full);
        full.report(self);
        let decided = self.drive(&mailbox, Deadlines::of(t.round(), deadline));
        decided.granted() == n
    }
}

/// A round [`Shared::start_round`] sent: the answers the caller reads
/// itself are still to be read.
pub(crate) struct Sent<'a, E> {
    shared: &'a Shared<E>,
    t: &'a Transmit,
    inbox: Option<&'a Arc<dyn Inbox<E>>>,
    deadline: Instant,
    sent_at: Instant,
    started: Vec<(usize, Box<dyn Started<E> + 'a>)>,
    /// Whether some of the round's answers come through the workers or the
    /// poller: they may decide it while the caller waits for its own.
    elsewhere: bool,
    /// Reported first thing in [`Sent::finish`].
    full: FullQueues,
}

impl<E: std::error::Error + 'static> Sent<'_, E> {
    /// Reports the nodes whose queue was full, then reads the answers of
    /// the nodes the caller sent to itself, in node order, into the inbox;
    /// returns the round's deadline. Called with no lock of the manager
    /// held.
    pub(crate) fn finish(self) -> Instant {
        let Sent {
            shared,
            t,
            inbox,
            deadline,
            sent_at,
            started,
            elsewhere,
            full,
        } = self;
        full.report(shared);
        // The engine says which answer to wait for and until when.
        let mut own = OwnRound::new(sent_at, deadline, started);
        let mut now = Instant::now();
        // The round was decided through answers that came through the
        // workers (the caller looks every slice): its own nodes are read
        // within the grace, and then left.
        let mut heard = false;
        // Each node's answer passes through it in turn: one buffer a round.
        let mut out = Vec::new();
        while let Some(read) = own.next(now) {
            // Answers that come through the workers wake the caller's
            // thread, not its wait on a socket: with some, it waits a slice
            // at most, also on its last node, and looks at the machine.
            let limit = if elsewhere {
                later(now, WAIT_SLICE).min(own.by())
            } else {
                own.by()
            };
            let decided = if heard && now >= own.by() {
                true
            } else if read.until > now
                // In turn, not whichever answer came first: see
                // `runtime/ready.rs` for why a lone caller does not.
                && !own.current().is_some_and(|s| s.wait(read.until.min(limit)))
            {
                own.not_yet();
                now = Instant::now();
                if elsewhere && !heard && inbox.is_some_and(|inbox| inbox.needs_driver()) {
                    heard = true;
                    own.decided(now);
                }
                continue;
            } else {
                let Some((node, s)) = own.take() else {
                    break;
                };
                let result =
                    shared.workers[node].finish(s, own.by(), (t.message(), t.claim()), &mut out);
                let decided = inbox
                    .filter(|_| t.wants_reply(node))
                    .is_some_and(|inbox| inbox.deliver(t.round(), node, result));
                now = Instant::now();
                decided
            };
            if decided {
                own.decided(now);
                // Nobody waits for the rest: left to be read later where
                // the backend can, read within the grace where not.
                for (node, s) in own.rest() {
                    let by = own.by();
                    let Some(result) =
                        shared.workers[node].detach(s, by, (t.message(), t.claim()), &mut out)
                    else {
                        continue;
                    };
                    if let Some(inbox) = inbox.filter(|_| t.wants_reply(node)) {
                        inbox.deliver(t.round(), node, result);
                    }
                }
                break;
            }
        }
        deadline
    }
}

/// Counts a driver out however it leaves.
struct Leave<'a>(&'a AtomicUsize);

impl Drop for Leave<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl<E> Drop for Shared<E> {
    /// The last handle of the manager is gone (guards hold one too): the
    /// workers run what is queued (the releases of dropped guards above
    /// all), try failed releases again, and stop. Waits for them until the
    /// engine's exit deadline ([`Settings::exit_deadline`](crate::engine::Settings::exit_deadline): twice the node
    /// timeout, one for a call under way, one for the rest), which the
    /// simulator's exiting processes keep too.
    fn drop(&mut self) {
        let by = self.config.settings.exit_deadline(Instant::now());
        // The poller hands the workers nothing more once it exited.
        if let Some(poller) = self.poller.started() {
            poller.close();
            poller.wait_exit(by);
        }
        for worker in &self.workers {
            worker.close(by);
        }
        for worker in &self.workers {
            worker.wait_exit(by);
        }
    }
}
