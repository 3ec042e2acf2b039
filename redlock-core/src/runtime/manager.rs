//! One manager's parts: the shared context (workers, settings), its keeper
//! thread and its local lines. The handles ([`Redlock`](crate::Redlock)
//! and every [`Lock`](crate::Lock)) hold it; the last one to go stops the
//! workers (see `Shared`'s drop).

use std::sync::Arc;

use crate::runtime::context::Shared;
use crate::runtime::keeper::Keeper;
use crate::runtime::lines::Lines;
use crate::runtime::names::Names;

/// What a manager's handles and guards hold.
pub(crate) struct Manager<E> {
    pub(crate) shared: Arc<Shared<E>>,
    pub(crate) keeper: Keeper<E>,
    pub(crate) lines: Lines<E>,
    /// Names used as semaphores.
    pub(crate) names: Names,
}
