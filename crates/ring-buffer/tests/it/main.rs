//! kcache-ring-buffer's integration tests, one module per feature, in one test binary (one link
//! instead of one per file). The files share no helpers, so there is no `common` module.

mod growth;
mod model;
mod release;
mod traits;
