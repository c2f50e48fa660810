//! The domain's integration tests, as one test binary: every binary links the
//! whole crate, so one instead of seven saves most of the link time.

#[macro_use]
mod support;

mod accounts;
mod bundles;
mod code_mode;
mod connections;
mod failures;
mod faults;
mod market;
mod membership;
mod playground;
mod semantic;
mod sso;
mod tidy;
mod tools;
mod upstream;
