//! What the nodes said in a failed round: each node's failure, by node.

use std::error::Error as StdError;
use std::fmt;

use crate::NodeId;

/// Why one node did not answer usefully.
///
/// # Examples
///
/// ```
/// use redlock_core::NodeFailure;
/// let failure: NodeFailure<std::io::Error> = NodeFailure::TimedOut;
/// assert_eq!(failure.to_string(), "no reply within the per-node timeout");
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum NodeFailure<E> {
    /// The backend returned an error.
    Backend(E),
    /// No reply came within the per-node timeout.
    TimedOut,
    /// The node's request queue was full (the node has been slow or frozen
    /// for a long time), so the request was not sent.
    Overloaded,
    /// The backend panicked; the panic was contained.
    Panicked,
    /// The backend's [`run_batch`](crate::LockBackend::run_batch) returned
    /// no answer for this request (a backend bug).
    Unanswered,
}

impl<E: fmt::Display> fmt::Display for NodeFailure<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NodeFailure::Backend(e) => write!(f, "{e}"),
            NodeFailure::TimedOut => f.write_str("no reply within the per-node timeout"),
            NodeFailure::Overloaded => f.write_str("the node's request queue is full"),
            NodeFailure::Panicked => f.write_str("the backend panicked"),
            NodeFailure::Unanswered => {
                f.write_str("the backend's batch left the request unanswered")
            }
        }
    }
}

/// One node's failure in one round, naming the node.
///
/// # Examples
///
/// ```
/// use redlock_core::{NodeError, NodeFailure, NodeId};
/// let e: NodeError<std::io::Error> = NodeError::new(NodeId::new("a:6379"), NodeFailure::TimedOut);
/// assert_eq!(e.node().as_str(), "a:6379");
/// assert!(e.to_string().starts_with("node a:6379:"));
/// ```
#[derive(Debug)]
pub struct NodeError<E> {
    node: NodeId,
    failure: NodeFailure<E>,
}

impl<E> NodeError<E> {
    /// Pairs a node with its failure.
    ///
    /// # Examples
    ///
    /// ```
    /// # use redlock_core::{NodeError, NodeFailure, NodeId};
    /// let e: NodeError<std::io::Error> = NodeError::new(NodeId::new("n1"), NodeFailure::Overloaded);
    /// ```
    #[must_use]
    pub fn new(node: NodeId, failure: NodeFailure<E>) -> Self {
        NodeError { node, failure }
    }

    /// The node that failed.
    ///
    /// # Examples
    ///
    /// ```
    /// # use redlock_core::{NodeError, NodeFailure, NodeId};
    /// # let e: NodeError<std::io::Error> = NodeError::new(NodeId::new("n1"), NodeFailure::Overloaded);
    /// assert_eq!(e.node(), &NodeId::new("n1"));
    /// ```
    #[must_use]
    pub fn node(&self) -> &NodeId {
        &self.node
    }

    /// What went wrong there.
    ///
    /// # Examples
    ///
    /// ```
    /// # use redlock_core::{NodeError, NodeFailure, NodeId};
    /// # let e: NodeError<std::io::Error> = NodeError::new(NodeId::new("n1"), NodeFailure::Overloaded);
    /// assert!(matches!(e.failure(), NodeFailure::Overloaded));
    /// ```
    #[must_use]
    pub fn failure(&self) -> &NodeFailure<E> {
        &self.failure
    }
}

impl<E: fmt::Display> fmt::Display for NodeError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "node {}: {}", self.node, self.failure)
    }
}

impl<E: StdError + 'static> StdError for NodeError<E> {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match &self.failure {
            NodeFailure::Backend(e) => Some(e),
            _ => None,
        }
    }
}

/// What the nodes said in one failed round.
///
/// # Examples
///
/// ```
/// use redlock_core::LockError;
/// fn explain<E: std::fmt::Display>(err: &LockError<E>) {
///     if let Some(report) = err.report() {
///         for failure in report.failures() {
///             eprintln!("{failure}");
///         }
///     }
/// }
/// ```
#[derive(Debug)]
pub struct RoundReport<E> {
    pub(crate) nodes: usize,
    pub(crate) quorum: usize,
    pub(crate) granted: usize,
    pub(crate) refused: usize,
    pub(crate) failures: Vec<NodeError<E>>,
}

