//! The shell that carries the engine's machines: node workers, the
//! poller, mailboxes, the keeper thread, the local lines' parking,
//! wake-ups.

pub(crate) mod config;
pub(crate) mod context;
pub(crate) mod keeper;
pub(crate) mod lines;
pub(crate) mod mailbox;
pub(crate) mod manager;
pub(crate) mod names;
pub(crate) mod poller;
pub(crate) mod ready;
pub(crate) mod state;
pub(crate) mod wake;
pub(crate) mod worker;
