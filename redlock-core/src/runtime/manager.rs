//! One manager's parts: the shared context (workers, settings), its keeper
//! thread and its local lines. The handles ([`Redlock`](crate::Redlock)
//! and every [`Lock`](crate::Lock)) hold it; the last one to go stops the
//! workers (see `Shared`'s drop).

use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use crate::events::{EventHandler, Observer};
use crate::runtime::config::Config;
use crate::runtime::context::Shared;
use crate::runtime::keeper::Keeper;
use crate::runtime::lines::Lines;
use crate::runtime::names::Names;
use crate::runtime::poller::LazyPoller;
use crate::runtime::wake::Wakeups;
use crate::runtime::worker::Worker;
use crate::{BuildError, Claim, LockBackend, Resources, Token, Ttl};

/// What a manager's handles and guards hold.
pub(crate) struct Manager<E> {
    pub(crate) shared: Arc<Shared<E>>,
    pub(crate) keeper: Keeper<E>,
    pub(crate) lines: Lines<E>,
    /// Names used as semaphores.
    pub(crate) names: Names,
}

impl<E: std::error::Error + Send + Sync + 'static> Manager<E> {
    /// Starts a manager's parts over `backends`: the node workers, the
    /// release feeds, the context every caller shares. The one place a
    /// manager is put together; [`Builder::build`](crate::Builder::build)
    /// validates the settings first.
    pub(crate) fn start<B: LockBackend<Error = E> + 'static>(
        backends: Vec<B>,
        config: Config,
        events: Option<Arc<dyn EventHandler>>,
    ) -> Result<Self, BuildError> {
        let depth = config.queue_depth;
        let observer = Arc::new(Observer::new(events));
        let feeds: Vec<_> = if config.wake_ups {
            backends
                .iter()
                .filter_map(LockBackend::release_feed)
                .collect()
        } else {
            Vec::new()
        };
        let batches = backends.iter().all(LockBackend::starts_batches);
        let workers = backends
            .into_iter()
            .enumerate()
            .map(|(i, backend)| Worker::spawn(i, backend, depth, &observer).map(Arc::new))
            .collect::<Result<Vec<_>, _>>()?;
        let poller = if config.poller && batches && workers.len() > 1 {
            LazyPoller::new(&workers, config.settings.node_timeout, &observer)
        } else {
            LazyPoller::none()
        };
        let mut rng = match config.jitter_seed {
            Some(seed) => fastrand::Rng::with_seed(seed),
            None => fastrand::Rng::new(),
        };
        let seeded = config.jitter_seed.is_some();
        let flush_claim = Arc::new(Claim::new(
            Resources::one("redlock:flush")?,
            Token::from_bytes([0; crate::TOKEN_LEN]),
        ));
        // Names this manager in its waiting marks; only needs to differ from
        // other managers'.
        let id = match Token::random_u64() {
            Ok(id) => id,
            Err(_) => rng.u64(..),
        };
        let mark_ttl = Ttl::new(
            config
                .settings
                .retry
                .max()
                .saturating_add(config.settings.node_timeout)
                .saturating_mul(2)
                .max(Duration::from_millis(1)),
        )?;
        let lines = Lines::new(config.settings.node_timeout, config.settings.retry.max());
        let shared = Arc::new(Shared {
            id,
            mark_ttl,
            workers,
            poller,
            flush_claim,
            config,
            rng: seeded.then(|| Mutex::new(rng)),
            waiting: AtomicUsize::new(0),
            observer,
            wakeups: Wakeups::new(feeds, id, mark_ttl.as_duration()),
        });
        Ok(Manager {
            shared,
            keeper: Keeper::new(),
            lines,
            names: Names::default(),
        })
    }
}
