//! Holder identity: a short, user-chosen name of a manager (a host and a
//! process id, say), stored with every lock the manager takes so that
//! anyone can see who holds a lock.

use std::fmt;
use std::sync::Arc;

use crate::{ConfigError, TOKEN_LEN};

/// The name a manager gives itself, stored with every lock it takes (see
/// [`Builder::identity`](crate::Builder::identity)) and shown by
/// [`Redlock::holder`](crate::Redlock::holder) and `redlock status`.
///
/// It is never secret: anyone who can read the nodes' keys reads it. It is
/// 1 to [`Identity::MAX_LEN`] bytes of UTF-8 without control characters, so
/// that it prints safely on a terminal or in a log.
///
/// A backend stores it after the lock's random token in each key's value
/// ([`Claim::value`](crate::backend::Claim::value)): it costs no round and
/// no key of its own, and releases and extends compare the whole value as
/// before.
///
/// # Examples
///
/// ```
/// use redlock_core::{ConfigError, Identity};
/// let me = Identity::new(format!("worker-3:{}", std::process::id()))?;
/// assert!(me.as_str().starts_with("worker-3:"));
/// assert!(matches!(Identity::new("bad\nname"), Err(ConfigError::Identity { .. })));
/// assert!(Identity::new("x".repeat(Identity::MAX_LEN + 1)).is_err());
/// # Ok::<(), ConfigError>(())
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Identity(Arc<str>);

impl Identity {
    /// The longest identity accepted, in bytes.
    pub const MAX_LEN: usize = 128;

    /// Validates `name` as an identity.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Identity`] when it is empty, longer than
    /// [`Identity::MAX_LEN`] bytes, or has a control character in it.
    ///
    /// # Examples
    ///
    /// See [`Identity`].
    pub fn new(name: impl Into<String>) -> Result<Self, ConfigError> {
        let name = name.into();
        let why = if name.is_empty() {
            Some("it is empty")
        } else if name.len() > Self::MAX_LEN {
            Some("it is longer than 128 bytes")
        } else if name.chars().any(char::is_control) {
            Some("it has a control character in it")
        } else {
            None
        };
        match why {
            Some(why) => Err(ConfigError::Identity {
                // Bounded and escaped: the error may be printed.
                name: name.chars().take(Self::MAX_LEN).collect(),
                why,
            }),
            None => Ok(Identity(name.into())),
        }
    }

    /// The identity, as given.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(redlock_core::Identity::new("a")?.as_str(), "a");
    /// # Ok::<(), redlock_core::ConfigError>(())
    /// ```
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The identity stored in a lock key's `value` (a token of
    /// [`TOKEN_LEN`] bytes, then the identity), as this library writes it:
    /// `None` for a value without one (a manager without identity, another
    /// library's lock) or whose tail is not a valid identity.
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_core::{Identity, Resources};
    /// use redlock_core::backend::{Claim, Token};
    /// let me = Identity::new("host-1:42")?;
    /// let claim = Claim::new(Resources::one("job")?, Token::from_bytes([7; 20])).with_identity(&me);
    /// assert_eq!(Identity::of_value(claim.value()), Some(me));
    /// assert_eq!(Identity::of_value(&[7; 20]), None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn of_value(value: &[u8]) -> Option<Identity> {
        let tail = value.get(TOKEN_LEN..).filter(|tail| !tail.is_empty())?;
        Identity::new(std::str::from_utf8(tail).ok()?).ok()
    }
}

impl fmt::Display for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Identity({:?})", &*self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_and_characters() {
        assert!(Identity::new("x".repeat(Identity::MAX_LEN)).is_ok());
        for bad in [
            String::new(),
            "x".repeat(Identity::MAX_LEN + 1),
            "a\u{1b}[31m".to_owned(),
            "tab\there".to_owned(),
            "sep\u{1f}".to_owned(),
            "del\u{7f}".to_owned(),
        ] {
            let err = Identity::new(bad.clone()).expect_err(&bad);
            assert!(matches!(err, ConfigError::Identity { .. }), "{err:?}");
            // The message never carries the raw control characters.
            assert!(!err.to_string().chars().any(char::is_control), "{err}");
        }
        // Unicode is fine.
        assert_eq!(
            Identity::new("hôte-ß:1").map(|i| i.to_string()),
            Ok("hôte-ß:1".to_owned())
        );
    }

    #[test]
    fn a_value_without_a_valid_tail_has_no_identity() {
        assert_eq!(Identity::of_value(b"short"), None);
        let mut value = vec![1; TOKEN_LEN];
        value.extend_from_slice(&[0xff, 0xfe]);
        assert_eq!(Identity::of_value(&value), None);
        value.truncate(TOKEN_LEN);
        value.extend_from_slice(b"ok\n");
        assert_eq!(Identity::of_value(&value), None);
    }
}
