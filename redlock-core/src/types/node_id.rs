//! The name of a node.

use std::fmt;
use std::sync::Arc;

/// A stable, human-readable name for one node, used in errors and to detect
/// a node listed twice. For Redis it is the normalized address without
/// credentials (e.g. `127.0.0.1:6379/0`).
///
/// # Examples
///
/// ```
/// use redlock_core::NodeId;
/// let id = NodeId::new("10.0.0.1:6379/0");
/// assert_eq!(id.to_string(), "10.0.0.1:6379/0");
/// assert_eq!(id, NodeId::new("10.0.0.1:6379/0"));
/// ```
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(Arc<str>);

impl NodeId {
    /// A node id from its display name.
    ///
    /// # Examples
    ///
    /// ```
    /// let id = redlock_core::NodeId::new("mock-0");
    /// ```
    #[must_use]
    pub fn new(name: impl Into<String>) -> Self {
        NodeId(name.into().into())
    }

    /// The name.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(redlock_core::NodeId::new("a").as_str(), "a");
    /// ```
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NodeId({})", self.0)
    }
}