impl<E> RoundReport<E> {
    /// The report of a round never tried on `nodes` nodes (a caller that
    /// waited in its local line until its deadline).
    pub(crate) fn untried(nodes: usize) -> Self {
        RoundReport {
            nodes,
            quorum: crate::quorum(nodes),
            granted: 0,
            refused: 0,
            failures: Vec::new(),
        }
    }

    /// How many nodes the round was sent to.
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_core::{LockError, Redlock};
    /// let cluster = redlock_mock::MockCluster::new(3);
    /// let locks = Redlock::new(cluster.backends())?;
    /// cluster.node(0).go_down();
    /// cluster.node(1).go_down();
    /// let Err(LockError::NoQuorum(report)) = locks.try_lock("k", std::time::Duration::from_secs(1)) else { unreachable!() };
    /// assert_eq!(report.nodes(), 3);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn nodes(&self) -> usize {
        self.nodes
    }
    /// How many grants a quorum needs.
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_core::{LockError, Redlock};
    /// let cluster = redlock_mock::MockCluster::new(3);
    /// let locks = Redlock::new(cluster.backends())?;
    /// cluster.node(0).go_down();
    /// cluster.node(1).go_down();
    /// let Err(LockError::NoQuorum(report)) = locks.try_lock("k", std::time::Duration::from_secs(1)) else { unreachable!() };
    /// assert_eq!(report.quorum(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn quorum(&self) -> usize {
        self.quorum
    }
    /// Nodes that granted (before the round was decided).
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_core::{LockError, Redlock};
    /// let cluster = redlock_mock::MockCluster::new(3);
    /// let locks = Redlock::new(cluster.backends())?;
    /// cluster.node(0).go_down();
    /// cluster.node(1).go_down();
    /// let Err(LockError::NoQuorum(report)) = locks.try_lock("k", std::time::Duration::from_secs(1)) else { unreachable!() };
    /// assert!(report.granted() <= 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn granted(&self) -> usize {
        self.granted
    }
    /// Nodes that refused: the key was held by another holder (acquire), or
    /// did not hold our token (extend, release).
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_core::{LockError, Redlock};
    /// let cluster = redlock_mock::MockCluster::new(3);
    /// let locks = Redlock::new(cluster.backends())?;
    /// cluster.node(0).go_down();
    /// cluster.node(1).go_down();
    /// let Err(LockError::NoQuorum(report)) = locks.try_lock("k", std::time::Duration::from_secs(1)) else { unreachable!() };
    /// assert_eq!(report.refused(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn refused(&self) -> usize {
        self.refused
    }
    /// Each failed node with its error.
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_core::{LockError, Redlock};
    /// let cluster = redlock_mock::MockCluster::new(3);
    /// let locks = Redlock::new(cluster.backends())?;
    /// cluster.node(0).go_down();
    /// cluster.node(1).go_down();
    /// let Err(LockError::NoQuorum(report)) = locks.try_lock("k", std::time::Duration::from_secs(1)) else { unreachable!() };
    /// assert_eq!(report.failures().len(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn failures(&self) -> &[NodeError<E>] {
        &self.failures
    }
    /// The ids of the failed nodes, in node order.
    ///
    /// # Examples
    ///
    /// ```
    /// use redlock_core::{LockError, Redlock};
    /// let cluster = redlock_mock::MockCluster::new(3);
    /// let locks = Redlock::new(cluster.backends())?;
    /// cluster.node(0).go_down();
    /// cluster.node(1).go_down();
    /// let Err(LockError::NoQuorum(report)) = locks.try_lock("k", std::time::Duration::from_secs(1)) else { unreachable!() };
    /// assert_eq!(report.failed_nodes().map(|n| n.as_str()).collect::<Vec<_>>(), ["mock-0", "mock-1"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn failed_nodes(&self) -> impl Iterator<Item = &NodeId> {
        self.failures.iter().map(NodeError::node)
    }
}

impl<E> fmt::Display for RoundReport<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} of {} nodes granted (quorum {}), {} refused, {} failed",
            self.granted,
            self.nodes,
            self.quorum,
            self.refused,
            self.failures.len()
        )?;
        if !self.failures.is_empty() {
            let names: Vec<&str> = self.failed_nodes().map(NodeId::as_str).collect();
            write!(f, " ({})", names.join(", "))?;
        }
        Ok(())
    }
}
