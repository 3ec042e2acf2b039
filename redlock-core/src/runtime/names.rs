//! The names a manager uses as semaphores and read-write locks, so that one
//! is not also locked as a mutex, or used as something else, through the
//! same manager; and the writers of each read-write lock waiting on it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::engine::{LocalWriters, MAX_PERMITS};
use crate::{ConfigError, Resources};

/// What a name is used as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Semaphore(u32),
    RwLock,
}

impl Kind {
    fn error(self, name: &str) -> ConfigError {
        let name = name.to_owned();
        match self {
            Kind::Semaphore(permits) => ConfigError::SemaphoreName { name, permits },
            Kind::RwLock => ConfigError::RwLockName { name },
        }
    }
}

/// The writers of one read-write lock that wait on this manager, by the
/// order they came in: a reader that came later waits for them (the
/// nodes' waiting marks do that for other managers).
#[derive(Debug, Default)]
pub(crate) struct Writers {
    state: Mutex<LocalWriters>,
}

impl Writers {
    /// A number in arrival order, for a reader or a writer.
    pub(crate) fn arrive(&self) -> u64 {
        self.state.lock().arrive()
    }

    /// The writer that arrived as `seq` waits until the returned guard
    /// drops.
    pub(crate) fn wait(self: &Arc<Self>, seq: u64) -> WaitingWriter {
        self.state.lock().start_waiting(seq);
        WaitingWriter {
            writers: Arc::clone(self),
            seq,
        }
    }

    /// Whether a writer that arrived before `seq` still waits.
    pub(crate) fn ahead_of(&self, seq: u64) -> bool {
        self.state.lock().reader_must_wait(seq)
    }
}

/// A writer waiting; dropped when it acquired or gave up.
pub(crate) struct WaitingWriter {
    writers: Arc<Writers>,
    seq: u64,
}

impl Drop for WaitingWriter {
    fn drop(&mut self) {
        self.writers.state.lock().stop_waiting(self.seq);
    }
}

struct Entry {
    kind: Kind,
    writers: Arc<Writers>,
}

/// Semaphore and read-write lock names, for one manager.
#[derive(Default)]
pub(crate) struct Names {
    /// Whether any name was defined: a lock call reads only this until one
    /// is.
    any: AtomicBool,
    defined: Mutex<HashMap<String, Entry>>,
}

impl Names {
    /// Records `name` as a semaphore of `permits`; an error if this manager
    /// knows it as something else.
    pub(crate) fn define(&self, name: &str, permits: u32) -> Result<(), ConfigError> {
        if permits == 0 {
            return Err(ConfigError::NoPermits);
        }
        self.define_as(name, Kind::Semaphore(permits), permits)
            .map(drop)
    }

    /// Records `name` as a read-write lock; an error if this manager knows
    /// it as something else. Its waiting writers, shared by every handle of
    /// the name on this manager.
    pub(crate) fn define_rwlock(&self, name: &str) -> Result<Arc<Writers>, ConfigError> {
        self.define_as(name, Kind::RwLock, 1)
    }

    fn define_as(&self, name: &str, kind: Kind, count: u32) -> Result<Arc<Writers>, ConfigError> {
        crate::keys::check_name(name)?;
        if count > MAX_PERMITS {
            return Err(ConfigError::TooManyPermits {
                permits: count,
                max: MAX_PERMITS,
            });
        }
        let mut defined = self.defined.lock();
        match defined.get(name) {
            Some(entry) if entry.kind != kind => Err(entry.kind.error(name)),
            Some(entry) => Ok(Arc::clone(&entry.writers)),
            None => {
                let writers = Arc::default();
                defined.insert(
                    name.to_owned(),
                    Entry {
                        kind,
                        writers: Arc::clone(&writers),
                    },
                );
                self.any.store(true, Ordering::Release);
                Ok(writers)
            }
        }
    }

    /// An error if a key of `resources` is a semaphore's or read-write
    /// lock's name: those are locked only through them.
    pub(crate) fn check_lock(&self, resources: &Resources) -> Result<(), ConfigError> {
        if !self.any.load(Ordering::Acquire) {
            return Ok(());
        }
        let defined = self.defined.lock();
        for key in resources.keys() {
            // A semaphore's permit keys cannot be named at all
            // ([`ConfigError::ReservedChar`]).
            if let Some(entry) = defined.get(key.as_str()) {
                return Err(entry.kind.error(key));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::permit_key;

    #[test]
    fn a_name_is_one_semaphore_and_no_mutex() {
        let names = Names::default();
        let one = |k: &str| Resources::one(k).unwrap_or_else(|_| unreachable!());
        assert_eq!(names.check_lock(&one("jobs")), Ok(()));
        assert_eq!(names.define("jobs", 3), Ok(()));
        assert_eq!(names.define("jobs", 3), Ok(()));
        let taken = Err(ConfigError::SemaphoreName {
            name: "jobs".into(),
            permits: 3,
        });
        assert_eq!(names.define("jobs", 4), taken);
        assert_eq!(names.check_lock(&one("jobs")), taken);
        assert_eq!(names.check_lock(&one("jobs:permit:2")), Ok(()));
        assert!(matches!(
            Resources::one(permit_key("jobs", 2)),
            Err(ConfigError::ReservedChar { .. })
        ));
        assert_eq!(names.check_lock(&one("jobs:other")), Ok(()));
        assert!(names.define_rwlock("doc").is_ok());
        assert!(names.define_rwlock("doc").is_ok());
        let doc: Result<(), ConfigError> = Err(ConfigError::RwLockName { name: "doc".into() });
        assert_eq!(names.check_lock(&one("doc")), doc);
        assert_eq!(names.define("doc", 4), doc);
        assert_eq!(names.define_rwlock("jobs").map(drop), taken);
        assert_eq!(
            names.define_rwlock("").map(drop),
            Err(ConfigError::EmptyKey)
        );
        assert_eq!(names.define("", 1), Err(ConfigError::EmptyKey));
        assert_eq!(names.define("x", 0), Err(ConfigError::NoPermits));
        assert_eq!(
            names.define("x", MAX_PERMITS + 1),
            Err(ConfigError::TooManyPermits {
                permits: MAX_PERMITS + 1,
                max: MAX_PERMITS
            })
        );
    }
}
