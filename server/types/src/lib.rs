//! Plain types that the domain and the browser app (`app`, compiled to wasm)
//! share, so that each exists once: a type both sides spoke by its JSON shape
//! alone could drift without a compiler noticing.

pub mod args;
pub mod health;
pub mod ids;
