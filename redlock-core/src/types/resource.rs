//! What a lock is taken on: validated resource names and the lock's identity.

use std::num::NonZeroU64;
use std::sync::Arc;

use crate::{ConfigError, Identity, Token, Ttl, TOKEN_LEN};

/// One or more resource names locked together, validated: at least one name,
/// no empty name, duplicates removed, sorted.
///
/// Sorting gives every client the same key order, and backends lock the whole
/// set atomically per node (all or none).
///
/// # Examples
///
/// ```
/// use redlock_core::Resources;
/// let set = Resources::new(["b", "a", "b"])?;
/// assert_eq!(set.keys(), ["a", "b"]);
/// assert!(Resources::new(Vec::<String>::new()).is_err());
/// assert!(Resources::one("").is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Resources(Names);

/// The names behind one pointer, so that a `Resources`, and each claim that
/// holds one, stays small: one name (most locks), an election's one name
/// (watched), or several.
#[derive(Clone)]
enum Names {
    One(Arc<String>),
    Watched(Arc<String>),
    Many(Arc<Vec<String>>),
}

// As the pair (names, watched) they stand for.
impl PartialEq for Resources {
    fn eq(&self, other: &Self) -> bool {
        self.keys() == other.keys() && self.is_watched() == other.is_watched()
    }
}

impl Eq for Resources {}

impl std::hash::Hash for Resources {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.keys().hash(state);
        self.is_watched().hash(state);
    }
}

impl std::fmt::Debug for Resources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Resources")
            .field(&self.keys())
            .field(&self.is_watched())
            .finish()
    }
}

impl Resources {
    /// A single resource.
    ///
    /// # Errors
    ///
    /// [`ConfigError::EmptyKey`] for an empty name,
    /// [`ConfigError::ReservedChar`] for a name with U+001F in it (see
    /// [`keys`](crate::keys)).
    ///
    /// # Examples
    ///
    /// ```
    /// let one = redlock_core::Resources::one("invoice:42")?;
    /// assert_eq!(one.keys(), ["invoice:42"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn one(key: impl Into<String>) -> Result<Self, ConfigError> {
        // No list to sort: the name and its `Arc` are all it allocates.
        let key = key.into();
        crate::keys::check_name(&key)?;
        Ok(Resources(Names::One(Arc::new(key))))
    }

    /// Several resources locked as one.
    ///
    /// # Errors
    ///
    /// [`ConfigError::NoKeys`] for an empty list, [`ConfigError::EmptyKey`]
    /// when any name is empty, [`ConfigError::ReservedChar`] when any has
    /// U+001F in it (see [`keys`](crate::keys)).
    ///
    /// # Examples
    ///
    /// ```
    /// let set = redlock_core::Resources::new(["user:1", "user:2"])?;
    /// assert_eq!(set.len(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new<I>(keys: I) -> Result<Self, ConfigError>
    where
        I: IntoIterator,
        I::Item: Into<String>,
    {
        let keys: Vec<String> = keys.into_iter().map(Into::into).collect();
        if keys.is_empty() {
            return Err(ConfigError::NoKeys);
        }
        for key in &keys {
            crate::keys::check_name(key)?;
        }
        Ok(Self::sorted(keys))
    }

    /// Keys made by the library itself (a semaphore's permits), which
    /// may have [`SEPARATOR`](crate::keys::SEPARATOR) in them: sorted and
    /// without duplicates, not checked. `keys` is not empty.
    pub(crate) fn internal(keys: Vec<String>) -> Self {
        Self::sorted(keys)
    }

    fn sorted(mut keys: Vec<String>) -> Self {
        keys.sort_unstable();
        keys.dedup();
        if keys.len() == 1 {
            if let Some(key) = keys.pop() {
                return Resources(Names::One(Arc::new(key)));
            }
        }
        keys.shrink_to_fit();
        Resources(Names::Many(Arc::new(keys)))
    }

    /// The names, sorted and without duplicates.
    ///
    /// # Examples
    ///
    /// ```
    /// let set = redlock_core::Resources::one("k")?;
    /// assert_eq!(set.keys(), ["k"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn keys(&self) -> &[String] {
        match &self.0 {
            Names::One(key) | Names::Watched(key) => std::slice::from_ref(&**key),
            Names::Many(keys) => keys,
        }
    }

    /// How many distinct names.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(redlock_core::Resources::new(["a", "a"])?.len(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn len(&self) -> usize {
        self.keys().len()
    }

    /// Whether this is an election's name, whose observers are told when
    /// its lock is released (see
    /// [`WATCH_SUFFIX`](crate::keys::WATCH_SUFFIX)): only
    /// [`Redlock::election`](crate::Redlock::election) makes one.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(!redlock_core::Resources::one("a")?.is_watched());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn is_watched(&self) -> bool {
        matches!(self.0, Names::Watched(_))
    }

    /// This one resource, watched (see [`Resources::is_watched`]).
    pub(crate) fn watched(self) -> Self {
        match self.0 {
            Names::One(key) => Resources(Names::Watched(key)),
            names => Resources(names),
        }
    }

    /// Always `false`: a `Resources` holds at least one name.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(!redlock_core::Resources::one("a")?.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.keys().is_empty()
    }
}

