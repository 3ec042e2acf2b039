//! "Who holds this lock?", asked of every node at once.

use std::time::Instant;

use crate::backend::{Holder, Inspect, KeyView, Watcher};
use crate::types::report::NodeError;
use crate::{LockError, NodeFailure, Redlock, RoundReport};

impl<B: Inspect + 'static> Redlock<B> {
    /// Who holds the lock on `resource` now, as a quorum of the nodes sees
    /// it: the holder's [identity](crate::Builder::identity) (when its
    /// manager has one), how long a quorum still holds it, and its fencing
    /// counter; `None` when no holder is on a quorum (free, or a round
    /// under way). Asks every node at once, on a thread each (nothing is
    /// queued behind the manager's requests), and returns within twice the
    /// node timeout: a node that has not answered by then counts as timed
    /// out. Takes nothing. Only for backends with the [`Inspect`]
    /// ability.
    ///
    /// The answer is a snapshot: the lock may change hands right after.
    /// It is for showing and watching, never for deciding who may write
    /// (that is what [fencing tokens](crate::FencingToken) are for).
    ///
    /// # Errors
    ///
    /// [`LockError::Config`] for a name no lock can have (empty, or with
    /// [`keys::SEPARATOR`](crate::keys::SEPARATOR)); [`LockError::NoQuorum`]
    /// when fewer than a quorum of nodes answered (the report counts the
    /// nodes that did as granted).
    ///
    /// # Examples
    ///
    /// See [`Holder`].
    pub fn holder(&self, resource: &str) -> Result<Option<Holder>, LockError<B::Error>> {
        self.read_holder(resource, None)
    }

    /// [`Redlock::holder`], for `watcher` to watch `resource` from then on
    /// on every node that answers.
    pub(crate) fn read_holder(
        &self,
        resource: &str,
        watcher: Option<Watcher>,
    ) -> Result<Option<Holder>, LockError<B::Error>> {
        crate::keys::check_name(resource).map_err(LockError::Config)?;
        let workers = &self.manager.shared.workers;
        let nodes = workers.len();
        // A thread per node, not joined: a frozen node's thread ends when
        // the node answers, while this call returns at its deadline.
        let (tx, rx) = crossbeam_channel::bounded(nodes);
        for (i, worker) in workers.iter().enumerate() {
            let (inspector, sender, key) = (worker.inspector(), tx.clone(), resource.to_owned());
            let asked = std::thread::Builder::new()
                .name(format!("redlock-inspect-{i}"))
                .spawn(move || {
                    let _ = sender.send((i, inspector.inspect(&key, watcher)));
                });
            if asked.is_err() {
                // No thread to ask it on: this node does not answer.
                let _ = tx.send((i, Err(NodeFailure::Unanswered)));
            }
        }
        drop(tx);
        let timeout = self.manager.shared.config.settings.timeout();
        let deadline = Instant::now() + timeout.saturating_mul(crate::engine::READ_TIMEOUTS);
        let mut answers: Vec<Result<KeyView, NodeFailure<B::Error>>> =
            (0..nodes).map(|_| Err(NodeFailure::TimedOut)).collect();
        for _ in 0..nodes {
            match rx.recv_deadline(deadline) {
                Ok((i, answer)) => answers[i] = answer,
                Err(_) => break,
            }
        }
        let mut views = Vec::with_capacity(nodes);
        let mut failures = Vec::new();
        for (worker, answer) in workers.iter().zip(answers) {
            match answer {
                Ok(view) => views.push(Some(view)),
                Err(failure) => {
                    views.push(None);
                    failures.push(NodeError::new(worker.id.clone(), failure));
                }
            }
        }
        let quorum = crate::quorum(nodes);
        if nodes - failures.len() < quorum {
            return Err(LockError::NoQuorum(RoundReport {
                nodes,
                quorum,
                granted: nodes - failures.len(),
                refused: 0,
                failures,
            }));
        }
        Ok(Holder::of_views(&views, nodes))
    }
}
