//! The builder of a [`RedisBackend`]: URL, timeouts, pool size, TLS roots.

use std::fmt;
use std::time::Duration;

use redis::ConnectionAddr;

use crate::address::{self, Secret};
use crate::error::Stage;
use crate::pool::{NodePool, PoolSettings};
use crate::wire::{Address, Endpoint};
use crate::{RedisBackend, RedisErrorKind, RedisNodeError};

/// The default per-node timeout, the same as the core manager's.
pub const DEFAULT_NODE_TIMEOUT: Duration = Duration::from_millis(50);

/// The default number of pooled connections per node.
pub const DEFAULT_POOL_SIZE: u32 = 2;

/// Where and how to reach one node, checked but not connected.
#[derive(Clone)]
pub(crate) struct Target {
    pub(crate) node: redlock_core::NodeId,
    pub(crate) endpoint: Endpoint,
    pub(crate) timeout: Duration,
    pub(crate) tls: bool,
    pub(crate) password: Option<Secret>,
}

/// Settings for one [`RedisBackend`]; [`build`](Self::build) checks them.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use redlock_redis::RedisBackend;
///
/// let backend = RedisBackend::builder("redis://app:s3cret@127.0.0.1:6379/2")
///     .node_timeout(Duration::from_millis(20))
///     .pool_size(1)
///     .build()?;
/// # use redlock_redis::backend::LockBackend;
/// assert_eq!(backend.node_id().as_str(), "127.0.0.1:6379/2");
/// assert!(!format!("{backend:?}").contains("s3cret"));
/// # Ok::<(), redlock_redis::RedisNodeError>(())
/// ```
#[must_use = "a builder does nothing until build() is called"]
pub struct RedisBackendBuilder {
    url: Secret,
    node_timeout: Duration,
    pool_size: u32,
    #[cfg(feature = "tls")]
    root_certificate: Option<Vec<u8>>,
}

impl fmt::Debug for RedisBackendBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = f.debug_struct("RedisBackendBuilder");
        out.field("url", &address::redact(self.url.expose()))
            .field("node_timeout", &self.node_timeout)
            .field("pool_size", &self.pool_size);
        #[cfg(feature = "tls")]
        out.field("root_certificate", &self.root_certificate.is_some());
        out.finish()
    }
}

impl RedisBackendBuilder {
    pub(crate) fn new(url: &str) -> Self {
        RedisBackendBuilder {
            url: Secret::new(url.to_owned()),
            node_timeout: DEFAULT_NODE_TIMEOUT,
            pool_size: DEFAULT_POOL_SIZE,
            #[cfg(feature = "tls")]
            root_certificate: None,
        }
    }

    /// Bounds every call to the node: waiting for a connection, sending
    /// and reading replies together, however slowly the server sends them.
    /// Opening a connection in the background takes at most twice as long
    /// (the name lookup, TCP connect and TLS handshake within one timeout,
    /// the Redis handshake within another); see "Bounds on what a server can
    /// cost" on [`RedisBackend`]. Defaults to 50 ms
    /// ([`DEFAULT_NODE_TIMEOUT`]); must not be zero, and more than an hour
    /// counts as an hour. Use the same value as
    /// the manager's [`node_timeout`](redlock_core::Builder::node_timeout).
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// let builder = redlock_redis::RedisBackend::builder("redis://127.0.0.1")
    ///     .node_timeout(Duration::from_millis(100));
    /// ```
    pub fn node_timeout(mut self, timeout: Duration) -> Self {
        self.node_timeout = timeout;
        self
    }

    /// How many connections the node's pool may hold. Defaults to 2
    /// ([`DEFAULT_POOL_SIZE`]): the manager sends one request at a time per
    /// node, and a second connection is a warm spare when one breaks. Zero
    /// is raised to 1.
    ///
    /// # Examples
    ///
    /// ```
    /// let builder = redlock_redis::RedisBackend::builder("redis://127.0.0.1").pool_size(4);
    /// ```
    pub fn pool_size(mut self, size: u32) -> Self {
        self.pool_size = size.max(1);
        self
    }

