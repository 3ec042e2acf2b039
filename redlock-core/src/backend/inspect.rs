//! "Who holds this lock?": one node's view of a lock key ([`KeyView`],
//! read by [`LockBackend::inspect`](crate::LockBackend::inspect)) and what
//! a quorum of them says ([`Holder`]).

use std::time::Duration;

use crate::{Identity, LockBackend, TOKEN_LEN};

/// One node's view of one lock key, read at one instant
/// ([`LockBackend::inspect`](crate::LockBackend::inspect)).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use redlock_core::backend::KeyView;
/// let free = KeyView::default();
/// assert!(free.value.is_none() && free.ttl.is_none());
/// let held = KeyView::new(Some(vec![1; 20]), Some(Duration::from_secs(3)), None);
/// assert!(held.is_held());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct KeyView {
    /// The key's value while it is held: the holder's
    /// [`Claim::value`](crate::backend::Claim::value) (its token, then its
    /// manager's identity), or the readers' marker of a read-write lock
    /// that readers hold. `None` when the key is free (or holds something
    /// that is not a string).
    pub value: Option<Vec<u8>>,
    /// The time left before the key expires (`Duration::MAX` for a key
    /// without expiry, which this library never writes); `None` when free.
    pub ttl: Option<Duration>,
    /// The resource's fencing counter on this node, when it has one: the
    /// holder's fencing token once it took the lock with fencing, else the
    /// last fenced holder's.
    pub fence: Option<u64>,
}

impl KeyView {
    /// A view of `value` with `ttl` left and fencing counter `fence`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlock_core::backend::KeyView;
    /// let view = KeyView::new(Some(vec![1; 20]), Some(Duration::from_secs(1)), Some(4));
    /// assert_eq!(view.fence, Some(4));
    /// ```
    #[must_use]
    pub fn new(value: Option<Vec<u8>>, ttl: Option<Duration>, fence: Option<u64>) -> Self {
        KeyView { value, ttl, fence }
    }

    /// Whether the key is held on this node.
    ///
    /// # Examples
    ///
    /// See [`KeyView`].
    #[must_use]
    pub fn is_held(&self) -> bool {
        self.value.is_some() && self.ttl.is_some()
    }
}

/// A manager that watches a lock key from a reading on
/// ([`LockBackend::inspect`](crate::LockBackend::inspect), the node model's
/// [`Command::Inspect`](crate::model::Command::Inspect)): the release of a
/// watched lock (an election's, [`Resources::is_watched`](crate::Resources::is_watched))
/// tells it on its release channel, as a release tells the first waiter.
///
/// # Examples
///
/// ```
/// use redlock_core::model::{Command, Node, Watcher};
/// let mut node = Node::new();
/// let keys = ["e".to_owned()];
/// let watcher = Watcher { manager: 7, ttl_ms: 1_000 };
/// node.apply(0, &Command::Inspect { key: "e", watcher: Some(watcher) }, &mut Vec::new());
/// node.apply(0, &Command::Acquire { keys: &keys, token: b"T", ttl_ms: 100, fence: false }, &mut Vec::new());
/// let mut told = Vec::new();
/// let release = Command::Release { keys: &keys, token: b"T", channel: b"ch", leave: None, watched: true };
/// node.apply(10, &release, &mut told);
/// assert_eq!(told[0].channel, b"ch:7");
/// assert_eq!(told[0].message, b"7 e");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Watcher {
    /// The manager's id (its channel's suffix).
    pub manager: u64,
    /// How long it watches, in milliseconds.
    pub ttl_ms: u64,
}

/// The ability to read who holds a lock key
/// ([`LockBackend::inspect`](crate::LockBackend::inspect) answers): only a
/// manager over a backend that declares it has
/// [`Redlock::holder`](crate::Redlock::holder).
///
/// # Examples
///
/// ```
/// use redlock_core::backend::Inspect;
/// fn can_show_holders<B: Inspect>() {}
/// can_show_holders::<redlock_mock::MockNode>();
/// ```
pub trait Inspect: LockBackend {}

/// Who holds a lock, as a quorum of its nodes sees it
/// ([`Redlock::holder`](crate::Redlock::holder)).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use redlock_core::{Identity, Redlock};
/// let cluster = redlock_mock::MockCluster::new(3);
/// let locks = Redlock::builder(cluster.backends())
///     .identity(Identity::new("billing-7")?)
///     .build()?;
/// let lock = locks.try_lock("invoices", Duration::from_secs(10))?;
/// let holder = locks.holder("invoices")?.expect("held");
/// assert_eq!(holder.identity().map(Identity::as_str), Some("billing-7"));
/// assert_eq!(holder.nodes(), 3);
/// assert!(holder.ttl() <= Duration::from_secs(10));
/// lock.release()?;
/// assert!(locks.holder("invoices")?.is_none());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    value: Vec<u8>,
    identity: Option<Identity>,
    ttl: Duration,
    fence: Option<u64>,
    nodes: usize,
}

