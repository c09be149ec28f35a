//! The Lease as a lock: client-go's `resourcelock.LeaseLock` over `kube::Api<Lease>`. It keeps
//! the last Lease it read or wrote, so that an update carries that object's resourceVersion:
//! optimistic concurrency, where a 409 Conflict means another candidate wrote first.

use std::collections::BTreeMap;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use kube::api::{Api, ObjectMeta, PostParams};

use crate::record::LeaderElectionRecord;

/// How a request to the API server failed, as the election loop tells failures apart.
#[derive(Debug)]
pub(crate) enum LockError {
    /// 404: the Lease does not exist.
    NotFound,
    /// 409: the update carried a stale resourceVersion, or a create found the Lease there: a race
    /// lost to another writer.
    Conflict,
    /// No answer before the request's deadline.
    Timeout,
    /// Update before any get or create (client-go: "lease not initialized").
    NotInitialized,
    /// Anything else: another Status, or a transport error.
    Other(kube::Error),
}

impl std::fmt::Display for LockError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LockError::NotFound => f.write_str("lease not found"),
            LockError::Conflict => f.write_str("conflict: the lease was written by someone else first"),
            LockError::Timeout => f.write_str("no answer before the deadline"),
            LockError::NotInitialized => f.write_str("lease not initialized, call get or create first"),
            // kube's error names the status or transport failure, never a Lease body.
            LockError::Other(e) => write!(f, "{e}"),
        }
    }
}

impl From<kube::Error> for LockError {
    fn from(e: kube::Error) -> Self {
        match &e {
            kube::Error::Api(s) if s.code == 404 => LockError::NotFound,
            kube::Error::Api(s) if s.code == 409 => LockError::Conflict,
            _ => LockError::Other(e),
        }
    }
}

/// One Lease, read and written as an election record.
pub(crate) struct LeaseLock {
    api: Api<Lease>,
    name: String,
    namespace: String,
    labels: BTreeMap<String, String>,
    /// The Lease as last read, created or updated; its resourceVersion is the precondition of
    /// the next update (client-go's `ll.lease`). Not changed by a failed write.
    lease: Option<Lease>,
}

impl LeaseLock {
    pub(crate) fn new(
        api: Api<Lease>,
        namespace: &str,
        name: &str,
        labels: BTreeMap<String, String>,
    ) -> Self {
        Self { api, name: name.to_owned(), namespace: namespace.to_owned(), labels, lease: None }
    }

    /// `namespace/name`, client-go's `Describe`.
    pub(crate) fn describe(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// Reads the Lease: its record and its spec as served (the "raw record" whose change tells
    /// that the holder renewed).
    pub(crate) async fn get(&mut self) -> Result<(LeaderElectionRecord, LeaseSpec), LockError> {
        let lease = self.api.get(&self.name).await?;
        let spec = lease.spec.clone().unwrap_or_default();
        self.lease = Some(lease);
        Ok((LeaderElectionRecord::from_spec(&spec), spec))
    }

    /// Creates the Lease with `record` (and the configured labels).
    pub(crate) async fn create(&mut self, record: &LeaderElectionRecord) -> Result<(), LockError> {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                namespace: Some(self.namespace.clone()),
                labels: (!self.labels.is_empty()).then(|| self.labels.clone()),
                ..Default::default()
            },
            spec: Some(record.to_spec()),
        };
        self.lease = Some(self.api.create(&PostParams::default(), &lease).await?);
        Ok(())
    }

    /// Writes `record` over the last Lease seen, with its resourceVersion as the precondition;
    /// the configured labels are set, other labels kept.
    pub(crate) async fn update(&mut self, record: &LeaderElectionRecord) -> Result<(), LockError> {
        let Some(mut lease) = self.lease.clone() else { return Err(LockError::NotInitialized) };
        lease.spec = Some(record.to_spec());
        if !self.labels.is_empty() {
            let labels = lease.metadata.labels.get_or_insert_with(BTreeMap::new);
            labels.extend(self.labels.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        self.lease = Some(self.api.replace(&self.name, &PostParams::default(), &lease).await?);
        Ok(())
    }
}
