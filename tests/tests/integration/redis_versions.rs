//! The oldest server the library works with, enforced at connect: a master
//! that reports a Redis older than 6.2 (a fake one, [`HostileServer`]) is
//! refused with `RedisErrorKind::UnsupportedServer` naming the node and
//! its version, while every kind the tests run passes; and
//! docs/operations.md names exactly the versions the tests run and the
//! minimum the library enforces.

use std::time::Duration;

use redlock_redis::backend::LockBackend;
use redlock_redis::{LockError, NodeFailure, RedisBackend, RedisErrorKind, Ttl, MIN_REDIS_VERSION};
use redlock_tests::harness::{Hello, HostileServer, Misbehaviour, ServerKind, ServerOptions};

use crate::redis_common::{backend, backends, claim, cluster, key, manager_over, NODE_TIMEOUT};

const OPERATIONS: &str = include_str!("../../../docs/operations.md");
const TTL: Duration = Duration::from_secs(10);

/// A fake master that says it is `hello` and would trickle the reply to
/// any lock command sent to it (none must be).
fn old_master(hello: Hello) -> HostileServer {
    HostileServer::start_as(
        Misbehaviour::Trickle {
            pause: Duration::from_millis(5),
        },
        hello,
    )
    .expect("a fake master")
}

fn fake_backend(server: &HostileServer) -> RedisBackend {
    RedisBackend::builder(server.url())
        .node_timeout(NODE_TIMEOUT)
        .build()
        .expect("a backend for the fake master")
}

#[test]
fn a_master_older_than_redis_6_2_is_refused_at_connect_naming_its_version() {
    for (hello, shown) in [
        (Hello::reports("redis", "6.0.9"), "it reports Redis 6.0.9"),
        (Hello::reports("redis", "6.2.0-rc1"), ""),
        (Hello::reports("redis", "5.0.14"), "it reports Redis 5.0.14"),
        (
            Hello::Unknown,
            "it does not know HELLO: older than Redis 6.0",
        ),
        (
            Hello::NeedsArguments,
            "it needs arguments to HELLO: older than Redis 6.2",
        ),
    ] {
        let server = old_master(hello.clone());
        let node = fake_backend(&server);
        let claim = claim(&key("versions-old"));
        let result = node.acquire(&claim, Ttl::new(TTL).expect("ttl"), false);
        if shown.is_empty() {
            // 6.2.0 itself (a release candidate of it) passes the check: the
            // lock command then meets the fake's trickle.
            let err = result.expect_err("the fake never answers a lock");
            assert_ne!(err.kind(), RedisErrorKind::UnsupportedServer, "{err}");
            continue;
        }
        let err = result.expect_err("refused");
        assert_eq!(
            err.kind(),
            RedisErrorKind::UnsupportedServer,
            "{hello:?}: {err}"
        );
        assert!(err.is_misconfiguration());
        let text = err.to_string();
        assert!(text.contains(node.node_id().as_str()), "{text}");
        assert!(text.contains(shown), "{hello:?}: {text}");
        assert!(
            text.contains("the oldest supported is Redis 6.2.0"),
            "{text}"
        );
        // Refused in the handshake: no lock command ever reached it.
        assert_eq!(server.misbehaving(), 0, "{hello:?}");
    }
}

#[test]
fn a_manager_names_its_old_masters_and_locks_on_the_others() {
    let real = cluster(2);
    let old = [
        old_master(Hello::reports("redis", "6.0.9")),
        old_master(Hello::Unknown),
    ];
    // Two real masters and one old: a quorum of 2 of 3 still locks.
    let mut nodes = backends(&real, NODE_TIMEOUT);
    nodes.push(fake_backend(&old[0]));
    let locks = manager_over(nodes, NODE_TIMEOUT);
    locks
        .try_lock(key("versions-mixed").as_str(), TTL)
        .expect("a quorum of supported masters")
        .release()
        .expect("held");
    // One real master and two old: no quorum, and each old one is named
    // with its reason.
    let mut nodes = backends(&real, NODE_TIMEOUT);
    nodes.truncate(1);
    let ids: Vec<_> = old
        .iter()
        .map(|server| {
            let node = fake_backend(server);
            let id = node.node_id().clone();
            nodes.push(node);
            id
        })
        .collect();
    let locks = manager_over(nodes, NODE_TIMEOUT);
    let err = locks
        .try_lock(key("versions-old-majority").as_str(), TTL)
        .expect_err("two of three masters are too old");
    assert!(matches!(err, LockError::NoQuorum(_)), "{err}");
    let report = err.report().expect("a report");
    for id in &ids {
        let failure = report
            .failures()
            .iter()
            .find(|f| f.node() == id)
            .unwrap_or_else(|| panic!("{id} is not named in {err}"));
        match failure.failure() {
            NodeFailure::Backend(e) => {
                assert_eq!(e.kind(), RedisErrorKind::UnsupportedServer, "{e}");
            }
            other => panic!("expected a backend error, got {other}"),
        }
    }
    assert!(err.to_string().contains("6.0.9"), "{err}");
    for server in &old {
        assert_eq!(server.misbehaving(), 0);
    }
}