impl TryFrom<&str> for Resources {
    type Error = ConfigError;

    fn try_from(key: &str) -> Result<Self, ConfigError> {
        Resources::one(key)
    }
}

impl TryFrom<String> for Resources {
    type Error = ConfigError;

    fn try_from(key: String) -> Result<Self, ConfigError> {
        Resources::one(key)
    }
}

/// The identity of one lock as backends see it: the resources and the random
/// token that signs them.
///
/// A backend stores the token under every key on acquire, and extends or
/// deletes a key only while it still holds this token.
///
/// # Examples
///
/// ```
/// use redlock_core::Resources;
/// use redlock_core::backend::{Claim, Token};
/// let claim = Claim::new(Resources::one("job")?, Token::from_bytes([1; 20]));
/// assert_eq!(claim.keys(), ["job"]);
/// assert_eq!(claim.token().as_bytes(), &[1; 20]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Claim {
    resources: Resources,
    token: Token,
    /// The token followed by the manager's identity, when it has one: what
    /// the nodes store ([`Claim::value`]).
    value: Option<Arc<[u8]>>,
    queued: Option<Queued>,
    shared: bool,
}

/// How a caller that waits for its resources (through
/// [`Redlock::lock`](crate::Redlock::lock) and its variants, not
/// [`Redlock::try_lock`](crate::Redlock::try_lock)) asks the nodes to be
/// fair to the waiters of other managers, usually other processes.
///
/// Carried by the acquire's [`Claim`] ([`Claim::queued`]). A backend that
/// supports it keeps, next to each key, a short-lived *waiting mark* naming
/// one manager, and on an acquire of a queued claim:
///
/// 1. when [`Queued::yields`] and any key carries the mark of another
///    manager, refuses ([`AcquireOutcome::HeldByOther`](crate::AcquireOutcome::HeldByOther))
///    and changes nothing: somebody else has been waiting;
/// 2. otherwise, when any key is held, refuses and marks every key as waited
///    for by [`Queued::manager`] for [`Queued::mark_ttl`];
/// 3. otherwise grants as usual, and [`Queued::manager`] keeps its place
///    in the keys' lines: when the round fails on other nodes, the lines
///    still agree across the nodes for the caller's next round.
///
/// The release of a claim that carries a mark (the lock's own release) also
/// takes [`Queued::manager`] out of the keys' lines, before the next
/// manager in line is told (see
/// [`LockBackend::release_feed`](crate::LockBackend::release_feed)). The
/// release that cleans up a failed round carries no mark
/// ([`Claim::unqueued`]), so the caller keeps its place for its next round.
///
/// Marks never make a node grant what it would otherwise refuse, so they
/// cannot break mutual exclusion. A backend may ignore them (the default):
/// then a manager whose local line keeps handing the lock from one of its
/// callers to the next can starve other processes.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use redlock_core::{Resources, Ttl};
/// use redlock_core::backend::{Claim, Queued, Token};
/// let mark = Ttl::new(Duration::from_millis(500))?;
/// let claim = Claim::new(Resources::one("job")?, Token::from_bytes([1; 20]))
///     .queued(Queued::new(7, mark, true));
/// assert_eq!(claim.queue().map(|q| q.manager()), Some(7));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Queued {
    manager: u64,
    /// The mark's TTL in milliseconds (below 2^62: [`Ttl::MAX`]), with
    /// [`YIELDS`] set when it yields: three words, and none when absent
    /// (`Option<Queued>` in each claim).
    mark: NonZeroU64,
    ticket: u64,
}

