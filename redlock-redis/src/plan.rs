//! Which operation ([`crate::ops`]) each request goes to Redis as, in
//! which of the two forms a request can take (the first try, and the
//! fallback every server takes); and sending a batch of them in one write
//! and reading their replies.

use redis::Value;
use redlock_core::backend::{Claim, Request};
use redlock_core::Ttl;
use smallvec::SmallVec;

use redlock_core::model::Command;

use crate::ops::{self, set_nx, Read, Via};
use crate::session::{Failure, Session};
use crate::RELEASE_CHANNEL;

/// A request of a kind this backend knows, as it goes to the server.
///
/// Build it with [`Planned::new`] or the constructors ([`Planned::acquire`],
/// [`Planned::extend`], [`Planned::release`], [`Planned::raise_fence`]),
/// which send a shared claim ([`Claim::is_shared`]) to the `Shared*`
/// variants; the others are for exclusive claims only.
#[derive(Clone, Copy)]
pub(crate) enum Planned<'a> {
    /// Acquire one key without fencing or waiting marks: [`set_nx`], in
    /// the form [`Form::set_get`] says.
    SetNx {
        claim: &'a Claim,
        ttl: Ttl,
    },
    /// Acquire several keys, or with fencing, or for a caller waiting in
    /// line (`queue`): [`ops::acquire`] ([`ops::queued_acquire`] with a
    /// queue).
    Acquire {
        claim: &'a Claim,
        ttl: Ttl,
        fence: bool,
    },
    Extend {
        claim: &'a Claim,
        ttl: Ttl,
    },
    Release {
        claim: &'a Claim,
    },
    RaiseFence {
        claim: &'a Claim,
        at_least: u64,
    },
    /// Acquire a shared claim (a reader): [`ops::shared_acquire`].
    SharedAcquire {
        claim: &'a Claim,
        ttl: Ttl,
        fence: bool,
    },
    SharedExtend {
        claim: &'a Claim,
        ttl: Ttl,
    },
    SharedRelease {
        claim: &'a Claim,
    },
    SharedRaiseFence {
        claim: &'a Claim,
        at_least: u64,
    },
}

/// A batch's requests, in order. A lone caller's round sends one request
/// per node: that one is kept inline, as are its replies ([`Replies`]) and
/// what they read as ([`Reads`]), so that it allocates none of them.
pub(crate) type Plans<'a> = SmallVec<[Planned<'a>; 1]>;

/// What a batch's replies read as, one per request.
pub(crate) type Reads = SmallVec<[Read; 1]>;

/// A batch's replies read so far (one request's, or its two in the
/// fallback form, inline).
pub(crate) type Replies = SmallVec<[Value; 2]>;

