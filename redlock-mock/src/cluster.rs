//! A set of mock nodes sharing one clock.

use std::sync::Arc;

use redlock_core::{Clock, SystemClock};

use crate::MockNode;

/// `n` in-memory nodes named `mock-0` .. `mock-{n-1}`, sharing one clock.
///
/// Hand [`MockCluster::backends`] to a manager and keep the cluster to inject
/// faults through [`MockCluster::node`]. Dropping the cluster thaws every
/// node, so no worker thread stays blocked.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use redlock_core::Redlock;
/// use redlock_mock::MockCluster;
///
/// let cluster = MockCluster::new(5);
/// let locks = Redlock::new(cluster.backends())?;
/// cluster.node(2).go_down();
/// let lock = locks.try_lock("k", Duration::from_secs(1))?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct MockCluster {
    nodes: Vec<MockNode>,
}

impl MockCluster {
    /// `n` nodes on the system clock.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(redlock_mock::MockCluster::new(3).len(), 3);
    /// ```
    #[must_use]
    pub fn new(n: usize) -> Self {
        Self::with_clock(n, Arc::new(SystemClock))
    }

    /// `n` nodes whose keys expire by `clock`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use redlock_mock::{ManualClock, MockCluster};
    /// let clock = ManualClock::new();
    /// let cluster = MockCluster::with_clock(3, Arc::new(clock.clone()));
    /// ```
    #[must_use]
    pub fn with_clock(n: usize, clock: Arc<dyn Clock>) -> Self {
        let nodes = (0..n)
            .map(|i| MockNode::with_clock(format!("mock-{i}"), Arc::clone(&clock)))
            .collect();
        MockCluster { nodes }
    }

    /// Handles to every node, for a manager.
    ///
    /// # Examples
    ///
    /// ```
    /// let cluster = redlock_mock::MockCluster::new(3);
    /// assert_eq!(cluster.backends().len(), 3);
    /// ```
    #[must_use]
    pub fn backends(&self) -> Vec<MockNode> {
        self.nodes.clone()
    }

    /// Handles to every node with their type erased, for a
    /// [`DynRedlock`](redlock_core::DynRedlock): the type application code
    /// can hold whether its nodes are Redis masters or these. The cluster
    /// keeps its handles, so faults can still be injected.
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_core::{DynRedlock, Redlock};
    /// let cluster = redlock_mock::MockCluster::new(3);
    /// let locks: DynRedlock = Redlock::new(cluster.dyn_backends())?;
    /// cluster.node(0).go_down();
    /// assert!(locks.try_lock("k", std::time::Duration::from_secs(1)).is_ok());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn dyn_backends(&self) -> Vec<redlock_core::DynBackend> {
        self.nodes
            .iter()
            .cloned()
            .map(redlock_core::DynBackend::new)
            .collect()
    }

    /// Node `i`.
    ///
    /// # Panics
    ///
    /// When `i >= len()`, like slice indexing (test code only).
    ///
    /// # Examples
    ///
    /// ```
    /// let cluster = redlock_mock::MockCluster::new(3);
    /// cluster.node(1).go_down();
    /// ```
    #[must_use]
    #[allow(clippy::panic)]
    pub fn node(&self, i: usize) -> &MockNode {
        &self.nodes[i]
    }

    /// All nodes.
    ///
    /// # Examples
    ///
    /// ```
    /// let cluster = redlock_mock::MockCluster::new(2);
    /// assert!(cluster.nodes().iter().all(|n| !n.is_locked("k")));
    /// ```
    #[must_use]
    pub fn nodes(&self) -> &[MockNode] {
        &self.nodes
    }

    /// The number of nodes.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(redlock_mock::MockCluster::new(5).len(), 5);
    /// ```
    #[must_use]
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether there are no nodes.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(!redlock_mock::MockCluster::new(1).is_empty());
    /// ```
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }
}

impl Drop for MockCluster {
    fn drop(&mut self) {
        for node in &self.nodes {
            node.thaw();
        }
    }
}
