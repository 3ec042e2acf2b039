//! Several independent servers of one variant (Redlock's N masters).

use anyhow::Context as _;

use super::{RedisServer, ServerKind, ServerOptions};

/// `n` independent `redis-server` processes (not a Redis Cluster: no
/// replication, no slots), each on its own port and directory. Dropping it
/// stops them all.
///
/// # Examples
///
/// ```no_run
/// use redlock_tests::harness::{RedisCluster, ServerOptions};
/// let cluster = RedisCluster::start(5, &ServerOptions::new()).unwrap();
/// assert_eq!(cluster.urls().len(), 5);
/// cluster.node(0).kill().unwrap();
/// ```
#[derive(Debug)]
pub struct RedisCluster {
    nodes: Vec<RedisServer>,
}

impl RedisCluster {
    /// Starts `n` servers with the same options, in parallel, and waits until
    /// all are ready.
    ///
    /// # Errors
    ///
    /// Fails if any server fails to start (the others are stopped again).
    pub fn start(n: usize, options: &ServerOptions) -> anyhow::Result<Self> {
        Self::start_each(vec![options.clone(); n])
    }

    /// Starts one server of each kind in `kinds`, in that order (a kind
    /// may come several times), all with `options` otherwise, in parallel:
    /// a fleet of mixed servers.
    ///
    /// # Errors
    ///
    /// Fails if any server fails to start, among others when a kind's
    /// binary is missing (see [`ServerKind::binary`]); the others are
    /// stopped again.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use redlock_tests::harness::{RedisCluster, ServerKind, ServerOptions};
    /// let fleet = RedisCluster::start_kinds(
    ///     &[ServerKind::Redis70, ServerKind::Valkey91, ServerKind::Redis62],
    ///     &ServerOptions::new(),
    /// )
    /// .unwrap();
    /// assert_eq!(fleet.len(), 3);
    /// ```
    pub fn start_kinds(kinds: &[ServerKind], options: &ServerOptions) -> anyhow::Result<Self> {
        Self::start_each(
            kinds
                .iter()
                .map(|&kind| options.clone().kind(kind))
                .collect(),
        )
    }

    fn start_each(each: Vec<ServerOptions>) -> anyhow::Result<Self> {
        let n = each.len();
        let nodes = std::thread::scope(|scope| {
            let starting: Vec<_> = each
                .into_iter()
                .map(|options| scope.spawn(move || RedisServer::start_with(options)))
                .collect();
            starting
                .into_iter()
                .enumerate()
                .map(|(i, handle)| match handle.join() {
                    Ok(started) => started.with_context(|| format!("starting node {i} of {n}")),
                    Err(_) => Err(anyhow::anyhow!("starting node {i} of {n} panicked")),
                })
                // Joins every thread before failing: no server outlives this.
                .collect::<Vec<_>>()
        })
        .into_iter()
        .collect::<anyhow::Result<Vec<_>>>()?;
        Ok(Self { nodes })
    }

    /// Every node's [`RedisServer::url`], in node order.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }

    /// Node `i`.
    ///
    /// # Panics
    ///
    /// If `i` is out of range.
    pub fn node(&self, i: usize) -> &RedisServer {
        &self.nodes[i]
    }

    /// All nodes, in order.
    pub fn nodes(&self) -> &[RedisServer] {
        &self.nodes
    }

    /// How many nodes there are.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether there are no nodes.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The nodes, in order.
    pub fn iter(&self) -> std::slice::Iter<'_, RedisServer> {
        self.nodes.iter()
    }
}

impl<'a> IntoIterator for &'a RedisCluster {
    type Item = &'a RedisServer;
    type IntoIter = std::slice::Iter<'a, RedisServer>;

    fn into_iter(self) -> Self::IntoIter {
        self.nodes.iter()
    }
}
