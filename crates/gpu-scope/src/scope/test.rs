//! Tests of scope, spawn, join.