/// The bit of [`Queued::mark`] that says the acquire yields.
const YIELDS: u64 = 1 << 63;

// As the fields they stand for (manager, mark TTL, yields, ticket).
impl std::hash::Hash for Queued {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.manager.hash(state);
        self.mark_ttl().hash(state);
        self.yields().hash(state);
        self.ticket.hash(state);
    }
}

impl std::fmt::Debug for Queued {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queued")
            .field("manager", &self.manager)
            .field("mark_ttl", &self.mark_ttl())
            .field("yields", &self.yields())
            .field("ticket", &self.ticket)
            .finish()
    }
}

impl Queued {
    /// A queued acquire of `manager` (a random id per manager), whose waiting
    /// marks live for `mark_ttl`; with `yields`, it gives way to the marks
    /// of other managers.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlock_core::Ttl;
    /// use redlock_core::backend::Queued;
    /// let q = Queued::new(1, Ttl::new(Duration::from_millis(400))?, false);
    /// assert!(!q.yields());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn new(manager: u64, mark_ttl: Ttl, yields: bool) -> Self {
        // A TTL is at least 1 ms and below 2^62 ms.
        let millis = mark_ttl.as_millis().clamp(1, YIELDS - 1);
        let yields = if yields { YIELDS } else { 0 };
        Queued {
            manager,
            mark: NonZeroU64::new(millis | yields).unwrap_or(NonZeroU64::MIN),
            ticket: 0,
        }
    }

    /// The same with `ticket`: the place in the nodes' lines of waiting
    /// managers (lower first; equal ones in arrival order). Every node gets
    /// the same ticket for a call, so their lines agree on who is first;
    /// the manager uses the wall-clock time its caller started waiting, in
    /// microseconds. Marks only ever refuse, so a wrong ticket can cost a
    /// turn, never safety.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use redlock_core::Ttl;
    /// # use redlock_core::backend::Queued;
    /// let q = Queued::new(9, Ttl::new(Duration::from_millis(1))?, true).with_ticket(42);
    /// assert_eq!(q.ticket(), 42);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn with_ticket(mut self, ticket: u64) -> Self {
        self.ticket = ticket;
        self
    }

    /// The place in the nodes' lines (see [`Queued::with_ticket`]; 0 by
    /// default).
    ///
    /// # Examples
    ///
    /// See [`Queued::with_ticket`].
    #[must_use]
    pub fn ticket(&self) -> u64 {
        self.ticket
    }

    /// The id of the manager that waits.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use redlock_core::Ttl;
    /// # use redlock_core::backend::Queued;
    /// assert_eq!(Queued::new(9, Ttl::new(Duration::from_millis(1))?, true).manager(), 9);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn manager(&self) -> u64 {
        self.manager
    }

    /// How long a waiting mark lives.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use redlock_core::Ttl;
    /// # use redlock_core::backend::Queued;
    /// let ttl = Ttl::new(Duration::from_millis(300))?;
    /// assert_eq!(Queued::new(9, ttl, true).mark_ttl(), ttl);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn mark_ttl(&self) -> Ttl {
        Ttl::of_millis(self.mark.get() & !YIELDS)
    }

    /// Whether this acquire gives way to other managers' waiting marks.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use redlock_core::Ttl;
    /// # use redlock_core::backend::Queued;
    /// assert!(Queued::new(9, Ttl::new(Duration::from_millis(1))?, true).yields());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn yields(&self) -> bool {
        self.mark.get() & YIELDS != 0
    }
}