#[test]
fn every_kind_the_tests_run_passes_the_check() {
    for kind in ServerKind::all() {
        let server = ServerOptions::new()
            .kind(kind)
            .start()
            .unwrap_or_else(|e| panic!("{kind}: {e:#}"));
        let (name, version) = server.hello().expect("HELLO");
        assert_eq!(name, kind.server(), "{kind}");
        assert!(version.starts_with(kind.version()), "{kind}: {version}");
        let node = backend(&server, &server.url(), NODE_TIMEOUT);
        let claim = claim(&key("versions-every-kind"));
        let ttl = Ttl::new(TTL).expect("ttl");
        let granted = node
            .acquire(&claim, ttl, false)
            .unwrap_or_else(|e| panic!("{kind}: {e}"));
        assert!(granted.is_granted(), "{kind}");
        assert!(node.release(&claim).expect("up"), "{kind}");
    }
}

#[test]
fn the_deployment_check_reports_each_kinds_own_version() {
    for kind in ServerKind::all() {
        let server = ServerOptions::new()
            .kind(kind)
            .start()
            .unwrap_or_else(|e| panic!("{kind}: {e:#}"));
        let check = redlock_redis::check_deployment([server.url()], Duration::from_secs(2))
            .expect("a valid URL");
        let info = check.servers()[0]
            .info()
            .unwrap_or_else(|e| panic!("{kind}: {e}"));
        // Valkey's redis_version is 7.2.4 whatever its own version is.
        assert_eq!(info.server, kind.server(), "{kind}");
        assert!(info.version.starts_with(kind.version()), "{kind}: {info:?}");
    }
}

/// scripts/test.sh skips the TLS test on the kinds whose build has no TLS:
/// this keeps that list true (a build that gains TLS fails here).
#[test]
fn only_the_kinds_said_to_serve_tls_do() {
    for kind in ServerKind::all() {
        let started = ServerOptions::new().kind(kind).tls().start();
        assert_eq!(
            started.is_ok(),
            kind.serves_tls(),
            "{kind}: {:?}",
            started.err()
        );
    }
}

/// The rows of the table under "## Server versions": (server, version).
fn documented_versions() -> Vec<(String, String)> {
    let section = OPERATIONS
        .split("\n## ")
        .find(|s| s.starts_with("Server versions"))
        .expect("docs/operations.md has a section \"Server versions\"");
    section
        .lines()
        .filter(|line| line.starts_with('|') && !line.starts_with("|-") && !line.contains("---"))
        .skip(1) // the header
        .map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            (cells[1].to_owned(), cells[2].to_owned())
        })
        .collect()
}

#[test]
fn the_docs_name_the_versions_the_tests_run_and_the_minimum() {
    let mut documented = documented_versions();
    documented.sort();
    let mut run: Vec<(String, String)> = ServerKind::all()
        .into_iter()
        .map(|kind| {
            let (product, _) = kind.name().split_once(' ').expect("product and version");
            // Debian's package may bring any 7.0 patch release: "7.0.x".
            let version = match kind.version() {
                v if v.ends_with('.') => format!("{v}x"),
                v => v.to_owned(),
            };
            (product.to_owned(), version)
        })
        .collect();
    run.sort();
    assert_eq!(
        documented, run,
        "docs/operations.md, \"Server versions\", against the harness's kinds"
    );
    let minimum = format!("Redis {MIN_REDIS_VERSION}");
    let section = OPERATIONS
        .split("\n## ")
        .find(|s| s.starts_with("Server versions"))
        .expect("the section");
    assert!(
        section.contains(&format!("**{minimum}**")),
        "the section does not name the minimum {minimum} in bold"
    );
    assert!(section.contains("UnsupportedServer"));
}