impl<'a> Planned<'a> {
    /// Plans each of `requests` in order; `None` when one is of a kind
    /// this backend does not know. Sized at once (collecting `Option`s
    /// would grow it from empty).
    pub(crate) fn all(requests: &[Request<'a>]) -> Option<Plans<'a>> {
        let mut planned = Plans::with_capacity(requests.len());
        for request in requests {
            planned.push(Planned::new(request)?);
        }
        Some(planned)
    }

    /// `None` for a kind of request this backend does not know.
    pub(crate) fn new(request: &Request<'a>) -> Option<Self> {
        Some(match *request {
            Request::Acquire { claim, ttl, fence } => Planned::acquire(claim, ttl, fence),
            Request::Extend { claim, ttl } => Planned::extend(claim, ttl),
            Request::Release { claim } => Planned::release(claim),
            Request::RaiseFence { claim, at_least } => Planned::raise_fence(claim, at_least),
            _ => return None,
        })
    }

    pub(crate) fn acquire(claim: &'a Claim, ttl: Ttl, fence: bool) -> Self {
        let queue = claim.queue();
        if claim.is_shared() {
            return Planned::SharedAcquire { claim, ttl, fence };
        }
        match (claim.keys(), fence, queue) {
            ([_], false, None) => Planned::SetNx { claim, ttl },
            _ => Planned::Acquire { claim, ttl, fence },
        }
    }

    pub(crate) fn extend(claim: &'a Claim, ttl: Ttl) -> Self {
        if claim.is_shared() {
            Planned::SharedExtend { claim, ttl }
        } else {
            Planned::Extend { claim, ttl }
        }
    }

    pub(crate) fn release(claim: &'a Claim) -> Self {
        if claim.is_shared() {
            Planned::SharedRelease { claim }
        } else {
            Planned::Release { claim }
        }
    }

    pub(crate) fn raise_fence(claim: &'a Claim, at_least: u64) -> Self {
        if claim.is_shared() {
            Planned::SharedRaiseFence { claim, at_least }
        } else {
            Planned::RaiseFence { claim, at_least }
        }
    }

    /// The lock this request is about.
    pub(crate) fn claim(&self) -> &'a Claim {
        match *self {
            Planned::SetNx { claim, .. }
            | Planned::Acquire { claim, .. }
            | Planned::Extend { claim, .. }
            | Planned::Release { claim }
            | Planned::RaiseFence { claim, .. }
            | Planned::SharedAcquire { claim, .. }
            | Planned::SharedExtend { claim, .. }
            | Planned::SharedRelease { claim }
            | Planned::SharedRaiseFence { claim, .. } => claim,
        }
    }

    /// Whether this is an acquire.
    pub(crate) fn is_acquire(&self) -> bool {
        matches!(
            self,
            Planned::SetNx { .. } | Planned::Acquire { .. } | Planned::SharedAcquire { .. }
        )
    }

    /// Whether this is a release.
    pub(crate) fn is_release(&self) -> bool {
        matches!(
            self,
            Planned::Release { .. } | Planned::SharedRelease { .. }
        )
    }

    /// How many replies its commands get.
    pub(crate) fn replies(&self, form: Form) -> usize {
        match self {
            Planned::SetNx { .. } => set_nx::replies(form.set_get),
            _ => 1,
        }
    }

    /// The request this is.
    fn request(&self) -> Request<'a> {
        match *self {
            Planned::SetNx { claim, ttl } => Request::Acquire {
                claim,
                ttl,
                fence: false,
            },
            Planned::Acquire {
                claim, ttl, fence, ..
            }
            | Planned::SharedAcquire {
                claim, ttl, fence, ..
            } => Request::Acquire { claim, ttl, fence },
            Planned::Extend { claim, ttl } | Planned::SharedExtend { claim, ttl } => {
                Request::Extend { claim, ttl }
            }
            Planned::Release { claim } | Planned::SharedRelease { claim } => {
                Request::Release { claim }
            }
            Planned::RaiseFence { claim, at_least }
            | Planned::SharedRaiseFence { claim, at_least } => {
                Request::RaiseFence { claim, at_least }
            }
        }
    }

    /// Appends its commands to `packed`, in `form`: the node model's
    /// command for the request ([`Command::of`], the mapping the in-memory
    /// node uses too), written by its operation ([`ops::write`]; a
    /// single-key acquire by [`set_nx::write_acquire`], in its form).
    pub(crate) fn write(&self, packed: &mut Vec<u8>, form: Form) {
        let Some(command) = Command::of(&self.request(), RELEASE_CHANNEL.as_bytes()) else {
            return;
        };
        match command {
            Command::SetNxGet { .. } => set_nx::write_acquire(packed, form.set_get, &command),
            command => ops::write(packed, form.via, &command),
        }
    }

    /// Reads its replies from `replies`, by its operation ([`set_nx::read`],
    /// [`ops::read`]). A reply of the wrong shape fails the whole call (and
    /// discards the connection): the replies may be out of step.
    pub(crate) fn read(
        &self,
        replies: &mut impl Iterator<Item = Value>,
        form: Form,
    ) -> Result<Read, Failure> {
        if let Planned::SetNx { claim, .. } = *self {
            let key = claim.keys().first().map_or("", String::as_str);
            return set_nx::read(key, form.set_get, replies);
        }
        let reply = replies.next().unwrap_or(Value::Nil);
        match Command::of(&self.request(), RELEASE_CHANNEL.as_bytes()) {
            Some(command) => ops::read(&command, reply),
            None => Err(Failure::unexpected(
                "a request without an operation",
                &reply,
            )),
        }
    }
}

/// How requests are written.
#[derive(Clone, Copy)]
pub(crate) struct Form {
    /// Scripts by `EVALSHA` or by `EVAL`.
    pub(crate) via: Via,
    /// A single-key acquire as `SET ... NX PX ... GET` (Redis 7.0 and
    /// later), or as `SET ... NX PX` and `TYPE`.
    pub(crate) set_get: bool,
}

impl Form {
    /// The form of a request's second try, which every server takes.
    pub(crate) const FALLBACK: Form = Form {
        via: Via::Body,
        set_get: false,
    };
}

