//! The behavioural conformance suite every [`LockBackend`] must pass.
//!
//! It runs against the in-memory mock and real Redis in this workspace, and
//! is public so that a third-party backend can run it on its own nodes:
//!
//! ```
//! use redlock_mock::MockCluster;
//! use redlock_mock::conformance::Conformance;
//!
//! // `make(n)` returns handles to `n` distinct, reachable nodes. They may be
//! // the same nodes on every call: each check uses keys of its own.
//! let cluster = MockCluster::new(5);
//! let nodes = cluster.backends();
//! // The base contract's checks, and those of each ability the backend
//! // declares (`Fencing`, `SharedClaims`; the mock declares both).
//! let suite = Conformance::new(move |n| nodes[..n].to_vec()).with_all_abilities();
//! suite.run_all()?;
//! # Ok::<(), redlock_mock::conformance::ConformanceError>(())
//! ```
//!
//! Checks talk to single nodes through the trait (the backend contract) and
//! to several nodes through [`Redlock`] (the behaviour users see). Each
//! failure is reported with the check's name and a [`Failure`] saying what
//! was wrong, in a typed [`ConformanceError`].
//!
//! Behind the `conformance` feature of `redlock-mock`: a backend crate adds
//! `redlock-mock = { version = "...", features = ["conformance"] }` to its
//! dev-dependencies and runs [`Conformance::run_all`] in a test against its
//! own nodes (this workspace runs it on the mock and on real Redis), after
//! adding the checks of each ability its type declares
//! ([`Conformance::with_fencing`], [`Conformance::with_shared_claims`],
//! [`Conformance::with_all_abilities`]): a backend of the base contract
//! alone runs the base checks and serves mutexes and semaphores.

mod failure;
mod manager;

use std::fmt::Write as _;
use std::time::{Duration, Instant};

pub use failure::{ConformanceError, Failure};

use failure::{bail, ensure, Context as _};

type Result<T, E = Failure> = std::result::Result<T, E>;
use redlock_core::backend::{
    AcquireOutcome, Claim, Fencing, Inspect, KeyView, LockBackend, Queued, Request, Response,
    SharedClaims, Token,
};
use redlock_core::{Identity, Redlock, Resources, Ttl};

/// One named check.
pub type Check<B> = fn(&Conformance<B>) -> Result<(), Failure>;

/// Makes `n` node handles for one check.
type Factory<B> = Box<dyn Fn(usize) -> Vec<B> + Send + Sync>;

/// The suite, bound to a way of making nodes.
pub struct Conformance<B> {
    make: Factory<B>,
    prefix: String,
    /// The checks this suite runs: the base contract's, plus those of each
    /// ability added with `with_fencing`, `with_shared_claims` or
    /// `with_all_abilities`.
    checks: Vec<(&'static str, Check<B>)>,
}

impl<B> std::fmt::Debug for Conformance<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conformance")
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

const TTL: Duration = Duration::from_secs(30);
/// How long a check waits for a short TTL to pass before it fails.
const EXPIRY_BOUND: Duration = Duration::from_secs(10);

impl<B: LockBackend + 'static> Conformance<B> {
    /// A suite over nodes from `make(n)`, which must return `n` distinct
    /// nodes (n is at most 5). Keys are prefixed with a fresh random tag, so
    /// runs on shared servers do not interfere.
    pub fn new(make: impl Fn(usize) -> Vec<B> + Send + Sync + 'static) -> Self {
        let tag = Token::random().map(|t| {
            t.as_bytes()[..6].iter().fold(String::new(), |mut s, b| {
                let _ = write!(s, "{b:02x}");
                s
            })
        });
        Conformance {
            make: Box::new(make),
            prefix: format!("conformance:{}:", tag.unwrap_or_else(|_| "fixed".into())),
            checks: Self::base_checks(),
        }
    }