    /// Trusts the certificate authorities in `pem` (one or more PEM
    /// certificates) for a `rediss://` URL, instead of the system's roots.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// let ca = std::fs::read("/etc/redis/tls/ca.crt")?;
    /// let backend = redlock_redis::RedisBackend::builder("rediss://redis-a.internal:6380")
    ///     .tls_root_certificate(ca)
    ///     .build()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    pub fn tls_root_certificate(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.root_certificate = Some(pem.into());
        self
    }

    /// Checks the settings and creates the node's connection pool. Does not
    /// wait for the node: one connection is opened in the background, and a
    /// node that is down is a failed node in each round until it is back.
    ///
    /// # Errors
    ///
    /// [`RedisErrorKind::InvalidUrl`] for a URL that does not parse;
    /// [`RedisErrorKind::InvalidConfig`] for a zero node timeout, a
    /// `rediss://` URL without the `tls` feature, or a root certificate that
    /// is not PEM or is given for a URL without TLS.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlock_redis::{RedisBackend, RedisErrorKind};
    /// let err = RedisBackend::builder("redis://127.0.0.1")
    ///     .node_timeout(Duration::ZERO)
    ///     .build()
    ///     .unwrap_err();
    /// assert_eq!(err.kind(), RedisErrorKind::InvalidConfig);
    /// ```
    pub fn build(self) -> Result<RedisBackend, RedisNodeError> {
        let target = self.target()?;
        let pool = NodePool::new(PoolSettings {
            node: target.node.clone(),
            endpoint: target.endpoint.clone(),
            timeout: target.timeout,
            size: self.pool_size,
            password: target.password.clone(),
        });
        Ok(RedisBackend::from_parts(
            target.node.clone(),
            target.timeout,
            self.pool_size,
            target.tls,
            pool,
            target,
        ))
    }

    /// Checks the settings: where and how to connect, without connecting.
    pub(crate) fn target(&self) -> Result<Target, RedisNodeError> {
        let address = address::parse(self.url.expose())?;
        let invalid = |detail: &str| {
            RedisNodeError::new(
                address.node.clone(),
                RedisErrorKind::InvalidConfig,
                Stage::Build,
                detail,
            )
        };
        if self.node_timeout.is_zero() {
            return Err(invalid("the node timeout must not be zero"));
        }
        let timeout = RedisBackend::effective_timeout(self.node_timeout);
        let settings = address.info.redis_settings();
        let endpoint = Endpoint::new(
            self.address(&address, &invalid)?,
            settings.username().map(str::to_owned),
            settings
                .password()
                .filter(|p| !p.is_empty())
                .map(str::to_owned),
            settings.db(),
        );
        Ok(Target {
            node: address.node,
            endpoint,
            timeout,
            tls: address.tls,
            password: address.password,
        })
    }

    /// Where to connect, with the TLS settings for `rediss://`.
    fn address(
        &self,
        address: &address::Address,
        invalid: &dyn Fn(&str) -> RedisNodeError,
    ) -> Result<Address, RedisNodeError> {
        #[cfg(feature = "tls")]
        if self.root_certificate.is_some() && !address.tls {
            return Err(invalid("a TLS root certificate needs a rediss:// URL"));
        }
        match address.info.addr() {
            ConnectionAddr::Tcp(host, port) => Ok(Address::Tcp {
                host: host.clone(),
                port: *port,
            }),
            #[cfg(feature = "tls")]
            ConnectionAddr::TcpTls { host, port, .. } => Ok(Address::Tls {
                host: host.clone(),
                port: *port,
                config: self.tls_config(invalid)?,
            }),
            ConnectionAddr::Unix(path) => Ok(Address::Unix(path.clone())),
            _ => Err(invalid("unsupported kind of address")),
        }
    }

    /// The TLS client settings: the given roots, else the system's.
    #[cfg(feature = "tls")]
    fn tls_config(
        &self,
        invalid: &dyn Fn(&str) -> RedisNodeError,
    ) -> Result<std::sync::Arc<rustls::ClientConfig>, RedisNodeError> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::CertificateDer;

        let mut roots = rustls::RootCertStore::empty();
        match &self.root_certificate {
            Some(pem) => {
                let certificates = CertificateDer::pem_slice_iter(pem)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| invalid(&format!("the root certificate is not valid PEM: {e}")))?;
                if certificates.is_empty() {
                    return Err(invalid("the root certificate PEM holds no certificate"));
                }
                for certificate in certificates {
                    roots
                        .add(certificate)
                        .map_err(|e| invalid(&format!("unusable root certificate: {e}")))?;
                }
            }
            None => {
                // Unreadable system certificates are skipped; with none at
                // all, handshakes fail as untrusted (a TLS error).
                let (added, _ignored) =
                    roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
                let _ = added;
            }
        }
        // The application's process-wide provider if it installed one.
        let provider = rustls::crypto::CryptoProvider::get_default()
            .cloned()
            .unwrap_or_else(|| std::sync::Arc::new(rustls::crypto::ring::default_provider()));
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| invalid(&format!("TLS settings: {e}")))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(std::sync::Arc::new(config))
    }
}