/// Why [`send`] got no answer for some requests.
pub(crate) struct Cut {
    pub(crate) failure: Failure,
    /// Replies the node still owes on the connection: it may yet run the
    /// requests they answer (none if nothing was sent).
    pub(crate) owed: usize,
    /// The requests (by index) whose replies were not all read.
    pub(crate) unanswered: Vec<usize>,
}

/// Sends the commands of `planned` in one write, in `form`, and reads the
/// replies.
///
/// # Errors
///
/// A failure of the connection (or a reply of the wrong shape) fails the
/// whole call; the [`Cut`] says which requests got no answer and how many
/// replies are still due.
pub(crate) fn send(
    session: &mut Session<'_>,
    planned: &[Planned<'_>],
    form: Form,
) -> Result<Reads, Cut> {
    let sent = write(session, planned, form);
    receive(session, planned, form, sent, Replies::new())
}

/// How many replies `planned` gets in `form`.
pub(crate) fn replies_to(planned: &[Planned<'_>], form: Form) -> usize {
    planned.iter().map(|p| p.replies(form)).sum()
}

/// The first half of [`send`]: writes `planned`'s commands in one write.
pub(crate) fn write(
    session: &mut Session<'_>,
    planned: &[Planned<'_>],
    form: Form,
) -> Result<(), Failure> {
    session.send(|packed| {
        for request in planned {
            request.write(packed, form);
        }
    })
}

/// The second half of [`send`]: reads the replies to what [`write()`] sent
/// (`sent` is how the write went, and how reading went so far when
/// `replies` holds the first replies, read before).
pub(crate) fn receive(
    session: &mut Session<'_>,
    planned: &[Planned<'_>],
    form: Form,
    sent: Result<(), Failure>,
    mut replies: Replies,
) -> Result<Reads, Cut> {
    let count = replies_to(planned, form);
    let called = sent.and_then(|()| {
        while replies.len() < count {
            replies.push(session.read()?);
        }
        Ok(())
    });
    if let Err(failure) = called {
        let owed = match failure {
            Failure::Deadline => 0,
            _ => count - replies.len(),
        };
        let mut read = 0;
        let unanswered = planned
            .iter()
            .enumerate()
            .filter_map(|(i, request)| {
                read += request.replies(form);
                (read > replies.len()).then_some(i)
            })
            .collect();
        return Err(Cut {
            failure,
            owed,
            unanswered,
        });
    }
    let mut replies = replies.into_iter();
    // Sized at once (collecting `Result`s would grow it from empty).
    let mut reads = Reads::with_capacity(planned.len());
    for request in planned {
        match request.read(&mut replies, form) {
            Ok(read) => reads.push(read),
            Err(failure) => {
                return Err(Cut {
                    failure,
                    owed: 0,
                    unanswered: (0..planned.len()).collect(),
                })
            }
        }
    }
    Ok(reads)
}

#[cfg(test)]
pub(crate) mod tests {
    use std::time::Duration;

    use super::*;
    pub(crate) use crate::ops::pairing::claim;
    use crate::ops::{
        write_release, Arg, Keys, QUEUED_ACQUIRE, RAISE_FENCE, SHARED_ACQUIRE, SHARED_EXTEND,
        SHARED_RAISE_FENCE, SHARED_RELEASE,
    };
    use redlock_core::backend::{AcquireOutcome, Response};

    fn written(planned: Planned<'_>, form: Form) -> Vec<u8> {
        let mut packed = Vec::new();
        planned.write(&mut packed, form);
        packed
    }

    const NEW: Form = Form {
        via: Via::Hash,
        set_get: true,
    };

    #[test]
    fn commands_name_the_documented_keys() {
        let claim = claim(&["b", "a"]);
        let packed = written(
            Planned::RaiseFence {
                claim: &claim,
                at_least: u64::MAX,
            },
            NEW,
        );
        let expected = redis::cmd("EVALSHA")
            .arg(RAISE_FENCE.hash())
            .arg(4)
            .arg(&["a", "b", "a\u{1f}fence", "b\u{1f}fence"])
            .arg(&[7_u8; 20][..])
            .arg(i64::MAX)
            .get_packed_command();
        assert_eq!(packed, expected);
        let ttl = Ttl::new(Duration::from_millis(1500)).expect("ttl");
        let one = self::claim(&["k"]);
        let packed = written(Planned::acquire(&one, ttl, false), NEW);
        let expected = redis::cmd("SET")
            .arg("k")
            .arg(&[7_u8; 20][..])
            .arg("NX")
            .arg("PX")
            .arg(1500)
            .arg("GET")
            .get_packed_command();
        assert_eq!(packed, expected);
        assert_eq!(Planned::acquire(&one, ttl, false).replies(NEW), 1);
        let packed = written(Planned::acquire(&one, ttl, false), Form::FALLBACK);
        let mut expected = redis::cmd("SET")
            .arg("k")
            .arg(&[7_u8; 20][..])
            .arg("NX")
            .arg("PX")
            .arg(1500)
            .get_packed_command();
        expected.extend(redis::cmd("TYPE").arg("k").get_packed_command());
        assert_eq!(packed, expected);
        assert_eq!(
            Planned::acquire(&one, ttl, false).replies(Form::FALLBACK),
            2
        );
        assert_eq!(Planned::acquire(&one, ttl, true).replies(Form::FALLBACK), 1);
    }

    #[test]
    fn shared_commands_name_the_documented_keys() {
        use redlock_core::backend::Queued;
        let ttl = Ttl::new(Duration::from_millis(1500)).expect("ttl");
        let mark_ttl = Ttl::new(Duration::from_millis(300)).expect("ttl");
        let reader = claim(&["b", "a"])
            .shared()
            .queued(Queued::new(42, mark_ttl, true).with_ticket(9));
        let token = &[7_u8; 20][..];
        let packed = written(Planned::acquire(&reader, ttl, true), NEW);
        let expected = redis::cmd("EVALSHA")
            .arg(SHARED_ACQUIRE.hash())
            .arg(8)
            .arg(&["a", "b", "a\u{1f}readers", "b\u{1f}readers"])
            .arg(&[
                "a\u{1f}fence",
                "b\u{1f}fence",
                "a\u{1f}waiting",
                "b\u{1f}waiting",
            ])
            .arg(token)
            .arg(1500)
            .arg(2)
            .arg(1)
            .arg(42)
            .arg(1)
            .arg(300)
            .arg(9)
            .get_packed_command();
        assert_eq!(packed, expected);
        // One key without fencing is still the script, never `SET NX`;
        // a claim without a queue names no manager and does not yield.
        let one = claim(&["k"]).shared();
        let packed = written(Planned::acquire(&one, ttl, false), NEW);
        let expected = redis::cmd("EVALSHA")
            .arg(SHARED_ACQUIRE.hash())
            .arg(3)
            .arg(&["k", "k\u{1f}readers", "k\u{1f}waiting"])
            .arg(token)
            .arg(1500)
            .arg(1)
            .arg(0)
            .arg("")
            .arg(0)
            .arg(0)
            .arg(0)
            .get_packed_command();
        assert_eq!(packed, expected);
        let packed = written(Planned::extend(&reader, ttl), NEW);
        let expected = redis::cmd("EVALSHA")
            .arg(SHARED_EXTEND.hash())
            .arg(4)
            .arg(&["a", "b", "a\u{1f}readers", "b\u{1f}readers"])
            .arg(token)
            .arg(1500)
            .get_packed_command();
        assert_eq!(packed, expected);
        let packed = written(Planned::release(&reader), NEW);
        let expected = redis::cmd("EVALSHA")
            .arg(SHARED_RELEASE.hash())
            .arg(6)
            .arg(&[
                "a",
                "b",
                "a\u{1f}readers",
                "b\u{1f}readers",
                "a\u{1f}waiting",
                "b\u{1f}waiting",
            ])
            .arg(token)
            .arg(RELEASE_CHANNEL)
            // The read waited in line: its release leaves the lines.
            .arg(42)
            .get_packed_command();
        assert_eq!(packed, expected);
        let packed = written(Planned::raise_fence(&reader, u64::MAX), NEW);
        let expected = redis::cmd("EVALSHA")
            .arg(SHARED_RAISE_FENCE.hash())
            .arg(6)
            .arg(&[
                "a",
                "b",
                "a\u{1f}readers",
                "b\u{1f}readers",
                "a\u{1f}fence",
                "b\u{1f}fence",
            ])
            .arg(token)
            .arg(i64::MAX)
            .get_packed_command();
        assert_eq!(packed, expected);
        // The release written behind a timed-out shared acquire is the
        // shared one, by `EVAL`.
        let mut behind = Vec::new();
        write_release(&mut behind, &reader, Via::Body, false);
        let keys = Keys {
            locks: reader.keys(),
            readers: true,
            counters: false,
            marks: true,
            watchers: false,
        };
        let mut expected = Vec::new();
        let args = [
            Arg::Bytes(reader.value()),
            Arg::Bytes(RELEASE_CHANNEL.as_bytes()),
        ];
        SHARED_RELEASE.write(&mut expected, Via::Body, keys, &args);
        assert_eq!(behind, expected);
        assert!(behind.starts_with(b"*11\r\n$4\r\nEVAL\r\n"));
    }

    #[test]
    fn shared_claims_are_planned_and_read_as_their_exclusive_counterparts() {
        let ttl = Ttl::new(Duration::from_millis(1500)).expect("ttl");
        let reader = claim(&["k"]).shared();
        let plain = claim(&["k"]);
        let requests = [
            Request::Acquire {
                claim: &reader,
                ttl,
                fence: true,
            },
            Request::Extend {
                claim: &reader,
                ttl,
            },
            Request::Release { claim: &reader },
            Request::RaiseFence {
                claim: &reader,
                at_least: 3,
            },
        ];
        let planned: Vec<Planned<'_>> = requests
            .iter()
            .map(|r| Planned::new(r).expect("known"))
            .collect();
        assert!(matches!(
            planned[..],
            [
                Planned::SharedAcquire { fence: true, .. },
                Planned::SharedExtend { .. },
                Planned::SharedRelease { .. },
                Planned::SharedRaiseFence { at_least: 3, .. },
            ]
        ));
        assert!(matches!(
            Planned::extend(&plain, ttl),
            Planned::Extend { .. }
        ));
        assert!(matches!(Planned::release(&plain), Planned::Release { .. }));
        assert!(matches!(
            Planned::raise_fence(&plain, 1),
            Planned::RaiseFence { .. }
        ));
        let acquire = planned[0];
        assert!(acquire.is_acquire() && !acquire.is_release());
        assert!(planned[2].is_release() && !planned[2].is_acquire());
        for p in &planned {
            assert!(std::ptr::eq(p.claim(), &reader));
            assert_eq!(p.replies(NEW), 1);
            assert_eq!(p.replies(Form::FALLBACK), 1);
        }
        let read = |p: &Planned<'_>, reply: Value| p.read(&mut std::iter::once(reply), NEW);
        assert!(matches!(
            read(&acquire, Value::Int(-1)),
            Ok(Read::Done(Response::Acquire(AcquireOutcome::HeldByOther)))
        ));
        assert!(matches!(
            read(&acquire, Value::Int(5)),
            Ok(Read::Done(Response::Acquire(AcquireOutcome::Granted {
                fence: Some(5)
            })))
        ));
        let unfenced = Planned::acquire(&reader, ttl, false);
        assert!(matches!(
            read(&unfenced, Value::Int(0)),
            Ok(Read::Done(Response::Acquire(AcquireOutcome::Granted {
                fence: None
            })))
        ));
        assert!(read(&acquire, Value::Int(-2)).is_err());
        assert!(matches!(
            read(&planned[1], Value::Int(1)),
            Ok(Read::Done(Response::Held(true)))
        ));
        assert!(matches!(
            read(&planned[2], Value::Int(2)),
            Ok(Read::Released {
                held: false,
                waited: true
            })
        ));
        assert!(matches!(
            read(&planned[3], Value::Int(0)),
            Ok(Read::Done(Response::Held(false)))
        ));
        assert!(read(&planned[3], Value::Int(2)).is_err());
    }

    #[test]
    fn only_a_queued_claim_goes_by_the_queued_script_with_its_marks() {
        use redlock_core::backend::Queued;
        let ttl = Ttl::new(Duration::from_millis(1500)).expect("ttl");
        let mark_ttl = Ttl::new(Duration::from_millis(300)).expect("ttl");
        let one = claim(&["k"]);
        assert!(matches!(
            Planned::acquire(&one, ttl, false),
            Planned::SetNx { .. }
        ));
        let queued = claim(&["k"]).queued(Queued::new(42, mark_ttl, true).with_ticket(9));
        let packed = written(Planned::acquire(&queued, ttl, true), NEW);
        let expected = redis::cmd("EVALSHA")
            .arg(QUEUED_ACQUIRE.hash())
            .arg(3)
            .arg(&["k", "k\u{1f}fence", "k\u{1f}waiting"])
            .arg(&[7_u8; 20][..])
            .arg(1500)
            .arg(1)
            .arg(1)
            .arg(42)
            .arg(300)
            .arg(1)
            .arg(9)
            .get_packed_command();
        assert_eq!(packed, expected);
    }
}
