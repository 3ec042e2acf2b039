//! The keep-alive policy of a lock: how long and how often it may be
//! extended, and who is told when it is lost.

use std::fmt;
use std::time::Duration;

use crate::LostReason;

/// How a lock is kept alive by automatic extension, and where that stops.
///
/// Extension is bounded, as the specification asks, so that a holder that
/// hangs cannot keep a resource forever: by total hold time (default one
/// hour) and by number of extensions (default unbounded). When a bound is
/// reached or an extension fails, the lock is marked lost and the optional
/// callback runs once, on the keeper thread.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use redlock_core::KeepAlive;
/// let (tx, rx) = std::sync::mpsc::channel();
/// let policy = KeepAlive::new()
///     .max_hold(Duration::from_secs(300))
///     .max_extensions(100)
///     .on_lost(move |reason| {
///         let _ = tx.send(reason);
///     });
/// # drop((policy, rx));
/// ```
#[must_use]
pub struct KeepAlive {
    pub(crate) max_hold: Duration,
    pub(crate) max_extensions: u32,
    pub(crate) on_lost: Option<Box<dyn FnOnce(LostReason) + Send>>,
}

impl KeepAlive {
    /// The defaults: at most one hour of total hold time, no bound on the
    /// number of extensions, no callback.
    ///
    /// # Examples
    ///
    /// ```
    /// let policy = redlock_core::KeepAlive::new();
    /// ```
    pub fn new() -> Self {
        KeepAlive {
            max_hold: Duration::from_secs(3600),
            max_extensions: u32::MAX,
            on_lost: None,
        }
    }

    /// The longest total hold time, from when the lock is kept alive: no
    /// extension starts after it. Defaults to one hour.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// let policy = redlock_core::KeepAlive::new().max_hold(Duration::from_secs(600));
    /// ```
    pub fn max_hold(mut self, max_hold: Duration) -> Self {
        self.max_hold = max_hold;
        self
    }

    /// The largest number of automatic extensions. Defaults to unbounded.
    ///
    /// # Examples
    ///
    /// ```
    /// let policy = redlock_core::KeepAlive::new().max_extensions(10);
    /// ```
    pub fn max_extensions(mut self, max_extensions: u32) -> Self {
        self.max_extensions = max_extensions;
        self
    }

    /// Runs `callback` once, on the keeper thread, when the lock is lost.
    /// Keep it short (it delays other locks' extensions); a panic in it is
    /// contained. It runs with none of the manager's locks held, so it may
    /// call back into the manager (read
    /// [`Redlock::stats`](crate::Redlock::stats), take another lock), as
    /// an event hook may ([`Builder::events`](crate::Builder::events)).
    ///
    /// # Examples
    ///
    /// ```
    /// let policy = redlock_core::KeepAlive::new().on_lost(|reason| eprintln!("lock lost: {reason}"));
    /// ```
    pub fn on_lost(mut self, callback: impl FnOnce(LostReason) + Send + 'static) -> Self {
        self.on_lost = Some(Box::new(callback));
        self
    }
}

impl Default for KeepAlive {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for KeepAlive {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeepAlive")
            .field("max_hold", &self.max_hold)
            .field("max_extensions", &self.max_extensions)
            .field("on_lost", &self.on_lost.is_some())
            .finish()
    }
}
