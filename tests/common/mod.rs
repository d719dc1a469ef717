//! Helpers shared by integration tests (each test crate uses a part).
#![allow(dead_code)]

pub mod lttng;