impl Claim {
    /// Pairs resources with a token.
    ///
    /// # Examples
    ///
    /// ```
    /// # use redlock_core::Resources;
    /// # use redlock_core::backend::{Claim, Token};
    /// let claim = Claim::new(Resources::one("a")?, Token::random().expect("entropy"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn new(resources: Resources, token: Token) -> Self {
        Claim {
            resources,
            token,
            value: None,
            queued: None,
            shared: false,
        }
    }

    /// This claim, taken by a manager that names itself `identity` (see
    /// [`Identity`]): its [`value`](Claim::value) is the token followed by
    /// the identity.
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_core::{Identity, Resources};
    /// use redlock_core::backend::{Claim, Token};
    /// let claim = Claim::new(Resources::one("a")?, Token::from_bytes([1; 20]))
    ///     .with_identity(&Identity::new("web-2")?);
    /// assert_eq!(&claim.value()[..20], &[1; 20]);
    /// assert_eq!(&claim.value()[20..], b"web-2");
    /// assert_eq!(claim.identity().map(|i| i.to_string()), Some("web-2".to_owned()));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn with_identity(mut self, identity: &Identity) -> Self {
        let mut value = Vec::with_capacity(TOKEN_LEN + identity.as_str().len());
        value.extend_from_slice(self.token.as_bytes());
        value.extend_from_slice(identity.as_str().as_bytes());
        self.value = Some(value.into());
        self
    }

    /// The bytes a backend stores under each key of this lock, and compares
    /// before it extends or deletes one: the [token](Claim::token), then
    /// the manager's [identity](Claim::with_identity) when it has one.
    ///
    /// # Examples
    ///
    /// ```
    /// # use redlock_core::Resources;
    /// # use redlock_core::backend::{Claim, Token};
    /// let claim = Claim::new(Resources::one("a")?, Token::from_bytes([1; 20]));
    /// assert_eq!(claim.value(), &[1; 20]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    #[inline]
    pub fn value(&self) -> &[u8] {
        match &self.value {
            Some(value) => value,
            None => self.token.as_bytes(),
        }
    }

    /// The identity of the manager that took this claim, if it has one
    /// (see [`Claim::with_identity`]).
    ///
    /// # Examples
    ///
    /// See [`Claim::with_identity`].
    #[must_use]
    pub fn identity(&self) -> Option<Identity> {
        self.value.as_deref().and_then(Identity::of_value)
    }

    /// This claim, made shared: a read of a read-write lock
    /// ([`Redlock::read`](crate::Redlock::read)). A backend with the
    /// [`SharedClaims`](crate::backend::SharedClaims) ability keeps, for each key, a set of shared holders, each with its own
    /// time-to-live, next to the key's one exclusive holder:
    ///
    /// - an acquire of a shared claim is granted when no key has a live
    ///   exclusive holder (and, for a [`Queued`] claim that
    ///   [yields](Queued::yields), no key's line of waiting managers names
    ///   a live manager other than [`Queued::manager`], wherever in the
    ///   line); it adds the token to each key's shared holders for the TTL
    ///   and never leaves a waiting mark of its own;
    /// - an acquire of an exclusive (ordinary) claim is refused while any
    ///   key has a live shared holder, as when it has an exclusive one;
    /// - extend, release and raise-fence of a shared claim act only when
    ///   every key has the token among its live shared holders, and touch
    ///   only that holder's entry;
    /// - fencing counters are the keys' counters, bumped by shared and
    ///   exclusive acquires alike.
    ///
    /// So shared holders exclude exclusive ones on each node, as two
    /// exclusive holders exclude each other, and the quorum argument of a
    /// mutex applies to a read against a write.
    ///
    /// # Examples
    ///
    /// ```
    /// # use redlock_core::Resources;
    /// # use redlock_core::backend::{Claim, Token};
    /// let claim = Claim::new(Resources::one("doc")?, Token::from_bytes([0; 20])).shared();
    /// assert!(claim.is_shared());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn shared(mut self) -> Self {
        self.shared = true;
        self
    }

    /// Whether this claim is shared ([`Claim::shared`]): a read, not a
    /// lock.
    ///
    /// # Examples
    ///
    /// ```
    /// # use redlock_core::Resources;
    /// # use redlock_core::backend::{Claim, Token};
    /// let claim = Claim::new(Resources::one("doc")?, Token::from_bytes([0; 20]));
    /// assert!(!claim.is_shared());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn is_shared(&self) -> bool {
        self.shared
    }

    /// This claim, acquired by a caller that waits in line (see [`Queued`]).
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use redlock_core::{Resources, Ttl};
    /// # use redlock_core::backend::{Claim, Queued, Token};
    /// let q = Queued::new(3, Ttl::new(Duration::from_millis(400))?, true);
    /// let claim = Claim::new(Resources::one("a")?, Token::from_bytes([0; 20])).queued(q);
    /// assert_eq!(claim.queue(), Some(q));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn queued(mut self, queued: Queued) -> Self {
        self.queued = Some(queued);
        self
    }

    /// The same claim without its waiting mark: what the release of a
    /// failed round carries, so that the nodes keep the caller's place in
    /// the keys' lines for its next round (see [`Queued`]).
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use redlock_core::{Resources, Ttl};
    /// # use redlock_core::backend::{Claim, Queued, Token};
    /// let q = Queued::new(3, Ttl::new(Duration::from_millis(400))?, true);
    /// let claim = Claim::new(Resources::one("a")?, Token::from_bytes([0; 20])).queued(q);
    /// let cleanup = claim.unqueued();
    /// assert_eq!(cleanup.queue(), None);
    /// assert_eq!(cleanup.token(), claim.token());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn unqueued(&self) -> Claim {
        Claim {
            queued: None,
            ..self.clone()
        }
    }

    /// How the acquire of this claim waits, if it comes from a caller that
    /// waits in line; `None` for a one-off attempt.
    ///
    /// # Examples
    ///
    /// ```
    /// # use redlock_core::Resources;
    /// # use redlock_core::backend::{Claim, Token};
    /// let claim = Claim::new(Resources::one("a")?, Token::from_bytes([0; 20]));
    /// assert!(claim.queue().is_none());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn queue(&self) -> Option<Queued> {
        self.queued
    }

    /// The locked resources.
    ///
    /// # Examples
    ///
    /// ```
    /// # use redlock_core::Resources;
    /// # use redlock_core::backend::{Claim, Token};
    /// let claim = Claim::new(Resources::one("a")?, Token::from_bytes([0; 20]));
    /// assert_eq!(claim.resources().len(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn resources(&self) -> &Resources {
        &self.resources
    }

    /// The resource names, sorted.
    ///
    /// # Examples
    ///
    /// ```
    /// # use redlock_core::Resources;
    /// # use redlock_core::backend::{Claim, Token};
    /// let claim = Claim::new(Resources::new(["b", "a"])?, Token::from_bytes([0; 20]));
    /// assert_eq!(claim.keys(), ["a", "b"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn keys(&self) -> &[String] {
        self.resources.keys()
    }

    /// The token that signs every key of this lock.
    ///
    /// # Examples
    ///
    /// ```
    /// # use redlock_core::Resources;
    /// # use redlock_core::backend::{Claim, Token};
    /// let claim = Claim::new(Resources::one("a")?, Token::from_bytes([9; 20]));
    /// assert_eq!(claim.token().as_bytes()[0], 9);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn token(&self) -> &Token {
        &self.token
    }
}

