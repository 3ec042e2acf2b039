//! Waiting for the answers of the poller's generation: where every node
//! not read yet offers a descriptor ([`Started::readiness`]), one
//! readiness wait (`poll`) over all of them, so that whichever answer
//! comes first is read first; where one does not, a short while on each
//! in turn ([`OwnRound::next`]).
//!
//! A lone caller reads its own round in turn instead (`Sent::finish`).
//! Read in the order the answers came, its rounds were decided sooner, and
//! eight processes contending for one key (the benchmark's procs mode,
//! servers sharing the clients' CPU) lost most of their rate and waited
//! far longer: the rounds kept splitting, each contender granted on one
//! node and refused on the others (docs/benchmarks.md, history).

use std::time::Instant;

use crate::backend::Started;
use crate::engine::OwnRound;

/// The nodes of a round whose answers its driver reads.
pub(crate) type Reading<'a, E> = OwnRound<Box<dyn Started<E> + 'a>>;

/// Waits for an answer of `own`, and returns whether the one `own` points
/// at now is in (the driver takes it); `false`: not yet, the next node's
/// turn. `until` ends the wait for [`OwnRound::next`]'s node when the
/// nodes are waited for in turn; a readiness wait lasts until the first
/// answer comes or `limit` passes (at most [`OwnRound::by`]).
pub(crate) fn wait<E>(own: &mut Reading<'_, E>, until: Instant, limit: Instant) -> bool {
    #[cfg(unix)]
    if let Some(ready) = first(own, limit) {
        return ready;
    }
    own.current().is_some_and(|s| s.wait(until))
}

/// The readiness wait: `None` when some node offers no descriptor (or the
/// wait itself failed, say it was interrupted), so that the nodes are
/// waited for in turn this time.
///
/// The nodes are looked at in turn from [`OwnRound::position`] (which
/// moves on after each wait that ended without an answer), and the first
/// whose answer can be read is read: a node whose bytes are buffered
/// already (or keep coming without making a reply, as a hostile server's
/// may) does not keep the others' answers waiting.
#[cfg(unix)]
fn first<E>(own: &mut Reading<'_, E>, limit: Instant) -> Option<bool> {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};

    use crate::backend::Readiness;
    use crate::decide::deadline::later;
    use crate::engine::WAIT_SLICE;

    let count = own.pending().len();
    if count < 2 {
        return None;
    }
    let by = own.by();
    let limit = limit.min(by);
    let from = own.position();
    let found = {
        // In turn from `from`: (turn, descriptor) of each node to poll.
        let mut fds = Vec::with_capacity(count);
        let mut turns = Vec::with_capacity(count);
        let mut now = None;
        for turn in 0..count {
            let position = (from + turn) % count;
            match own.pending()[position].1.readiness() {
                Readiness::Now => {
                    now.get_or_insert(turn);
                }
                Readiness::On(fd) => {
                    fds.push(PollFd::from_borrowed_fd(fd, PollFlags::IN));
                    turns.push(turn);
                }
                Readiness::Unknown => return None,
            }
        }
        // With an answer to read now, only look whether one comes earlier
        // in turn.
        let left = match now {
            Some(_) => std::time::Duration::ZERO,
            None => limit.saturating_duration_since(Instant::now()),
        };
        if !fds.is_empty() {
            poll(&mut fds, Some(&Timespec::try_from(left).ok()?)).ok()?;
        }
        // Readable, hung up or failed: reading it says which.
        let polled = fds
            .iter()
            .zip(&turns)
            .find(|(fd, _)| !fd.revents().is_empty())
            .map(|(_, turn)| *turn);
        match (now, polled) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    };
    // None came by the end: the driver takes each as it is.
    let Some(turn) = found else {
        return Some(false);
    };
    own.point((from + turn) % count);
    // What came is read at once; the rest of a reply split on its way
    // is waited for a slice at most, as when waiting in turn.
    let until = later(Instant::now(), WAIT_SLICE).min(by);
    Some(own.current().is_some_and(|s| s.wait(until)))
}

#[cfg(all(test, unix))]
mod tests {
    use std::io::{Read, Write};
    use std::os::fd::AsFd;
    use std::os::unix::net::UnixStream;
    use std::time::{Duration, Instant};

    use super::*;
    use crate::backend::{Readiness, Response};

    /// A request whose answer is a byte on `socket`; `stuck` ones say their
    /// bytes are buffered, and never have a whole answer.
    struct Fake {
        socket: UnixStream,
        stuck: bool,
        waits: usize,
    }