    /// The checks of the base contract ([`LockBackend`]), which every
    /// backend must pass.
    fn base_checks() -> Vec<(&'static str, Check<B>)> {
        vec![
            ("acquire_is_exclusive", Self::acquire_is_exclusive),
            ("release_needs_the_token", Self::release_needs_the_token),
            (
                "extend_needs_the_token_and_never_creates",
                Self::extend_needs_the_token_and_never_creates,
            ),
            (
                "keys_expire_after_their_ttl",
                Self::keys_expire_after_their_ttl,
            ),
            ("extend_resets_the_ttl", Self::extend_resets_the_ttl),
            ("multi_key_is_all_or_none", Self::multi_key_is_all_or_none),
            (
                "multi_key_release_and_extend_need_every_key",
                Self::multi_key_release_and_extend_need_every_key,
            ),
            (
                "a_batch_answers_as_one_request_at_a_time",
                Self::a_batch_answers_as_one_request_at_a_time,
            ),
            (
                "node_ids_are_distinct_and_stable",
                Self::node_ids_are_distinct_and_stable,
            ),
            ("manager_lock_cycle", Self::manager_lock_cycle),
            (
                "manager_contention_and_handover",
                Self::manager_contention_and_handover,
            ),
            ("manager_extend_and_expiry", Self::manager_extend_and_expiry),
            ("manager_semaphore", Self::manager_semaphore),
        ]
    }

