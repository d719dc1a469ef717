//! runtrace
