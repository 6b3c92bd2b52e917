//! The name server's state, pure and clock-driven (placeholder while the route table lands).
