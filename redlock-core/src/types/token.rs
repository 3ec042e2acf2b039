//! Random lock tokens from the operating system's CSPRNG.

use std::fmt;

/// Length of a [`Token`] in bytes (the specification asks for 20).
pub const TOKEN_LEN: usize = 20;

/// The random value that signs one lock: only its holder can extend or
/// release the keys it was stored under.
///
/// Built from [`TOKEN_LEN`] bytes of the operating system's CSPRNG. Its
/// `Debug` output shows a short prefix only, so logs never carry a whole
/// token; there is deliberately no `Display`.
///
/// # Examples
///
/// ```
/// use redlock_core::backend::Token;
/// let a = Token::random()?;
/// let b = Token::random()?;
/// assert_ne!(a, b);
/// assert_eq!(a.as_bytes().len(), 20);
/// assert!(format!("{a:?}").len() < 20);
/// # Ok::<(), redlock_core::EntropyError>(())
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Token([u8; TOKEN_LEN]);

impl Token {
    /// A fresh token from the OS CSPRNG.
    ///
    /// # Errors
    ///
    /// [`EntropyError`] when the operating system cannot provide randomness.
    ///
    /// # Examples
    ///
    /// ```
    /// let token = redlock_core::backend::Token::random()?;
    /// # Ok::<(), redlock_core::EntropyError>(())
    /// ```
    pub fn random() -> Result<Self, EntropyError> {
        let mut bytes = [0u8; TOKEN_LEN];
        getrandom::fill(&mut bytes).map_err(|e| EntropyError(e.raw_os_error()))?;
        Ok(Token(bytes))
    }

    /// A random `u64` from the OS CSPRNG.
    pub(crate) fn random_u64() -> Result<u64, EntropyError> {
        let mut bytes = [0u8; 8];
        getrandom::fill(&mut bytes).map_err(|e| EntropyError(e.raw_os_error()))?;
        Ok(u64::from_le_bytes(bytes))
    }

    /// A token with the given bytes. Meant for deterministic simulations and
    /// tests; production locks use [`Token::random`].
    ///
    /// # Examples
    ///
    /// ```
    /// let token = redlock_core::backend::Token::from_bytes([7; 20]);
    /// assert_eq!(token.as_bytes()[0], 7);
    /// ```
    #[must_use]
    pub const fn from_bytes(bytes: [u8; TOKEN_LEN]) -> Self {
        Token(bytes)
    }

    /// The raw bytes, as a backend stores them.
    ///
    /// # Examples
    ///
    /// ```
    /// let token = redlock_core::backend::Token::from_bytes([1; 20]);
    /// assert_eq!(token.as_bytes(), &[1; 20]);
    /// ```
    #[must_use]
    pub fn as_bytes(&self) -> &[u8; TOKEN_LEN] {
        &self.0
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Token({:02x}{:02x}{:02x}…)",
            self.0[0], self.0[1], self.0[2]
        )
    }
}

/// The operating system could not provide random bytes for a token.
///
/// # Examples
///
/// ```
/// fn fresh() -> Result<redlock_core::backend::Token, redlock_core::EntropyError> {
///     redlock_core::backend::Token::random()
/// }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntropyError(Option<i32>);

impl fmt::Display for EntropyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(code) => write!(f, "the OS random source failed (os error {code})"),
            None => f.write_str("the OS random source failed"),
        }
    }
}

impl std::error::Error for EntropyError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_hides_most_of_the_token() {
        let token = Token::from_bytes([0xab; TOKEN_LEN]);
        let shown = format!("{token:?}");
        assert_eq!(shown, "Token(ababab…)");
        assert!(!shown.contains(&"ab".repeat(4)));
    }

    #[test]
    fn random_tokens_differ() {
        let tokens: std::collections::HashSet<_> = (0..1000)
            .map(|_| Token::random().map(|t| t.0))
            .collect::<Result<_, _>>()
            .expect("entropy");
        assert_eq!(tokens.len(), 1000);
    }
}
