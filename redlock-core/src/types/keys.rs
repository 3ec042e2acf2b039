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
//! | `R` [`WATCH_SUFFIX`] | the managers watching election `R`'s leader, told when its lock is released (a sorted set of ids, each scored by when it stops watching) |
//! | `R` [`FORMAT_SUFFIX`] | the wire format `R`'s keys are in, when not [`WIRE_FORMAT`] 1 (never written by this version) |
//!
//! # Versions
//!
//! The layout above is wire format [`WIRE_FORMAT`] (1). Every script that
//! acquires or joins state (the acquire, the queued acquire, the fence
//! raise and their shared twins) first reads the format key of each of its
//! lock keys ([`format_key`]: the key's resource, the part before its first
//! [`SEPARATOR`], then [`FORMAT_SUFFIX`], so that a semaphore's permits share
//! the semaphore's). Absent, or the decimal of [`WIRE_FORMAT`]: the script
//! goes on. Anything else, a value or a key of another type: it refuses
//! with a `WIREFORMAT` error reply and writes nothing. Releases and extends
//! never read it (a holder can always let go of, or keep, its own token),
//! nor does the plain `SET R token NX PX` path, which is the layout every
//! version shares with plain clients.
//!
//! Format 1 never writes the format key: absent means 1. A later version
//! that changes the layout must write its own number there (with a TTL at
//! least as long as that of the helper keys it writes), so that clients of
//! format 1 refuse its resources instead of misreading them, and must
//! itself refuse a resource whose helper keys are in format 1 (present
//! without a format key).
//!
//! ```
//! use redlock_core::keys::{format_key, FORMAT_SUFFIX, WIRE_FORMAT};
//! assert_eq!(WIRE_FORMAT, 1);
//! assert_eq!(format_key(b"job"), format!("job{FORMAT_SUFFIX}").into_bytes());
//! assert_eq!(format_key("job\u{1f}permit:3".as_bytes()), b"job\x1fformat");
//! ```
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

/// What follows an election's name in the key of the managers watching
/// its leader (a sorted set: each member a manager's id, its score the
/// node's time in milliseconds when it stops watching). An observer's
/// reading joins it; a release of the election's lock tells each live
/// member on its channel, as a release tells the first waiter.
pub const WATCH_SUFFIX: &str = "\u{1f}watchers";

/// What separates a semaphore's name from a permit's number in the
/// permit's key.
pub const PERMIT_INFIX: &str = "\u{1f}permit:";

/// What follows a resource's name in the key that says which wire format
/// its keys are in (see [Versions](self#versions)).
pub const FORMAT_SUFFIX: &str = "\u{1f}format";

/// The wire format of the keys, values, script arguments and channels this
/// version of the library writes on a node: the layout of this module's
/// table. A lock key whose format key holds another value is refused by
/// every script that acquires (see [Versions](self#versions)).
pub const WIRE_FORMAT: u32 = 1;

/// The format key of a lock key: its resource (the part before its first
/// [`SEPARATOR`], the whole key for a lock the library names) and
/// [`FORMAT_SUFFIX`]. A semaphore's permits share the semaphore's.
///
/// # Examples
///
/// ```
/// use redlock_core::keys::format_key;
/// assert_eq!(format_key(b"jobs"), b"jobs\x1fformat");
/// assert_eq!(format_key(b"jobs\x1fpermit:0"), b"jobs\x1fformat");
/// ```
#[must_use]
pub fn format_key(lock_key: &[u8]) -> Vec<u8> {
    let mut key = Vec::with_capacity(lock_key.len() + FORMAT_SUFFIX.len());
    format_key_in(&mut key, lock_key);
    key
}

/// [`format_key`], written into `buf` (cleared first).
pub(crate) fn format_key_in<'b>(buf: &'b mut Vec<u8>, lock_key: &[u8]) -> &'b [u8] {
    // The separator is one byte in UTF-8, which no other character has.
    let end = lock_key
        .iter()
        .position(|&b| char::from(b) == SEPARATOR)
        .unwrap_or(lock_key.len());
    buf.clear();
    buf.extend_from_slice(&lock_key[..end]);
    buf.extend_from_slice(FORMAT_SUFFIX.as_bytes());
    buf
}

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
        for tail in [
            FENCE_SUFFIX,
            WAIT_SUFFIX,
            READERS_SUFFIX,
            PERMIT_INFIX,
            FORMAT_SUFFIX,
        ] {
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
            for tail in ["", FENCE_SUFFIX, WAIT_SUFFIX, READERS_SUFFIX, FORMAT_SUFFIX] {
                let key = format!("{name}{tail}");
                assert!(keys.insert(key.clone()), "{key:?} twice");
                let owner = key.split(SEPARATOR).next().unwrap_or_default();
                assert_eq!(owner, name);
            }
            let permit = format!("{name}{PERMIT_INFIX}0");
            assert!(keys.insert(permit.clone()));
            assert!(keys.insert(format!("{permit}{FENCE_SUFFIX}")));
            // A permit's format key is its semaphore's.
            assert_eq!(
                format_key(permit.as_bytes()),
                format!("{name}{FORMAT_SUFFIX}").into_bytes()
            );
        }
    }

    #[test]
    fn the_format_key_of_a_key_is_its_resources() {
        assert_eq!(format_key(b""), FORMAT_SUFFIX.as_bytes());
        assert_eq!(format_key("é\u{1f}".as_bytes()), "é\u{1f}format".as_bytes());
        assert_eq!(format_key(b"a\x1fb\x1fc"), b"a\x1fformat");
        // The separator is one byte in UTF-8: no other character holds it.
        assert_eq!(SEPARATOR.len_utf8(), 1);
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
