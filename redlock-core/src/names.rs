//! The names a manager uses as semaphores, so that one is not also locked
//! as a mutex, or as a semaphore of another size, through the same manager.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;

use crate::{ConfigError, Resources};

/// The most permits a semaphore may have: a call that finds every permit
/// taken makes one round per permit (see `Semaphore`).
pub const MAX_PERMITS: u32 = 64;

/// The key of permit `slot` of semaphore `name`.
pub(crate) fn permit_key(name: &str, slot: u32) -> String {
    format!("{name}:permit:{slot}")
}

/// The semaphore a permit key belongs to, if `key` has a permit key's form.
fn semaphore_of(key: &str) -> Option<&str> {
    let (name, slot) = key.rsplit_once(":permit:")?;
    (!slot.is_empty() && slot.bytes().all(|b| b.is_ascii_digit())).then_some(name)
}

/// Semaphore names and their permits, for one manager.
#[derive(Default)]
pub(crate) struct Names {
    /// Whether any semaphore was defined: a lock call reads only this
    /// until one is.
    any: AtomicBool,
    semaphores: Mutex<HashMap<String, u32>>,
}

impl Names {
    /// Records `name` as a semaphore of `permits`; an error if this manager
    /// knows it with another number.
    pub(crate) fn define(&self, name: &str, permits: u32) -> Result<(), ConfigError> {
        if name.is_empty() {
            return Err(ConfigError::EmptyKey);
        }
        if permits == 0 {
            return Err(ConfigError::NoPermits);
        }
        if permits > MAX_PERMITS {
            return Err(ConfigError::TooManyPermits {
                permits,
                max: MAX_PERMITS,
            });
        }
        let mut semaphores = self.semaphores.lock();
        match semaphores.get(name) {
            Some(&known) if known != permits => Err(ConfigError::SemaphoreName {
                name: name.to_owned(),
                permits: known,
            }),
            Some(_) => Ok(()),
            None => {
                semaphores.insert(name.to_owned(), permits);
                self.any.store(true, Ordering::Release);
                Ok(())
            }
        }
    }

    /// An error if a key of `resources` is a semaphore's name or one of its
    /// permit keys: those are locked only through the semaphore.
    pub(crate) fn check_lock(&self, resources: &Resources) -> Result<(), ConfigError> {
        if !self.any.load(Ordering::Acquire) {
            return Ok(());
        }
        let semaphores = self.semaphores.lock();
        for key in resources.keys() {
            for name in [Some(key.as_str()), semaphore_of(key)]
                .into_iter()
                .flatten()
            {
                if let Some(&permits) = semaphores.get(name) {
                    return Err(ConfigError::SemaphoreName {
                        name: name.to_owned(),
                        permits,
                    });
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_permit_key_names_its_semaphore() {
        assert_eq!(semaphore_of(&permit_key("jobs", 3)), Some("jobs"));
        assert_eq!(semaphore_of("a:permit:b:permit:12"), Some("a:permit:b"));
        assert_eq!(semaphore_of("jobs:permit:"), None);
        assert_eq!(semaphore_of("jobs:permit:x"), None);
        assert_eq!(semaphore_of("jobs"), None);
    }

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
        assert_eq!(names.check_lock(&one("jobs:permit:2")), taken);
        assert_eq!(names.check_lock(&one("jobs:other")), Ok(()));
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