    /// The checks this suite runs, by name.
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_mock::conformance::Conformance;
    /// use redlock_mock::MockCluster;
    /// let nodes = MockCluster::new(5).backends();
    /// let base = Conformance::new(move |n| nodes[..n].to_vec());
    /// let n = base.checks().len();
    /// assert!(base.with_fencing().checks().len() > n);
    /// ```
    #[must_use]
    pub fn checks(&self) -> &[(&'static str, Check<B>)] {
        &self.checks
    }

    fn add(mut self, checks: &[(&'static str, Check<B>)]) -> Self {
        for check in checks {
            if !self.checks.iter().any(|(name, _)| name == &check.0) {
                self.checks.push(*check);
            }
        }
        self
    }

    /// Runs one check by name.
    ///
    /// # Errors
    ///
    /// [`ConformanceError::Failed`] with the check's failure, or
    /// [`ConformanceError::UnknownCheck`].
    pub fn run(&self, name: &str) -> Result<(), ConformanceError> {
        let (name, check) = self
            .checks
            .iter()
            .copied()
            .find(|(n, _)| *n == name)
            .ok_or_else(|| ConformanceError::UnknownCheck(name.to_owned()))?;
        check(self).map_err(|failure| ConformanceError::Failed(vec![(name, failure)]))
    }

    /// Runs every check and reports all failures together.
    ///
    /// # Errors
    ///
    /// [`ConformanceError::Failed`] listing every failed check with why.
    pub fn run_all(&self) -> Result<(), ConformanceError> {
        let failures: Vec<(&'static str, Failure)> = self
            .checks
            .iter()
            .copied()
            .filter_map(|(name, check)| check(self).err().map(|failure| (name, failure)))
            .collect();
        if failures.is_empty() {
            Ok(())
        } else {
            Err(ConformanceError::Failed(failures))
        }
    }

    fn key(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }

    fn claim(&self, keys: &[&str]) -> Result<Claim> {
        let resources = Resources::new(keys.iter().map(|k| self.key(k)))?;
        Ok(Claim::new(resources, Token::random()?))
    }

    fn one(&self) -> Result<B> {
        (self.make)(1)
            .into_iter()
            .next()
            .context("the factory returned no node")
    }

    fn manager(&self, n: usize) -> Result<Redlock<B>> {
        let nodes = (self.make)(n);
        ensure!(
            nodes.len() == n,
            "the factory returned {} nodes, not {n}",
            nodes.len()
        );
        Ok(Redlock::builder(nodes)
            .node_timeout(Duration::from_secs(2))
            .retry_delay(Duration::from_millis(1), Duration::from_millis(20))
            .build()?)
    }

    /// Acquires until `claim` is granted or `EXPIRY_BOUND` passes.
    fn acquire_when_free(node: &B, claim: &Claim, ttl: Ttl) -> Result<()> {
        let deadline = Instant::now() + EXPIRY_BOUND;
        loop {
            if node.acquire(claim, ttl, false)?.is_granted() {
                return Ok(());
            }
            ensure!(
                Instant::now() < deadline,
                "the key never expired within {EXPIRY_BOUND:?}"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// `node`'s answers to `batch`, one per request, each a success.
    fn answers(node: &B, batch: &[Request<'_>]) -> Result<Vec<Response>> {
        let mut out = Vec::new();
        node.run_batch(batch, &mut out);
        ensure!(
            out.len() == batch.len(),
            "{} answers to {} requests",
            out.len(),
            batch.len()
        );
        out.into_iter()
            .enumerate()
            .map(|(i, r)| r.with_context(|| format!("request {i} failed")))
            .collect()
    }

    fn ttl(d: Duration) -> Result<Ttl> {
        Ok(Ttl::new(d)?)
    }

    /// A free key is granted; while held, another token is refused.
    pub fn acquire_is_exclusive(&self) -> Result<()> {
        let node = self.one()?;
        let (a, b) = (self.claim(&["exclusive"])?, self.claim(&["exclusive"])?);
        let ttl = Self::ttl(TTL)?;
        ensure!(
            node.acquire(&a, ttl, false)? == AcquireOutcome::Granted { fence: None },
            "a free key was not granted"
        );
        ensure!(
            node.acquire(&b, ttl, false)? == AcquireOutcome::HeldByOther,
            "a held key was granted to another token"
        );
        ensure!(
            node.acquire(&a, ttl, false)? == AcquireOutcome::HeldByOther,
            "acquire is not re-entrant: a second acquire by the holder must be refused"
        );
        ensure!(node.release(&a)?, "the holder could not release");
        Ok(())
    }

    /// Only the holder's token releases; afterwards the key is free.
    pub fn release_needs_the_token(&self) -> Result<()> {
        let node = self.one()?;
        let (a, b) = (self.claim(&["release"])?, self.claim(&["release"])?);
        let ttl = Self::ttl(TTL)?;
        ensure!(
            node.acquire(&a, ttl, false)?.is_granted(),
            "a free key was not granted"
        );
        ensure!(!node.release(&b)?, "another token released the key");
        ensure!(
            node.acquire(&b, ttl, false)? == AcquireOutcome::HeldByOther,
            "a wrong-token release deleted the key"
        );
        ensure!(node.release(&a)?, "the holder's release reported not held");
        ensure!(!node.release(&a)?, "a second release reported held");
        ensure!(
            node.acquire(&b, ttl, false)?.is_granted(),
            "the key was not free after release"
        );
        node.release(&b)?;
        Ok(())
    }

    /// Extend works only for the holder and never creates a missing key.
    pub fn extend_needs_the_token_and_never_creates(&self) -> Result<()> {
        let node = self.one()?;
        let (a, b) = (self.claim(&["extend"])?, self.claim(&["extend"])?);
        let ttl = Self::ttl(TTL)?;
        ensure!(
            !node.extend(&a, ttl)?,
            "extend of a missing key reported held"
        );
        ensure!(
            node.acquire(&b, ttl, false)?.is_granted(),
            "extend created the key"
        );
        ensure!(!node.extend(&a, ttl)?, "another token extended the key");
        ensure!(node.extend(&b, ttl)?, "the holder could not extend");
        node.release(&b)?;
        Ok(())
    }

    /// A key frees itself after its TTL.
    pub fn keys_expire_after_their_ttl(&self) -> Result<()> {
        let node = self.one()?;
        let (a, b) = (self.claim(&["expire"])?, self.claim(&["expire"])?);
        let started = Instant::now();
        ensure!(
            node.acquire(&a, Self::ttl(Duration::from_millis(100))?, false)?
                .is_granted(),
            "not granted"
        );
        Self::acquire_when_free(&node, &b, Self::ttl(TTL)?)?;
        ensure!(
            started.elapsed() >= Duration::from_millis(100),
            "the key expired early: {:?}",
            started.elapsed()
        );
        ensure!(!node.release(&a)?, "an expired holder released");
        node.release(&b)?;
        Ok(())
    }

    /// Extend replaces the TTL: a short lock extended to a long TTL outlives
    /// its original expiry.
    pub fn extend_resets_the_ttl(&self) -> Result<()> {
        let node = self.one()?;
        let (a, b) = (self.claim(&["reset"])?, self.claim(&["reset"])?);
        ensure!(
            node.acquire(&a, Self::ttl(Duration::from_millis(200))?, false)?
                .is_granted(),
            "not granted"
        );
        ensure!(node.extend(&a, Self::ttl(TTL)?)?, "extend failed");
        std::thread::sleep(Duration::from_millis(400));
        ensure!(
            node.acquire(&b, Self::ttl(TTL)?, false)? == AcquireOutcome::HeldByOther,
            "the extended key expired at its first TTL"
        );
        node.release(&a)?;
        Ok(())
    }

    /// (Backends with shared claims.) Shared claims ([`Claim::shared`]): readers
    /// are granted together, a writer is refused while any reader lives and
    /// a reader while the writer lives; extend and release touch only the
    /// reader's own entry; the last reader's release frees the key.
    pub fn shared_claims_admit_readers_and_exclude_a_writer(&self) -> Result<()> {
        let node = self.one()?;
        let read = || -> Result<Claim> { Ok(self.claim(&["shared"])?.shared()) };
        let (r1, r2, r3) = (read()?, read()?, read()?);
        let writer = self.claim(&["shared"])?;
        let ttl = Self::ttl(TTL)?;
        ensure!(
            node.acquire(&r1, ttl, false)?.is_granted(),
            "a free key refused a reader"
        );
        ensure!(
            node.acquire(&r2, ttl, false)?.is_granted(),
            "a second reader was refused"
        );
        ensure!(
            node.acquire(&writer, ttl, false)? == AcquireOutcome::HeldByOther,
            "a writer was granted while readers live"
        );
        ensure!(node.extend(&r1, ttl)?, "a reader could not extend");
        ensure!(!node.extend(&r3, ttl)?, "an absent reader extended");
        ensure!(
            !node.release(&r3)?,
            "an absent reader's release reported held"
        );
        ensure!(node.release(&r1)?, "a reader's release reported not held");
        ensure!(
            !node.release(&r1)?,
            "a second release of a reader reported held"
        );
        ensure!(
            node.acquire(&writer, ttl, false)? == AcquireOutcome::HeldByOther,
            "one reader's release let a writer in while another reads"
        );
        ensure!(
            node.release(&r2)?,
            "the last reader's release reported not held"
        );
        ensure!(
            node.acquire(&writer, ttl, false)?.is_granted(),
            "the key was not free for a writer after the last reader left"
        );
        ensure!(
            node.acquire(&r3, ttl, false)? == AcquireOutcome::HeldByOther,
            "a reader was granted while a writer holds"
        );
        ensure!(!node.extend(&r3, ttl)?, "a refused reader extended");
        ensure!(!node.release(&r3)?, "a refused reader released");
        ensure!(node.release(&writer)?, "the writer could not release");
        Ok(())
    }

    /// (Backends with fencing and shared claims.) A fenced read returns a
    /// counter and can raise it; a fenced write after it gets a larger one.
    pub fn fenced_readers_raise_their_counter(&self) -> Result<()> {
        let node = self.one()?;
        let ttl = Self::ttl(TTL)?;
        let r3 = self.claim(&["fenced-read"])?.shared();
        let writer = self.claim(&["fenced-read"])?;
        let before = match node.acquire(&r3, ttl, true)? {
            AcquireOutcome::Granted { fence: Some(f) } => f,
            other => bail!("a fenced read: expected a counter, got {other:?}"),
        };
        ensure!(
            node.raise_fence(&r3, before + 10)?,
            "a reader could not raise its counter"
        );
        ensure!(node.release(&r3)?, "a fenced reader could not release");
        match node.acquire(&writer, ttl, true)? {
            AcquireOutcome::Granted { fence: Some(f) } if f > before + 10 => {}
            other => bail!(
                "a write after a raised read: expected a counter above {}, got {other:?}",
                before + 10
            ),
        }
        ensure!(
            node.release(&writer)?,
            "the fenced writer could not release"
        );
        Ok(())
    }

    /// Shared claims expire after their own TTL (one long-lived reader
    /// keeps the key from a writer after a short-lived one expired), and a
    /// queued, yielding one gives way to another manager's waiting mark
    /// but not to its own manager's, and never leaves a mark. (Backends with
    /// shared claims.)
    pub fn shared_claims_expire_and_give_way_to_marks(&self) -> Result<()> {
        let node = self.one()?;
        let ttl = Self::ttl(TTL)?;
        let short = self.claim(&["expiring"])?.shared();
        let long = self.claim(&["expiring"])?.shared();
        let writer = self.claim(&["expiring"])?;
        ensure!(
            node.acquire(&long, ttl, false)?.is_granted(),
            "a reader was refused"
        );
        ensure!(
            node.acquire(&short, Self::ttl(Duration::from_millis(100))?, false)?
                .is_granted(),
            "a second reader was refused"
        );
        ensure!(node.release(&long)?, "the long reader could not release");
        let started = Instant::now();
        Self::acquire_when_free(&node, &writer, ttl)?;
        ensure!(
            started.elapsed() >= Duration::from_millis(50),
            "the short reader expired early: {:?}",
            started.elapsed()
        );
        ensure!(!node.release(&short)?, "an expired reader released");
        // A queued writer refused while the key is held leaves its mark.
        let mark = Self::ttl(Duration::from_secs(10))?;
        let waiting = self
            .claim(&["expiring"])?
            .queued(Queued::new(1, mark, true));
        ensure!(
            node.acquire(&waiting, ttl, false)? == AcquireOutcome::HeldByOther,
            "a second writer was granted"
        );
        ensure!(node.release(&writer)?, "the writer could not release");
        let other = self
            .claim(&["expiring"])?
            .shared()
            .queued(Queued::new(2, mark, true));
        ensure!(
            node.acquire(&other, ttl, false)? == AcquireOutcome::HeldByOther,
            "a reader of another manager went ahead of a waiting writer"
        );
        let own = self
            .claim(&["expiring"])?
            .shared()
            .queued(Queued::new(1, mark, true));
        ensure!(
            node.acquire(&own, ttl, false)?.is_granted(),
            "a reader gave way to its own manager's mark"
        );
        ensure!(node.release(&own)?, "the reader could not release");
        // The waiting writer goes in: the reader of its manager left it its
        // place, and the reader of manager 2 waits behind it.
        ensure!(
            node.acquire(&waiting, ttl, false)?.is_granted(),
            "the waiting writer was refused once the readers left"
        );
        node.release(&waiting)?;
        Ok(())
    }

    /// A multi-key acquire takes every key or none.
    pub fn multi_key_is_all_or_none(&self) -> Result<()> {
        let node = self.one()?;
        let ttl = Self::ttl(TTL)?;
        let b = self.claim(&["m-b"])?;
        ensure!(node.acquire(&b, ttl, false)?.is_granted(), "not granted");
        let abc = self.claim(&["m-a", "m-b", "m-c"])?;
        ensure!(
            node.acquire(&abc, ttl, false)? == AcquireOutcome::HeldByOther,
            "a multi-key acquire over a held key was granted"
        );
        let a = self.claim(&["m-a"])?;
        let c = self.claim(&["m-c"])?;
        ensure!(
            node.acquire(&a, ttl, false)?.is_granted(),
            "a refused multi-key acquire left key m-a behind"
        );
        ensure!(
            node.acquire(&c, ttl, false)?.is_granted(),
            "a refused multi-key acquire left key m-c behind"
        );
        for claim in [&a, &b, &c] {
            node.release(claim)?;
        }
        ensure!(
            node.acquire(&abc, ttl, false)?.is_granted(),
            "a free multi-key set was refused"
        );
        ensure!(
            node.acquire(&b, ttl, false)? == AcquireOutcome::HeldByOther,
            "a multi-key grant did not take every key"
        );
        ensure!(node.release(&abc)?, "multi-key release failed");
        ensure!(
            node.acquire(&b, ttl, false)?.is_granted(),
            "multi-key release left a key"
        );
        node.release(&b)?;
        Ok(())
    }

    /// Release and extend of a multi-key claim report held only when every
    /// key still held the token; release still deletes the keys that did.
    pub fn multi_key_release_and_extend_need_every_key(&self) -> Result<()> {
        let node = self.one()?;
        let ttl = Self::ttl(TTL)?;
        let xy = self.claim(&["p-x", "p-y"])?;
        ensure!(node.acquire(&xy, ttl, false)?.is_granted(), "not granted");
        // Take key p-y away from the claim (as if it expired), using a claim on p-y alone.
        let y_only = Claim::new(Resources::one(self.key("p-y"))?, xy.token().clone());
        ensure!(node.release(&y_only)?, "could not drop p-y");
        ensure!(
            !node.extend(&xy, ttl)?,
            "extend reported held with a key missing"
        );
        ensure!(
            !node.release(&xy)?,
            "release reported held with a key missing"
        );
        let x = self.claim(&["p-x"])?;
        ensure!(
            node.acquire(&x, ttl, false)?.is_granted(),
            "release left the key that still held the token"
        );
        node.release(&x)?;
        Ok(())
    }

    /// (Backends that declare fencing.) With fencing, each grant of a key
    /// returns a larger counter than the last; `raise_fence` lifts it for
    /// the holder only.
    pub fn fencing_counters_rise_and_can_be_raised(&self) -> Result<()> {
        let node = self.one()?;
        let ttl = Self::ttl(TTL)?;
        let mut last = 0;
        for _ in 0..3 {
            let claim = self.claim(&["fenced"])?;
            let AcquireOutcome::Granted { fence: Some(fence) } = node.acquire(&claim, ttl, true)?
            else {
                bail!("a fenced grant returned no counter");
            };
            ensure!(fence > last, "fence {fence} did not rise above {last}");
            last = fence;
            node.release(&claim)?;
        }
        let holder = self.claim(&["fenced"])?;
        let other = self.claim(&["fenced"])?;
        ensure!(
            node.acquire(&holder, ttl, false)? == AcquireOutcome::Granted { fence: None },
            "an unfenced grant returned a counter"
        );
        ensure!(
            !node.raise_fence(&other, last + 100)?,
            "a non-holder raised the fence"
        );
        ensure!(
            node.raise_fence(&holder, last + 10)?,
            "the holder could not raise the fence"
        );
        ensure!(
            node.raise_fence(&holder, 1)?,
            "raising to a lower value must succeed without lowering"
        );
        node.release(&holder)?;
        let next = self.claim(&["fenced"])?;
        let AcquireOutcome::Granted { fence: Some(fence) } = node.acquire(&next, ttl, true)? else {
            bail!("a fenced grant returned no counter");
        };
        ensure!(
            fence == last + 11,
            "after raising to {}, the next grant got {fence}",
            last + 10
        );
        node.release(&next)?;
        Ok(())
    }

    /// A batch of requests ([`LockBackend::run_batch`]) is answered in
    /// order, each as if it ran alone after the ones before it.
    pub fn a_batch_answers_as_one_request_at_a_time(&self) -> Result<()> {
        let node = self.one()?;
        let ttl = Self::ttl(TTL)?;
        let (a, other_a) = (
            self.claim(&["plain-batch-a"])?,
            self.claim(&["plain-batch-a"])?,
        );
        let bc = self.claim(&["plain-batch-b", "plain-batch-c"])?;
        let acquire = |claim| Request::Acquire {
            claim,
            ttl,
            fence: false,
        };
        let batch = [
            acquire(&a),
            acquire(&other_a),
            acquire(&bc),
            Request::Extend { claim: &a, ttl },
            Request::Extend {
                claim: &other_a,
                ttl,
            },
            Request::Release { claim: &a },
            Request::Release { claim: &a },
            acquire(&other_a),
            Request::Release { claim: &other_a },
            Request::Release { claim: &bc },
        ];
        let answers = Self::answers(&node, &batch)?;
        let granted = Response::Acquire(AcquireOutcome::Granted { fence: None });
        let expected = [
            granted,
            Response::Acquire(AcquireOutcome::HeldByOther),
            granted,
            Response::Held(true),
            Response::Held(false),
            Response::Held(true),
            Response::Held(false),
            granted,
            Response::Held(true),
            Response::Held(true),
        ];
        ensure!(answers == expected, "answers in order: {answers:?}");
        Ok(())
    }

    /// (Backends with fencing.) The same with fenced acquires and a raise
    /// inside the batch.
    pub fn a_fenced_batch_answers_as_one_request_at_a_time(&self) -> Result<()> {
        let node = self.one()?;
        let ttl = Self::ttl(TTL)?;
        let (a, other_a) = (self.claim(&["batch-a"])?, self.claim(&["batch-a"])?);
        let bc = self.claim(&["batch-b", "batch-c"])?;
        let batch = [
            Request::Acquire {
                claim: &a,
                ttl,
                fence: false,
            },
            Request::Acquire {
                claim: &other_a,
                ttl,
                fence: false,
            },
            Request::Acquire {
                claim: &bc,
                ttl,
                fence: true,
            },
            Request::Extend { claim: &a, ttl },
            Request::Extend {
                claim: &other_a,
                ttl,
            },
            Request::RaiseFence {
                claim: &bc,
                at_least: 50,
            },
            Request::Release { claim: &a },
            Request::Release { claim: &a },
            Request::Acquire {
                claim: &other_a,
                ttl,
                fence: false,
            },
            Request::Release { claim: &other_a },
            Request::Release { claim: &bc },
        ];
        let answers = Self::answers(&node, &batch)?;
        let granted = Response::Acquire(AcquireOutcome::Granted { fence: None });
        let held_by_other = Response::Acquire(AcquireOutcome::HeldByOther);
        let expected_head = [granted, held_by_other];
        ensure!(
            answers[..2] == expected_head,
            "first acquires: {:?}",
            &answers[..2]
        );
        ensure!(
            matches!(
                answers[2],
                Response::Acquire(AcquireOutcome::Granted { fence: Some(_) })
            ),
            "fenced multi-key acquire: {:?}",
            answers[2]
        );
        let expected_tail = [
            Response::Held(true),
            Response::Held(false),
            Response::Held(true),
            Response::Held(true),
            Response::Held(false),
            granted,
            Response::Held(true),
            Response::Held(true),
        ];
        ensure!(
            answers[3..] == expected_tail,
            "answers in order: {:?}",
            &answers[3..]
        );
        // The raise inside the batch took effect.
        let next = self.claim(&["batch-b"])?;
        let AcquireOutcome::Granted { fence: Some(fence) } = node.acquire(&next, ttl, true)? else {
            bail!("a fenced grant returned no counter");
        };
        ensure!(
            fence == 51,
            "after the batch raised the counter to 50, the next grant got {fence}"
        );
        node.release(&next)?;
        Ok(())
    }

    /// (Backends that declare fencing.) A fenced multi-key grant leaves every
    /// key's counter at the value it returns, so a later lock on any one of
    /// the keys gets a larger value.
    pub fn multi_key_fencing_leaves_every_counter_at_the_top(&self) -> Result<()> {
        let node = self.one()?;
        let ttl = Self::ttl(TTL)?;
        let fenced = |keys: &[&str]| -> Result<u64> {
            let claim = self.claim(keys)?;
            let AcquireOutcome::Granted { fence: Some(fence) } = node.acquire(&claim, ttl, true)?
            else {
                bail!("a fenced grant of {keys:?} returned no counter");
            };
            ensure!(node.release(&claim)?, "release of {keys:?} failed");
            Ok(fence)
        };
        for _ in 0..3 {
            fenced(&["mf-b"])?;
        }
        let both = fenced(&["mf-a", "mf-b"])?;
        ensure!(
            both == 4,
            "the multi-key grant returned {both}, not the largest counter 4"
        );
        let a = fenced(&["mf-a"])?;
        ensure!(
            a > both,
            "a later lock on mf-a got {a}, not above the multi-key token {both}"
        );
        Ok(())
    }

    /// Node ids are non-empty, distinct per node and stable per node.
    pub fn node_ids_are_distinct_and_stable(&self) -> Result<()> {
        let first: Vec<_> = (self.make)(3).iter().map(|n| n.node_id().clone()).collect();
        let again: Vec<_> = (self.make)(3).iter().map(|n| n.node_id().clone()).collect();
        ensure!(
            first == again,
            "node ids changed between handles: {first:?} vs {again:?}"
        );
        ensure!(
            first.iter().all(|id| !id.as_str().is_empty()),
            "an empty node id"
        );
        let mut sorted = first.clone();
        sorted.sort();
        sorted.dedup();
        ensure!(
            sorted.len() == first.len(),
            "node ids are not distinct: {first:?}"
        );
        Ok(())
    }
}

impl<B: Fencing + 'static> Conformance<B> {
    /// Adds the checks of the [`Fencing`] ability.
    ///
    /// # Examples
    ///
    /// See [`Conformance::checks`].
    #[must_use]
    pub fn with_fencing(self) -> Self {
        self.add(&[
            (
                "fencing_counters_rise_and_can_be_raised",
                Self::fencing_counters_rise_and_can_be_raised,
            ),
            (
                "multi_key_fencing_leaves_every_counter_at_the_top",
                Self::multi_key_fencing_leaves_every_counter_at_the_top,
            ),
            (
                "a_fenced_batch_answers_as_one_request_at_a_time",
                Self::a_fenced_batch_answers_as_one_request_at_a_time,
            ),
            (
                "manager_fencing_tokens_rise",
                Self::manager_fencing_tokens_rise,
            ),
        ])
    }
}

impl<B: SharedClaims + 'static> Conformance<B> {
    /// Adds the checks of the [`SharedClaims`] ability.
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_mock::conformance::Conformance;
    /// use redlock_mock::MockCluster;
    /// let nodes = MockCluster::new(5).backends();
    /// Conformance::new(move |n| nodes[..n].to_vec())
    ///     .with_shared_claims()
    ///     .run("shared_claims_admit_readers_and_exclude_a_writer")?;
    /// # Ok::<(), redlock_mock::conformance::ConformanceError>(())
    /// ```
    #[must_use]
    pub fn with_shared_claims(self) -> Self {
        self.add(&[
            (
                "shared_claims_admit_readers_and_exclude_a_writer",
                Self::shared_claims_admit_readers_and_exclude_a_writer,
            ),
            (
                "shared_claims_expire_and_give_way_to_marks",
                Self::shared_claims_expire_and_give_way_to_marks,
            ),
            ("manager_rwlock", Self::manager_rwlock),
        ])
    }
}

impl<B: Inspect + 'static> Conformance<B> {
    /// Adds the checks of the [`Inspect`] ability.
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_mock::conformance::Conformance;
    /// use redlock_mock::MockCluster;
    /// let nodes = MockCluster::new(5).backends();
    /// Conformance::new(move |n| nodes[..n].to_vec()).with_inspect().run_all()?;
    /// # Ok::<(), redlock_mock::conformance::ConformanceError>(())
    /// ```
    #[must_use]
    pub fn with_inspect(self) -> Self {
        self.add(&[
            (
                "inspect_shows_the_value_its_ttl_and_the_counter",
                Self::inspect_shows_the_value_its_ttl_and_the_counter,
            ),
            (
                "manager_holder_names_the_identity",
                Self::manager_holder_names_the_identity,
            ),
        ])
    }

    /// [`LockBackend::inspect`] shows what an acquire stored (the claim's
    /// whole value, the token then the identity), the time left within the
    /// TTL, the fencing counter of a fenced grant, and nothing once
    /// released.
    ///
    /// # Errors
    ///
    /// A [`Failure`] saying what the node got wrong.
    pub fn inspect_shows_the_value_its_ttl_and_the_counter(&self) -> Result<()> {
        let node = self.one()?;
        let ttl = Self::ttl(TTL)?;
        let name = self.key("inspected");
        let view = |node: &B| -> Result<KeyView> {
            node.inspect(&name, None)
                .context("an Inspect backend answered None")?
                .map_err(|e| Failure::new(format!("inspect: {e}")))
        };
        ensure!(view(&node)?.value.is_none(), "a free key shows a value");
        let claim = self
            .claim(&["inspected"])?
            .with_identity(&Identity::new("conformance:1")?);
        let AcquireOutcome::Granted { fence: Some(fence) } = node.acquire(&claim, ttl, true)?
        else {
            bail!("a fenced grant returned no counter");
        };
        let seen = view(&node)?;
        ensure!(
            seen.value.as_deref() == Some(claim.value()),
            "the key shows {:?}, not the claim's value",
            seen.value
        );
        ensure!(
            seen.ttl.is_some_and(|left| left <= TTL && left > TTL / 2),
            "time left {:?} for a TTL of {TTL:?}",
            seen.ttl
        );
        ensure!(
            seen.fence == Some(fence),
            "counter {:?}, granted {fence}",
            seen.fence
        );
        ensure!(node.release(&claim)?, "the release did not find the value");
        let after = view(&node)?;
        ensure!(
            after.value.is_none() && after.ttl.is_none(),
            "released, it still shows {after:?}"
        );
        Ok(())
    }

    /// A manager with an identity takes a lock; another manager's
    /// [`Redlock::holder`] names it, from all three nodes.
    ///
    /// # Errors
    ///
    /// A [`Failure`] saying what was wrong.
    pub fn manager_holder_names_the_identity(&self) -> Result<()> {
        let nodes = (self.make)(3);
        ensure!(
            nodes.len() == 3,
            "the factory returned {} nodes",
            nodes.len()
        );
        let named = Redlock::builder(nodes)
            .node_timeout(Duration::from_secs(2))
            .identity(Identity::new("conformance-holder")?)
            .build()?;
        let watcher = self.manager(3)?;
        let name = self.key("holder");
        let lock = named.try_lock(name.as_str(), TTL)?;
        // The call returned at a quorum: every node's grant first.
        ensure!(named.flush(EXPIRY_BOUND), "a node did not catch up");
        let holder = watcher.holder(&name)?.context("held, but no holder")?;
        ensure!(
            holder.identity().map(Identity::as_str) == Some("conformance-holder"),
            "holder {holder:?}"
        );
        ensure!(holder.nodes() >= 2, "held on {} of 3", holder.nodes());
        lock.release()?;
        ensure!(watcher.holder(&name)?.is_none(), "released, still a holder");
        Ok(())
    }
}

impl<B: Fencing + SharedClaims + 'static> Conformance<B> {
    /// Adds the checks of every ability, and of the two together (fenced
    /// reads), for a backend that declares them all (the Redis and
    /// in-memory ones do).
    ///
    /// # Examples
    ///
    /// See the [module](self) documentation.
    #[must_use]
    pub fn with_all_abilities(self) -> Self {
        self.with_fencing().with_shared_claims().add(&[(
            "fenced_readers_raise_their_counter",
            Self::fenced_readers_raise_their_counter,
        )])
    }
}