/// Anything that names the resources of a lock: a `&str` or `String` for one,
/// an array, slice or `Vec` of names for a multi-resource lock, or a ready
/// [`Resources`].
///
/// # Examples
///
/// ```
/// use redlock_core::IntoResources;
/// assert_eq!("a".into_resources()?.keys(), ["a"]);
/// assert_eq!(["b", "a"].into_resources()?.keys(), ["a", "b"]);
/// assert!(Vec::<String>::new().into_resources().is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait IntoResources {
    /// Validates the names.
    ///
    /// # Errors
    ///
    /// [`ConfigError::EmptyKey`] or [`ConfigError::NoKeys`].
    fn into_resources(self) -> Result<Resources, ConfigError>;
}

impl IntoResources for Resources {
    fn into_resources(self) -> Result<Resources, ConfigError> {
        Ok(self)
    }
}
impl IntoResources for &Resources {
    fn into_resources(self) -> Result<Resources, ConfigError> {
        Ok(self.clone())
    }
}
impl IntoResources for &str {
    fn into_resources(self) -> Result<Resources, ConfigError> {
        Resources::one(self)
    }
}
impl IntoResources for String {
    fn into_resources(self) -> Result<Resources, ConfigError> {
        Resources::one(self)
    }
}
impl IntoResources for &String {
    fn into_resources(self) -> Result<Resources, ConfigError> {
        Resources::one(self.as_str())
    }
}
impl<S: AsRef<str>, const N: usize> IntoResources for [S; N] {
    fn into_resources(self) -> Result<Resources, ConfigError> {
        Resources::new(self.iter().map(|s| s.as_ref().to_owned()))
    }
}
impl<S: AsRef<str>> IntoResources for &[S] {
    fn into_resources(self) -> Result<Resources, ConfigError> {
        Resources::new(self.iter().map(|s| s.as_ref().to_owned()))
    }
}
impl<S: AsRef<str>> IntoResources for Vec<S> {
    fn into_resources(self) -> Result<Resources, ConfigError> {
        self.as_slice().into_resources()
    }
}
