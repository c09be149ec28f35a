//! An in-process Kubernetes API server for tests, demos and fault injection, spoken to through kube::Client.