    impl Started<std::io::Error> for Fake {
        fn readiness(&self) -> Readiness<'_> {
            if self.stuck {
                Readiness::Now
            } else {
                Readiness::On(self.socket.as_fd())
            }
        }

        fn wait(&mut self, until: Instant) -> bool {
            self.waits += 1;
            if self.stuck {
                return false;
            }
            let left = until.saturating_duration_since(Instant::now());
            let _ = self
                .socket
                .set_read_timeout(Some(left.max(Duration::from_micros(1))));
            self.socket.read(&mut [0]).is_ok_and(|n| n == 1)
        }

        fn finish(self: Box<Self>, _: Instant, out: &mut Vec<Result<Response, std::io::Error>>) {
            out.push(Ok(Response::Held(true)));
        }
    }

    /// `n` requests under way, and the far ends of their sockets.
    fn round(stuck: &[bool], by: Duration) -> (Reading<'static, std::io::Error>, Vec<UnixStream>) {
        let mut pending: Vec<(usize, Box<dyn Started<std::io::Error>>)> = Vec::new();
        let mut ends = Vec::new();
        for (node, &stuck) in stuck.iter().enumerate() {
            let (ours, theirs) = UnixStream::pair().unwrap_or_else(|e| unreachable!("{e}"));
            pending.push((
                node,
                Box::new(Fake {
                    socket: ours,
                    stuck,
                    waits: 0,
                }),
            ));
            ends.push(theirs);
        }
        let sent = Instant::now();
        (OwnRound::new(sent, sent + by, pending), ends)
    }

    fn answer(end: &mut UnixStream) {
        end.write_all(&[1]).unwrap_or_else(|e| unreachable!("{e}"));
    }

    #[test]
    fn the_answer_that_came_is_read_first_whatever_its_node() {
        let (mut own, mut ends) = round(&[false, false, false], Duration::from_secs(60));
        answer(&mut ends[2]);
        // In turn, node 0 would be waited for first, a slice, in vain.
        let slice = || Instant::now() + Duration::from_millis(50);
        let by = own.by();
        assert!(wait(&mut own, slice(), by));
        assert_eq!(own.take().map(|(node, _)| node), Some(2));
        answer(&mut ends[0]);
        assert!(wait(&mut own, slice(), by));
        assert_eq!(own.take().map(|(node, _)| node), Some(0));
    }

    #[test]
    fn a_node_with_bytes_that_never_make_an_answer_does_not_starve_the_others() {
        let (mut own, mut ends) = round(&[true, false, false], Duration::from_secs(60));
        answer(&mut ends[2]);
        let far = Instant::now() + Duration::from_secs(60);
        let mut taken = None;
        for _ in 0..3 {
            if wait(&mut own, far, far) {
                taken = own.take().map(|(node, _)| node);
                break;
            }
            own.not_yet();
        }
        assert_eq!(taken, Some(2));
    }

    #[test]
    fn nothing_by_the_end_of_the_round_is_not_an_answer() {
        let (mut own, _ends) = round(&[false, false], Duration::from_millis(20));
        let started = Instant::now();
        let by = own.by();
        assert!(!wait(&mut own, by, by));
        // One wait over both, until the round's end, not a slice.
        assert!(started.elapsed() >= Duration::from_millis(19));
        assert!(own
            .next(Instant::now())
            .is_some_and(|r| r.until <= Instant::now()));
    }

    #[test]
    fn without_descriptors_the_nodes_are_waited_for_in_turn() {
        let (mut own, mut ends) = round(&[false, false], Duration::from_secs(60));
        answer(&mut ends[1]);
        // One is waited for without a descriptor: in turn, it first.
        struct Blind;
        impl Started<std::io::Error> for Blind {
            fn wait(&mut self, _: Instant) -> bool {
                false
            }
            fn finish(self: Box<Self>, _: Instant, _: &mut Vec<Result<Response, std::io::Error>>) {}
        }
        let sent = Instant::now();
        let mut pending = own.rest();
        pending.insert(0, (9, Box::new(Blind)));
        let mut own = OwnRound::new(sent, sent + Duration::from_secs(60), pending);
        let slice = Instant::now() + Duration::from_millis(1);
        let by = own.by();
        assert!(!wait(&mut own, slice, by));
        assert_eq!(own.next(Instant::now()).map(|r| r.node), Some(9));
    }
}
