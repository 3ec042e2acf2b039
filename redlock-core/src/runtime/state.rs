//! What a guard and the keeper thread share about one held lock, and the
//! extend round both run.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use crate::engine::{Lease, Single, Until};
use crate::runtime::context::Shared;
use crate::{Claim, LockError, Ttl};

/// What the guard and the keeper thread share about one held lock.
pub(crate) struct LockState<E> {
    pub(crate) claim: Arc<Claim>,
    pub(crate) life: Mutex<Lease<E>>,
    /// Held for the whole of an extend round, so that the keeper's and the
    /// caller's extensions never interleave (each sets the validity from
    /// its own round).
    pub(crate) extending: Mutex<()>,
}

/// One extend round for `state`; shared by `Lock::extend` and the keeper.
pub(crate) fn extend<E: std::error::Error + Send + Sync + 'static>(
    shared: &Shared<E>,
    state: &LockState<E>,
    ttl: Ttl,
) -> Result<Duration, LockError<E>> {
    let turn = state.extending.lock();
    let started = std::time::Instant::now();
    let now = shared.config.clock.now();
    let lost_before = state.life.lock().lost().is_some();
    let result = (|| {
        let (message, skips) = {
            let mut life = state.life.lock();
            (
                life.begin_extend(now, ttl, &shared.config.settings)?,
                life.skips().cloned(),
            )
        };
        let single = Single::new(
            &shared.config.settings,
            message,
            Arc::clone(&state.claim),
            Until::Decided,
        )
        .skipping(skips);
        let decided = shared.run_single(single);
        state
            .life
            .lock()
            .end_extend(ttl, decided, &shared.config.settings)
    })();
    let lost_now = state.life.lock().lost();
    // The hook runs with this lock's turn let go: it may extend it.
    drop(turn);
    shared.observe_extend(state.claim.resources(), started, &result);
    if let (false, Some(reason)) = (lost_before, lost_now) {
        shared.observe_lost(state.claim.resources(), reason);
    }
    result
}
