//! One module per page (or family of pages).

mod account;
mod admin;
mod approvals;
mod bundles;
mod consent;
mod home;
pub mod market;
mod not_found;
mod people;
mod playground;
mod sign_in;
pub mod tools;

pub use account::Account;
pub use admin::{Admin, AuditLog, ExternalServers, ToolHealth};
pub use approvals::Approvals;
pub use bundles::{BundleEditor, BundleListing};
pub use consent::Consent;
pub use home::Home;
pub use not_found::NotFound;
pub use people::People;
pub use playground::Playground;
pub use sign_in::{LoginPage, RegisterPage};
