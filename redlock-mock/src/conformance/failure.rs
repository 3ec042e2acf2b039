//! The suite's typed results: why a check failed, and the suite's error.

use std::fmt;

/// Why one check failed: a message with the context it was found in
/// (outermost first).
///
/// It converts from any error with `?` (so it does not implement
/// [`std::error::Error`] itself; [`ConformanceError`] does).
///
/// # Examples
///
/// ```
/// use redlock_mock::conformance::Failure;
/// let failure = Failure::new("the key was not refused").context("acquire_is_exclusive");
/// assert_eq!(failure.to_string(), "acquire_is_exclusive: the key was not refused");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// Outermost context first, the cause last.
    chain: Vec<String>,
}

impl Failure {
    /// A failure with this message.
    ///
    /// # Examples
    ///
    /// See [`Failure`].
    #[must_use]
    pub fn new(message: impl Into<String>) -> Self {
        Failure {
            chain: vec![message.into()],
        }
    }

    /// The same failure, said to have happened in `context`.
    ///
    /// # Examples
    ///
    /// See [`Failure`].
    #[must_use]
    pub fn context(mut self, context: impl Into<String>) -> Self {
        self.chain.insert(0, context.into());
        self
    }

    /// The innermost message: what was found wrong.
    ///
    /// # Examples
    ///
    /// ```
    /// let failure = redlock_mock::conformance::Failure::new("late").context("outer");
    /// assert_eq!(failure.cause(), "late");
    /// ```
    #[must_use]
    pub fn cause(&self) -> &str {
        self.chain.last().map_or("", String::as_str)
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.chain.join(": "))
    }
}

impl<E: std::error::Error> From<E> for Failure {
    fn from(error: E) -> Self {
        let mut failure = Failure::new(error.to_string());
        let mut source = error.source();
        while let Some(cause) = source {
            failure.chain.push(cause.to_string());
            source = cause.source();
        }
        failure
    }
}

/// Adds context to a failing result, as the checks do.
pub(super) trait Context<T> {
    fn context(self, context: impl Into<String>) -> Result<T, Failure>;
    fn with_context<S: Into<String>>(self, context: impl FnOnce() -> S) -> Result<T, Failure>;
}

impl<T, E: Into<Failure>> Context<T> for Result<T, E> {
    fn context(self, context: impl Into<String>) -> Result<T, Failure> {
        self.map_err(|e| e.into().context(context))
    }
    fn with_context<S: Into<String>>(self, context: impl FnOnce() -> S) -> Result<T, Failure> {
        self.map_err(|e| e.into().context(context()))
    }
}

impl<T> Context<T> for Option<T> {
    fn context(self, context: impl Into<String>) -> Result<T, Failure> {
        self.ok_or_else(|| Failure::new(context))
    }
    fn with_context<S: Into<String>>(self, context: impl FnOnce() -> S) -> Result<T, Failure> {
        self.ok_or_else(|| Failure::new(context()))
    }
}

/// Fails the check with a formatted message unless `cond` holds.
macro_rules! ensure {
    ($cond:expr, $($arg:tt)+) => {
        if !$cond {
            return Err($crate::conformance::Failure::new(format!($($arg)+)));
        }
    };
}

/// Fails the check with a formatted message.
macro_rules! bail {
    ($($arg:tt)+) => {
        return Err($crate::conformance::Failure::new(format!($($arg)+)))
    };
}

pub(super) use {bail, ensure};

/// What the suite reports.
///
/// # Examples
///
/// ```
/// use redlock_mock::conformance::{Conformance, ConformanceError};
/// use redlock_mock::MockCluster;
/// let nodes = MockCluster::new(1).backends();
/// let suite = Conformance::new(move |n| nodes[..n].to_vec());
/// assert!(matches!(suite.run("no-such-check"), Err(ConformanceError::UnknownCheck(_))));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConformanceError {
    /// No check has this name.
    UnknownCheck(String),
    /// These checks failed (name, why), in the suite's order.
    Failed(Vec<(&'static str, Failure)>),
}

impl ConformanceError {
    /// The failed checks (name, why); empty for an unknown name.
    ///
    /// # Examples
    ///
    /// ```
    /// let err = redlock_mock::conformance::ConformanceError::UnknownCheck("x".into());
    /// assert!(err.failures().is_empty());
    /// ```
    #[must_use]
    pub fn failures(&self) -> &[(&'static str, Failure)] {
        match self {
            ConformanceError::UnknownCheck(_) => &[],
            ConformanceError::Failed(failures) => failures,
        }
    }
}

impl fmt::Display for ConformanceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConformanceError::UnknownCheck(name) => write!(f, "no conformance check named {name}"),
            ConformanceError::Failed(failures) => {
                write!(f, "{} conformance check(s) failed:", failures.len())?;
                for (name, failure) in failures {
                    write!(f, "\n{name}: {failure}")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for ConformanceError {}
