//! The key space a lock lives in: which keys a backend keeps for a
//! resource, written once for every backend.
//!
//! A lock on resource `R` is the key `R` itself, the bare name, so that a
//! plain `SET R token NX PX ttl` client excludes it and is excluded by it.
//! Everything else a backend keeps for `R` (its fencing counter, its
//! waiting line, its readers) and a semaphore's permits are *helper keys*:
//! `R`, then [`SEPARATOR`], then the helper's name. No resource name may
//! contain [`SEPARATOR`] ([`ConfigError::ReservedChar`]), so no name,
//! whatever data it was built from, is another resource's helper key, and
//! a key splits at its first [`SEPARATOR`] into the resource it belongs to
//! and what it is.
//!
//! | key | what it is |
//! |---|---|
//! | `R` | the lock on `R` (a token with a TTL), or `R`'s readers' write guard |
//! | `R` [`FENCE_SUFFIX`] | `R`'s fencing counter (an integer, no TTL) |
//! | `R` [`WAIT_SUFFIX`] | the line of managers waiting for `R` |
//! | `R` [`WAIT_SUFFIX`] `:<id>` | manager `<id>`'s place in that line |
//! | `R` [`READERS_SUFFIX`] | `R`'s readers (a read-write lock's shared claims) |
//! | `S` [`PERMIT_INFIX`] `<i>` | permit `i` of semaphore `S`: a lock of its own, with its own helper keys |
//!
//! # Examples
//!
//! ```
//! use redlock_core::keys::{FENCE_SUFFIX, SEPARATOR};
//! use redlock_core::{ConfigError, Resources};
//!
//! assert_eq!(FENCE_SUFFIX, "\u{1f}fence");
//! // A name built from any data but that one character is accepted ...
//! assert!(Resources::one("job:fence").is_ok());
//! // ... and none can be a helper key.
//! let helper = format!("job{FENCE_SUFFIX}");
//! assert!(matches!(Resources::one(helper), Err(ConfigError::ReservedChar { .. })));
//! assert!(!"job:fence".contains(SEPARATOR));
//! ```

use crate::ConfigError;

/// The one character no resource name may contain: U+001F, the ASCII
/// unit separator, a control character that text data does not carry.
/// Every helper key has it right after the name of the resource it
/// belongs to.
pub const SEPARATOR: char = '\u{1f}';

/// What follows a resource's name in its fencing counter's key.
pub const FENCE_SUFFIX: &str = "\u{1f}fence";

/// What follows a resource's name in its waiting line's key; a waiting
/// manager's place in the line is that key, `:` and the manager's id.
pub const WAIT_SUFFIX: &str = "\u{1f}waiting";

/// What follows a resource's name in the key of its readers (the shared
/// claims of a read-write lock).
pub const READERS_SUFFIX: &str = "\u{1f}readers";

/// What separates a semaphore's name from a permit's number in the
/// permit's key.
pub const PERMIT_INFIX: &str = "\u{1f}permit:";

/// Checks a name a user gave for a lock, a semaphore or a read-write lock.
///
/// # Errors
///
/// [`ConfigError::EmptyKey`] for an empty name,
/// [`ConfigError::ReservedChar`] for one that contains [`SEPARATOR`].
///
/// # Examples
///
/// ```
/// use redlock_core::{keys::check_name, ConfigError};
/// assert!(check_name("any bytes: \0 \u{7f} é / : * ?").is_ok());
/// assert_eq!(check_name(""), Err(ConfigError::EmptyKey));
/// assert!(matches!(check_name("a\u{1f}b"), Err(ConfigError::ReservedChar { .. })));
/// ```
pub fn check_name(name: &str) -> Result<(), ConfigError> {
    if name.is_empty() {
        return Err(ConfigError::EmptyKey);
    }
    if name.contains(SEPARATOR) {
        return Err(ConfigError::ReservedChar {
            name: name.to_owned(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_helper_key_starts_its_tail_with_the_separator() {
        for tail in [FENCE_SUFFIX, WAIT_SUFFIX, READERS_SUFFIX, PERMIT_INFIX] {
            assert!(tail.starts_with(SEPARATOR), "{tail:?}");
            assert_eq!(tail.matches(SEPARATOR).count(), 1, "{tail:?}");
        }
    }

    #[test]
    fn a_key_splits_into_its_resource_and_its_helper_unambiguously() {
        // Helper keys of one resource differ from each other and from
        // every other resource's: the part before the first separator is
        // the resource, and no name has a separator.
        let names = ["job", "job:waiting", "job:fence", "jo", "job:permit:0"];
        let mut keys = std::collections::HashSet::new();
        for name in names {
            assert_eq!(check_name(name), Ok(()));
            for tail in ["", FENCE_SUFFIX, WAIT_SUFFIX, READERS_SUFFIX] {
                let key = format!("{name}{tail}");
                assert!(keys.insert(key.clone()), "{key:?} twice");
                let owner = key.split(SEPARATOR).next().unwrap_or_default();
                assert_eq!(owner, name);
            }
            let permit = format!("{name}{PERMIT_INFIX}0");
            assert!(keys.insert(permit.clone()));
            assert!(keys.insert(format!("{permit}{FENCE_SUFFIX}")));
        }
    }

    #[test]
    fn names_with_the_separator_are_refused_and_nothing_else_is() {
        assert!(matches!(
            check_name("\u{1f}"),
            Err(ConfigError::ReservedChar { .. })
        ));
        assert!(matches!(
            check_name(&format!("job{WAIT_SUFFIX}")),
            Err(ConfigError::ReservedChar { .. })
        ));
        for c in (0..=0x7f_u8).map(char::from).filter(|&c| c != SEPARATOR) {
            assert_eq!(check_name(&format!("a{c}b")), Ok(()), "{c:?}");
        }
    }
}
