//! What applications use: the manager, its builder, the guard, the
//! semaphore, the read-write lock and the type-erased manager.

pub(crate) mod builder;
pub(crate) mod dynamic;
pub(crate) mod election;
pub(crate) mod guard;
pub(crate) mod holder;
pub(crate) mod redlock;
pub(crate) mod rwlock;
pub(crate) mod semaphore;