impl Holder {
    /// The holder that `views` (one per node of the lock's `nodes`, `None`
    /// for a node that did not answer) agree on: the value held on at
    /// least a quorum of the `nodes`. `None` when no value is.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlock_core::backend::{Holder, KeyView};
    /// let held = |ms| KeyView::new(Some(vec![7; 20]), Some(Duration::from_millis(ms)), None);
    /// let views = [Some(held(900)), Some(held(500)), None, Some(KeyView::default()), Some(held(700))];
    /// let holder = Holder::of_views(&views, 5).expect("3 of 5");
    /// // The quorum holds it for as long as its third-longest key lives.
    /// assert_eq!(holder.ttl(), Duration::from_millis(500));
    /// assert_eq!(Holder::of_views(&views[..4], 5), None);
    /// ```
    #[must_use]
    pub fn of_views(views: &[Option<KeyView>], nodes: usize) -> Option<Holder> {
        let quorum = crate::quorum(nodes);
        let held: Vec<&KeyView> = views.iter().flatten().filter(|v| v.is_held()).collect();
        for (i, first) in held.iter().enumerate() {
            let value = first.value.as_deref()?;
            // Counted once, at its first holder.
            if held[..i].iter().any(|v| v.value.as_deref() == Some(value)) {
                continue;
            }
            let same: Vec<&&KeyView> = held
                .iter()
                .filter(|v| v.value.as_deref() == Some(value))
                .collect();
            if same.len() < quorum {
                continue;
            }
            let mut ttls: Vec<Duration> = same.iter().filter_map(|v| v.ttl).collect();
            ttls.sort_unstable_by(|a, b| b.cmp(a));
            return Some(Holder {
                value: value.to_vec(),
                identity: Identity::of_value(value),
                ttl: ttls.get(quorum - 1).copied().unwrap_or_default(),
                fence: agreed(same.iter().map(|v| v.fence), quorum),
                nodes: same.len(),
            });
        }
        None
    }

    /// The value held (the token, then the identity).
    pub(crate) fn value(&self) -> &[u8] {
        &self.value
    }

    /// The holder's manager's identity, when it has one (see
    /// [`Builder::identity`](crate::Builder::identity)).
    ///
    /// # Examples
    ///
    /// See [`Holder`].
    #[must_use]
    pub fn identity(&self) -> Option<&Identity> {
        self.identity.as_ref()
    }

    /// How long a quorum of the nodes still holds the lock: the time left
    /// before fewer than a quorum of the keys live. The holder's own
    /// validity is shorter by its clock-drift allowance and by the time
    /// this answer took.
    ///
    /// # Examples
    ///
    /// See [`Holder`].
    #[must_use]
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// The resource's fencing counter that at least a quorum of the
    /// holding nodes agree on: the holder's fencing token once it took the
    /// lock with fencing and raised it (a node that granted late, after
    /// other managers' refused rounds bumped its counter, may show more;
    /// between the grant and the raise the nodes may not agree yet, or
    /// agree on one less). `None` when they do not agree, or keep none.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlock_core::Redlock;
    /// let cluster = redlock_mock::MockCluster::new(3);
    /// let locks = Redlock::builder(cluster.backends()).fencing(true).build()?;
    /// let lock = locks.try_lock("ledger", Duration::from_secs(10))?;
    /// let holder = locks.holder("ledger")?.expect("held");
    /// assert_eq!(holder.fence(), lock.fencing_token().map(|t| t.value()));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn fence(&self) -> Option<u64> {
        self.fence
    }

    /// How many nodes hold it.
    ///
    /// # Examples
    ///
    /// See [`Holder`].
    #[must_use]
    pub fn nodes(&self) -> usize {
        self.nodes
    }

    /// The first bytes of the holder's token, in hex (never the whole
    /// token): enough to tell two holders apart in a log.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlock_core::backend::{Holder, KeyView};
    /// let views = [Some(KeyView::new(Some(vec![0xab; 20]), Some(Duration::from_secs(1)), None))];
    /// assert_eq!(Holder::of_views(&views, 1).unwrap().token_prefix(), "ababab");
    /// ```
    #[must_use]
    pub fn token_prefix(&self) -> String {
        use std::fmt::Write as _;
        let mut hex = String::new();
        for b in self.value.iter().take(3.min(TOKEN_LEN)) {
            let _ = write!(hex, "{b:02x}");
        }
        hex
    }
}

/// The value at least `quorum` of `values` are, if any.
fn agreed(values: impl Iterator<Item = Option<u64>> + Clone, quorum: usize) -> Option<u64> {
    values
        .clone()
        .flatten()
        .find(|v| values.clone().filter(|w| *w == Some(*v)).count() >= quorum)
}
